"""VMSST's decoder warm-up (``VmsstObjective.warmup_decoder_steps``; ``Component.warm_up`` run by the trainer's
pre-phase ``models.training.train.warm_up``; the probe and stopping rule in ``models.vmsst.probe``): during it the
student's weights do not move and get no gradient while every generative method's own parts train; on a purpose-built
bilingual set a random-init encoder's frozen μ_sem becomes readable (the probe gap passes its threshold) within the
budget, and the warm-up stops at the first probe that passes; its record reaches the stats and ``train_steps``; the
defaults leave the loss, the ``train_steps`` columns and the cache key as they were; and what cannot warm up is
refused before training."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from test_vmsst import _sample_rows, _settings, _write_pairs

from models.objectives.vmsst import VmsstObjective
from models.settings import TokenizerSettings, key_view
from models.settings_io import to_mapping
from models.training.tokenizer import train_tokenizer

EN = ("red", "blue", "green", "black", "white", "pink", "gray", "gold")
XX = ("rojo", "azul", "verde", "negro", "blanco", "rosa", "gris", "oro")


def _tokenised(root: Path, rows: dict[str, list[tuple[str, str]]], vocab: int) -> dict[str, Path]:
    pairs = _write_pairs(root / "bitext_pairs", rows)
    pq.write_table(pa.table({"text": [x for r in rows.values() for p in r for x in p]}), root / "tok.parquet")
    train_tokenizer(TokenizerSettings(vocab_size=vocab, min_frequency=1), {"t": root / "tok.parquet"}, root)
    return {"bitext_pairs": pairs, "tokenizer": root / "tokenizer"}


@pytest.fixture(scope="module")
def colours(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every ordered two-colour phrase of 8 colours (64 pairs, 64 meanings), English ↔ a word-by-word ``xx``: every
    word occurs in every position of the pairs the warm-up trains on, so a decoder can learn to read which words a
    held-out pair's μ_sem holds."""
    pairs = [(f"{EN[i]} {EN[j]}", f"{XX[i]} {XX[j]}") for i, j in itertools.product(range(8), repeat=2)]
    return _tokenised(tmp_path_factory.mktemp("colours"), {"xx": pairs}, 100)


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sample's en-de / en-fr bitext, as ``tests/test_vmsst.py``'s ``corpora``."""
    return _tokenised(tmp_path_factory.mktemp("sample"), _sample_rows(), 500)


def _run(settings, corpus: dict[str, Path], tmp_path: Path):
    from models.training.train import start_run

    torch.manual_seed(0)
    return start_run(settings, {"bitext_pairs": corpus["bitext_pairs"]}, run_name="warm",
                     tokenizer_dir=corpus["tokenizer"], dev_tables=None, checkpoints=tmp_path / "ckpt")


def _state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


# ---------------------------------------------------------------------------------------------- (1) what trains
@pytest.mark.parametrize(("variant", "decoder"), [("vmsst", "shared"), ("vmsst", "separate"),
                                                  ("bitranslation", "shared"), ("vmsst_contrastive", "shared")])
def test_the_warm_up_trains_the_decoders_and_leaves_the_student_as_it_was(
        sample: dict[str, Path], tmp_path: Path, variant: str, decoder: str) -> None:
    """Every generative method: after the warm-up every weight of the student (backbone, its word-embedding table
    that the decoders read, W_μ) is bit-for-bit the start's, none has a gradient and each keeps its requires_grad;
    every parameter of the decoders moved; the run's own AdamW has no state yet (its update 1 starts as without a
    warm-up); and the warm-up ran its whole budget (null threshold)."""
    from models.training.train import warm_up

    o = VmsstObjective(variant=variant, translation_decoder=decoder, batch_size=8, kl_anneal_steps=10,
                       monitor_every=2, warmup_decoder_steps=3, warmup_probe_gap=None, warmup_probe_pairs=8,
                       decoder_vocab_size="corpus")
    run = _run(_settings(o), sample, tmp_path)
    (c,) = run.components
    flags = {k: p.requires_grad for k, p in run.model.named_parameters()}
    assert all(flags.values())
    student, own = _state(run.model), {k: p.detach().clone() for k, p in c.modules.named_parameters()}
    warm_up(run)
    after = _state(run.model)
    assert after.keys() == student.keys()
    for k, v in student.items():
        assert torch.equal(after[k], v), f"student weight {k} changed during the warm-up"
    assert all(p.grad is None for p in run.model.parameters())
    assert {k: p.requires_grad for k, p in run.model.named_parameters()} == flags
    decoders = {k: p for k, p in c.modules.named_parameters() if "decoder." in k}
    assert any(k.startswith("vmsst.translation_decoder.") for k in decoders) == (
        variant == "bitranslation" or decoder == "separate")
    unmoved = [k for k, p in decoders.items() if torch.equal(p.detach(), own[k])]
    assert decoders and not unmoved, f"decoder parameters the warm-up did not train: {unmoved}"
    if variant != "bitranslation":  # VMSST's own inference parts train with them
        assert not torch.equal(c.modules["vmsst"].semantic_logvar.weight.detach(), own["vmsst.semantic_logvar.weight"])
    assert not run.optimizer.state
    assert run.warmups["vmsst"]["updates"] == 3 and run.warmups["vmsst"]["passed"] is False


def test_without_the_freezing_the_warm_up_would_leave_gradients_on_the_student(sample: dict[str, Path],
                                                                               tmp_path: Path) -> None:
    """What the check above guards: the warm-up's updates run without the trainer's ``frozen`` student leave
    gradients on the student's weights (the backbone the semantic pass runs, the table the decoders read), which the
    run's own AdamW would then apply at its update 1."""
    import models.training.train as train_module

    o = VmsstObjective(batch_size=8, kl_anneal_steps=10, monitor_every=0, warmup_decoder_steps=1,
                       warmup_probe_gap=None, warmup_probe_pairs=8)
    run = _run(_settings(o), sample, tmp_path)
    (c,) = run.components
    train_module._warm_up_updates(run, c, c.warm_up())
    reached = [k for k, p in run.model.named_parameters() if p.grad is not None and bool(p.grad.abs().sum() > 0)]
    assert any("word_embeddings" in k for k in reached) and any("encoder.layer" in k for k in reached), reached


