"""MPCL against the paper (issue: scientific fidelity): the min–max scaling readings, the collapse the row-wise
reading rewards, K = 5 positives with 15 languages, "+Single" through the same loss, and contradiction-only hard
negatives — on purpose-built translation groups."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from models.objectives import contrastive, mpcl
from models.objectives.contrastive import ContrastiveObjective
from models.objectives.mpcl import MPCL_SCALINGS, MpclObjective, mpcl_loss
from models.settings import TrainSettings

FIFTEEN = ("ar", "bg", "de", "el", "en", "es", "fr", "hi", "ru", "sw", "th", "tr", "ur", "vi", "zh")


def _clustered(seed: int = 0, groups: int = 6, size: int = 4, d: int = 16, spread: float = 0.35):
    """Embeddings of ``groups`` translation groups: members near their group's centre (a trained-like state)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(groups, d))
    e = np.repeat(centres, size, axis=0) + spread * rng.normal(size=(groups * size, d))
    return torch.tensor(e, dtype=torch.float64), torch.arange(groups).repeat_interleave(size)


def _shrunk(e: torch.Tensor, alpha: float) -> torch.Tensor:
    mean = e.mean(dim=0, keepdim=True)
    return mean + alpha * (e - mean)


def test_matrix_readings_use_one_range_for_the_whole_batch() -> None:
    e, g = _clustered(1, spread=1.0)
    tau = 0.1
    z = torch.nn.functional.normalize(e, dim=-1)
    s = z @ z.T
    off = ~torch.eye(len(e), dtype=torch.bool)
    lo, hi = s[off].min(), s[off].max()
    scaled = (2 * (s - lo) / (hi - lo + 1e-6) - 1) / tau
    pos = (g[:, None] == g[None, :]) & off
    want = (torch.logsumexp(scaled.masked_fill(~off, -torch.inf), 1)
            - torch.logsumexp(scaled.masked_fill(~pos, -torch.inf), 1)).mean()
    for reading in ("matrix", "matrix_detached"):
        assert mpcl_loss(e, g, tau, scaling=reading).item() == pytest.approx(want.item(), rel=1e-10)
    assert abs(mpcl_loss(e, g, tau, scaling="row").item() - want.item()) > 1e-3
    with pytest.raises(ValueError, match="scaling must be one of"):
        mpcl_loss(e, g, tau, scaling="column")  # type: ignore[arg-type]


def test_minmax_self_puts_the_self_similarity_in_the_range() -> None:
    e, g = _clustered(2)
    z = torch.nn.functional.normalize(e, dim=-1)
    s = z @ z.T
    off = ~torch.eye(len(e), dtype=torch.bool)
    lo = s.masked_fill(~off, torch.inf).amin(1, keepdim=True)
    scaled = (2 * (s - lo) / (1.0 - lo + 1e-6) - 1) / 0.05  # hi = s_ii = 1
    pos = (g[:, None] == g[None, :]) & off
    want = (torch.logsumexp(scaled.masked_fill(~off, -torch.inf), 1)
            - torch.logsumexp(scaled.masked_fill(~pos, -torch.inf), 1)).mean()
    got = mpcl_loss(e, g, 0.05, scaling="row", minmax_self=True)
    assert got.item() == pytest.approx(want.item(), rel=1e-9)


def test_shrinking_embeddings_toward_their_mean_does_not_lower_the_plain_loss() -> None:
    """The collapse the row-wise reading allows: contracting every embedding toward the batch mean must cost the
    plain loss (``scaling="none"``), while the row-wise reading cannot see it (its value is invariant to affine changes
    of a row)."""
    for seed in range(3):
        e, g = _clustered(seed)
        default = mpcl_loss(e, g, scaling="none").item()
        for alpha in (0.8, 0.5, 0.2):
            assert mpcl_loss(_shrunk(e, alpha), g, scaling="none").item() > default, (seed, alpha)
        row = [mpcl_loss(_shrunk(e, a), g, scaling="row").item() for a in (1.0, 0.5, 0.2)]
        assert max(row) - min(row) < 0.25 * (mpcl_loss(_shrunk(e, 0.2), g, scaling="none").item() - default)


