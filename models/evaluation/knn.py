"""Exact cosine k-nearest neighbours in bounded memory (docs methods §7.2, the k-NN step of margin scoring).

Reference: LASER ``source/mine_bitexts.py`` (``knnCPU``/``knnGPU``: faiss ``IndexFlatIP`` on rows L2-normalised by
``faiss.normalize_L2``) and ``source/xsim.py`` (``_score_knn``). The same exact search is done here with chunked
matmuls (torch, CPU or any torch device) and a running top-k merge, so memory is
O(x_chunk × y_chunk + (nx + ny) × k), never nx × ny, and the caller's arrays are never modified (faiss normalises in
place, pitfall D.6.7: here only per-chunk copies are normalised).

Order and ties. Results are sorted by score descending; equal scores are ordered by the lower corpus index, and a
tie at the k-th place goes to the lowest indices. ``torch.topk`` promises neither, so it is only used to find the
values: each block asks for k+1 values, and only where the k-th and (k+1)-th values are equal (the one case where
topk's choice among equal values matters) the block row is re-selected exactly (everything above the k-th value plus
the lowest-index entries equal to it). The k kept entries are then ordered by (−score, index) with ``np.lexsort``;
block results are merged with a stable sort in block order (earlier blocks hold lower indices), which keeps the rule.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

#: default blocks of :func:`cosine_topk` (one score block is query_chunk × corpus_chunk × 4 bytes = 1 GiB)
QUERY_CHUNK = 4096
CORPUS_CHUNK = 65536
#: default blocks of :func:`cosine_topk_pair`, which also keeps a transposed copy of each block (2 × 256 MiB)
PAIR_X_CHUNK = 4096
PAIR_Y_CHUNK = 16384
_FIXUP_ROWS = 256  # ambiguous rows re-selected per step (bounds the cumsum buffer)


def as_embeddings(a: object, name: str = "embeddings") -> np.ndarray:
    """Check ``a`` is a 2-D finite numeric matrix and return it as C-contiguous float32 (a copy only if needed)."""
    arr = np.asarray(a)
    if arr.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array (rows × dim), got shape {arr.shape}")
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"{name}: expected numeric embeddings, got dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    for lo in range(0, len(arr), 65536):  # in blocks: no n × d boolean temporary
        finite = np.isfinite(arr[lo:lo + 65536]).all(axis=1)
        if not finite.all():
            raise ValueError(f"{name}: row {lo + int(np.argmin(finite))} (0-based) has a NaN or infinite value")
    return arr


def _normalised(t: object) -> object:
    import torch

    return torch.nn.functional.normalize(t, p=2.0, dim=1, eps=1e-12)


def _block_topk(scores: object, k: int, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of every row of a score block (torch tensor) as numpy (scores f32, global indices i64), ordered by
    (−score, index), ties at the k-th place resolved to the lowest indices (see the module docstring)."""
    import torch

    rows, cols = scores.shape
    kk = min(k, cols)
    if kk == cols:
        idx = torch.arange(cols, device=scores.device).expand(rows, cols)
        vals = scores
    else:
        vals, idx = torch.topk(scores, kk + 1, dim=1, largest=True, sorted=True)
        ambiguous = torch.nonzero(vals[:, kk] == vals[:, kk - 1]).squeeze(1)
        vals, idx = vals[:, :kk].clone(), idx[:, :kk].clone()
        for lo in range(0, len(ambiguous), _FIXUP_ROWS):
            r = ambiguous[lo:lo + _FIXUP_ROWS]
            sub = scores[r]
            kth = vals[r, kk - 1:kk]
            above = sub > kth
            equal = sub == kth
            need = kk - above.sum(dim=1, keepdim=True)
            keep = above | (equal & (torch.cumsum(equal, dim=1) <= need))
            sel = torch.nonzero(keep)[:, 1].view(len(r), kk)  # row-major: ascending column within each row
            idx[r] = sel
            vals[r] = sub.gather(1, sel)
    v = vals.float().cpu().numpy()
    i = idx.cpu().numpy().astype(np.int64) + offset
    order = np.lexsort((i, -v), axis=-1)
    return np.take_along_axis(v, order, 1), np.take_along_axis(i, order, 1)


