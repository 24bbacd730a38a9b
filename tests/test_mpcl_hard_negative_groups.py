"""MPCL's hard-negative variant (issue: silent choices): which groups it trains on is a setting,
``hard_negative_groups`` — ``with_contradiction`` (default: only groups with a contradiction, the rest dropped and
counted in the log) or ``all`` (groups without one train with no hard-negative column) — and the ``row_detached``
scaling reading's gradient treats min and max as constants."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from models.objectives import mpcl
from models.objectives.mpcl import MPCL_SCALINGS, MpclObjective, mpcl_loss
from models.settings import TrainSettings

LANGS = ("de", "en", "es", "fr", "ru", "zh")


@pytest.fixture(scope="module")
def groups_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20 premise groups, each pointing at its contradiction-hypothesis group, and those 20 hypothesis groups plus 10
    more (no contradiction of their own): 20 of 50 groups have a contradiction. Texts: ``p7.de``, ``h7.de``, ``x3.de``.
    """
    rows: dict[str, list] = {"group_id": [], "lang": [], "text": [], "negative_group_id": []}
    spec = [(f"p{i}", f"h{i}") for i in range(20)] + [(f"h{i}", None) for i in range(20)] + \
        [(f"x{i}", None) for i in range(10)]
    for gid, neg in spec:
        for lang in LANGS:
            rows["group_id"].append(gid)
            rows["lang"].append(lang)
            rows["text"].append(f"{gid}.{lang}")
            rows["negative_group_id"].append(neg)
    path = tmp_path_factory.mktemp("hn_groups") / "xnli_groups.parquet"
    pq.write_table(pa.table(rows), path)
    return path


def _component(o: MpclObjective, path: Path) -> mpcl.MpclComponent:
    settings = TrainSettings(objectives=(o,), steps=10, seed=3, device="cpu")
    return mpcl.MpclComponent("obj", o, {"xnli_groups": path}, settings, 0, torch.device("cpu"))


def _run(c: mpcl.MpclComponent, step: int, monkeypatch: pytest.MonkeyPatch) -> tuple[list[list[str]], dict]:
    """The batch's text columns and the keyword arguments its loss hands ``mpcl_loss`` (which really runs)."""
    seen: dict = {}
    real = mpcl.mpcl_loss

    def spy(embeddings, groups, *args, **kwargs):
        seen.update(kwargs, groups=groups)
        return real(embeddings, groups, *args, **kwargs)

    monkeypatch.setattr(mpcl, "mpcl_loss", spy)
    b = c.batch(step)
    loss = b.loss_fn([torch.randn(len(col), 8, generator=torch.Generator().manual_seed(step)) for col in b.columns])
    assert torch.isfinite(loss)
    return b.columns, seen