@pytest.mark.parametrize("reading", [r for r in MPCL_SCALINGS if r in ("none", "row_detached", "matrix_detached")])
def test_gradient_on_a_rows_least_similar_candidate_does_not_point_toward_the_anchor(reading: str) -> None:
    e, g = _clustered(4)
    anchor = 0
    z = torch.nn.functional.normalize(e, dim=-1)
    s = (z[anchor] @ z.T).clone()
    s[anchor] = torch.inf
    least = int(s.argmin())
    anchors = torch.zeros(len(e), dtype=torch.bool)
    anchors[anchor] = True
    x = e.clone().requires_grad_()
    mpcl_loss(x, g, 0.05, scaling=reading, anchors=anchors).backward()
    # gradient descent moves the candidate along −grad: that must not raise its cosine with the anchor
    toward = torch.dot(-x.grad[least], z[anchor] - (z[anchor] @ z[least]) * z[least])
    assert toward.item() <= 1e-12


def test_row_scaling_pulls_the_least_similar_candidate_toward_the_anchor() -> None:
    """Pins the defect of the non-detached row reading (the measured collapse), so the default never becomes it."""
    e, g = _clustered(4)
    z = torch.nn.functional.normalize(e, dim=-1)
    s = (z[0] @ z.T).clone()
    s[0] = torch.inf
    least = int(s.argmin())
    anchors = torch.zeros(len(e), dtype=torch.bool)
    anchors[0] = True
    x = e.clone().requires_grad_()
    mpcl_loss(x, g, 0.05, scaling="row", anchors=anchors).backward()
    toward = torch.dot(-x.grad[least], z[0] - (z[0] @ z[least]) * z[least])
    assert toward.item() > 0


