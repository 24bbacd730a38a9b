"""Tests of models/objectives: hand-computed cases, naive-loop references, reductions, gradients and masks.

The references below are written with Python loops over (i, j) on numpy arrays, independent of the tensor code.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from models.objectives.contrastive import info_nce
from models.objectives.ease import ease_entity_loss, ease_loss
from models.objectives.ease.entity_head import EntityHead
from models.objectives.mpcl import mpcl_loss
from models.objectives.simcse import simcse_loss
from models.objectives.soft_label import (
    SoftLabelObjective,
    soft_label_column_targets,
    soft_label_loss,
    soft_label_targets,
    soft_targets_from_similarity,
)

R = 1 / math.sqrt(2)  # cos 45°
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def t64(x) -> torch.Tensor:
    return torch.tensor(np.asarray(x, dtype=np.float64), dtype=torch.float64)


def _cos(u: np.ndarray, v: np.ndarray) -> float:
    return float(np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v)))


def _lse(xs: list[float]) -> float:
    m = max(xs)
    return m + math.log(sum(math.exp(x - m) for x in xs))


def _ce(logits: list[float], target: int) -> float:
    """−log softmax(logits)[target], written out."""
    return -math.log(math.exp(logits[target]) / sum(math.exp(x) for x in logits))


# ------------------------------------------------------------------------------------------- naive references
def ref_info_nce(a, p, tau, symmetric=True, hn=None, w=0.0, groups=None) -> float:
    b = len(a)

    def masked(i: int, j: int) -> bool:
        return groups is not None and j != i and groups[i] == groups[j]

    fwd = 0.0
    for i in range(b):
        row = [_cos(a[i], p[j]) / tau for j in range(b) if not masked(i, j)]
        if hn is not None:
            row += [_cos(a[i], hn[j]) / tau + (w if j == i else 0.0) for j in range(len(hn))]
        fwd += _lse(row) - _cos(a[i], p[i]) / tau
    fwd /= b
    if not symmetric:
        return fwd
    bwd = 0.0
    for i in range(b):
        row = [_cos(p[i], a[j]) / tau for j in range(b) if not masked(i, j)]
        bwd += _lse(row) - _cos(p[i], a[i]) / tau
    return (fwd + bwd / b) / 2


def ref_mpcl_bounds(e, hn, cand, i) -> tuple[float, float]:
    allv = list(e) + ([] if hn is None else list(hn))
    cs = [j for j in range(len(e)) if j != i and (cand is None or cand[i][j])] + [len(e) + k for k in
                                                                                 range(0 if hn is None else len(hn))]
    s = [_cos(e[i], allv[c]) for c in cs]
    return min(s), max(s)


def ref_mpcl(e, groups, tau, positives="inside", minmax=True, anchors=None, hn=None, cand=None, eps=1e-6,
             bounds=None) -> float:
    """MPCL by loops; ``bounds`` {i: (lo, hi)} freezes the min–max range (the detached variant's gradient)."""
    n = len(e)
    allv = list(e) + ([] if hn is None else list(hn))
    total, count = 0.0, 0
    for i in range(n):
        if anchors is not None and not anchors[i]:
            continue
        cs = [j for j in range(n) if j != i and (cand is None or cand[i][j])] + list(range(n, len(allv)))
        ps = [j for j in range(n) if j != i and groups[j] == groups[i]]
        s = {c: _cos(e[i], allv[c]) for c in cs}
        if minmax:
            lo, hi = bounds[i] if bounds is not None else (min(s.values()), max(s.values()))
            st = {c: (2 * (s[c] - lo) / (hi - lo + eps) - 1) / tau for c in cs}
        else:
            st = {c: s[c] / tau for c in cs}
        denominator = _lse([st[c] for c in cs])
        if positives == "inside":
            total += -_lse([st[k] for k in ps]) + denominator
        else:
            total += -sum(st[k] - denominator for k in ps) / len(ps)
        count += 1
    return total / count


def ref_soft_normalise(st, tau, w_func) -> np.ndarray:
    """f(S): row-softmax(S/τ) or S itself, written out."""
    b = len(st)
    if w_func == "raw":
        return np.array(st, dtype=np.float64)
    w = np.zeros((b, b))
    for i in range(b):
        z = sum(math.exp(st[i][k] / tau) for k in range(b))
        for j in range(b):
            w[i, j] = math.exp(st[i][j] / tau) / z
    return w


def ref_soft_targets(ta, tb, tau, mode, w_func, transpose=False) -> np.ndarray:
    """W = f(S_T), or with ``transpose`` the recomputed column target f(S_Tᵀ) (S_T transposed by the loops)."""
    b = len(ta)
    st = np.zeros((b, b))
    for i in range(b):
        for j in range(b):
            st[i, j] = _cos(ta[i], ta[j]) if mode == "priority" else (_cos(ta[i], ta[j]) + _cos(tb[i], tb[j])) / 2
    if transpose:
        st = np.array([[st[j, i] for j in range(b)] for i in range(b)])
    return ref_soft_normalise(st, tau, w_func)


def ref_soft_loss(sa, sb, w, wc, tau, tms=False, cross_weight=0.1, mono_terms="paper",
                  mono_target="transposed") -> float:
    """L_cross = L_rows(S, W) + L_rows(Sᵀ, C) with the column target C = ``wc``; L_mono one term per language
    ("paper": target Wᵀ, Eq. 7 literally, or W with ``mono_target="recomputed"``, S_T symmetric) or both directions
    ("code")."""
    b = len(sa)

    def sim(x, y):
        return [[_cos(x[i], y[j]) for j in range(b)] for i in range(b)]

    def rows(s, ww):
        total = 0.0
        for i in range(b):
            lse = _lse([s[i][k] / tau for k in range(b)])
            for j in range(b):
                total += -ww[i][j] * (s[i][j] / tau - lse)
        return total / b

    def transposed(s):
        return [[s[j][i] for j in range(b)] for i in range(b)]

    s = sim(sa, sb)
    cross = rows(s, w) + rows(transposed(s), wc)
    if not tms:
        return cross
    mono = 0.0
    for m in (sim(sa, sa), sim(sb, sb)):
        if mono_terms == "code":
            mono += rows(m, w) + rows(transposed(m), wc)
        else:
            mono += rows(m, transposed(w) if mono_target == "transposed" else w)
    return cross_weight * cross + mono


def nt_xent(views: np.ndarray, partner: list[int], tau: float) -> float:
    """SimCLR's NT-Xent over 2G views: −log exp(s_i,partner/τ) / Σ_{k≠i} exp(s_ik/τ), mean over all views."""
    n = len(views)
    total = 0.0
    for i in range(n):
        den = sum(math.exp(_cos(views[i], views[k]) / tau) for k in range(n) if k != i)
        total += -math.log(math.exp(_cos(views[i], views[partner[i]]) / tau) / den)
    return total / n


# ------------------------------------------------------------------------------------------------- info_nce
def test_info_nce_hand_computed() -> None:
    a, p = [[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [1.0, 1.0]]  # cos: (0,0)=1, (0,1)=R, (1,0)=0, (1,1)=R
    tau = 0.5
    fwd = (_ce([1 / tau, R / tau], 0) + _ce([0 / tau, R / tau], 1)) / 2
    bwd = (_ce([1 / tau, 0 / tau], 0) + math.log(2)) / 2  # column 1: R/τ vs R/τ → log 2
    assert info_nce(t64(a), t64(p), tau, symmetric=False).item() == pytest.approx(fwd, rel=1e-12)
    assert info_nce(t64(a), t64(p), tau).item() == pytest.approx((fwd + bwd) / 2, rel=1e-12)
    # hard negatives: cos(a, hn) = [[-1, 0], [0, -1]]; own one gets +w after the division by τ
    hn, w = [[-1.0, 0.0], [0.0, -1.0]], 0.5
    fwd_hn = (_ce([1 / tau, R / tau, -1 / tau + w, 0.0], 0) + _ce([0.0, R / tau, 0.0, -1 / tau + w], 1)) / 2
    got = info_nce(t64(a), t64(p), tau, symmetric=True, hard_negatives=t64(hn), hard_negative_weight=w)
    assert got.item() == pytest.approx((fwd_hn + bwd) / 2, rel=1e-12)  # backward ignores hard negatives
    # groups: both rows one meaning → row 0 keeps only its positive (loss 0), row 1 keeps only column 1
    grouped = info_nce(t64(a), t64(p), tau, symmetric=False, groups=torch.tensor([4, 4]))
    assert grouped.item() == pytest.approx((0.0 + 0.0) / 2, abs=1e-12)
    grouped_hn = info_nce(t64(a), t64(p), tau, symmetric=False, hard_negatives=t64(hn), groups=torch.tensor([4, 4]))
    expected = (_ce([1 / tau, -1 / tau, 0.0], 0) + _ce([R / tau, 0.0, -1 / tau], 0)) / 2  # hn columns stay
    assert grouped_hn.item() == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("negatives", ["none", "H=3", "H=B,w"])
@pytest.mark.parametrize("grouped", [False, True])
def test_info_nce_matches_naive_loop(symmetric: bool, negatives: str, grouped: bool) -> None:
    rng = np.random.default_rng(1)
    b, d = 6, 5
    a, p = rng.normal(size=(b, d)), rng.normal(size=(b, d))
    hn = {"none": None, "H=3": rng.normal(size=(3, d)), "H=B,w": rng.normal(size=(b, d))}[negatives]
    w = 0.7 if negatives == "H=B,w" else 0.0
    groups = [0, 1, 0, 2, 2, 3] if grouped else None
    want = ref_info_nce(a, p, 0.1, symmetric, hn, w, groups)
    got = info_nce(t64(a), t64(p), 0.1, symmetric, hard_negatives=None if hn is None else t64(hn),
                   hard_negative_weight=w, groups=None if groups is None else torch.tensor(groups))
    assert got.item() == pytest.approx(want, rel=1e-10)


def test_info_nce_keeps_positional_signature_and_float32() -> None:
    rng = np.random.default_rng(2)
    z1, z2 = rng.normal(size=(5, 8)), rng.normal(size=(5, 8))
    want = ref_info_nce(z1, z2, 0.05, False)
    assert info_nce(t64(z1), t64(z2), 0.05, False).item() == pytest.approx(want, rel=1e-10)
    got32 = info_nce(t64(z1).float(), t64(z2).float(), 0.05, False)
    assert got32.dtype == torch.float32
    assert got32.item() == pytest.approx(want, rel=1e-5)


def test_groups_mask_changes_the_value_and_distinct_groups_do_not() -> None:
    rng = np.random.default_rng(3)
    a, p = t64(rng.normal(size=(4, 3))), t64(rng.normal(size=(4, 3)))
    plain = info_nce(a, p, 0.1).item()
    assert info_nce(a, p, 0.1, groups=torch.tensor([0, 1, 2, 3])).item() == pytest.approx(plain, rel=1e-12)
    masked = info_nce(a, p, 0.1, groups=torch.tensor([0, 0, 1, 2])).item()
    assert masked < plain - 1e-3  # removing a negative lowers every affected row's loss
    assert masked == pytest.approx(ref_info_nce(a.numpy(), p.numpy(), 0.1, True, groups=[0, 0, 1, 2]), rel=1e-10)


def test_info_nce_validates_arguments() -> None:
    z = torch.randn(3, 4)
    with pytest.raises(ValueError, match="equal shape"):
        info_nce(z, torch.randn(3, 5))
    with pytest.raises(ValueError, match="hard_negatives"):
        info_nce(z, z, hard_negatives=torch.randn(2, 4), hard_negative_weight=1.0)  # H ≠ B with w ≠ 0
    info_nce(z, z, hard_negatives=torch.randn(2, 4))  # H ≠ B is fine with w = 0
    with pytest.raises(ValueError, match="hard_negatives"):
        info_nce(z, z, hard_negatives=torch.randn(3, 5))
    with pytest.raises(ValueError, match=r"groups.*\(B,\)"):
        info_nce(z, z, groups=torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="groups"):
        info_nce(z, z, groups=torch.tensor([0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match="temperature"):
        info_nce(z, z, temperature=0.0)


# --------------------------------------------------------------------------------------------------- SimCSE
def test_simcse_hand_computed_b_by_2b() -> None:
    z1, z2, z3 = [[1.0, 0.0], [0.0, 1.0]], [[1.0, 1.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 1.0]]
    tau, w = 0.05, math.log(2)  # w = ln 2 doubles the own hard negative's exp-term (z3_i for row i)
    # cos(z1, z2) = [[R, 0], [R, 1]], cos(z1, z3) = [[0, R], [1, R]]
    row0 = -math.log(math.exp(R / tau) / (math.exp(R / tau) + math.exp(0.0) + 2 * math.exp(0.0) + math.exp(R / tau)))
    row1 = -math.log(math.exp(1 / tau) / (math.exp(R / tau) + math.exp(1 / tau) + math.exp(1 / tau)
                                          + 2 * math.exp(R / tau)))
    got = simcse_loss(t64(z1), t64(z2), t64(z3), tau, hard_negative_weight=w)
    assert got.item() == pytest.approx((row0 + row1) / 2, rel=1e-12)


@pytest.mark.parametrize("with_negatives", [False, True])
def test_simcse_is_one_way_info_nce_and_matches_naive_loop(with_negatives: bool) -> None:
    rng = np.random.default_rng(4)
    z1, z2, z3 = (rng.normal(size=(5, 6)) for _ in range(3))
    groups = [0, 1, 1, 2, 3]
    neg, w = (z3, 1.3) if with_negatives else (None, 0.0)
    got = simcse_loss(t64(z1), t64(z2), None if neg is None else t64(neg), 0.05, hard_negative_weight=w,
                      groups=torch.tensor(groups))
    assert got.item() == pytest.approx(ref_info_nce(z1, z2, 0.05, False, neg, w, groups), rel=1e-10)
    same = info_nce(t64(z1), t64(z2), 0.05, symmetric=False, hard_negatives=None if neg is None else t64(neg),
                    hard_negative_weight=w, groups=torch.tensor(groups))
    assert got.item() == pytest.approx(same.item(), rel=1e-12)
    sym = info_nce(t64(z1), t64(z2), 0.05, symmetric=True, hard_negatives=None if neg is None else t64(neg),
                   hard_negative_weight=w, groups=torch.tensor(groups))
    assert abs(got.item() - sym.item()) > 1e-3  # one-directional, not symmetric


def test_simcse_names_its_own_arguments() -> None:
    z = torch.randn(3, 4)
    with pytest.raises(ValueError, match="z3"):
        simcse_loss(z, z, torch.randn(3, 2))
    with pytest.raises(ValueError, match="z3"):
        simcse_loss(z, z, torch.randn(2, 4), hard_negative_weight=1.0)
    with pytest.raises(ValueError, match="z1 and z2"):
        simcse_loss(z, torch.randn(4, 4))


# ----------------------------------------------------------------------------------------------------- MPCL
def _mpcl_hand_embeddings() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # cos: (0,1)=0, (0,2)=R, (0,3)=R, (1,2)=R, (1,3)=−R, (2,3)=0
    e = t64([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, -1.0]])
    return e, torch.tensor([0, 0, 0, 1]), torch.tensor([True, True, True, False])


def test_mpcl_hand_computed_minmax_inside_and_outside() -> None:
    e, groups, anchors = _mpcl_hand_embeddings()
    tau = 0.5
    # candidates of row 0: {1, 2, 3}, s = [0, R, R] → scaled [−1, 1, 1]/τ; positives {1, 2}
    # row 1: {0, 2, 3}, s = [0, R, −R] → [0, 1, −1]/τ; positives {0, 2}
    # row 2: {0, 1, 3}, s = [R, R, 0] → [1, 1, −1]/τ; positives {0, 1}
    scaled = {0: ([-1, 1, 1], [0, 1]), 1: ([0, 1, -1], [0, 1]), 2: ([1, 1, -1], [0, 1])}
    inside = outside = 0.0
    for row, pos in scaled.values():
        den = math.log(sum(math.exp(x / tau) for x in row))
        inside += -math.log(sum(math.exp(row[k] / tau) for k in pos)) + den
        outside += -sum(row[k] / tau - den for k in pos) / len(pos)
    got_in = mpcl_loss(e, groups, tau, positives="inside", scaling="row", anchors=anchors, eps=0.0)
    got_out = mpcl_loss(e, groups, tau, positives="outside", scaling="row", anchors=anchors, eps=0.0)
    assert got_in.item() == pytest.approx(inside / 3, rel=1e-12)
    assert got_out.item() == pytest.approx(outside / 3, rel=1e-12)
    assert abs(inside - outside) > 1e-3


def test_mpcl_hand_computed_without_minmax_with_hard_negative() -> None:
    e, groups, anchors = _mpcl_hand_embeddings()
    hn = t64([[-1.0, 0.0]])  # cos with rows 0, 1, 2: −1, 0, −R
    tau = 0.5
    rows = {0: ([0, R, R, -1], [0, 1]), 1: ([0, R, -R, 0], [0, 1]), 2: ([R, R, 0, -R], [0, 1])}
    want = 0.0
    for row, pos in rows.values():
        want += -math.log(sum(math.exp(row[k] / tau) for k in pos)) + math.log(sum(math.exp(x / tau) for x in row))
    got = mpcl_loss(e, groups, tau, scaling="none", anchors=anchors, hard_negatives=hn)
    assert got.item() == pytest.approx(want / 3, rel=1e-12)


def _mpcl_random(seed: int = 5):
    rng = np.random.default_rng(seed)
    n, d = 7, 4
    e, hn = rng.normal(size=(n, d)), rng.normal(size=(3, d))
    groups = [0, 0, 0, 1, 1, 2, 2]
    pos = np.array([[i != j and groups[i] == groups[j] for j in range(n)] for i in range(n)])
    cand = (rng.random((n, n)) > 0.4) | pos
    anchors = np.array([True, False, True, True, False, True, True])
    return e, hn, groups, cand, anchors


@pytest.mark.parametrize("positives", ["inside", "outside"])
@pytest.mark.parametrize("scaling", ["off", "on", "detach"])
@pytest.mark.parametrize("options", ["plain", "anchors", "hard_negatives", "candidate_mask", "all"])
def test_mpcl_matches_naive_loop(positives: str, scaling: str, options: str) -> None:
    e, hn, groups, cand, anchors = _mpcl_random()
    use = {"plain": set(), "anchors": {"a"}, "hard_negatives": {"h"}, "candidate_mask": {"c"},
           "all": {"a", "h", "c"}}[options]
    want = ref_mpcl(e, groups, 0.07, positives, minmax=scaling != "off", anchors=anchors if "a" in use else None,
                    hn=hn if "h" in use else None, cand=cand if "c" in use else None, eps=1e-6)
    reading = {"off": "none", "on": "row", "detach": "row_detached"}[scaling]
    got = mpcl_loss(t64(e), torch.tensor(groups), 0.07, positives=positives, scaling=reading,
                    anchors=torch.tensor(anchors) if "a" in use else None,
                    hard_negatives=t64(hn) if "h" in use else None,
                    candidate_mask=torch.tensor(cand) if "c" in use else None, eps=1e-6)
    assert got.item() == pytest.approx(want, rel=1e-10)


def test_mpcl_minmax_detach_gradient_treats_min_and_max_as_constants() -> None:
    e, hn, groups, cand, anchors = _mpcl_random(6)
    tau, eps = 0.3, 1e-6
    bounds = {i: ref_mpcl_bounds(e, hn, cand, i) for i in range(len(e))}

    def f(ee: np.ndarray, hh: np.ndarray) -> float:
        return ref_mpcl(ee, groups, tau, "inside", True, anchors, hh, cand, eps, bounds=bounds)

    h = 1e-6
    num_e, num_h = np.zeros_like(e), np.zeros_like(hn)
    for arr, out, other in ((e, num_e, "e"), (hn, num_h, "h")):
        for idx in np.ndindex(arr.shape):
            plus, minus = arr.copy(), arr.copy()
            plus[idx] += h
            minus[idx] -= h
            if other == "e":
                out[idx] = (f(plus, hn) - f(minus, hn)) / (2 * h)
            else:
                out[idx] = (f(e, plus) - f(e, minus)) / (2 * h)

    def grads(detach: bool) -> tuple[np.ndarray, np.ndarray]:
        te, th = t64(e).requires_grad_(), t64(hn).requires_grad_()
        mpcl_loss(te, torch.tensor(groups), tau, scaling="row_detached" if detach else "row",
                  anchors=torch.tensor(anchors), hard_negatives=th, candidate_mask=torch.tensor(cand),
                  eps=eps).backward()
        return te.grad.numpy(), th.grad.numpy()

    ge, gh = grads(True)
    np.testing.assert_allclose(ge, num_e, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(gh, num_h, rtol=1e-5, atol=1e-7)
    ge_full, _ = grads(False)
    assert np.abs(ge_full - ge).max() > 1e-3  # the min/max path carries gradient when not detached


def test_mpcl_pairs_without_scaling_is_nt_xent() -> None:
    rng = np.random.default_rng(7)
    g = 4
    views = rng.normal(size=(2 * g, 5))  # rows 0..G−1 one side, G..2G−1 the other
    partner = [i + g if i < g else i - g for i in range(2 * g)]
    groups = torch.tensor(list(range(g)) * 2)
    got = mpcl_loss(t64(views), groups, 0.1, scaling="none")
    assert got.item() == pytest.approx(nt_xent(views, partner, 0.1), rel=1e-10)
    assert mpcl_loss(t64(views), groups, 0.1, positives="outside", scaling="none").item() == pytest.approx(
        got.item(), rel=1e-12)  # K = 1: inside = outside


def test_mpcl_cross_side_candidates_is_symmetric_info_nce() -> None:
    rng = np.random.default_rng(8)
    g = 5
    a, b = rng.normal(size=(g, 6)), rng.normal(size=(g, 6))
    side = torch.tensor([0] * g + [1] * g)
    cross = side[:, None] != side[None, :]
    got = mpcl_loss(t64(np.vstack([a, b])), torch.tensor(list(range(g)) * 2), 0.05, scaling="none",
                    candidate_mask=cross)
    assert got.item() == pytest.approx(info_nce(t64(a), t64(b), 0.05, symmetric=True).item(), rel=1e-10)
    everything = mpcl_loss(t64(np.vstack([a, b])), torch.tensor(list(range(g)) * 2), 0.05, scaling="none")
    assert abs(everything.item() - got.item()) > 1e-3  # the candidate mask matters


def test_mpcl_single_positive_is_eq1() -> None:
    rng = np.random.default_rng(9)
    g, tau = 4, 0.05
    e = rng.normal(size=(2 * g, 5))
    hn = rng.normal(size=(2, 5))
    groups = [0, 0, 1, 1, 2, 2, 3, 3]
    anchors = [i % 2 == 0 for i in range(2 * g)]
    allv = list(e) + list(hn)
    eq1 = 0.0
    for i in range(0, 2 * g, 2):  # Eq. 1: −log exp(sim(h_i, h_i⁺)/τ) / Σ_{j≠i} exp(sim(h_i, h_j)/τ)
        den = sum(math.exp(_cos(e[i], allv[j]) / tau) for j in range(len(allv)) if j != i)
        eq1 += -math.log(math.exp(_cos(e[i], e[i + 1]) / tau) / den)
    kwargs = {"anchors": torch.tensor(anchors), "hard_negatives": t64(hn)}
    inside = mpcl_loss(t64(e), torch.tensor(groups), tau, scaling="none", **kwargs)
    outside = mpcl_loss(t64(e), torch.tensor(groups), tau, positives="outside", scaling="none", **kwargs)
    assert inside.item() == pytest.approx(eq1 / g, rel=1e-10)
    assert outside.item() == pytest.approx(eq1 / g, rel=1e-10)
    scaled_in = mpcl_loss(t64(e), torch.tensor(groups), tau, scaling="row", **kwargs)
    scaled_out = mpcl_loss(t64(e), torch.tensor(groups), tau, positives="outside", scaling="row", **kwargs)
    assert scaled_in.item() == pytest.approx(scaled_out.item(), rel=1e-12)
    assert abs(scaled_in.item() - inside.item()) > 1e-3  # scaling changes the value


def test_mpcl_group_ids_decide_the_positives() -> None:
    e = _mpcl_random(10)[0]
    a = mpcl_loss(t64(e), torch.tensor([0, 0, 0, 1, 1, 2, 2]), 0.1)
    b = mpcl_loss(t64(e), torch.tensor([0, 0, 1, 1, 2, 2, 2]), 0.1)
    assert abs(a.item() - b.item()) > 1e-3


def test_mpcl_row_without_positive_raises() -> None:
    e = torch.randn(3, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match="anchor row 2 has no positive"):
        mpcl_loss(e, torch.tensor([0, 0, 1]))
    mpcl_loss(e, torch.tensor([0, 0, 1]), anchors=torch.tensor([True, True, False]))  # not an anchor: fine
    with pytest.raises(ValueError, match="candidate_mask excludes positive column 1 of anchor row 0"):
        mpcl_loss(e, torch.tensor([0, 0, 0]), candidate_mask=torch.tensor([[False, False, True]] * 3))
    with pytest.raises(ValueError, match="no row"):
        mpcl_loss(e, torch.tensor([0, 0, 0]), anchors=torch.zeros(3, dtype=torch.bool))


def test_mpcl_validates_arguments() -> None:
    e = torch.randn(4, 3)
    g = torch.tensor([0, 0, 1, 1])
    with pytest.raises(ValueError, match=r"groups.*\(N,\)"):
        mpcl_loss(e, torch.tensor([0, 0, 1]))
    with pytest.raises(ValueError, match="positives"):
        mpcl_loss(e, g, positives="between")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"anchors.*bool"):
        mpcl_loss(e, g, anchors=torch.tensor([1, 1, 0, 0]))
    with pytest.raises(ValueError, match=r"candidate_mask.*N×N"):
        mpcl_loss(e, g, candidate_mask=torch.ones(4, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="hard_negatives"):
        mpcl_loss(e, g, hard_negatives=torch.randn(2, 5))
    with pytest.raises(ValueError, match="embeddings"):
        mpcl_loss(torch.randn(4), g)


def test_mpcl_gradcheck_with_minmax() -> None:
    torch.manual_seed(0)
    e = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    hn = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    groups, anchors = torch.tensor([0, 0, 1]), torch.tensor([True, True, False])
    for positives in ("inside", "outside"):
        assert torch.autograd.gradcheck(
            lambda x, y, p=positives: mpcl_loss(x, groups, 0.5, positives=p, scaling="row", anchors=anchors,
                                                hard_negatives=y), (e, hn))


# ------------------------------------------------------------------------------------------------ soft labels
def test_soft_label_hand_computed() -> None:
    tau = 0.1
    teacher = t64([[2.0, 0.0], [1.0, 1.0]])  # normalised inside: S_T = [[1, R], [R, 1]]
    w0 = [math.exp(1 / tau) / (math.exp(1 / tau) + math.exp(R / tau)),
          math.exp(R / tau) / (math.exp(1 / tau) + math.exp(R / tau))]
    w = [w0, w0[::-1]]
    got_w = soft_label_targets(teacher, temperature=tau)
    np.testing.assert_allclose(got_w.numpy(), np.array(w), rtol=1e-12)
    assert soft_label_targets(teacher, w_func="raw").numpy() == pytest.approx(np.array([[1, R], [R, 1]]), rel=1e-12)
    # "average" with a second side whose teacher similarity is the identity: S_T = [[1, R/2], [R/2, 1]]
    avg = soft_label_targets(teacher, t64([[0.0, 3.0], [1.0, 0.0]]), tau, mode="average", w_func="raw")
    np.testing.assert_allclose(avg.numpy(), [[1, R / 2], [R / 2, 1]], rtol=1e-12)

    sa, sb = t64([[1.0, 0.0], [0.0, 1.0]]), t64([[1.0, 0.0], [1.0, 1.0]])  # S = [[1, R], [0, R]]
    s = [[1.0, R], [0.0, R]]

    def rows(m: list[list[float]], ww: list[list[float]]) -> float:
        out = 0.0
        for i in range(2):
            z = math.exp(m[i][0] / tau) + math.exp(m[i][1] / tau)
            out += -sum(ww[i][j] * math.log(math.exp(m[i][j] / tau) / z) for j in range(2))
        return out / 2

    st = [[1.0, 0.0], [R, R]]
    wt = [[w[0][0], w[1][0]], [w[0][1], w[1][1]]]  # W is symmetric here: both column readings agree
    cross = rows(s, w) + rows(st, w)
    assert soft_label_loss(sa, sb, got_w, tau).item() == pytest.approx(cross, rel=1e-12)
    assert soft_label_loss(sa, sb, got_w, tau, column_target="transposed").item() == pytest.approx(
        rows(s, w) + rows(st, wt), rel=1e-12)
    # TMS: S_aa = I, S_bb = [[1, R], [R, 1]]; "paper": one term per language; "code": the transposed terms repeat them
    mono = rows([[1.0, 0.0], [0.0, 1.0]], w) + rows([[1.0, R], [R, 1.0]], w)
    assert soft_label_loss(sa, sb, got_w, tau, tms=True, cross_weight=0.1).item() == pytest.approx(
        0.1 * cross + mono, rel=1e-12)
    assert soft_label_loss(sa, sb, got_w, tau, tms=True, cross_weight=0.1, mono_terms="code").item() == (
        pytest.approx(0.1 * cross + 2 * mono, rel=1e-12))


@pytest.mark.parametrize("mode", ["priority", "average"])
@pytest.mark.parametrize("w_func", ["softmax", "raw"])
@pytest.mark.parametrize(("tms", "cross_weight"), [(False, 0.1), (True, 0.1), (True, 1.0)])
@pytest.mark.parametrize("column_target", ["recomputed", "transposed"])
@pytest.mark.parametrize(("mono_terms", "mono_target"), [("paper", "transposed"), ("paper", "recomputed"),
                                                         ("code", "transposed")])
def test_soft_label_matches_naive_loop(mode: str, w_func: str, tms: bool, cross_weight: float, column_target: str,
                                       mono_terms: str, mono_target: str) -> None:
    rng = np.random.default_rng(11)
    b = 5
    ta, tb = rng.normal(size=(b, 7)), rng.normal(size=(b, 7))  # teacher dim 7, student dim 4
    sa, sb = rng.normal(size=(b, 4)), rng.normal(size=(b, 4))
    w_ref = ref_soft_targets(ta, tb, 0.1, mode, w_func)
    # the column target: f(S_Tᵀ) recomputed from the transposed teacher similarity, or Wᵀ
    wc_ref = ref_soft_targets(ta, tb, 0.1, mode, w_func, transpose=True) if column_target == "recomputed" else w_ref.T
    w = soft_label_targets(t64(ta), t64(tb), 0.1, mode=mode, w_func=w_func)
    np.testing.assert_allclose(w.numpy(), w_ref, rtol=1e-10, atol=1e-14)
    got = soft_label_loss(t64(sa), t64(sb), w, 0.1, tms=tms, cross_weight=cross_weight, column_target=column_target,
                          mono_terms=mono_terms, mono_target=mono_target)
    want = ref_soft_loss(sa, sb, w_ref, wc_ref, 0.1, tms, cross_weight, mono_terms, mono_target)
    assert got.item() == pytest.approx(want, rel=1e-10)


def _related_teacher(rng: np.random.Generator, b: int, d: int) -> np.ndarray:
    """Teacher embeddings sharing a common direction, so that W = row-softmax(S_T/0.1) is far from one-hot (and from
    symmetric) as on real batches; independent random vectors give a nearly diagonal W."""
    return rng.normal(size=(1, d)) * 1.5 + rng.normal(size=(b, d))


def test_soft_label_column_targets_of_each_reading() -> None:
    """"transposed": C = Wᵀ, column-stochastic; "recomputed": C = f(S_Tᵀ), row-stochastic, = W for a symmetric S_T."""
    rng = np.random.default_rng(21)
    ta = _related_teacher(rng, 6, 5)
    w = soft_label_targets(t64(ta), temperature=0.1)
    assert (w - w.T).abs().max() > 1e-2  # row-softmax of a symmetric S_T is not symmetric
    tr = soft_label_column_targets(w, "transposed")
    np.testing.assert_allclose(tr.numpy(), w.numpy().T, rtol=0, atol=0)
    np.testing.assert_allclose(tr.sum(dim=0).numpy(), np.ones(6), rtol=1e-12)  # columns sum to 1 …
    assert (tr.sum(dim=1) - 1).abs().max() > 1e-2  # … rows do not
    rc = soft_label_column_targets(w, "recomputed")
    np.testing.assert_allclose(rc.sum(dim=1).numpy(), np.ones(6), rtol=1e-12)
    np.testing.assert_allclose(rc.numpy(), ref_soft_targets(ta, None, 0.1, "priority", "softmax", transpose=True),
                               rtol=1e-10)
    np.testing.assert_allclose(rc.numpy(), w.numpy(), rtol=1e-10)
    # a non-symmetric teacher similarity: the recomputed target is f(S_Tᵀ), passed by the caller
    st = rng.normal(size=(6, 6))
    w2 = soft_targets_from_similarity(t64(st), 0.2)
    c2 = soft_targets_from_similarity(t64(st).T, 0.2)
    np.testing.assert_allclose(w2.numpy(), ref_soft_normalise(st, 0.2, "softmax"), rtol=1e-12)
    np.testing.assert_allclose(c2.numpy(), ref_soft_normalise(st.T, 0.2, "softmax"), rtol=1e-12)
    np.testing.assert_allclose(soft_label_column_targets(w2, "recomputed", c2).numpy(), c2.numpy(), rtol=0)
    sa, sb = rng.normal(size=(6, 4)), rng.normal(size=(6, 4))
    got = soft_label_loss(t64(sa), t64(sb), w2, 0.2, tms=True, mono_terms="code", column_targets=c2)
    want = ref_soft_loss(sa, sb, w2.numpy(), ref_soft_normalise(st.T, 0.2, "softmax"), 0.2, True, 0.1, "code")
    assert got.item() == pytest.approx(want, rel=1e-10)
    # raw targets: the recomputed column target is S_Tᵀ itself
    raw = soft_targets_from_similarity(t64(st), w_func="raw")
    np.testing.assert_allclose(soft_label_column_targets(raw, "recomputed", soft_targets_from_similarity(
        t64(st).T, w_func="raw")).numpy(), st.T, rtol=0)
    with pytest.raises(ValueError, match="column_targets"):
        soft_label_column_targets(w2, "transposed", c2)
    with pytest.raises(ValueError, match="column_target"):
        soft_label_column_targets(w2, "literal")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="column_targets"):
        soft_label_loss(t64(sa), t64(sb), w2, column_targets=torch.ones(5, 5, dtype=torch.float64))
    with pytest.raises(ValueError, match="mono_terms"):
        soft_label_loss(t64(sa), t64(sb), w2, tms=True, mono_terms="both")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="square"):
        soft_targets_from_similarity(torch.ones(3, 4))


def test_soft_label_column_readings_give_different_losses_and_gradients() -> None:
    rng = np.random.default_rng(22)
    w = soft_label_targets(t64(_related_teacher(rng, 8, 6)), temperature=0.1)
    a0, b0 = rng.normal(size=(8, 4)), rng.normal(size=(8, 4))
    out = {}
    for reading in ("recomputed", "transposed"):
        sa, sb = t64(a0).requires_grad_(True), t64(b0).requires_grad_(True)
        loss = soft_label_loss(sa, sb, w, 0.1, column_target=reading)
        loss.backward()
        out[reading] = (loss.item(), sa.grad)
    (l_rc, g_rc), (l_tr, g_tr) = out["recomputed"], out["transposed"]
    assert abs(l_rc - l_tr) > 1e-3 * abs(l_rc)
    assert (g_rc - g_tr).norm() > 1e-2 * g_rc.norm()


def test_soft_label_mono_terms_code_is_twice_paper_where_symmetric() -> None:
    """L_mono ("code") = 2 · L_mono ("paper" with the W target, ``mono_target="recomputed"``) exactly when the column
    target equals W: always with "recomputed" (S_aa, S_bb are symmetric), and with "transposed" only for a symmetric
    W (raw targets); never for a softmax W with "transposed". cross_weight = 0 isolates L_mono. (The literal Eq. 7
    target Wᵀ, the default: tests/test_soft_label_fidelity.py.)"""
    rng = np.random.default_rng(23)
    ta, sa, sb = t64(_related_teacher(rng, 6, 7)), t64(rng.normal(size=(6, 4))), t64(rng.normal(size=(6, 4)))

    def mono(w: torch.Tensor, column_target: str, mono_terms: str) -> float:
        return soft_label_loss(sa, sb, w, 0.1, tms=True, cross_weight=0.0, column_target=column_target,
                               mono_terms=mono_terms, mono_target="recomputed").item()

    soft, raw = soft_label_targets(ta, temperature=0.1), soft_label_targets(ta, w_func="raw")
    for w, reading in ((soft, "recomputed"), (raw, "recomputed"), (raw, "transposed")):
        paper = mono(w, reading, "paper")
        assert paper != 0 and mono(w, reading, "code") == pytest.approx(2 * paper, rel=1e-10)
    paper = mono(soft, "transposed", "paper")  # about, not exactly, twice: the column terms' target Wᵀ ≠ W
    assert mono(soft, "transposed", "code") == pytest.approx(2 * paper, rel=1e-2)
    assert abs(mono(soft, "transposed", "code") - 2 * paper) > 1e-6 * abs(paper)
    # λ weighs L_cross only: L(λ) − L(0) = λ · L_cross under either reading of L_mono
    for terms in ("paper", "code"):
        full = soft_label_loss(sa, sb, soft, 0.1, tms=True, cross_weight=0.1, mono_terms=terms,
                               mono_target="recomputed").item()
        assert full - mono(soft, "recomputed", terms) == pytest.approx(
            0.1 * soft_label_loss(sa, sb, soft, 0.1).item(), rel=1e-10)


def test_soft_label_defaults_are_those_of_the_objective_settings() -> None:
    """One default per reading: the objective's dataclass and the loss function agree (the component passes both)."""
    import inspect

    params = inspect.signature(soft_label_loss).parameters
    o = SoftLabelObjective()
    assert params["column_target"].default == o.column_target
    assert params["mono_terms"].default == o.mono_terms
    assert params["cross_weight"].default == o.cross_weight and params["temperature"].default == o.temperature


def test_soft_label_modes_and_weights_matter() -> None:
    rng = np.random.default_rng(12)
    ta, tb, sa, sb = (t64(rng.normal(size=(4, 3))) for _ in range(4))
    pri, avg = soft_label_targets(ta, tb), soft_label_targets(ta, tb, mode="average")
    assert (pri - avg).abs().max() > 1e-3
    np.testing.assert_allclose(soft_label_targets(ta, tb).numpy(), soft_label_targets(ta).numpy())  # b ignored
    assert soft_label_loss(sa, sb, pri, cross_weight=1.0).item() == soft_label_loss(sa, sb, pri).item()
    tms1, tms01 = (soft_label_loss(sa, sb, pri, tms=True, cross_weight=c).item() for c in (1.0, 0.1))
    assert tms1 - tms01 == pytest.approx(0.9 * soft_label_loss(sa, sb, pri).item(), rel=1e-10)


def test_soft_label_identity_teacher_at_zero_temperature_is_twice_symmetric_info_nce() -> None:
    rng = np.random.default_rng(13)
    b, tau = 6, 0.1
    a, bb = t64(rng.normal(size=(b, 5))), t64(rng.normal(size=(b, 5)))
    w = soft_label_targets(torch.eye(b, dtype=torch.float64), temperature=1e-4)
    np.testing.assert_array_equal(w.numpy(), np.eye(b))  # exp(−1e4) underflows: one-hot
    got = soft_label_loss(a, bb, w, tau, tms=False)
    assert got.item() == pytest.approx(2 * info_nce(a, bb, tau, symmetric=True).item(), rel=1e-10)
    # the code's no-teacher quirk: softmax(I/τ) at τ = 0.1, B = 28 is not one-hot
    quirk = soft_label_targets(torch.eye(28, dtype=torch.float64), temperature=0.1)
    assert quirk[0, 0].item() == pytest.approx(math.exp(10) / (math.exp(10) + 27), rel=1e-12)
    assert quirk[0, 0].item() == pytest.approx(0.9988, abs=1e-4)


def test_soft_label_targets_carry_no_gradient() -> None:
    teacher = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    w = soft_label_targets(teacher)
    assert not w.requires_grad
    sa = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    sb = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    loss = soft_label_loss(sa, sb, teacher[:, :4] @ teacher[:, :4].T, tms=True)  # targets with a graph: detached
    loss.backward()
    assert teacher.grad is None
    assert sa.grad is not None and sa.grad.abs().sum() > 0


def test_soft_label_validates_arguments() -> None:
    z = torch.randn(3, 4)
    with pytest.raises(ValueError, match="teacher_b"):
        soft_label_targets(z, mode="average")
    with pytest.raises(ValueError, match="teacher_b"):
        soft_label_targets(z, torch.randn(2, 4), mode="average")
    with pytest.raises(ValueError, match="mode"):
        soft_label_targets(z, mode="left")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="w_func"):
        soft_label_targets(z, w_func="Softmax")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="targets"):
        soft_label_loss(z, z, torch.ones(3, 2))
    with pytest.raises(ValueError, match="equal shape"):
        soft_label_loss(z, torch.randn(3, 5), torch.ones(3, 3))


