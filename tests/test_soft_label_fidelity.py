"""Soft labels against the paper (issue: paper fidelity): Eq. 7's one L_mono term per language is column-normalised, so
read literally its target is Wᵀ (``mono_target: transposed``, the default); the earlier reading normalised with W
(``mono_target: recomputed``). The two agree only when W's columns sum to 1; ``column_target`` does not switch it."""

from __future__ import annotations

import inspect
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from models.objectives import soft_label
from models.objectives.soft_label import SoftLabelObjective, soft_label_loss, soft_label_targets
from models.settings import TrainSettings

TAU = 0.1


def t64(x) -> torch.Tensor:
    return torch.tensor(np.asarray(x), dtype=torch.float64)


def _cos(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.dot(x, y) / (np.linalg.norm(x) * np.linalg.norm(y)))


def _eq7_by_hand(student: np.ndarray, w: np.ndarray, tau: float, literal: bool) -> float:
    """One language's Eq. 7 term written out. ``literal``: column-normalised, −(1/B) Σ_j Σ_i w_ij log [exp(s_ij/τ) /
    Σ_k exp(s_kj/τ)] (Eq. 7 as printed, i.e. target Wᵀ); otherwise row-normalised with W, −(1/B) Σ_i Σ_j w_ij log
    [exp(s_ij/τ) / Σ_k exp(s_ik/τ)] (the earlier reading)."""
    b = len(student)
    s = [[_cos(student[i], student[j]) for j in range(b)] for i in range(b)]
    total = 0.0
    for i in range(b):
        for j in range(b):
            if literal:
                log_z = math.log(sum(math.exp(s[k][j] / tau) for k in range(b)))
            else:
                log_z = math.log(sum(math.exp(s[i][k] / tau) for k in range(b)))
            total += -w[i][j] * (s[i][j] / tau - log_z)
    return total / b


def _toy(seed: int = 3, b: int = 6):
    """A toy batch whose teacher shares a common direction, so W = row-softmax(S_T/τ) is far from symmetric."""
    rng = np.random.default_rng(seed)
    teacher = rng.normal(size=(1, 5)) * 1.5 + rng.normal(size=(b, 5))
    return t64(teacher), rng.normal(size=(b, 4)), rng.normal(size=(b, 4))


def _mono(sa, sb, w, **kw) -> float:
    """L_mono alone: cross_weight = 0 removes L_cross from λ · L_cross + L_mono."""
    return soft_label_loss(t64(sa), t64(sb), w, TAU, tms=True, cross_weight=0.0, **kw).item()


def test_default_eq7_term_is_the_literal_transpose_where_columns_do_not_sum_to_one() -> None:
    teacher, sa, sb = _toy()
    w = soft_label_targets(teacher, temperature=TAU)
    cols = w.sum(dim=0)
    assert cols.max() - cols.min() > 0.2  # W's columns do not sum to 1 (0.85–1.08 here; its rows do)
    wn = w.numpy()
    literal = _eq7_by_hand(sa, wn, TAU, literal=True) + _eq7_by_hand(sb, wn, TAU, literal=True)
    rows = _eq7_by_hand(sa, wn, TAU, literal=False) + _eq7_by_hand(sb, wn, TAU, literal=False)
    assert _mono(sa, sb, w) == pytest.approx(literal, rel=1e-10)  # the default: Eq. 7 with Wᵀ
    assert _mono(sa, sb, w, mono_target="transposed") == pytest.approx(literal, rel=1e-10)
    assert _mono(sa, sb, w, mono_target="recomputed") == pytest.approx(rows, rel=1e-10)  # the earlier W reading
    assert abs(literal - rows) > 1e-4  # ≈ 0.01 here, far above rounding (the equalities hold to 1e-10)
    # the literal term is the row form with Wᵀ: L_rows(S_ll, Wᵀ)
    assert _eq7_by_hand(sa, wn.T, TAU, literal=False) == pytest.approx(_eq7_by_hand(sa, wn, TAU, literal=True),
                                                                       rel=1e-10)


def test_the_two_eq7_readings_agree_where_columns_sum_to_one() -> None:
    b = 7
    angles = 2 * math.pi * np.arange(b) / b  # evenly spaced on a circle: S_T circulant, so W is doubly stochastic
    teacher = t64(np.stack([np.cos(angles), np.sin(angles)], axis=1))
    w = soft_label_targets(teacher, temperature=TAU)
    np.testing.assert_allclose(w.sum(dim=0).numpy(), np.ones(b), rtol=1e-12)
    rng = np.random.default_rng(4)
    sa, sb = rng.normal(size=(b, 4)), rng.normal(size=(b, 4))
    assert _mono(sa, sb, w, mono_target="transposed") == pytest.approx(_mono(sa, sb, w, mono_target="recomputed"),
                                                                       rel=1e-12)
    raw = soft_label_targets(_toy()[0], w_func="raw")  # a raw W = S_T is symmetric: the readings agree as well
    sa, sb = _toy()[1:]
    assert _mono(sa, sb, raw, mono_target="transposed") == pytest.approx(
        _mono(sa, sb, raw, mono_target="recomputed"), rel=1e-12)


def test_column_target_does_not_switch_the_eq7_target() -> None:
    teacher, sa, sb = _toy(5)
    w = soft_label_targets(teacher, temperature=TAU)
    for mono_target in ("transposed", "recomputed"):
        by_column = {c: _mono(sa, sb, w, column_target=c, mono_target=mono_target)
                     for c in ("recomputed", "transposed")}
        assert by_column["recomputed"] == pytest.approx(by_column["transposed"], rel=1e-12)
    # λ still weighs L_cross only, whatever M is
    for mono_target in ("transposed", "recomputed"):
        full = soft_label_loss(t64(sa), t64(sb), w, TAU, tms=True, cross_weight=0.1, mono_target=mono_target).item()
        assert full - _mono(sa, sb, w, mono_target=mono_target) == pytest.approx(
            0.1 * soft_label_loss(t64(sa), t64(sb), w, TAU).item(), rel=1e-10)
    # without TMS the setting is unused
    assert soft_label_loss(t64(sa), t64(sb), w, TAU, mono_target="recomputed").item() == (
        soft_label_loss(t64(sa), t64(sb), w, TAU).item())


