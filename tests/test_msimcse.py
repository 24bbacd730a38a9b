"""mSimCSE's ``duplicate_negatives`` (models/objectives/simcse.py): ``keep`` — the papers' equations and the code —
leaves same-meaning rows of a batch as each other's negatives; ``mask`` (polysent's own, its earlier behaviour) drops
them; both log how many columns in how many rows."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from models.objectives.simcse import SimcseComponent, SimcseObjective, simcse_loss
from models.settings import TrainSettings

LOGGER = "polysent.models.objectives.simcse"


@pytest.fixture(scope="module")
def triples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """6 cross-lingual NLI triples: meaning m0 three times (one English example in three languages), m1 twice."""
    path = tmp_path_factory.mktemp("msimcse") / "nli_triples.parquet"
    meaning = ["m0", "m0", "m0", "m1", "m1", "m2"]
    pq.write_table(pa.table({
        "triple_id": [f"t{i}" for i in range(6)], "meaning_id": meaning,
        "sent0": ["Der Hund schläft.", "Le chien dort.", "The dog sleeps.", "Es regnet.", "It rains.", "Hallo."],
        "sent1": ["A dog rests.", "Un chien se repose.", "Ein Hund ruht.", "Il pleut.", "Wet weather.", "Hi."],
        "hard_neg": ["A cat runs.", "Un chat court.", "Eine Katze rennt.", "Sunny.", "Sonnig.", "Bye."],
        "strategy": ["cross_lingual"] * 6}), path)
    return path


def _component(path: Path, **kw) -> SimcseComponent:
    o = SimcseObjective(**{"strategy": "cross_lingual_nli", "batch_size": 6, **kw})
    settings = TrainSettings(objectives=(o,), steps=3, grad_accumulation=2, device="cpu")
    return o.build("simcse", {"nli_triples": path}, settings, 0, torch.device("cpu"), None)


def test_default_keeps_same_meaning_rows_as_negatives_and_mask_drops_them(
        triples: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert SimcseObjective().duplicate_negatives == "keep"
    with caplog.at_level(logging.INFO, logger=LOGGER):
        keep, mask = _component(triples), _component(triples, duplicate_negatives="mask")
    idx = keep.plan.batch(0)
    assert sorted(idx.tolist()) == list(range(6)) and mask.plan.batch(0).tolist() == idx.tolist()
    torch.manual_seed(2)
    z1, z2, z3 = (torch.randn(6, 8) for _ in range(3))
    got_keep, got_mask = keep.batch(0).loss_fn([z1, z2, z3]), mask.batch(0).loss_fn([z1, z2, z3])
    groups = torch.as_tensor(keep.meaning[idx])
    assert got_keep.item() == pytest.approx(simcse_loss(z1, z2, z3).item(), rel=1e-6)  # the equation, no mask
    assert got_mask.item() == pytest.approx(simcse_loss(z1, z2, z3, groups=groups).item(), rel=1e-6)
    assert got_mask.item() < got_keep.item() - 1e-3
    # per batch: m0 × 3 → 6 columns in 3 rows, m1 × 2 → 2 columns in 2 rows; the run: 3 steps × 2 micro-batches
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert ("objective simcse: duplicate_negatives keep: over the run's 6 batches of 6, 48 same-meaning columns in 30 "
            "rows (6 batches) kept as negatives (cross_lingual_nli)") in lines
    assert ("objective simcse: duplicate_negatives mask: over the run's 6 batches of 6, 48 same-meaning columns in 30 "
            "rows (6 batches) masked from the denominators (cross_lingual_nli)") in lines
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        keep.batch(4)
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG] == [
        "objective simcse batch 4: 8 same-meaning columns in 5 rows kept as negatives (cross_lingual_nli)"]
