"""Clustering scores (docs methods §7.5, §4.5, pitfalls D.6.3–D.6.4).

Two protocols that are NOT comparable with each other:

* EASE (studio-ousia/ease ``downstreams/text-clustering/evaluation.py``): ``KMeans(n_clusters=#gold labels,
  random_state=42)`` on the raw (un-normalised) embeddings of every document, scored by Hungarian-matched accuracy
  (``coclust.evaluation.external.accuracy``). EASE ran scikit-learn 0.22, whose ``n_init`` default was 10; sklearn ≥ 1.4
  defaults to ``"auto"`` (one k-means++ run), so ``n_init=10`` is passed explicitly (D.6.3). The matching uses
  ``scipy.optimize.linear_sum_assignment(C.max() - C)`` and iterates ``zip(*indices)`` (D.6.4: one coclust release
  iterated the tuple of two arrays itself).
* mteb v2 (installed mteb 2.26, ``mteb/abstasks/clustering.py``): ``AbsTaskClustering._evaluate_subset`` first
  downsamples the documents it embeds (``max_fraction_of_documents_to_embed`` 0.04 or ``max_document_to_embed``,
  drawn with ``rng_state.sample``), then ``_evaluate_clustering_bootstrapped``: ``MiniBatchKMeans(n_clusters=#labels,
  batch_size=512, init="k-means++", n_init=1, random_state=seed)`` fitted on 10 draws of 16,384 documents taken with
  ``rng_state.choices`` (with replacement, whatever its docstring says); V-measure and AMI mean and (population) std.

mteb's random state, as read in the installed source: ``AbsTask.__init__`` calls ``mteb._set_seed._set_seed(seed)``,
which returns ``random.Random(seed)``, stored once per task object as ``self.rng_state``. ``AbsTask.evaluate`` does not
reset it between subsets, so ONE ``random.Random(42)`` is consumed by every language (hf_subset) and split that the
task object evaluates, in that order, first by the downsampling ``sample`` and then by the bootstrap ``choices`` of each
subset. Evaluators reseed separately (``Evaluator.__init__``), but the clustering bootstrap uses the task's state. To
reproduce a multi-language mteb run, create one ``random.Random(seed)`` and pass it as ``rng`` to
:func:`select_documents_to_embed` and :func:`v_measure_mteb` for each language in mteb's subset order; with
``rng=None`` each call starts a fresh ``random.Random(seed)`` (what a single-subset task such as MewsC16JaClustering
sees).

Scale: ``accuracy``, ``v_measure``, ``ami`` (and their std) are in points (×100); ``mteb_v_measure`` etc. carry mteb's
own [0, 1] values.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

__all__ = ["hungarian_accuracy", "kmeans_hungarian_accuracy", "select_documents_to_embed", "v_measure_mteb"]


def _check_embeddings_labels(emb: np.ndarray, labels: Sequence | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(emb)
    y = np.asarray(labels)
    if x.ndim != 2:
        raise ValueError(f"embeddings must be a 2-D array (N×d), got shape {x.shape}")
    if y.ndim != 1 or len(y) != len(x):
        raise ValueError(f"labels must be 1-D with one label per embedding row ({len(x)}), got shape {y.shape}")
    if len(x) == 0:
        raise ValueError("no documents to cluster (0 rows)")
    if np.issubdtype(x.dtype, np.floating) and not np.isfinite(x).all():
        raise ValueError("embeddings contain NaN or inf")
    return x, y


def hungarian_accuracy(true_labels: Sequence | np.ndarray, pred_labels: Sequence | np.ndarray) -> float:
    """Best one-to-one matching accuracy ×100 between gold classes and predicted clusters (any label types).

    C = contingency(true, pred); (r, c) = linear_sum_assignment(C.max() − C); accuracy = Σ C[r, c] / Σ C. A rectangular
    C (fewer clusters than classes or the reverse) is fine: unmatched classes count as errors.
    """
    from scipy.optimize import linear_sum_assignment

    t = np.asarray(true_labels)
    p = np.asarray(pred_labels)
    if t.ndim != 1 or t.shape != p.shape or len(t) == 0:
        raise ValueError(f"true {t.shape} and predicted {p.shape} labels must be non-empty 1-D arrays of equal length")
    _, ti = np.unique(t, return_inverse=True)
    _, pi = np.unique(p, return_inverse=True)
    contingency = np.zeros((ti.max() + 1, pi.max() + 1), dtype=np.int64)
    np.add.at(contingency, (ti, pi), 1)
    indices = linear_sum_assignment(contingency.max() - contingency)
    matched = sum(int(contingency[row, col]) for row, col in zip(*indices, strict=True))
    return 100.0 * matched / int(contingency.sum())


def kmeans_hungarian_accuracy(
    emb: np.ndarray, labels: Sequence | np.ndarray, *, n_init: int = 10, seed: int = 42
) -> dict[str, float]:
    """EASE's clustering accuracy: KMeans on the raw embeddings (k = number of distinct gold labels), Hungarian match.

    Returns ``accuracy`` (×100), ``n`` (documents), ``k`` (clusters) and ``inertia`` of the retained KMeans run.
    """
    from sklearn.cluster import KMeans

    x, y = _check_embeddings_labels(emb, labels)
    k = int(np.unique(y).size)
    if k > len(x):
        raise ValueError(f"{k} distinct labels but only {len(x)} documents: KMeans needs n_samples >= n_clusters")
    model = KMeans(n_clusters=k, n_init=n_init, random_state=seed).fit(x)
    return {
        "accuracy": hungarian_accuracy(y, model.labels_),
        "n": len(x),
        "k": k,
        "inertia": float(model.inertia_),
    }


def select_documents_to_embed(
    n_documents: int,
    *,
    max_fraction: float | None = 0.04,
    max_documents: int | None = None,
    seed: int = 42,
    rng: random.Random | None = None,
) -> np.ndarray:
    """The documents mteb's ``AbsTaskClustering`` embeds, as indices in mteb's order (NOT sorted).

    ``max_fraction`` / ``max_documents`` are the task's ``max_fraction_of_documents_to_embed`` (default 0.04) and
    ``max_document_to_embed``; set exactly one of them, or both to None to keep every document (``arange``; the
    EASE protocol, and mteb when a task disables downsampling). Tasks override them: MewsC16JaClustering uses
    ``max_documents=992, max_fraction=None``. Draws ``rng.sample(range(n), k)`` with
    ``k = min(n, int(max_fraction * n))`` or ``min(n, max_documents)``; ``rng`` defaults to ``random.Random(seed)``
    and is advanced (pass the task-wide state, see the module docstring).
    """
    if n_documents < 0:
        raise ValueError(f"n_documents must be >= 0, got {n_documents}")
    if max_fraction is not None and max_documents is not None:
        raise ValueError("set only one of max_fraction and max_documents (mteb raises for both)")
    if max_fraction is None and max_documents is None:
        return np.arange(n_documents)
    if max_fraction is not None:
        if not 0 <= max_fraction <= 1:
            raise ValueError(f"max_fraction must be within [0, 1], got {max_fraction}")
        k = int(max_fraction * n_documents)
    else:
        if max_documents is None or max_documents < 0:
            raise ValueError(f"max_documents must be >= 0, got {max_documents}")
        k = max_documents
    k = min(n_documents, k)
    state = random.Random(seed) if rng is None else rng
    return np.asarray(state.sample(range(n_documents), k=k), dtype=np.int64)


def v_measure_mteb(
    emb: np.ndarray,
    labels: Sequence | np.ndarray,
    *,
    seed: int = 42,
    rng: random.Random | None = None,
    n_clusters: int = 10,
    cluster_size: int = 16_384,
    kmeans_batch_size: int = 512,
) -> dict[str, float]:
    """mteb 2.26 ``_evaluate_clustering_bootstrapped`` for one label level, on the embeddings mteb would have.

    ``emb``/``labels`` are the (already downsampled, in :func:`select_documents_to_embed` order) documents;
    ``n_clusters`` is mteb's name for the number of bootstrap draws, ``cluster_size`` its
    ``max_documents_per_cluster``. As in mteb, a label equal to -1 means "no label at this level" and the row is left
    out. ``rng`` defaults to ``random.Random(seed)`` and is advanced by ``n_clusters`` ``choices`` calls.

    Returns ``v_measure``, ``v_measure_std``, ``ami``, ``ami_std`` (×100; std is numpy's population std, as mteb),
    the same four as ``mteb_*`` in [0, 1], ``n`` (labelled documents) and ``k`` (clusters = distinct labels).
    """
    from sklearn.cluster import MiniBatchKMeans
    from sklearn.metrics.cluster import adjusted_mutual_info_score, v_measure_score

    x, y = _check_embeddings_labels(emb, labels)
    if n_clusters < 1 or cluster_size < 1:
        raise ValueError(f"n_clusters ({n_clusters}) and cluster_size ({cluster_size}) must be >= 1")
    state = random.Random(seed) if rng is None else rng
    # mteb builds np.array(list of labels) and drops entries equal to -1 (its filler for missing levels)
    valid = np.array([label != -1 for label in y], dtype=bool)
    y, x = y[valid], x[valid]
    if len(y) == 0:
        raise ValueError("every label is -1 (mteb's 'no label'): nothing to cluster")
    k = int(np.unique(y).size)
    model = MiniBatchKMeans(n_clusters=k, batch_size=kmeans_batch_size, init="k-means++", n_init=1, random_state=seed)
    v_measures, amis = [], []
    for _ in range(n_clusters):
        draw = state.choices(range(len(x)), k=cluster_size)
        assignment = model.fit_predict(x[draw])
        v_measures.append(float(v_measure_score(y[draw], assignment)))
        amis.append(float(adjusted_mutual_info_score(y[draw], assignment)))
    raw = {
        "v_measure": float(np.mean(v_measures)),
        "v_measure_std": float(np.std(v_measures)),
        "ami": float(np.mean(amis)),
        "ami_std": float(np.std(amis)),
    }
    out: dict[str, float] = {f"mteb_{key}": value for key, value in raw.items()}
    out.update({key: 100.0 * value for key, value in raw.items()})
    out["n"] = len(x)
    out["k"] = k
    return out