def test_soft_label_gradcheck() -> None:
    torch.manual_seed(1)
    sa = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    sb = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    w = soft_label_targets(torch.randn(3, 6, dtype=torch.float64), temperature=0.5)
    for tms, column_target, mono_terms in ((False, "recomputed", "paper"), (False, "transposed", "paper"),
                                           (True, "recomputed", "paper"), (True, "transposed", "code")):
        assert torch.autograd.gradcheck(
            lambda x, y, m=tms, c=column_target, t=mono_terms: soft_label_loss(x, y, w, 0.5, tms=m, column_target=c,
                                                                               mono_terms=t), (sa, sb))


# ----------------------------------------------------------------------------------------------------- EASE
def test_ease_entity_loss_hand_computed_divides_by_tau() -> None:
    s = t64([[1.0, 0.0], [0.0, 1.0]])
    e = t64([[1.0, 0.0], [1.0, 1.0]])  # cos(s, e) = [[1, R], [0, R]]
    n = t64([[0.0, 1.0], [-1.0, 0.0]])  # cos(s, n) = [[0, −1], [1, 0]]
    tau, w = 10.0, 1.0
    row0 = _ce([1 / tau, R / tau, 0 / tau + w, -1 / tau], 0)  # logits in ±0.1, the own negative +1
    row1 = _ce([0 / tau, R / tau, 1 / tau, 0 / tau + w], 1)
    assert ease_entity_loss(s, e, n, tau, w).item() == pytest.approx((row0 + row1) / 2, rel=1e-12)
    # a duplicated entity (rows 0 and 1 share it) is dropped from each other's positive block
    row0g = _ce([1 / tau, 0 / tau + w, -1 / tau], 0)
    row1g = _ce([R / tau, 1 / tau, 0 / tau + w], 0)
    got = ease_entity_loss(s, e, n, tau, w, entity_groups=torch.tensor([9, 9]))
    assert got.item() == pytest.approx((row0g + row1g) / 2, rel=1e-12)
    # the total: SimCSE term on (z1, z2) + λ · entity term on z1 only
    z2 = t64([[1.0, 1.0], [0.0, 1.0]])  # cos(z1, z2) = [[R, 0], [R, 1]]
    simcse = (_ce([R / 0.05, 0.0], 0) + _ce([R / 0.05, 1 / 0.05], 1)) / 2
    total = ease_loss(s, z2, e, n, simcse_temperature=0.05, entity_temperature=tau, hard_negative_weight=w,
                      entity_weight=0.01)
    assert total.item() == pytest.approx(simcse + 0.01 * (row0 + row1) / 2, rel=1e-12)


