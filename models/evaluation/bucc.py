"""BUCC 2018 bitext mining: LASER margin mining, threshold search and F1 (docs methods §7.3, pitfalls D.4).

References: LASER ``source/mine_bitexts.py --unify --mode mine --retrieval max --margin ratio -k 4`` (mining),
LASER ``tasks/bucc/bucc.py`` (text → ID map, ``BuccOptimize``, ``BuccExtract``, F1 on ``src\\ttgt`` ID strings),
mteb ``tasks/bitext_mining/multilingual/bucc_bitext_mining*.py`` (the retrieval-style cross-check).

What is reproduced, step by step:

1. ``TextLoadUnify``: identical texts per side are de-duplicated, the unique texts in first-occurrence order. The
   embedding used for a unique text is the row of its LAST occurrence: LASER's ``unique_embeddings`` builds
   ``{j: i for i, j in enumerate(ind)}``, which the last duplicate overwrites (identical texts normally have
   identical embeddings; this only matters when they do not).
2. k-NN both ways on the unique rows (cosine; :mod:`models.evaluation.knn`, bounded memory, inputs never modified),
   margin scores of the k candidates both ways (:mod:`models.evaluation.margin`), forward best per source and
   backward best per target (argmax, first maximum).
3. Retrieval ``max``: forward and backward pairs pooled, sorted by score descending, accepted greedily only when
   neither side is used yet (1:1); a visited pair marks both sides used even when its score is ≤ ``threshold`` and
   is then not output (LASER's order of ``seen.add`` and the threshold test). ``fwd``, ``bwd`` and ``intersect``
   output every forward / backward / mutual pair with no threshold test, as LASER does. One documented difference:
   LASER sorts with numpy's default (unstable) quicksort; here the sort is stable, so equal scores keep pool order
   (forward pairs by source row, then backward pairs by target row).
4. ``bucc.py``: texts (stripped, as ``line.strip()``) are mapped back to IDs; a stripped text occurring more than
   once in its file is DROPPED from the text → ID map, so a gold pair with such a text can never be found; a
   candidate (src ID, tgt ID) seen twice keeps the max score and its first position.

``BuccOptimize`` indexes ``items[i + 1]``, an IndexError when the best F1 is reached at the last candidate (D.4.2):
here that case takes the last candidate's own score as threshold (extraction keeps score ≥ threshold, so every
candidate is kept, which is that prefix). When no candidate is correct, the threshold stays LASER's initial 0.
Precision, recall and F1 are those of the extraction at the chosen threshold (what ``bucc.py`` prints), in points.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from models.evaluation.knn import PAIR_X_CHUNK, PAIR_Y_CHUNK, as_embeddings
from models.evaluation.margin import Neighbourhoods, best_by_margin, knn_means, margin_function, score_candidates

RETRIEVALS = ("max", "fwd", "bwd", "intersect")


class Candidate(NamedTuple):
    """A mined pair: margin score and the two sentence IDs."""

    score: float
    src_id: str
    tgt_id: str


def unify_texts(texts: Sequence[str]) -> tuple[np.ndarray, list[str], np.ndarray]:
    """LASER ``TextLoadUnify`` + ``unique_embeddings``: (unique index of every row, unique texts in first-occurrence
    order, the row whose embedding each unique text uses = its last occurrence)."""
    sent2ind: dict[str, int] = {}
    inds = np.fromiter((sent2ind.setdefault(t, len(sent2ind)) for t in texts), dtype=np.int64, count=len(texts))
    rows = np.empty(len(sent2ind), dtype=np.int64)
    rows[inds] = np.arange(len(inds))  # fancy assignment: the last write per unique index wins, as LASER's dict
    return inds, list(sent2ind), rows


def _text_to_id(ids: Sequence[str], texts: Sequence[str]) -> tuple[dict[str, str], int]:
    """``bucc.py``'s sent2id: stripped text → ID, repeated stripped texts removed; returns (map, #repeated texts)."""
    counts = Counter(t.strip() for t in texts)
    sent2id: dict[str, str] = {}
    for i, t in zip(ids, texts, strict=True):
        s = t.strip()
        if counts[s] == 1:
            sent2id[s] = str(i).strip()
    return sent2id, sum(1 for c in counts.values() if c > 1)


