"""``training.freeze`` (``models/training/freezing.py``): the frozen parts leave a run exactly as the start had them
while the rest trains, the optimiser holds no state for them, bad requests are refused naming the key, and runs without
the setting keep their cache keys."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from tiny_start import TINY, bitext_and_start

from models.encoder import SentenceEncoder
from models.objectives.contrastive import ContrastiveObjective
from models.settings import FreezeSettings, TrainSettings

TWO_LAYERS = dataclasses.replace(TINY, num_layers=2)


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("freeze")
    paths = bitext_and_start(root)
    torch.manual_seed(1)
    SentenceEncoder.from_settings(TWO_LAYERS, paths["tokenizer"]).save(root / "start2")
    return {**paths, "start": root / "start2"}


def _train(corpora: dict[str, Path], out: Path, freeze: FreezeSettings | None) -> dict[str, torch.Tensor]:
    from models.training.train import train

    settings = TrainSettings(objectives=(ContrastiveObjective(data="bitext_pairs", batch_size=8),),
                             encoder=dataclasses.replace(TWO_LAYERS, pretrained=str(corpora["start"])), steps=3,
                             lr=1e-2, warmup_steps=0, seed=4, device="cpu", freeze=freeze)
    train(settings, {"bitext_pairs": corpora["bitext_pairs"]}, out, progress=False)
    return load_file(str(out / "model" / "model.safetensors"))


def _changed(start: dict[str, torch.Tensor], trained: dict[str, torch.Tensor]) -> set[str]:
    return {k for k in trained if not torch.equal(start[k], trained[k])}


def test_frozen_parts_stay_at_the_start_and_the_rest_trains(corpora: dict[str, Path], tmp_path: Path) -> None:
    start = load_file(str(corpora["start"] / "model.safetensors"))
    everything = _changed(start, _train(corpora, tmp_path / "all", None))
    assert any(".embeddings." in k or k.startswith("embeddings.") for k in everything)  # the control moves them

    got = _train(corpora, tmp_path / "emb", FreezeSettings(embeddings=True, layers=1))
    moved = _changed(start, got)
    frozen = {k for k in start if "embeddings." in k or "encoder.layer.0." in k}
    assert frozen and not moved & frozen, sorted(moved & frozen)[:5]
    assert any("encoder.layer.1." in k for k in moved)  # the layer above the frozen one trains

    layers_only = _changed(start, _train(corpora, tmp_path / "l1", FreezeSettings(embeddings=False, layers=1)))
    assert not any("encoder.layer.0." in k for k in layers_only)
    assert any("embeddings." in k for k in layers_only)


def test_the_optimiser_holds_no_state_for_frozen_weights(corpora: dict[str, Path], tmp_path: Path) -> None:
    from models.training.train import start_run

    settings = TrainSettings(objectives=(ContrastiveObjective(data="bitext_pairs", batch_size=8),),
                             encoder=dataclasses.replace(TWO_LAYERS, pretrained=str(corpora["start"])), steps=1,
                             device="cpu", freeze=FreezeSettings())
    run = start_run(settings, {"bitext_pairs": corpora["bitext_pairs"]}, run_name="r", tokenizer_dir=None,
                    dev_tables=None, checkpoints=tmp_path / "ck")
    in_optimiser = {id(p) for g in run.optimizer.param_groups for p in g["params"]}
    embeddings = list(run.model.backbone.embeddings.parameters())
    assert embeddings and not any(id(p) in in_optimiser or p.requires_grad for p in embeddings)
    assert all(id(p) in in_optimiser for p in run.model.backbone.encoder.layer[0].parameters())


def test_bad_freeze_requests_are_refused_naming_the_key(corpora: dict[str, Path]) -> None:
    from models.settings_io import SettingsError, from_mapping
    from models.training.freezing import freeze_student

    model = SentenceEncoder.load(corpora["start"])
    with pytest.raises(ValueError, match=r"training\.freeze\.layers: 3, but the backbone has 2 layers; expected at "
                                         r"most 2"):
        freeze_student(model.backbone, FreezeSettings(layers=3))
    with pytest.raises(ValueError, match=r"training\.freeze\.embeddings: the backbone \(Linear\) has no 'embeddings'"):
        freeze_student(torch.nn.Linear(2, 2), FreezeSettings())
    with pytest.raises(SettingsError, match=r"freeze\.layers: out of range \(value -1\)"):
        from_mapping(TrainSettings, {"freeze": {"layers": -1}}, "cfg.yaml")
    assert from_mapping(TrainSettings, {"freeze": {"layers": 2}}, "cfg.yaml").freeze == FreezeSettings(True, 2)
    assert freeze_student(model.backbone, None) == 0


def test_runs_without_freeze_keep_their_keys() -> None:
    from flows.stages.train import portable_train
    from models.settings import key_view
    from models.settings_io import to_mapping

    plain = TrainSettings()
    assert "freeze" not in portable_train(plain) and "freeze" not in key_view(to_mapping(plain))
    assert portable_train(dataclasses.replace(plain, freeze=FreezeSettings(layers=2)))["freeze"] == {
        "embeddings": True, "layers": 2}