@pytest.mark.parametrize("negatives", [False, True])
@pytest.mark.parametrize("grouped", [False, True])
def test_ease_loss_matches_naive_loop(negatives: bool, grouped: bool) -> None:
    rng = np.random.default_rng(14)
    b, d = 6, 5
    z1, z2, e, n = (rng.normal(size=(b, d)) for _ in range(4))
    groups = [0, 0, 1, 2, 3, 4] if grouped else None
    egroups = [5, 6, 5, 7, 8, 6] if grouped else None
    neg = n if negatives else None
    want = (ref_info_nce(z1, z2, 0.05, False, groups=groups)
            + 0.01 * ref_info_nce(z1, e, 10.0, False, neg, 1.0, egroups))
    got = ease_loss(t64(z1), t64(z2), t64(e), None if neg is None else t64(neg), hard_negative_weight=1.0,
                    groups=None if groups is None else torch.tensor(groups),
                    entity_groups=None if egroups is None else torch.tensor(egroups))
    assert got.item() == pytest.approx(want, rel=1e-10)
    entity = ease_entity_loss(t64(z1), t64(e), None if neg is None else t64(neg), 100.0, 1.0,
                              entity_groups=None if egroups is None else torch.tensor(egroups))
    assert entity.item() == pytest.approx(ref_info_nce(z1, e, 100.0, False, neg, 1.0, egroups), rel=1e-10)