def mine_rows(x: np.ndarray, y: np.ndarray, *, k: int = 4, margin: str = "ratio", retrieval: str = "max",
              threshold: float = 0.0, x_chunk: int = PAIR_X_CHUNK, y_chunk: int = PAIR_Y_CHUNK,
              device: str = "cpu") -> list[tuple[float, int, int]]:
    """``mine_bitexts.py --mode mine`` on embedding rows: (score, x row, y row) in LASER's output order."""
    if retrieval not in RETRIEVALS:
        raise ValueError(f"retrieval must be one of {RETRIEVALS}, got {retrieval!r}")
    margin_function(margin)
    if len(x) == 0 or len(y) == 0:
        return []
    nb = knn_means(x, y, k, x_chunk=x_chunk, y_chunk=y_chunk, device=device)
    return select_pairs(nb, margin=margin, retrieval=retrieval, threshold=threshold)


def select_pairs(nb: Neighbourhoods, *, margin: str = "ratio", retrieval: str = "max",
                 threshold: float = 0.0) -> list[tuple[float, int, int]]:
    """LASER's candidate selection from the k-NN both ways: margin scores of the k candidates each way, forward
    best per source, backward best per target, then ``retrieval`` (module docstring, step 3): (score, x row, y row)
    in LASER's output order. Neighbour places with index −1 (an approximate index that found fewer than k) are never
    chosen. :mod:`models.mining.mine` runs the same selection on faiss neighbourhoods."""
    if retrieval not in RETRIEVALS:
        raise ValueError(f"retrieval must be one of {RETRIEVALS}, got {retrieval!r}")
    fwd_scores = score_candidates(nb.x2y_sim, nb.x2y_ind, nb.x2y_mean, nb.y2x_mean, margin)
    bwd_scores = score_candidates(nb.y2x_sim, nb.y2x_ind, nb.y2x_mean, nb.x2y_mean, margin)
    fwd_scores[nb.x2y_ind < 0] = -np.inf
    bwd_scores[nb.y2x_ind < 0] = -np.inf
    fwd_best, fwd_score = best_by_margin(fwd_scores, nb.x2y_ind)
    bwd_best, bwd_score = best_by_margin(bwd_scores, nb.y2x_ind)
    nx, ny = len(fwd_best), len(bwd_best)
    if retrieval == "fwd":
        return list(zip(fwd_score.tolist(), range(nx), fwd_best.tolist(), strict=True))
    if retrieval == "bwd":
        return list(zip(bwd_score.tolist(), bwd_best.tolist(), range(ny), strict=True))
    if retrieval == "intersect":
        mutual = np.flatnonzero(bwd_best[fwd_best] == np.arange(nx))
        return list(zip(fwd_score[mutual].tolist(), mutual.tolist(), fwd_best[mutual].tolist(), strict=True))
    src = np.concatenate([np.arange(nx), bwd_best])
    tgt = np.concatenate([fwd_best, np.arange(ny)])
    scores = np.concatenate([fwd_score, bwd_score])
    order = np.argsort(-scores, kind="stable")
    seen_src = np.zeros(nx, dtype=bool)
    seen_tgt = np.zeros(ny, dtype=bool)
    out: list[tuple[float, int, int]] = []
    for i, s, t in zip(order.tolist(), src[order].tolist(), tgt[order].tolist(), strict=True):
        if s < 0 or t < 0:  # a row whose every neighbour place is empty (approximate index)
            continue
        if not seen_src[s] and not seen_tgt[t]:
            seen_src[s] = seen_tgt[t] = True
            if scores[i] > threshold:
                out.append((float(scores[i]), s, t))
    return out


