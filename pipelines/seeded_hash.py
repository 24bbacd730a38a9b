"""Seeded 64-bit hashing for reproducible random choices, stable across library versions (unlike polars' ``hash``).

splitmix64 (Steele, Lea and Flood 2014) over numpy ``uint64`` arrays; strings enter through an MD5-derived constant.
"""

from __future__ import annotations

import hashlib

import numpy as np


def splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint64(30))
        x = x * np.uint64(0xBF58476D1CE4E5B9)
        x = x ^ (x >> np.uint64(27))
        x = x * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def string_constant(s: str) -> np.uint64:
    return np.uint64(int.from_bytes(hashlib.md5(s.encode("utf-8")).digest()[:8], "little"))


def seeded_hash(values: np.ndarray, *salt: str) -> np.ndarray:
    """splitmix64 of ``values`` (integers) mixed with the strings in ``salt``."""
    x = np.asarray(values).astype(np.uint64, copy=False)
    for s in salt:
        x = splitmix64(x ^ string_constant(s))
    return x