def test_ease_without_entity_weight_is_simcse() -> None:
    rng = np.random.default_rng(15)
    z1, z2, e, n = (t64(rng.normal(size=(4, 3))) for _ in range(4))
    groups = torch.tensor([0, 1, 1, 2])
    simcse = simcse_loss(z1, z2, temperature=0.05, groups=groups)
    assert ease_loss(z1, z2, e, n, entity_weight=0.0, groups=groups).item() == pytest.approx(simcse.item(), rel=1e-12)
    assert ease_loss(z1, z2, e, n, entity_weight=1.0, groups=groups).item() > simcse.item() + 1e-3
    # only z1 meets the entities: swapping the views changes the entity term
    a = ease_loss(z1, z2, e, n, entity_weight=1.0) - simcse_loss(z1, z2)
    b = ease_loss(z2, z1, e, n, entity_weight=1.0) - simcse_loss(z2, z1)
    assert abs(a.item() - b.item()) > 1e-4


def test_ease_validates_arguments() -> None:
    z = torch.randn(3, 4)
    with pytest.raises(ValueError, match="negatives"):
        ease_entity_loss(z, z, torch.randn(2, 4), hard_negative_weight=1.0)  # w ≠ 0 needs one negative per sentence
    with pytest.raises(ValueError, match="sentences and entities"):
        ease_entity_loss(z, torch.randn(3, 5))
    with pytest.raises(ValueError, match="entity_groups"):
        ease_entity_loss(z, z, entity_groups=torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="entity_temperature"):
        ease_loss(z, z, z, entity_temperature=-1.0)
    ease_entity_loss(z, z, hard_negative_weight=1.0)  # w without negatives is inert
    ease_entity_loss(z, z, torch.randn(2, 4))  # the default w = 0 (the paper): any number of hard negatives


