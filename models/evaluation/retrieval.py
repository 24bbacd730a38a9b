"""Bitext retrieval accuracy (Tatoeba protocol, docs methods §7.1).

Cosine similarity, top-1 by argmax with ties broken by the lowest index, accuracy against the identity alignment,
computed in both directions with the real number of pairs as denominator (not EASE's ``/10``, which assumes 1,000).
"""

from __future__ import annotations

import numpy as np


def retrieval_accuracy(src: np.ndarray, tgt: np.ndarray) -> tuple[float, float]:
    """Return (accuracy src→tgt, accuracy tgt→src) for row-aligned embeddings (any scale; cosine is used)."""
    if src.shape != tgt.shape:
        raise ValueError(f"src {src.shape} and tgt {tgt.shape} must have the same shape (line-aligned pairs)")
    a = src / np.clip(np.linalg.norm(src, axis=1, keepdims=True), 1e-12, None)
    b = tgt / np.clip(np.linalg.norm(tgt, axis=1, keepdims=True), 1e-12, None)
    sim = a @ b.T
    gold = np.arange(len(src))
    s2t = float((sim.argmax(axis=1) == gold).mean())
    t2s = float((sim.argmax(axis=0) == gold).mean())
    return s2t, t2s