# ------------------------------------------------------------------------------------------------ the component
@pytest.fixture(scope="module")
def groups15(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 premise groups in 15 languages, each pointing at a contradiction-hypothesis group, and those 40 hypothesis
    groups (no contradiction of their own). Texts name their group and language: ``p7.de``, ``h7.de``."""
    rows: dict[str, list] = {"group_id": [], "lang": [], "text": [], "negative_group_id": []}
    for i in range(40):
        for kind, neg in (("p", f"h{i:03d}"), ("h", None)):
            for lang in FIFTEEN:
                rows["group_id"].append(f"{kind}{i:03d}")
                rows["lang"].append(lang)
                rows["text"].append(f"{kind}{i}.{lang}")
                rows["negative_group_id"].append(neg)
    path = tmp_path_factory.mktemp("groups15") / "xnli_groups.parquet"
    pq.write_table(pa.table(rows), path)
    return path


def _component(cls, o, path: Path):
    settings = TrainSettings(objectives=(o,), steps=10, seed=5, device="cpu")
    return cls("obj", o, {"xnli_groups": path}, settings, 0, torch.device("cpu"))


def _captured(monkeypatch: pytest.MonkeyPatch, name: str) -> dict:
    seen: dict = {}

    def fake(*args, **kwargs):
        seen["args"], seen["kwargs"] = args, kwargs
        return torch.zeros(())

    monkeypatch.setattr(mpcl, name, fake)
    return seen


def test_anchor_sees_five_positives_with_fifteen_languages(groups15: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _captured(monkeypatch, "mpcl_loss")
    c = _component(mpcl.MpclComponent, MpclObjective(batch_size=8), groups15)
    for step in range(3):
        b = c.batch(step)
        texts = b.columns[0]
        assert len(texts) == 8 * 6
        b.loss_fn([torch.randn(len(texts), 4)])
        ids = seen["args"][1]
        _, counts = torch.unique(ids, return_counts=True)
        assert counts.tolist() == [6] * 8  # anchor + K = 5 positives in every group
        for gid in torch.unique(ids).tolist():
            members = [texts[k] for k in range(len(texts)) if ids[k] == gid]
            assert len({t.split(".")[0] for t in members}) == 1 and len({t.split(".")[1] for t in members}) == 6
    every = _component(mpcl.MpclComponent, MpclObjective(batch_size=8, group_members=None), groups15)
    assert len(every.batch(0).columns[0]) == 8 * 15


def seen_multi_mask(component: mpcl.MpclComponent, step: int):
    seen: dict = {}
    original = mpcl.mpcl_loss
    mpcl.mpcl_loss = lambda *a, **k: seen.update(k) or torch.zeros(())  # type: ignore[assignment]
    try:
        b = component.batch(step)
        b.loss_fn([torch.randn(len(b.columns[0]), 4)])
    finally:
        mpcl.mpcl_loss = original
    return seen["candidate_mask"]


@pytest.mark.parametrize(("languages", "members"), [
    (("en", "de", "fr", "es", "ru", "zh"), 6),  # mpcl_scaling's and me5-mpcl's setting: K = 5 against 3 pairs
    (("en", "de", "fr", "es", "ru"), 4),  # mpcl_random_init's: K = 3 against 2 pairs
])
def test_split_pairs_is_single_positive_on_the_same_sentences(groups15: Path, monkeypatch: pytest.MonkeyPatch,
                                                              languages: tuple[str, ...], members: int) -> None:
    seen = _captured(monkeypatch, "mpcl_loss")
    o = MpclObjective(batch_size=8, languages=languages, group_members=members)
    multi = _component(mpcl.MpclComponent, o, groups15)
    single = _component(mpcl.MpclComponent, MpclObjective(**{**o.__dict__, "split_pairs": True}), groups15)
    for step in range(3):
        bm, bs = multi.batch(step), single.batch(step)
        assert sorted(bm.columns[0]) == sorted(bs.columns[0])  # the same sentences per step
        bm.loss_fn([torch.randn(len(bm.columns[0]), 4)])
        _, counts = torch.unique(seen["args"][1], return_counts=True)
        assert counts.tolist() == [members] * 8  # MPCL: the anchor and K = members − 1 positives
        bs.loss_fn([torch.randn(len(bs.columns[0]), 4)])
        ids, kwargs = seen["args"][1], seen["kwargs"]
        _, counts = torch.unique(ids, return_counts=True)
        assert counts.tolist() == [2] * (8 * members // 2)  # members / 2 disjoint pairs per group: K = 1
        assert kwargs["scaling"] == o.scaling  # through the same loss and scaling
        texts = bs.columns[0]
        for gid in torch.unique(ids).tolist():
            a, b = (texts[k] for k in range(len(texts)) if ids[k] == gid)
            assert a.split(".")[0] == b.split(".")[0] and a != b
        # the same in-batch negatives as MPCL: translations from a row's own group are no candidates at all
        mask = kwargs["candidate_mask"]
        origin = [t.split(".")[0] for t in texts]
        for i in range(len(texts)):
            for j in range(len(texts)):
                same_pair = bool(ids[i] == ids[j])
                assert bool(mask[i, j]) == (origin[i] != origin[j] or same_pair)
        assert seen_multi_mask(multi, step) is None


def test_mpcl_hard_negative_is_always_a_contradiction(groups15: Path) -> None:
    c = _component(mpcl.MpclComponent, MpclObjective(batch_size=8, hard_negatives=True), groups15)
    langs = set()
    for step in range(12):
        texts, negs = c.batch(step).columns
        anchors = {t.split(".")[0] for t in texts}
        assert all(a.startswith("p") for a in anchors)  # only groups with a contradiction are drawn
        for n in negs:
            assert n.startswith("h")
            assert "p" + n.split(".")[0][1:] in anchors  # the contradiction of a premise in this batch
            langs.add(n.split(".")[1])
        assert len(negs) == 8
    assert len(langs) > 6  # its language drawn at random from all languages


def test_contrastive_hard_negative_is_always_a_contradiction(groups15: Path) -> None:
    o = ContrastiveObjective(data="xnli_groups", batch_size=8, hard_negatives=True)
    c = _component(contrastive.ContrastiveComponent, o, groups15)
    for step in range(12):
        a, b, negs = c.batch(step).columns
        for x, y, n in zip(a, b, negs, strict=True):
            assert x.startswith("p") and y.split(".")[0] == x.split(".")[0]
            assert n == "h" + y.split(".")[0][1:] + "." + y.split(".")[1]  # its contradiction, in b's language
