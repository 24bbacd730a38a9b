"""Margin-based scoring of cross-lingual candidates (Artetxe & Schwenk, ACL 2019; docs methods §7.2).

Reference: LASER ``source/mine_bitexts.py`` (``score``, ``score_candidates``, the ``mine`` mode's k-NN means) and
``source/xsim.py`` (``_score_margin``). With x, y L2-normalised, NN_k^Y(x) the k nearest targets of x by cosine and
NN_k^X(y) the k nearest sources of y::

    margin(x, y) = M(cos(x, y), (1/2k) Σ_{z∈NN_k^Y(x)} cos(x, z) + (1/2k) Σ_{z∈NN_k^X(y)} cos(y, z))
    ratio: M(a, b) = a / b      distance: M(a, b) = a − b      absolute: M(a, b) = a

as LASER codes it: the neighbourhoods include the candidate itself, the per-side means ``x2y_mean`` and ``y2x_mean``
are computed once (float32 means of the k cosines, k clipped to the other side's size) and the denominator is their
average ``(x2y_mean[i] + y2x_mean[j]) / 2``; candidates of x are its cosine top-k, re-ranked by the margin (argmax:
the first of equal margins in cosine order wins). One difference, on purpose: the numerator is the k-NN cosine
(as ``xsim.py`` does) where ``mine_bitexts.py`` recomputes ``x[i].dot(y[j])`` in numpy — the same value up to the
last float32 bit. The k-NN runs through :mod:`models.evaluation.knn` (exact, bounded memory, inputs never modified).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from models.evaluation.knn import PAIR_X_CHUNK, PAIR_Y_CHUNK, cosine_topk_pair

MARGINS = ("ratio", "distance", "absolute")


def margin_function(margin: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """LASER's M(a, b): ``ratio`` a / b, ``distance`` a − b, ``absolute`` a."""
    if margin == "ratio":
        return lambda a, b: a / b
    if margin == "distance":
        return lambda a, b: a - b
    if margin == "absolute":
        return lambda a, b: a
    raise ValueError(f"margin must be one of {MARGINS}, got {margin!r}")


@dataclass(frozen=True)
class Neighbourhoods:
    """Cosine k-NN both ways and the per-side means of the margin's denominator."""

    x2y_sim: np.ndarray  # float32 [nx, kx], descending
    x2y_ind: np.ndarray  # int64 [nx, kx]
    y2x_sim: np.ndarray  # float32 [ny, ky]
    y2x_ind: np.ndarray  # int64 [ny, ky]
    x2y_mean: np.ndarray  # float32 [nx]
    y2x_mean: np.ndarray  # float32 [ny]


def knn_means(x: np.ndarray, y: np.ndarray, k: int = 4, *, x_chunk: int = PAIR_X_CHUNK,
              y_chunk: int = PAIR_Y_CHUNK, device: str = "cpu") -> Neighbourhoods:
    """k-NN x→y (k clipped to len(y)) and y→x (k clipped to len(x)) by cosine, and their means (LASER's
    ``x2y_mean = x2y_sim.mean(axis=1)``, ``y2x_mean`` likewise), from one bounded-memory pass."""
    (xs, xi), (ys, yi) = cosine_topk_pair(x, y, k, x_chunk=x_chunk, y_chunk=y_chunk, device=device)
    return Neighbourhoods(xs, xi, ys, yi, xs.mean(axis=1), ys.mean(axis=1))


def score_candidates(sim: np.ndarray, ind: np.ndarray, fwd_mean: np.ndarray, bwd_mean: np.ndarray,
                     margin: str = "ratio") -> np.ndarray:
    """LASER ``score_candidates`` vectorised: ``M(sim[i, j], (fwd_mean[i] + bwd_mean[ind[i, j]]) / 2)`` in float32,
    returned as float64 (LASER stores the float32 results in an ``np.zeros`` float64 array)."""
    m = margin_function(margin)
    with np.errstate(divide="ignore", invalid="ignore"):
        b = (fwd_mean[:, None] + bwd_mean[ind]) / np.float32(2)
        return np.asarray(m(sim, b), dtype=np.float32).astype(np.float64)


def best_by_margin(scores: np.ndarray, ind: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(best candidate index, its margin) per row: LASER's ``ind[i, scores[i].argmax()]`` (first maximum)."""
    if scores.shape[1] == 0:
        return np.empty(len(scores), dtype=np.int64), np.empty(len(scores))
    arg = scores.argmax(axis=1)
    rows = np.arange(len(scores))
    return ind[rows, arg], scores[rows, arg]


def margin_scores(x: np.ndarray, y: np.ndarray, k: int = 4, margin: str = "ratio", *, x_chunk: int = PAIR_X_CHUNK,
                  y_chunk: int = PAIR_Y_CHUNK, device: str = "cpu") -> tuple[np.ndarray, np.ndarray]:
    """For each x row, its cosine top-k targets re-ranked by margin: (margin scores float64 [nx, k], target indices
    int64 [nx, k]), best first (equal margins keep the cosine order, so column 0 is LASER's argmax choice)."""
    margin_function(margin)
    nb = knn_means(x, y, k, x_chunk=x_chunk, y_chunk=y_chunk, device=device)
    s = score_candidates(nb.x2y_sim, nb.x2y_ind, nb.x2y_mean, nb.y2x_mean, margin)
    order = np.argsort(-s, axis=1, kind="stable")
    return np.take_along_axis(s, order, 1), np.take_along_axis(nb.x2y_ind, order, 1)
