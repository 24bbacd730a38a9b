"""xSIM: margin-based similarity-search error rate (docs methods §7.8, e.g. on FLORES-200 devtest).

Reference: LASER ``source/xsim.py`` (``xSIM``, ``_score_knn``, ``_score_margin``, ``calculate_error``) and
``source/eval.py`` (``calc_xsim_nway``). For each source row i: its cosine top-k among the target rows (k=4), re-ranked
by the margin (:mod:`models.evaluation.margin`; ``absolute`` is LASER's plain cosine top-1), the best one is retrieved.
An error is counted when the retrieved row ≠ i (index comparison, ``--index-comparison``) or, when the target texts
are given (``eval.py``'s default), when the retrieved target's TEXT ≠ the gold target's text — so retrieving a
duplicate of the gold sentence is correct. xSIM = 100 · errors / n, in percent. Inputs are never modified (LASER's
``faiss.normalize_L2`` normalises the caller's arrays in place, pitfall D.6.7).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from models.evaluation.knn import PAIR_X_CHUNK, PAIR_Y_CHUNK, as_embeddings
from models.evaluation.margin import Neighbourhoods, best_by_margin, knn_means, margin_function, score_candidates


def _retrieved(nb: Neighbourhoods, margin: str) -> np.ndarray:
    if margin == "absolute":
        return nb.x2y_ind[:, 0]  # cosine top-1 (LASER: idx_y.search(x, 1))
    best, _ = best_by_margin(score_candidates(nb.x2y_sim, nb.x2y_ind, nb.x2y_mean, nb.y2x_mean, margin), nb.x2y_ind)
    return best


def _errors(best: np.ndarray, tgt_texts: Sequence[str] | None) -> int:
    n = len(best)
    if tgt_texts is None:
        return int((best != np.arange(n)).sum())
    if len(tgt_texts) != n:
        raise ValueError(f"tgt_texts has {len(tgt_texts)} lines for {n} target rows")
    return sum(tgt_texts[i] != tgt_texts[j] for i, j in enumerate(best.tolist()))


def _result(errors: int, n: int) -> dict[str, float]:
    return {"error_rate": 100 * errors / n, "errors": errors, "n": n}


def _check_pair(src: np.ndarray, tgt: np.ndarray, names: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
    a, b = as_embeddings(src, names[0]), as_embeddings(tgt, names[1])
    if a.shape != b.shape:
        raise ValueError(f"number of source {a.shape} / target {b.shape} shapes mismatch ({names[0]}, {names[1]})")
    if len(a) == 0:
        raise ValueError(f"{names[0]} and {names[1]} are empty")
    return a, b


def xsim(src_emb: np.ndarray, tgt_emb: np.ndarray, *, margin: str = "ratio", k: int = 4,
         tgt_texts: Sequence[str] | None = None, x_chunk: int = PAIR_X_CHUNK, y_chunk: int = PAIR_Y_CHUNK,
         device: str = "cpu") -> dict[str, float]:
    """xSIM of row-aligned ``src_emb`` → ``tgt_emb``: error_rate (percent), errors, n. ``tgt_texts`` (one per
    target row) switches from index comparison to LASER ``eval.py``'s default text comparison."""
    margin_function(margin)
    a, b = _check_pair(src_emb, tgt_emb, ("src_emb", "tgt_emb"))
    nb = knn_means(a, b, 1 if margin == "absolute" else k, x_chunk=x_chunk, y_chunk=y_chunk, device=device)
    return _result(_errors(_retrieved(nb, margin), tgt_texts), len(a))


def _swap(nb: Neighbourhoods) -> Neighbourhoods:
    return Neighbourhoods(nb.y2x_sim, nb.y2x_ind, nb.x2y_sim, nb.x2y_ind, nb.y2x_mean, nb.x2y_mean)


def xsim_matrix(embs_by_lang: Mapping[str, np.ndarray], texts_by_lang: Mapping[str, Sequence[str]] | None = None, *,
                margin: str = "ratio", k: int = 4, x_chunk: int = PAIR_X_CHUNK, y_chunk: int = PAIR_Y_CHUNK,
                device: str = "cpu") -> dict[tuple[str, str], dict[str, float]]:
    """LASER ``eval.py --nway``: xSIM for every ordered pair (src, tgt) of distinct languages of a row-aligned
    (N-way parallel) set, keyed ``(src, tgt)``. With ``texts_by_lang`` the target's texts are compared. The k-NN of
    each unordered pair is computed once and serves both directions. LASER's global average is the mean of the
    ``error_rate`` values (its matrix average excludes the diagonal)."""
    margin_function(margin)
    langs = list(embs_by_lang)
    if len(langs) < 2:
        raise ValueError(f"xsim_matrix needs at least two languages, got {langs}")
    if texts_by_lang is not None:
        missing = [lang for lang in langs if lang not in texts_by_lang]
        if missing:
            raise ValueError(f"texts_by_lang has no texts for {', '.join(missing)}")
    embs = {lang: as_embeddings(embs_by_lang[lang], f"embeddings of {lang}") for lang in langs}
    out: dict[tuple[str, str], dict[str, float]] = {}
    for i, s in enumerate(langs):
        for t in langs[i + 1:]:
            a, b = _check_pair(embs[s], embs[t], (s, t))
            nb = knn_means(a, b, 1 if margin == "absolute" else k, x_chunk=x_chunk, y_chunk=y_chunk, device=device)
            for (src, tgt), hood in (((s, t), nb), ((t, s), _swap(nb))):
                texts = texts_by_lang[tgt] if texts_by_lang is not None else None
                out[(src, tgt)] = _result(_errors(_retrieved(hood, margin), texts), len(a))
    return {(s, t): out[(s, t)] for s in langs for t in langs if s != t}