def test_default_draws_only_groups_with_a_contradiction_and_logs_the_drop(groups_table: Path,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    assert MpclObjective().hard_negative_groups == "with_contradiction"
    with caplog.at_level(logging.INFO, logger="polysent.models.objectives.mpcl"):
        c = _component(MpclObjective(batch_size=4, hard_negatives=True), groups_table)
    assert ("hard_negative_groups=with_contradiction: 20 of 50 groups (unique sentences) have a contradiction and are "
            "drawn (120 of 300 texts); 30 groups (180 texts) without one are dropped") in caplog.text
    assert len(c.eligible) == 20
    for step in range(8):
        texts, negs = c.batch(step).columns
        assert {t.split(".")[0][0] for t in texts} == {"p"}  # only premises
        assert len(negs) == 4


def test_all_trains_groups_without_a_contradiction(groups_table: Path, caplog: pytest.LogCaptureFixture,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    with caplog.at_level(logging.INFO, logger="polysent.models.objectives.mpcl"):
        c = _component(MpclObjective(batch_size=4, hard_negatives=True, hard_negative_groups="all"), groups_table)
    assert ("hard_negative_groups=all: all 50 groups (unique sentences, 300 texts) are drawn, none dropped; 20 have "
            "a contradiction and bring a hard negative, 30 (180 texts) train without one") in caplog.text
    assert len(c.eligible) == 50
    kinds, without_any = set(), 0
    for step in range(40):
        columns, kwargs = _run(c, step, monkeypatch)
        texts, negs = columns[0], (columns[1] if len(columns) > 1 else [])
        drawn = list(dict.fromkeys(t.split(".")[0] for t in texts))
        kinds |= {g[0] for g in drawn}
        premises = [g for g in drawn if g.startswith("p")]
        assert len(negs) == len(premises)  # one hard negative per group with a contradiction, none for the rest
        assert sorted(n.split(".")[0] for n in negs) == sorted("h" + p[1:] for p in premises)
        ids = kwargs["groups"].tolist()  # every drawn group, with or without a contradiction: anchors and positives
        assert bool(kwargs["anchors"].all())
        for gid in drawn:
            assert len({ids[k] for k, t in enumerate(texts) if t.startswith(gid + ".")}) == 1
            assert sum(t.startswith(gid + ".") for t in texts) == 6
        if not negs:
            without_any += 1
            assert kwargs["hard_negatives"] is None and kwargs["hard_negative_mask"] is None
        else:
            assert kwargs["hard_negatives"].shape[0] == len(negs)
    assert kinds == {"p", "h", "x"}  # groups without a contradiction are anchors with their positives
    assert without_any > 0  # a batch without any premise trains with no hard-negative column at all


def test_all_masks_a_hard_negative_from_the_rows_it_translates(groups_table: Path, caplog: pytest.LogCaptureFixture,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """p7 and h7 in one batch: p7's hard negative is a member of h7, i.e. a translation of h7's rows — kept as a
    candidate of every other row, removed from h7's rows."""
    c = _component(MpclObjective(batch_size=8, hard_negatives=True, hard_negative_groups="all"), groups_table)
    collisions = 0
    with caplog.at_level(logging.INFO, logger="polysent.models.objectives.mpcl"):
        for step in range(40):
            columns, kwargs = _run(c, step, monkeypatch)
            mask = kwargs["hard_negative_mask"]
            if len(columns) == 1:
                continue
            texts, negs = columns
            want = np.array([[t.split(".")[0] != n.split(".")[0] for n in negs] for t in texts])
            if want.all():
                assert mask is None
                continue
            collisions += 1
            np.testing.assert_array_equal(mask.numpy(), want)
            assert f"objective obj step {step}: {int((~want).any(axis=0).sum())} hard negative(s)" in caplog.text
    assert collisions > 0


def test_hard_negative_mask_removes_a_column_from_chosen_rows_only() -> None:
    rng = np.random.default_rng(1)
    e = torch.tensor(rng.normal(size=(6, 5)))
    hn = torch.tensor(rng.normal(size=(3, 5)))
    g = torch.tensor([0, 0, 1, 1, 2, 2])
    full = mpcl_loss(e, g, 0.1, hard_negatives=hn)
    assert mpcl_loss(e, g, 0.1, hard_negatives=hn, hard_negative_mask=torch.ones(6, 3, dtype=torch.bool)).item() == (
        full.item())
    mask = torch.ones(6, 3, dtype=torch.bool)
    mask[:, 1] = False  # column 1 out of every row = no column 1
    assert mpcl_loss(e, g, 0.1, hard_negatives=hn, hard_negative_mask=mask).item() == pytest.approx(
        mpcl_loss(e, g, 0.1, hard_negatives=hn[[0, 2]]).item(), rel=1e-12)
    mask = torch.ones(6, 3, dtype=torch.bool)
    mask[2:4, 1] = False  # out of group 1's rows only
    for rows, negatives in (([2, 3], hn[[0, 2]]), ([0, 1, 4, 5], hn)):
        anchors = torch.zeros(6, dtype=torch.bool)
        anchors[rows] = True
        got = mpcl_loss(e, g, 0.1, hard_negatives=hn, hard_negative_mask=mask, anchors=anchors)
        assert got.item() == pytest.approx(mpcl_loss(e, g, 0.1, hard_negatives=negatives, anchors=anchors).item(),
                                           rel=1e-12)
    with pytest.raises(ValueError, match="hard_negative_mask"):
        mpcl_loss(e, g, 0.1, hard_negative_mask=mask)  # no hard negatives
    with pytest.raises(ValueError, match="hard_negative_mask"):
        mpcl_loss(e, g, 0.1, hard_negatives=hn, hard_negative_mask=torch.ones(6, 2, dtype=torch.bool))


def test_all_needs_one_process_and_unknown_values_fail(groups_table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from models.training import distributed

    monkeypatch.setattr(distributed, "world_size", lambda: 2)
    monkeypatch.setattr(distributed, "rank", lambda: 0)
    with pytest.raises(ValueError, match="hard_negative_groups: all"):
        _component(MpclObjective(batch_size=4, hard_negatives=True, hard_negative_groups="all"), groups_table)
    monkeypatch.undo()
    c = _component(MpclObjective(batch_size=4, hard_negatives=True), groups_table)
    with pytest.raises(ValueError, match="hard_negative_groups must be"):
        mpcl.hard_negative_eligible("obj", c.groups, "premises")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------- scaling: row_detached
def test_scaling_readings_are_the_documented_ones() -> None:
    """Each reading is a documented value (which one is the default: the decision test below reads the ledger)."""
    assert {"none", "row", "row_detached"} <= set(MPCL_SCALINGS)
    doc = mpcl.__doc__ or ""
    for reading in ("none", "row", "row_detached"):
        assert f'    "{reading}" ' in doc


def test_row_detached_gradient_treats_min_and_max_as_constants() -> None:
    """The gradient of ``row_detached`` equals that of the same min–max rescaling into [−1/τ, 1/τ] with each row's
    min and max computed beforehand as plain numbers; ``row`` (gradients through min/max) differs."""
    rng = np.random.default_rng(2)
    e0 = rng.normal(size=(8, 6))
    g = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2])
    tau, eps = 0.05, 1e-6
    off = ~torch.eye(8, dtype=torch.bool)
    pos = (g[:, None] == g[None, :]) & off
    with torch.no_grad():
        z = torch.nn.functional.normalize(torch.tensor(e0), dim=-1)
        s0 = z @ z.T
        lo = s0.masked_fill(~off, float("inf")).amin(1, keepdim=True).clone()  # constants, no graph
        hi = s0.masked_fill(~off, float("-inf")).amax(1, keepdim=True).clone()

    def by_hand(e: torch.Tensor) -> torch.Tensor:
        zz = torch.nn.functional.normalize(e, dim=-1)
        scaled = (2 * (zz @ zz.T - lo) / (hi - lo + eps) - 1) / tau
        den = torch.logsumexp(scaled.masked_fill(~off, -torch.inf), 1)
        return (den - torch.logsumexp(scaled.masked_fill(~pos, -torch.inf), 1)).mean()

    grads = {}
    for name, fn in (("hand", by_hand), ("row_detached", lambda x: mpcl_loss(x, g, tau, scaling="row_detached")),
                     ("row", lambda x: mpcl_loss(x, g, tau, scaling="row"))):
        x = torch.tensor(e0).requires_grad_()
        fn(x).backward()
        grads[name] = x.grad
    assert by_hand(torch.tensor(e0)).item() == pytest.approx(
        mpcl_loss(torch.tensor(e0), g, tau, scaling="row_detached").item(), rel=1e-12)
    torch.testing.assert_close(grads["row_detached"], grads["hand"], rtol=1e-10, atol=1e-12)
    assert (grads["row"] - grads["row_detached"]).norm() > 1e-3 * grads["row_detached"].norm()


def test_the_objectives_defaults_are_the_scaling_questions_decision() -> None:
    """``MpclObjective``'s scaling, temperature and anchors are the condition that ``experiments/mpcl_random_init``'s
    decision (the one question that decides them, where MPCL's loss does not saturate) chose from its committed ledger
    (a changed ledger or default that disagree fail here)."""
    from experiments import verdicts
    from experiments.ledger import read_rows, row_key
    from experiments.plan import plan
    from experiments.question import load_question, questions

    deciding = [n for n in questions() if (d := load_question(n).decision) is not None and d.setting.startswith("mpcl")]
    assert deciding == ["mpcl_random_init"]
    q = load_question("mpcl_random_init")
    d = q.decision
    assert d is not None
    rows = read_rows(q.results)
    current = {p.key for p in plan(q, rows, against_kit=False) if p.state == "done"}
    rows = [r for r in rows if row_key(r) in current]  # as the page reads them: no stale row
    chosen, why, _ = verdicts.decide(rows, d.incumbent, d.candidates, d.figures, d.scale, d.keep, d.tolerance,
                                     d.keep_against)
    if why.startswith("pending"):  # the defaults stay the last decided ones until the decision can be read again
        assert (MpclObjective().scaling, MpclObjective().temperature) == ("none", 0.05)
        pytest.skip(f"mpcl_random_init's decision is {why}")
    spec = next(c for c in q.conditions if c.name == chosen)
    (settings,) = spec.objectives
    default = MpclObjective()
    assert (default.scaling, default.temperature, default.anchors) == (
        settings.scaling, settings.temperature, settings.anchors), (chosen, why)
    assert mpcl.mpcl_loss.__defaults__[:3] == (default.temperature, default.positives, default.scaling)
