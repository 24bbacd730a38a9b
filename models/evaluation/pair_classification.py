"""Pair classification (paraphrase detection: PAWS-X, mteb's PairClassification family) on precomputed embeddings.

A pair is scored by the similarity of its two embeddings; the gold label says whether it is a paraphrase (1) or not
(0). No classifier is trained: the best threshold is searched on the very split that is scored (an oracle threshold),
so the numbers measure how well the similarity separates the two classes, which is what mteb reports.

:func:`pair_classification_mteb` reproduces, bit for bit on the same float32 arrays, mteb's scoring (installed mteb
2.26.24: ``mteb/_evaluators/pair_classification_evaluator.py`` ``PairClassificationEvaluator.__call__`` and
``mteb/abstasks/pair_classification.py`` ``AbsTaskPairClassification._compute_metrics`` /
``_compute_metrics_values`` / ``_find_best_acc_and_threshold`` / ``_find_best_f1_and_threshold``):

* five scores per pair: ``cosine`` = 1 − sklearn ``paired_cosine_distances``; ``manhattan`` and ``euclidean`` =
  sklearn paired distances (lower = more similar); ``dot`` = ``np.dot`` of each row pair; ``similarity`` = the model's
  own pairwise similarity, which for a cosine model (sentence-transformers' default, and every polysent encoder) is the
  cosine of L2-normalised float32 rows, as mteb's ``pairwise_cos_sim`` computes it.
* per score: **accuracy** — pairs sorted by score (most similar first), every cut between two *different* scores
  tried (a cut never splits tied scores, so row order cannot leak into the metric), best accuracy kept (first cut on
  equality), threshold = the midpoint of the two scores at the cut; **f1** with its **precision**, **recall** and
  threshold — the same walk, counting only cuts with at least one positive above; **ap** — sklearn
  ``average_precision_score`` of the scores (negated for distances). As in mteb, the cut "everything negative" is
  never tried, and no cut at all (all scores tied) gives accuracy 0 / threshold −1 and f1 0 / threshold 0.
* ``max_<metric>`` = the maximum of that metric over the five scores, each taken on its own (so ``max_precision`` need
  not be the precision of the ``max_f1`` cut — mteb's definition).

mteb's main score for ``PawsXPairClassification`` is ``max_ap`` (its ``TaskMetadata.main_score`` in mteb 2.26.24);
``main_score`` below is that value.

Scale: unprefixed keys are ×100 (accuracies, F1, precision, recall, AP), thresholds raw; ``mteb_<key>`` are mteb's own
[0, 1] values of every key mteb writes. mteb does not report thresholds any more; ``cosine_accuracy_threshold`` and
``cosine_f1_threshold`` are those of its search (the names older mteb versions used).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["SCORES", "best_accuracy_and_threshold", "best_f1_and_threshold", "pair_classification_mteb",
           "pair_scores"]

SCORES = ("similarity", "cosine", "manhattan", "euclidean", "dot")  # mteb's order; True = higher is more similar
_HIGHER_IS_SIMILAR = {"similarity": True, "cosine": True, "manhattan": False, "euclidean": False, "dot": True}
_METRICS = ("accuracy", "f1", "precision", "recall", "ap")


def _check(e1: np.ndarray, e2: np.ndarray, labels: Sequence[int] | np.ndarray) -> tuple[np.ndarray, ...]:
    a, b = np.asarray(e1), np.asarray(e2)
    y = np.asarray(labels)
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(f"e1 {a.shape} and e2 {b.shape} must be 2-D arrays of the same shape (row i of both = pair i)")
    if y.shape != (len(a),):
        raise ValueError(f"labels must be 1-D with one label per pair ({len(a)}), got shape {y.shape}")
    if len(a) < 2:
        raise ValueError(f"a threshold search needs at least 2 pairs, got {len(a)}")
    if not np.isin(y, (0, 1)).all():
        raise ValueError(f"labels must be 0 (not a paraphrase) or 1 (paraphrase); found {sorted(set(y.tolist()))}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("embeddings must be finite (NaN/inf found)")
    return a, b, y.astype(np.int64)


def pair_scores(e1: np.ndarray, e2: np.ndarray) -> dict[str, np.ndarray]:
    """The five per-pair scores of mteb's evaluator, as float64 arrays (mteb's ``.tolist()`` of float32 values)."""
    import torch
    from sklearn.metrics.pairwise import (
        paired_cosine_distances,
        paired_euclidean_distances,
        paired_manhattan_distances,
    )

    a, b = np.asarray(e1), np.asarray(e2)
    # mteb.similarity_functions.pairwise_cos_sim, in torch as there: on tied data a numpy cosine rounds differently in
    # the last float32 bit, which splits or joins ties and moves AP by up to a few 1e-3
    ta = torch.nn.functional.normalize(torch.tensor(a, dtype=torch.float32), p=2, dim=1)
    tb = torch.nn.functional.normalize(torch.tensor(b, dtype=torch.float32), p=2, dim=1)
    return {
        "similarity": (ta * tb).sum(dim=-1).numpy().astype(np.float64),
        "cosine": (1 - paired_cosine_distances(a, b)).astype(np.float64),
        "manhattan": paired_manhattan_distances(a, b).astype(np.float64),
        "euclidean": paired_euclidean_distances(a, b).astype(np.float64),
        # np.dot per row (not einsum): the same BLAS dot, so the same float32 rounding as mteb
        "dot": np.asarray([np.dot(a[i], b[i]) for i in range(len(a))]).astype(np.float64),
    }


def _walk(scores: np.ndarray, labels: np.ndarray, higher_is_similar: bool) -> tuple[np.ndarray, ...]:
    """Scores sorted most-similar first, positives above each cut, and the cuts that do not split tied scores."""
    order = np.argsort(-scores if higher_is_similar else scores, kind="stable")
    s, y = scores[order], labels[order]
    positives = np.cumsum(y == 1)[:-1]  # after rows 0..i, for the cut between row i and i + 1
    cut = s[:-1] != s[1:]
    midpoint = (s[:-1] + s[1:]) / 2
    return positives, cut, midpoint


def best_accuracy_and_threshold(scores: np.ndarray, labels: np.ndarray,
                                higher_is_similar: bool = True) -> tuple[float, float]:
    """mteb ``_find_best_acc_and_threshold``: the best accuracy of a cut between two different scores and its
    threshold (midpoint of the two scores); (0, -1) when every score is tied."""
    s, y = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=np.int64)
    positives, cut, midpoint = _walk(s, y, higher_is_similar)
    negatives_above = np.arange(1, len(s)) - positives
    acc = (positives + (int((y == 0).sum()) - negatives_above)) / len(y)
    if not cut.any():
        return 0.0, -1.0
    i = int(np.flatnonzero(cut)[np.argmax(acc[cut])])  # first cut on equality, as mteb's strict ">"
    return float(acc[i]), float(midpoint[i])


def best_f1_and_threshold(scores: np.ndarray, labels: np.ndarray,
                          higher_is_similar: bool = True) -> tuple[float, float, float, float]:
    """mteb ``_find_best_f1_and_threshold``: (f1, precision, recall, threshold) of the best-F1 cut between two
    different scores with at least one positive above; (0, 0, 0, 0) when there is none."""
    s, y = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=np.int64)
    positives, cut, midpoint = _walk(s, y, higher_is_similar)
    valid = cut & (positives > 0)
    if not valid.any():
        return 0.0, 0.0, 0.0, 0.0
    idx = np.flatnonzero(valid)
    correct = positives[idx].astype(np.float64)
    precision = correct / (idx + 1)
    recall = correct / int(y.sum())
    f1 = 2 * precision * recall / (precision + recall)
    j = int(np.argmax(f1))
    return float(f1[j]), float(precision[j]), float(recall[j]), float(midpoint[idx[j]])


def pair_classification_mteb(e1: np.ndarray, e2: np.ndarray, labels: Sequence[int] | np.ndarray,
                             main_metric: str = "max_ap") -> dict[str, float]:
    """mteb's PairClassification scores of pairs (``e1[i]``, ``e2[i]``) with gold ``labels`` (0/1).

    Returns ``mteb_<score>_<metric>`` for every score of :data:`SCORES` and metric (accuracy, f1, precision, recall,
    ap), ``mteb_max_<metric>``, ``mteb_main_score`` (= ``main_metric``; ``max_ap`` for PAWS-X) in mteb's [0, 1]; the
    same keys without the prefix ×100; ``cosine_accuracy_threshold`` and ``cosine_f1_threshold`` (raw cosine); ``n``.
    """
    from sklearn.metrics import average_precision_score

    a, b, y = _check(e1, e2, labels)
    raw: dict[str, float] = {}
    thresholds: dict[str, float] = {}
    for name, scores in pair_scores(a, b).items():
        higher = _HIGHER_IS_SIMILAR[name]
        acc, acc_threshold = best_accuracy_and_threshold(scores, y, higher)
        f1, precision, recall, f1_threshold = best_f1_and_threshold(scores, y, higher)
        ap = average_precision_score(y, scores * (1 if higher else -1))
        raw.update({f"{name}_accuracy": acc, f"{name}_f1": f1, f"{name}_precision": precision,
                    f"{name}_recall": recall, f"{name}_ap": float(ap)})
        thresholds.update({f"{name}_accuracy_threshold": acc_threshold, f"{name}_f1_threshold": f1_threshold})
    for metric in _METRICS:
        raw[f"max_{metric}"] = max(raw[f"{name}_{metric}"] for name in SCORES)
    if main_metric not in raw:
        raise ValueError(f"main_metric {main_metric!r} is not one of mteb's pair-classification scores {sorted(raw)}")
    raw["main_score"] = raw[main_metric]
    out = {f"mteb_{k}": v for k, v in raw.items()}
    out.update({k: 100.0 * v for k, v in raw.items()})
    out["cosine_accuracy_threshold"] = thresholds["cosine_accuracy_threshold"]
    out["cosine_f1_threshold"] = thresholds["cosine_f1_threshold"]
    out["n"] = len(y)
    return out