def mine(src_ids: Sequence[str], src_texts: Sequence[str], src_emb: np.ndarray, tgt_ids: Sequence[str],
         tgt_texts: Sequence[str], tgt_emb: np.ndarray, *, k: int = 4, margin: str = "ratio", retrieval: str = "max",
         threshold: float = 0.0, stats: dict[str, int] | None = None, x_chunk: int = PAIR_X_CHUNK,
         y_chunk: int = PAIR_Y_CHUNK, device: str = "cpu") -> list[Candidate]:
    """LASER ``mine_bitexts.py --unify --mode mine`` + ``bucc.py``'s candidate reading: candidates with IDs.

    Row i of ``src_emb`` embeds ``src_texts[i]`` whose ID is ``src_ids[i]`` (likewise for the target side). Returns
    the candidates in LASER's candidate-file order (best first for ``max``). If ``stats`` is given it is filled with
    counts: lines and unique texts per side, repeated (dropped) texts per side, pairs mined, pairs dropped because a
    side's text is repeated, duplicate ID pairs merged and candidates returned.
    """
    for side, ids, texts, emb in (("src", src_ids, src_texts, src_emb), ("tgt", tgt_ids, tgt_texts, tgt_emb)):
        if not (len(ids) == len(texts) == len(emb)):
            raise ValueError(f"{side}: {len(ids)} IDs, {len(texts)} texts and {len(emb)} embedding rows must match")
    x_all, y_all = as_embeddings(src_emb, "src_emb"), as_embeddings(tgt_emb, "tgt_emb")
    _, src_unique, src_rows = unify_texts(src_texts)
    _, tgt_unique, tgt_rows = unify_texts(tgt_texts)
    # no copy when every text is unique (the rows are then 0..n-1)
    x = x_all if len(src_rows) == len(x_all) else x_all[src_rows]
    y = y_all if len(tgt_rows) == len(y_all) else y_all[tgt_rows]
    mined = mine_rows(x, y, k=k, margin=margin, retrieval=retrieval, threshold=threshold, x_chunk=x_chunk,
                      y_chunk=y_chunk, device=device)
    src2id, src_repeated = _text_to_id(src_ids, src_texts)
    tgt2id, tgt_repeated = _text_to_id(tgt_ids, tgt_texts)
    best: dict[tuple[str, str], float] = {}
    dropped = merged = 0
    for score, i, j in mined:
        s, t = src2id.get(src_unique[i].strip()), tgt2id.get(tgt_unique[j].strip())
        if s is None or t is None:
            dropped += 1
            continue
        if (s, t) in best:
            merged += 1
            score = max(score, best[(s, t)])
        best[(s, t)] = score
    if stats is not None:
        stats.update(src_lines=len(src_texts), src_unique=len(src_unique), src_repeated_texts=src_repeated,
                     tgt_lines=len(tgt_texts), tgt_unique=len(tgt_unique), tgt_repeated_texts=tgt_repeated,
                     mined=len(mined), dropped_repeated_text=dropped, merged_duplicate_pairs=merged,
                     candidates=len(best))
    return [Candidate(score, s, t) for (s, t), score in best.items()]


def _gold_set(gold: Iterable[str | tuple[str, str]]) -> set[str]:
    out = {g.strip() if isinstance(g, str) else f"{str(g[0]).strip()}\t{str(g[1]).strip()}" for g in gold}
    if not out:
        raise ValueError("gold alignments are empty")
    return out


def _prf(n_correct: int, n_extracted: int, n_gold: int) -> tuple[float, float, float]:
    if n_correct == 0:
        return 0.0, 0.0, 0.0
    p, r = n_correct / n_extracted, n_correct / n_gold
    return 100 * 2 * p * r / (p + r), 100 * p, 100 * r


def bucc_f1(candidates: Iterable[Candidate], gold: Iterable[str | tuple[str, str]],
            threshold: float) -> dict[str, float]:
    """``BuccExtract`` (keep score ≥ threshold) scored against gold ``src\\ttgt`` ID pairs: f1, precision, recall
    (points), the threshold and the counts ``n_extracted``, ``n_correct``, ``n_gold``."""
    gold_set = _gold_set(gold)
    extracted = {f"{c.src_id}\t{c.tgt_id}" for c in candidates if c.score >= threshold}
    n_correct = len(gold_set & extracted)
    f1, p, r = _prf(n_correct, len(extracted), len(gold_set))
    return {"f1": f1, "precision": p, "recall": r, "threshold": float(threshold), "n_extracted": len(extracted),
            "n_correct": n_correct, "n_gold": len(gold_set)}


def optimize_threshold(candidates: Sequence[Candidate],
                       gold: Iterable[str | tuple[str, str]]) -> tuple[float, float, float, float]:
    """``BuccOptimize``: (threshold, f1, precision, recall), the metrics in points, at the best-F1 prefix of the
    candidates sorted by score descending (Python's stable sort, as LASER's ``sorted``; the first best prefix wins).
    The threshold is the midpoint between that candidate's score and the next one's, or the candidate's own score
    when it is the last (LASER raises IndexError there); 0 when nothing is correct or there are no candidates."""
    gold_set = _gold_set(gold)
    items = sorted(candidates, key=lambda c: -c.score)
    threshold = 0.0
    if items:
        correct = np.fromiter((f"{c.src_id}\t{c.tgt_id}" in gold_set for c in items), dtype=bool, count=len(items))
        n_correct = np.cumsum(correct)
        if n_correct[-1] > 0:
            p = n_correct / np.arange(1, len(items) + 1)
            r = n_correct / len(gold_set)
            with np.errstate(invalid="ignore"):
                f1 = np.where(n_correct > 0, 2 * p * r / (p + r), 0.0)
            b = int(np.argmax(f1))
            threshold = (items[b].score + items[b + 1].score) / 2 if b + 1 < len(items) else items[b].score
    res = bucc_f1(items, gold_set, threshold)
    return threshold, res["f1"], res["precision"], res["recall"]