def test_code_terms_relate_to_both_eq7_readings() -> None:
    """The code's two directions per language: with the recomputed column target, twice the W reading; with the
    transposed one, the W reading plus the literal one (S_aa, S_bb are symmetric)."""
    teacher, sa, sb = _toy(6)
    w = soft_label_targets(teacher, temperature=TAU)
    rows, literal = (_mono(sa, sb, w, mono_target=m) for m in ("recomputed", "transposed"))
    assert _mono(sa, sb, w, mono_terms="code", column_target="recomputed") == pytest.approx(2 * rows, rel=1e-10)
    assert _mono(sa, sb, w, mono_terms="code", column_target="transposed") == pytest.approx(rows + literal, rel=1e-10)
    for m in ("transposed", "recomputed"):  # mono_target is unused by the code's reading
        assert _mono(sa, sb, w, mono_terms="code", mono_target=m) == pytest.approx(2 * rows, rel=1e-10)


def test_eq7_readings_give_different_gradients_and_pass_gradcheck() -> None:
    teacher, a0, b0 = _toy(7)
    w = soft_label_targets(teacher, temperature=TAU)
    grads = {}
    for m in ("transposed", "recomputed"):
        sa, sb = t64(a0).requires_grad_(True), t64(b0).requires_grad_(True)
        soft_label_loss(sa, sb, w, TAU, tms=True, mono_target=m).backward()
        grads[m] = sa.grad
    assert (grads["transposed"] - grads["recomputed"]).norm() > 1e-3 * grads["recomputed"].norm()
    small = soft_label_targets(t64(np.random.default_rng(8).normal(size=(3, 5))), temperature=0.5)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    y = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda p, q: soft_label_loss(p, q, small, 0.5, tms=True), (x, y))


def test_mono_target_validation_and_non_symmetric_teacher() -> None:
    teacher, sa, sb = _toy(9)
    w = soft_label_targets(teacher, temperature=TAU)
    with pytest.raises(ValueError, match="mono_target"):
        soft_label_loss(t64(sa), t64(sb), w, tms=True, mono_target="literal")  # type: ignore[arg-type]
    # a non-symmetric S_T: "recomputed" takes f(S_Tᵀ) (column_targets) as M, "transposed" still Wᵀ
    st = np.random.default_rng(10).normal(size=(6, 6))
    w2 = soft_label.soft_targets_from_similarity(t64(st), TAU)
    c2 = soft_label.soft_targets_from_similarity(t64(st).T, TAU)
    got_rc = _mono(sa, sb, w2, mono_target="recomputed", column_targets=c2)
    want_rc = _eq7_by_hand(sa, c2.numpy().T, TAU, literal=True) + _eq7_by_hand(sb, c2.numpy().T, TAU, literal=True)
    assert got_rc == pytest.approx(want_rc, rel=1e-10)
    got_tr = _mono(sa, sb, w2, mono_target="transposed", column_targets=c2)
    want_tr = _eq7_by_hand(sa, w2.numpy(), TAU, literal=True) + _eq7_by_hand(sb, w2.numpy(), TAU, literal=True)
    assert got_tr == pytest.approx(want_tr, rel=1e-10)


def test_objective_default_is_the_loss_default_and_the_component_passes_it(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    assert SoftLabelObjective().mono_target == "transposed"
    assert inspect.signature(soft_label_loss).parameters["mono_target"].default == SoftLabelObjective().mono_target
    pq.write_table(pa.table({"pair_id": [f"p{i}" for i in range(8)], "pivot_lang": ["en"] * 8,
                             "pivot_text": [f"en {i}" for i in range(8)], "text": [f"de {i}" for i in range(8)],
                             "lang": ["de"] * 8}), tmp_path / "bitext_pairs.parquet")

    class FakeTeacher:
        def __init__(self, encoder, prefix: str = "", name: str = "teacher", normalize: bool = True) -> None:
            self.dim = 5

        def cache(self, texts) -> None:
            pass

        def embed(self, texts, device="cpu") -> torch.Tensor:
            ks = [float(t.split()[1]) for t in texts]  # "en 3" → 3: a common direction plus a varying part
            return torch.tensor([[1.0, 0.3 * k, math.sin(k), math.cos(2 * k), 0.5] for k in ks])

    class FakeStudent:
        train_head = None
        dim = 5

        def to(self, device):
            return self

    import models.training.teacher

    monkeypatch.setattr(models.training.teacher, "Teacher", FakeTeacher)
    losses = {}
    for m in ("transposed", "recomputed"):
        o = SoftLabelObjective(data="bitext_pairs", batch_size=8, tms=True, mono_target=m, teacher_cache=False)
        settings = TrainSettings(objectives=(o,), steps=2, seed=1, device="cpu")
        c = soft_label.SoftLabelComponent("soft", o, {"bitext_pairs": tmp_path / "bitext_pairs.parquet"}, settings,
                                          0, torch.device("cpu"), FakeStudent())  # type: ignore[arg-type]
        b = c.batch(0)
        za, zb = (torch.randn(8, 4, generator=torch.Generator().manual_seed(k)) for k in (1, 2))
        losses[m] = b.loss_fn([za, zb]).item()
    assert abs(losses["transposed"] - losses["recomputed"]) > 1e-6
