"""Embedding-space geometry: alignment, uniformity and a language-identification probe (docs methods §7.7).

* Alignment and uniformity (Wang & Isola 2020; reference implementation SsnL/align_uniform
  ``align_uniform/__init__.py``; used by SimCSE and mSimCSE Table 7) on L2-normalised copies f of the embeddings:
  ``align = mean_i ‖f(x_i) − f(y_i)‖₂^α`` over positive pairs (row i of x ↔ row i of y), α = 2;
  ``uniform = log mean_{a<b} exp(−t ‖f(a) − f(b)‖₂²)`` over all unordered distinct pairs, t = 2, i.e.
  ``torch.pdist(f).pow(2).mul(-t).exp().mean().log()``. Here it is computed in float64 over row blocks of the upper
  triangle (memory O(block × N), never the N×N matrix) with a running log-sum-exp, so N ≈ 50k works and large t does
  not underflow. Reported raw (not ×100); lower is better for both.
* Language-identification probe (mSimCSE Table 7): a logistic regression predicting the language of a sentence from
  its frozen embedding; accuracy ×100 — lower means a more language-agnostic space (chance = 100 / #languages for
  balanced data).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["alignment", "language_id_probe", "uniformity"]

_BLOCK_ELEMENTS = 1 << 22  # ~32 MB per float64 temporary of a row block


def _normalised(x: np.ndarray, what: str) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 2:
        raise ValueError(f"{what}: expected a 2-D array (N×d), got shape {a.shape}")
    a = a.astype(np.float64)  # always a copy: the caller's array is never modified
    if not np.isfinite(a).all():
        raise ValueError(f"{what}: embeddings contain NaN or inf")
    norms = np.linalg.norm(a, axis=1, keepdims=True)
    if (norms == 0).any():
        raise ValueError(f"{what}: row {int(np.flatnonzero(norms[:, 0] == 0)[0]) + 1} is a zero vector (no direction)")
    a /= norms
    return a


def alignment(x: np.ndarray, y: np.ndarray, alpha: float = 2) -> float:
    """Mean ‖f(x_i) − f(y_i)‖₂^α over row-aligned positive pairs, on L2-normalised copies."""
    fx = _normalised(x, "x")
    fy = _normalised(y, "y")
    if fx.shape != fy.shape:
        raise ValueError(f"x {fx.shape} and y {fy.shape} must have the same shape (row i of both is pair i)")
    if len(fx) == 0:
        raise ValueError("alignment needs at least one pair")
    if alpha <= 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    return float(np.mean(np.linalg.norm(fx - fy, axis=1) ** alpha))


def uniformity(
    x: np.ndarray,
    t: float = 2,
    max_points: int | None = None,
    seed: int = 0,
    block_size: int | None = None,
) -> float:
    """log mean over all unordered distinct pairs of exp(−t ‖f(a) − f(b)‖₂²), f = L2 normalisation.

    ``max_points``: evaluate on a seeded random subset of that many rows (``np.random.default_rng(seed)``, without
    replacement) when N is larger. ``block_size``: rows per block (default: about 4M matrix elements per block).
    """
    f = _normalised(x, "x")
    if t <= 0:
        raise ValueError(f"t must be > 0, got {t}")
    if max_points is not None:
        if max_points < 2:
            raise ValueError(f"max_points must be >= 2, got {max_points}")
        if len(f) > max_points:
            f = f[np.sort(np.random.default_rng(seed).choice(len(f), size=max_points, replace=False))]
    n = len(f)
    if n < 2:
        raise ValueError(f"uniformity needs at least 2 points, got {n}")
    if block_size is None:
        block_size = max(1, _BLOCK_ELEMENTS // n)
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    sq = np.einsum("ij,ij->i", f, f)
    running_max, running_sum = -np.inf, 0.0
    for start in range(0, n - 1, block_size):
        stop = min(start + block_size, n - 1)
        rows = f[start:stop]
        # exponent −t‖a − b‖² = 2t a·b − t‖a‖² − t‖b‖² (clipped at 0, i.e. ‖a − b‖² >= 0) of rows start..stop-1
        # against every later row (columns start+1..n-1)
        expo = rows @ f[start + 1 :].T
        expo *= 2.0 * t
        expo -= t * sq[start:stop, None]
        expo -= t * sq[None, start + 1 :]
        np.minimum(expo, 0.0, out=expo)
        # row r (global start+r) pairs with column c (global start+1+c) iff c >= r: only the leading square of the
        # block holds pairs to drop (c < r), its strict lower triangle
        b = stop - start
        head = expo[:, :b]
        head[np.tril_indices(b, k=-1)] = -np.inf
        block_max = float(expo.max())
        expo -= block_max
        np.exp(expo, out=expo)
        block_sum = float(expo.sum())
        if block_max > running_max:
            running_sum = running_sum * np.exp(running_max - block_max) + block_sum
            running_max = block_max
        else:
            running_sum += block_sum * np.exp(block_max - running_max)
    n_pairs = n * (n - 1) / 2
    return float(running_max + np.log(running_sum) - np.log(n_pairs))


def language_id_probe(
    train_emb: np.ndarray,
    train_langs: Sequence[str] | np.ndarray,
    test_emb: np.ndarray,
    test_langs: Sequence[str] | np.ndarray,
    seed: int = 0,
) -> dict[str, float]:
    """Logistic regression (lbfgs, ``max_iter=1000``, ``random_state=seed``) from embedding to language.

    Returns ``accuracy`` (×100 on the test rows), ``majority`` (×100, share of the most frequent test language — the
    chance level to compare with), ``n`` (test rows) and ``n_languages`` (distinct training languages).
    """
    from sklearn.linear_model import LogisticRegression

    xs, ys = [], []
    for what, emb, langs in (("train", train_emb, train_langs), ("test", test_emb, test_langs)):
        x = np.asarray(emb)
        y = np.asarray(langs)
        if x.ndim != 2 or y.ndim != 1 or len(x) != len(y) or len(x) == 0:
            raise ValueError(f"{what}: expected N×d embeddings and N language codes (N >= 1), got {x.shape}, {y.shape}")
        if np.issubdtype(x.dtype, np.floating) and not np.isfinite(x).all():
            raise ValueError(f"{what}: embeddings contain NaN or inf")
        xs.append(x)
        ys.append(y)
    if xs[0].shape[1] != xs[1].shape[1]:
        raise ValueError(f"train dimension {xs[0].shape[1]} differs from test dimension {xs[1].shape[1]}")
    n_languages = int(np.unique(ys[0]).size)
    if n_languages < 2:
        raise ValueError("train: a language-identification probe needs at least 2 languages")
    model = LogisticRegression(max_iter=1000, random_state=seed).fit(xs[0], ys[0])
    accuracy = float(np.mean(model.predict(xs[1]) == ys[1]))
    _, counts = np.unique(ys[1], return_counts=True)
    return {
        "accuracy": 100.0 * accuracy,
        "majority": 100.0 * float(counts.max()) / len(ys[1]),
        "n": len(ys[1]),
        "n_languages": n_languages,
    }