def test_entity_head_layout_and_tanh_range() -> None:
    torch.manual_seed(2)
    head = EntityHead(5, 3, 8, nonlinear=True)
    assert head.embedding.weight.shape == (6, 3)
    assert torch.all(head.embedding.weight[0] == 0)
    ids = torch.tensor([0, 1, 5, 5])
    out = head(ids)
    assert out.shape == (4, 8)
    assert torch.allclose(out[2], out[3])
    assert torch.allclose(out[0], torch.tanh(head.linear.bias))  # [PAD]: zeros through the linear map
    linear = EntityHead(5, 3, 8)  # the default: the paper's linear W
    with torch.no_grad():
        linear.embedding.weight.mul_(100)
    assert linear(ids).abs().max() > 1  # without tanh the range is unbounded
    with pytest.raises(ValueError, match="ids"):
        head(torch.tensor([[1, 2]]))
    with pytest.raises(ValueError, match="ids"):
        head(torch.tensor([1.0]))


def test_entity_head_from_vectors() -> None:
    torch.manual_seed(4)
    vectors = np.array([[10.0, -20.0, 30.0], [np.nan] * 3, [0.5, 0.25, -0.125], [np.nan] * 3], dtype=np.float32)
    head = EntityHead.from_vectors(vectors, hidden_size=4, nonlinear=True, seed=7)
    table = head.embedding.weight.detach()
    assert table.shape == (5, 3) and table.dtype == torch.float32
    assert torch.all(table[0] == 0)
    np.testing.assert_array_equal(table[1].numpy(), vectors[0])
    np.testing.assert_array_equal(table[3].numpy(), vectors[2])
    missing = table[[2, 4]]
    assert torch.all(missing.abs() <= 0.05) and torch.all(missing != 0)
    assert not torch.allclose(table[2], table[4])
    again = EntityHead.from_vectors(vectors, hidden_size=4, seed=7).embedding.weight.detach()
    other = EntityHead.from_vectors(vectors, hidden_size=4, seed=8).embedding.weight.detach()
    torch.testing.assert_close(again, table, rtol=0, atol=0)
    assert not torch.allclose(other[[2, 4]], missing)
    torch.testing.assert_close(other[[0, 1, 3]], table[[0, 1, 3]], rtol=0, atol=0)
    ids = torch.tensor([1, 2, 3, 4])
    out, pre = head(ids).detach(), head.linear(table[ids]).detach()
    assert out.shape == (4, 4)
    torch.testing.assert_close(out, torch.tanh(pre))
    assert pre.abs().max() > 2 and out.abs().max() <= 1  # entity 1 is large: tanh bounds what the linear map does not
    with pytest.raises(ValueError, match="partly NaN"):
        EntityHead.from_vectors(np.array([[1.0, np.nan]]), hidden_size=2)
    with pytest.raises(ValueError, match="vectors"):
        EntityHead.from_vectors(np.zeros(3), hidden_size=2)