@dataclass(frozen=True)
class BuccSplit:
    """One BUCC split of one language pair: sentences, IDs and embeddings per side (rows aligned) and the gold
    ``(src ID, tgt ID)`` pairs (None for a split whose gold is hidden)."""

    src_ids: Sequence[str]
    src_texts: Sequence[str]
    src_emb: np.ndarray
    tgt_ids: Sequence[str]
    tgt_texts: Sequence[str]
    tgt_emb: np.ndarray
    gold: Sequence[tuple[str, str]] | None = None


def _mine_split(split: BuccSplit, **kwargs: object) -> tuple[list[Candidate], dict[str, int]]:
    stats: dict[str, int] = {}
    cands = mine(split.src_ids, split.src_texts, split.src_emb, split.tgt_ids, split.tgt_texts, split.tgt_emb,
                 stats=stats, **kwargs)
    return cands, stats


def evaluate_bucc(tune: BuccSplit, test: BuccSplit | None = None, *, k: int = 4, margin: str = "ratio",
                  retrieval: str = "max", x_chunk: int = PAIR_X_CHUNK, y_chunk: int = PAIR_Y_CHUNK,
                  device: str = "cpu") -> dict[str, dict[str, float]]:
    """Mining F1 as two clearly labelled numbers (methods §7.3 recommendation):

    * ``oracle``: threshold tuned and scored on ``tune`` (what mSimCSE reports on the sample split);
    * ``held_out`` (when ``test`` is given): the threshold tuned on ``tune`` applied to ``test``, whose gold is only
      used for scoring (the closest public proxy of the XTREME protocol: tune on sample, score on training).

    Each holds threshold, f1, precision, recall (points) and counts; ``tune_stats`` / ``test_stats`` hold the
    mining counts of :func:`mine`. ``margin="absolute"`` gives the plain-cosine variant VMSST also reports.
    """
    if tune.gold is None:
        raise ValueError("the tuning split needs gold alignments")
    kw = {"k": k, "margin": margin, "retrieval": retrieval, "x_chunk": x_chunk, "y_chunk": y_chunk, "device": device}
    cands, stats = _mine_split(tune, **kw)
    threshold, *_ = optimize_threshold(cands, tune.gold)
    out: dict[str, dict[str, float]] = {"oracle": bucc_f1(cands, tune.gold, threshold),
                                        "tune_stats": {k2: float(v) for k2, v in stats.items()}}
    if test is not None:
        if test.gold is None:
            raise ValueError("the held-out split needs gold alignments to be scored")
        test_cands, test_stats = _mine_split(test, **kw)
        out["held_out"] = bucc_f1(test_cands, test.gold, threshold)
        out["test_stats"] = {k2: float(v) for k2, v in test_stats.items()}
    return out


def bucc_mteb(src_emb: np.ndarray, tgt_emb: np.ndarray, gold_rows: np.ndarray | Sequence[tuple[int, int]], *,
              version: str = "v1") -> dict[str, float]:
    """mteb's retrieval-style BUCC (not mining): accuracy, precision, recall, f1 (weighted, points).

    ``gold_rows`` are 0-based (source row, target row) pairs (mteb converts the 1-based gold). ``v1`` (task ``BUCC``):
    ``sentence1`` keeps only the gold source rows, in gold order, and each retrieves its cosine top-1 among ALL
    target rows, labelled with the gold target row. ``v2`` (``BUCC.v2``, gold set only): sentence1 / sentence2 are
    the gold pairs' rows, identity labels, so retrieval is among the gold targets only.
    """
    from models.evaluation.bitext import bitext_mining_mteb

    g = np.asarray(gold_rows, dtype=np.int64)
    if g.ndim != 2 or g.shape[1] != 2:
        raise ValueError(f"gold_rows: expected (source row, target row) pairs, got shape {g.shape}")
    src, tgt = as_embeddings(src_emb, "src_emb"), as_embeddings(tgt_emb, "tgt_emb")
    for name, col, n in (("source", 0, len(src)), ("target", 1, len(tgt))):
        if len(g) and (g[:, col].min() < 0 or g[:, col].max() >= n):
            raise ValueError(f"gold_rows: a {name} row is outside 0..{n - 1}")
    if version == "v1":
        return bitext_mining_mteb(src[g[:, 0]], tgt, gold=g[:, 1])
    if version == "v2":
        return bitext_mining_mteb(src[g[:, 0]], tgt[g[:, 1]])
    raise ValueError(f"version must be 'v1' or 'v2', got {version!r}")
