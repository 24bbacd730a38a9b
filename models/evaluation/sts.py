"""Semantic textual similarity scoring (docs methods §7.4 and §9).

Three views of the same protocol — score a sentence pair by the cosine of its two embeddings and correlate the scores
with the gold similarity — as the reference code computes them:

* :func:`sts_correlations`: Spearman / Pearson ×100 of the row-wise cosine, the number every codebase in methods.md
  prints (SentEval ``STSEval``, EASE ``SentEval/senteval/sts.py``, mSimCSE ``eval/evaluation_xsts.py``).
* :func:`sts_mteb`: mteb's ``AnySTSEvaluator`` + ``AbsTaskSTS._calculate_scores`` (installed mteb 2.26,
  ``mteb/_evaluators/any_sts_evaluator.py``, ``mteb/abstasks/sts.py``) reproduced on precomputed embeddings: gold
  normalised to [0, 1] with the task's min/max, cosine = 1 − ``paired_cosine_distances``, negated Manhattan and
  Euclidean distances, Pearson and Spearman of each, ``main_score = cosine_spearman``.
* :func:`senteval_aggregate`: SentEval's aggregation over the subsets of STS12–16 (princeton-nlp/SimCSE
  ``SentEval/senteval/sts.py STSEval.run``): ``all`` = correlation over the concatenation of every subset's predictions
  and gold (what SimCSE/mSimCSE report as ``['all']['spearman']['all']``), ``mean`` and ``wmean`` (weighted by the
  number of pairs) of the per-subset correlations.

Scale: every unprefixed key is in points (×100). :func:`sts_mteb` also returns mteb's own values, in mteb's [0, 1]
scale, under ``mteb_<mteb key>`` so they can be compared with an mteb result file directly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["paired_cosine", "senteval_aggregate", "sts_correlations", "sts_mteb"]


def _check_pairs(e1: np.ndarray, e2: np.ndarray, gold: Sequence[float] | np.ndarray) -> tuple[np.ndarray, ...]:
    a, b = np.asarray(e1), np.asarray(e2)
    g = np.asarray(gold, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"expected two 2-D embedding arrays (N×d), got shapes {a.shape} and {b.shape}")
    if a.shape != b.shape:
        raise ValueError(f"e1 {a.shape} and e2 {b.shape} must have the same shape (row i of both is pair i)")
    if g.shape != (len(a),):
        raise ValueError(f"gold must be 1-D with one score per pair ({len(a)}), got shape {g.shape}")
    if len(a) < 2:
        raise ValueError(f"a correlation needs at least 2 pairs, got {len(a)}")
    if not (np.isfinite(g).all() and np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("gold scores and embeddings must be finite (NaN/inf found)")
    return a, b, g


def paired_cosine(e1: np.ndarray, e2: np.ndarray) -> np.ndarray:
    """Row-wise cosine of L2-normalised float64 copies (inputs untouched); a zero row scores 0 (SentEval nan_to_num)."""
    a = np.asarray(e1, dtype=np.float64)
    b = np.asarray(e2, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"e1 {a.shape} and e2 {b.shape} must be 2-D arrays of the same shape")
    na = np.linalg.norm(a, axis=1)
    nb = np.linalg.norm(b, axis=1)
    dots = np.einsum("ij,ij->i", a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        cos = dots / (na * nb)
    return np.nan_to_num(cos, nan=0.0, posinf=0.0, neginf=0.0)


def _corr(pred: np.ndarray, gold: np.ndarray) -> tuple[float, float]:
    """(Spearman, Pearson) in [-1, 1] with scipy, as every reference does."""
    from scipy.stats import pearsonr, spearmanr

    return float(spearmanr(pred, gold)[0]), float(pearsonr(pred, gold)[0])


def sts_correlations(e1: np.ndarray, e2: np.ndarray, gold: Sequence[float] | np.ndarray) -> dict[str, float]:
    """Spearman and Pearson ×100 of the paired cosine against the gold scores; ``n`` = number of pairs."""
    a, b, g = _check_pairs(e1, e2, gold)
    spearman, pearson = _corr(paired_cosine(a, b), g)
    return {"spearman": 100.0 * spearman, "pearson": 100.0 * pearson, "n": len(g)}


def sts_mteb(
    e1: np.ndarray,
    e2: np.ndarray,
    gold: Sequence[float] | np.ndarray,
    min_score: float = 0,
    max_score: float = 5,
) -> dict[str, float]:
    """mteb's STS scores for precomputed embeddings (mteb 2.26 ``AbsTaskSTS``), bit for bit.

    The embeddings are used exactly as mteb's evaluator receives them from ``encode`` (dtype kept: sklearn's paired
    distances compute in float32 for float32 input, as in mteb). ``pearson``/``spearman`` — mteb's "model similarity"
    scores — equal the cosine ones here: for an encoder whose similarity function is cosine (sentence-transformers'
    default) mteb's ``similarity_pairwise`` is the same cosine (computed in torch, so it may differ from
    ``cosine_*`` in the last float32 bits).

    Returns ``mteb_<key>`` with mteb's own values in [0, 1] for the keys ``cosine_spearman``, ``cosine_pearson``,
    ``manhattan_spearman``, ``manhattan_pearson``, ``euclidean_spearman``, ``euclidean_pearson``, ``spearman``,
    ``pearson`` and ``main_score`` (= cosine_spearman); the same names without the prefix ×100; ``n``.
    """
    from sklearn.metrics.pairwise import (
        paired_cosine_distances,
        paired_euclidean_distances,
        paired_manhattan_distances,
    )

    a, b, g = _check_pairs(e1, e2, gold)
    if not max_score > min_score:
        raise ValueError(f"max_score ({max_score}) must be greater than min_score ({min_score})")
    # AbsTaskSTS._normalize, element-wise: (x - min) / (max - min)
    normalized = (g - min_score) / (max_score - min_score)
    # AnySTSEvaluator.__call__ "Scoring"; .tolist() in mteb widens float32 to Python floats: astype(float64) is the same
    predictions = {
        "cosine": (1 - paired_cosine_distances(a, b)).astype(np.float64),
        "manhattan": (-paired_manhattan_distances(a, b)).astype(np.float64),
        "euclidean": (-paired_euclidean_distances(a, b)).astype(np.float64),
    }
    from scipy.stats import pearsonr, spearmanr

    raw: dict[str, float] = {}
    for name, pred in predictions.items():
        # AbsTaskSTS._calculate_scores: compute_corr(normalized_scores, scores[...]) — gold first
        raw[f"{name}_pearson"] = float(pearsonr(normalized, pred)[0])
        raw[f"{name}_spearman"] = float(spearmanr(normalized, pred)[0])
    raw["pearson"] = raw["cosine_pearson"]
    raw["spearman"] = raw["cosine_spearman"]
    raw["main_score"] = raw["cosine_spearman"]
    out = {f"mteb_{k}": v for k, v in raw.items()}
    out.update({k: 100.0 * v for k, v in raw.items()})
    out["n"] = len(g)
    return out


def senteval_aggregate(
    per_subset: Mapping[str, tuple[Sequence[float] | np.ndarray, Sequence[float] | np.ndarray]],
) -> dict[str, float | dict[str, dict[str, float]]]:
    """SentEval ``STSEval.run`` aggregation of one STS year, ×100.

    ``per_subset`` maps a subset name (``"MSRpar"``, ``"headlines"``, ...) to ``(predicted similarity, gold)`` for its
    scored pairs (unscored pairs already dropped, as SentEval's loader does). Returns ``spearman_all``/``pearson_all``
    (correlation over the concatenation of all subsets, SimCSE's reported number), ``spearman_mean``/``pearson_mean``
    (plain mean of the per-subset correlations), ``spearman_wmean``/``pearson_wmean`` (mean weighted by subset size),
    ``n`` (pairs in total) and ``subsets``: ``{name: {"spearman", "pearson", "n"}}``.
    """
    if not per_subset:
        raise ValueError("per_subset is empty: expected at least one subset name -> (predictions, gold)")
    subsets: dict[str, dict[str, float]] = {}
    preds, golds = [], []
    for name, (pred, gold) in per_subset.items():
        p = np.asarray(pred, dtype=np.float64)
        g = np.asarray(gold, dtype=np.float64)
        if p.ndim != 1 or p.shape != g.shape:
            raise ValueError(f"subset {name!r}: predictions {p.shape} and gold {g.shape} must be 1-D of equal length")
        if len(p) < 2:
            raise ValueError(f"subset {name!r}: a correlation needs at least 2 pairs, got {len(p)}")
        if not (np.isfinite(p).all() and np.isfinite(g).all()):
            raise ValueError(f"subset {name!r}: predictions and gold must be finite (NaN/inf found)")
        spearman, pearson = _corr(p, g)
        subsets[name] = {"spearman": 100.0 * spearman, "pearson": 100.0 * pearson, "n": len(p)}
        preds.append(p)
        golds.append(g)
    spearman_all, pearson_all = _corr(np.concatenate(preds), np.concatenate(golds))
    weights = np.array([s["n"] for s in subsets.values()])
    sp = np.array([s["spearman"] for s in subsets.values()])
    pe = np.array([s["pearson"] for s in subsets.values()])
    return {
        "spearman_all": 100.0 * spearman_all,
        "pearson_all": 100.0 * pearson_all,
        "spearman_mean": float(np.average(sp)),
        "pearson_mean": float(np.average(pe)),
        "spearman_wmean": float(np.average(sp, weights=weights)),
        "pearson_wmean": float(np.average(pe, weights=weights)),
        "n": int(weights.sum()),
        "subsets": subsets,
    }