def test_entity_head_trains_through_ease_loss() -> None:
    torch.manual_seed(3)
    head = EntityHead.from_vectors(np.random.default_rng(16).normal(size=(6, 5)), hidden_size=4)
    z1 = torch.randn(3, 4, requires_grad=True)
    z2 = torch.randn(3, 4)
    loss = ease_loss(z1, z2, head(torch.tensor([1, 2, 3])), head(torch.tensor([4, 5, 0])))
    loss.backward()
    grad = head.embedding.weight.grad
    assert grad is not None
    assert torch.all(grad[0] == 0)  # [PAD] stays zero
    assert torch.all(grad[6] == 0)  # unused entity
    assert grad[[1, 2, 3, 4, 5]].abs().sum(dim=1).min() > 0
    assert head.linear.weight.grad is not None and z1.grad is not None


# ---------------------------------------------------------------------------------------- dtype and device
def _all_losses(dtype: torch.dtype, device: str) -> dict[str, float]:
    rng = np.random.default_rng(17)

    def arr(*shape: int) -> torch.Tensor:
        return torch.tensor(rng.normal(size=shape), dtype=dtype, device=device)

    a, b, hn, t = arr(6, 5), arr(6, 5), arr(6, 5), arr(6, 7)
    groups = torch.tensor([0, 0, 1, 1, 2, 2], device=device)
    w = soft_label_targets(t, arr(6, 3), mode="average")
    out = {
        "info_nce": info_nce(a, b, 0.05, True, hn, 0.5, groups),
        "simcse": simcse_loss(a, b, hn, 0.05, 1.0, groups),
        "mpcl": mpcl_loss(a, groups, 0.05, scaling="row", hard_negatives=hn),
        "mpcl_out": mpcl_loss(a, groups, 0.05, positives="outside", scaling="none",
                              candidate_mask=torch.ones(6, 6, dtype=torch.bool, device=device)),
        "soft": soft_label_loss(a, b, w, tms=True),
        "ease": ease_loss(a, b, hn, arr(6, 5), groups=groups, entity_groups=groups),
    }
    for name, v in out.items():
        assert v.dtype == dtype and v.device.type == device and v.dim() == 0, name
    return {k: v.item() for k, v in out.items()}


@pytest.mark.parametrize("device", DEVICES)
def test_every_loss_runs_in_float32_and_float64_on_the_device(device: str) -> None:
    ref = _all_losses(torch.float64, "cpu")
    for dtype, rel in ((torch.float64, 1e-9), (torch.float32, 1e-4)):
        got = _all_losses(dtype, device)
        for name in ref:
            assert got[name] == pytest.approx(ref[name], rel=rel), (name, dtype)