# ---------------------------------------------------------------------------------------------- (2) it reads μ_sem
def test_the_warm_up_makes_a_frozen_random_encoders_mu_sem_readable_and_stops_when_it_passes(
        colours: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A random-init encoder, frozen: before the warm-up the decoder ignores μ_sem (probe gap ≈ 0 on the held-out
    pairs); the warm-up raises it past 1 nat within its budget of 150 updates and stops at the first probe that
    passes (every earlier probe below the threshold), its updates a multiple of monitor_every; the record is in the
    stats and on every row of train_steps; the run's single update follows. Run again with no threshold, the warm-up
    spends its whole budget: stopping early was the threshold's doing."""
    from models.training.train import train

    o = VmsstObjective(batch_size=16, kl_anneal_steps=300, monitor_every=5, warmup_decoder_steps=150,
                       warmup_decoder_lr=3e-3, warmup_probe_gap=1.0, warmup_probe_pairs=16)
    settings = _settings(o, steps=1, lr=2e-5)
    with caplog.at_level(logging.INFO, logger="polysent.models.vmsst.probe"):
        res = train(settings, {"bitext_pairs": colours["bitext_pairs"]}, tmp_path / "run",
                    tokenizer_dir=colours["tokenizer"], progress=False)
    probes = [(int(m[1]), float(m[2])) for r in caplog.records
              if (m := re.search(r"warm-up update (\d+): probe gap (-?[\d.]+)", r.getMessage()))]
    record = res.stats["warmup"]["vmsst"]
    assert record["passed"] is True and 0 < record["updates"] < 150 and record["updates"] % 5 == 0
    assert [u for u, _ in probes] == list(range(0, record["updates"] + 1, 5))
    assert abs(probes[0][1]) < 0.1 and abs(record["probe_gap_start"] - probes[0][1]) < 1e-3
    assert record["probe_gap"] >= 1.0 and all(g < 1.0 for _, g in probes[:-1]), probes
    t = pq.read_table(tmp_path / "run" / res.tables["train_steps"]).to_pydict()
    assert t["step"] == [1] and t["warmup_updates"] == [record["updates"]]
    assert t["warmup_probe_gap"] == [pytest.approx(record["probe_gap"])]
    assert t["warmup_probe_gap_start"] == [pytest.approx(record["probe_gap_start"])]

    budget = dataclasses.replace(o, warmup_decoder_steps=record["updates"] + 5, warmup_probe_gap=None)
    res = train(_settings(budget, steps=1, lr=2e-5), {"bitext_pairs": colours["bitext_pairs"]},
                tmp_path / "budget", tokenizer_dir=colours["tokenizer"], progress=False)
    assert res.stats["warmup"]["vmsst"]["updates"] == record["updates"] + 5
    assert res.stats["warmup"]["vmsst"]["passed"] is False


def test_a_resumed_run_does_not_warm_up_again(sample: dict[str, Path], tmp_path: Path) -> None:
    """The warm-up belongs to a fresh run: resumed from a checkpoint after it, the run repeats the losses of the
    uninterrupted run and keeps its warm-up record (checkpointed with the run)."""
    from models.training.train import train

    o = VmsstObjective(batch_size=8, kl_anneal_steps=10, monitor_every=2, warmup_decoder_steps=2,
                       warmup_probe_gap=None, warmup_probe_pairs=8)
    full = _settings(o, steps=3, checkpoint_every=2)
    tables = {"bitext_pairs": sample["bitext_pairs"]}
    res = train(full, tables, tmp_path / "full", tokenizer_dir=sample["tokenizer"], progress=False, resume=False)
    ref = pq.read_table(tmp_path / "full" / "train_steps.parquet").to_pydict()
    ckpt = tmp_path / "full" / "checkpoints"
    assert sorted(p.name for p in ckpt.iterdir()) == ["step-00000000", "step-00000002"]  # keep_checkpoints 2
    shutil.rmtree(ckpt / "step-00000000")
    shutil.copytree(ckpt, tmp_path / "ckpt")
    resumed = train(full, tables, tmp_path / "resumed", tokenizer_dir=sample["tokenizer"], progress=False,
                    checkpoint_dir=tmp_path / "ckpt")
    t = pq.read_table(tmp_path / "resumed" / "train_steps.parquet").to_pydict()
    assert t["loss"] == ref["loss"] and t["warmup_updates"] == [2.0] * 3
    assert resumed.stats["warmup"] == res.stats["warmup"] and resumed.stats["resumed_from"] == 2


def test_a_run_stopped_after_its_warm_up_keeps_it(sample: dict[str, Path], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """With checkpoints on, the warm-up is followed by a checkpoint at step 0 (the first one due comes only after
    ``checkpoint_every`` updates, 15 of a 60-step CPU row, after a 6–15 min warm-up): a run stopped there resumes
    at step 0 without warming up again, its warm-up record kept, and repeats the uninterrupted run's losses."""
    import models.training.train as training

    o = VmsstObjective(batch_size=8, kl_anneal_steps=10, monitor_every=2, warmup_decoder_steps=2,
                       warmup_probe_gap=None, warmup_probe_pairs=8)
    full = _settings(o, steps=3, checkpoint_every=2, keep_checkpoints=3)
    tables = {"bitext_pairs": sample["bitext_pairs"]}
    res = training.train(full, tables, tmp_path / "full", tokenizer_dir=sample["tokenizer"], progress=False,
                         resume=False)
    ref = pq.read_table(tmp_path / "full" / "train_steps.parquet").to_pydict()
    assert not res.stats["resumed"]
    shutil.copytree(tmp_path / "full" / "checkpoints" / "step-00000000", tmp_path / "ckpt" / "step-00000000")

    def no_second_warm_up(run: object) -> None:
        raise AssertionError("the warm-up ran again")

    monkeypatch.setattr(training, "warm_up", no_second_warm_up)
    resumed = training.train(full, tables, tmp_path / "resumed", tokenizer_dir=sample["tokenizer"], progress=False,
                             checkpoint_dir=tmp_path / "ckpt")
    t = pq.read_table(tmp_path / "resumed" / "train_steps.parquet").to_pydict()
    assert t["loss"] == ref["loss"] and t["warmup_updates"] == [2.0] * 3
    assert resumed.stats["warmup"] == res.stats["warmup"]  # seconds included: the record of the first run
    assert resumed.stats["resumed"] and resumed.stats["resumed_from"] == 0
    # without checkpoints no step-0 checkpoint is written
    monkeypatch.undo()
    training.train(_settings(o, steps=3), tables, tmp_path / "plain", tokenizer_dir=sample["tokenizer"],
                   progress=False, resume=False)
    assert not (tmp_path / "plain" / "checkpoints").exists()


# ---------------------------------------------------------------------------------------------- (3) defaults
# train_steps losses of steps 1 and 2 of _settings(VmsstObjective(variant, batch_size=8, kl_anneal_steps=10,
# monitor_every=2), steps=2) on the sample, computed by the code before the warm-up existed
BEFORE = {("vmsst", "shared"): (426.5282287597656, 285.4976501464844),
          ("bitranslation", "shared"): (388.23260498046875, 255.55186462402344),
          ("vmsst_contrastive", "shared"): (2.2282140254974365, 2.1446006298065186),
          ("vmsst", "separate"): (427.241943359375, 281.753662109375)}
COLUMNS = {"vmsst": 20, "bitranslation": 11, "vmsst_contrastive": 22}


@pytest.mark.parametrize(("variant", "decoder"), sorted(BEFORE))
def test_defaults_train_as_before_the_warm_up_existed(sample: dict[str, Path], tmp_path: Path, variant: str,
                                                      decoder: str) -> None:
    from models.training.train import train

    o = VmsstObjective(variant=variant, translation_decoder=decoder, batch_size=8, kl_anneal_steps=10,
                       monitor_every=2)
    res = train(_settings(o, steps=2), {"bitext_pairs": sample["bitext_pairs"]}, tmp_path / "run",
                tokenizer_dir=sample["tokenizer"], progress=False)
    t = pq.read_table(tmp_path / "run" / res.tables["train_steps"]).to_pydict()
    assert t["loss"] == pytest.approx(BEFORE[variant, decoder], rel=1e-5)
    assert len(t) == COLUMNS[variant] and not any(k.startswith("warmup") for k in t)
    assert "warmup" not in res.stats


def test_the_warm_up_settings_stay_out_of_the_cache_key_at_their_defaults() -> None:
    o = VmsstObjective(batch_size=16, decoder_vocab_size="corpus", monitor_every=10)
    plain = key_view(to_mapping(_settings(o)))
    names = ("warmup_decoder_steps", "warmup_decoder_lr", "warmup_probe_gap", "warmup_probe_pairs")
    assert set(names) <= {f.name for f in dataclasses.fields(VmsstObjective)}
    assert set(VmsstObjective.KEY_WHEN_SET) == set(names)
    assert not set(names) & set(plain["objectives"][0])
    explicit = dataclasses.replace(o, warmup_decoder_steps=0, warmup_decoder_lr=1e-3, warmup_probe_gap=1.0,
                                   warmup_probe_pairs=256)
    assert key_view(to_mapping(_settings(explicit))) == plain
    warm = key_view(to_mapping(_settings(dataclasses.replace(o, warmup_decoder_steps=200))))
    assert warm["objectives"][0]["warmup_decoder_steps"] == 200 and warm != plain


# ---------------------------------------------------------------------------------------------- refusals
def test_what_cannot_warm_up_is_refused_before_training(sample: dict[str, Path], colours: dict[str, Path],
                                                        tmp_path: Path) -> None:
    from models.training.train import train

    with pytest.raises(ValueError, match="variant contrastive has none"):
        train(_settings(VmsstObjective(variant="contrastive", batch_size=8, warmup_decoder_steps=5)),
              {"bitext_pairs": sample["bitext_pairs"]}, tmp_path / "a", tokenizer_dir=sample["tokenizer"],
              progress=False)
    with pytest.raises(ValueError, match=r"has 64 pairs of 64 meanings; lower warmup_probe_pairs"):
        train(_settings(VmsstObjective(batch_size=16, warmup_decoder_steps=5, warmup_probe_pairs=60)),
              {"bitext_pairs": colours["bitext_pairs"]}, tmp_path / "b", tokenizer_dir=colours["tokenizer"],
              progress=False)
    assert not (tmp_path / "a" / "model").exists() and not (tmp_path / "b" / "model").exists()