class _TopK:
    """Running top-k per row (−inf placeholders until filled), fed blocks in increasing index order."""

    def __init__(self, n: int, k: int) -> None:
        self.k = k
        self.scores = np.full((n, k), -np.inf, dtype=np.float32)
        self.indices = np.full((n, k), -1, dtype=np.int64)

    def merge(self, lo: int, hi: int, scores: np.ndarray, indices: np.ndarray) -> None:
        cat_s = np.concatenate([self.scores[lo:hi], scores], axis=1)
        cat_i = np.concatenate([self.indices[lo:hi], indices], axis=1)
        order = np.argsort(-cat_s, axis=1, kind="stable")[:, :self.k]
        self.scores[lo:hi] = np.take_along_axis(cat_s, order, 1)
        self.indices[lo:hi] = np.take_along_axis(cat_i, order, 1)


def blocks(n: int, size: int) -> Iterator[tuple[int, int]]:
    for lo in range(0, n, size):
        yield lo, min(lo + size, n)


def _check(x: object, y: object, k: int, chunks: tuple[int, int], names: tuple[str, str]) -> tuple[np.ndarray, ...]:
    if not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if min(chunks) < 1:
        raise ValueError(f"chunk sizes must be positive, got {chunks}")
    a, b = as_embeddings(x, names[0]), as_embeddings(y, names[1])
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"{names[0]} has dimension {a.shape[1]} but {names[1]} has {b.shape[1]}")
    if len(b) == 0:
        raise ValueError(f"{names[1]} is empty: nothing to search")
    return a, b


def _scan(x: np.ndarray, y: np.ndarray, k: int, x_chunk: int, y_chunk: int, device: str,
          both: bool) -> tuple[_TopK, _TopK | None]:
    import torch

    dev = torch.device(device)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    fwd = _TopK(len(x), min(k, len(y)))
    bwd = _TopK(len(y), min(k, len(x))) if both else None
    with torch.inference_mode():
        # on an accelerator the normalised corpus blocks are moved there once; on the CPU they are re-made per query
        # block (a few % of the matmul's cost) so that no normalised copy of the corpus is held
        cached = [_normalised(ty[lo:hi].to(dev)) for lo, hi in blocks(len(y), y_chunk)] if dev.type != "cpu" else None
        for xlo, xhi in blocks(len(x), x_chunk):
            q = _normalised(tx[xlo:xhi].to(dev))
            for b, (ylo, yhi) in enumerate(blocks(len(y), y_chunk)):
                c = cached[b] if cached is not None else _normalised(ty[ylo:yhi])
                s = q @ c.T
                fwd.merge(xlo, xhi, *_block_topk(s, k, ylo))
                if bwd is not None:
                    bwd.merge(ylo, yhi, *_block_topk(s.T.contiguous(), k, xlo))
                del s
    return fwd, bwd


def cosine_topk(queries: np.ndarray, corpus: np.ndarray, k: int, *, query_chunk: int = QUERY_CHUNK,
                corpus_chunk: int = CORPUS_CHUNK, device: str = "cpu") -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` corpus rows most cosine-similar to each query row.

    Returns (scores float32 [nq, k], indices int64 [nq, k]), sorted by score descending, ties → lowest corpus index.
    ``k`` larger than the corpus is clipped to its size (as LASER's ``min(y.shape[0], k)``). Inputs are any numeric
    2-D arrays (cast to float32, never modified); ``device`` is a torch device string (``"cuda"`` on a GPU).
    """
    q, c = _check(queries, corpus, k, (query_chunk, corpus_chunk), ("queries", "corpus"))
    fwd, _ = _scan(q, c, k, query_chunk, corpus_chunk, device, both=False)
    return fwd.scores, fwd.indices


def cosine_topk_pair(x: np.ndarray, y: np.ndarray, k: int, *, x_chunk: int = PAIR_X_CHUNK,
                     y_chunk: int = PAIR_Y_CHUNK, device: str = "cpu"
                     ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Both k-NN searches of margin scoring from one pass over the x × y blocks: ((x→y scores, indices),
    (y→x scores, indices)), each exactly as :func:`cosine_topk` would return it (same order and tie rule; the
    scores of y→x are the same cosines as x→y's, read from the transposed block). Half the matmul work of two calls;
    memory O(x_chunk × y_chunk) (the block and its transposed copy)."""
    a, b = _check(x, y, k, (x_chunk, y_chunk), ("x", "y"))
    if len(a) == 0:
        raise ValueError("x is empty: nothing to search")
    fwd, bwd = _scan(a, b, k, x_chunk, y_chunk, device, both=True)
    assert bwd is not None
    return (fwd.scores, fwd.indices), (bwd.scores, bwd.indices)
