"""A row cut short goes on where it was (``experiments.row_progress``): its run folder keeps the checkpoints of the
same row only; the runner trains with checkpoints on the CPU and resumes from them; a training kept before a stop
in scoring is scored again, not trained again. The trainer's own resume (the loss sequence of the uninterrupted run)
is tested in tests/test_training.py and tests/test_vmsst_warmup.py."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import polars as pl
import pytest
from stand_in_kit import stand_in_kit

from experiments import kits, row_progress
from experiments.ledger import read_rows
from experiments.question import load_question

# the tiny question of every test here: its name, model, seed and scale (each test adds its title, sets, conditions)
SETUP = """\
name: q
kit: me5_replication
start: null
encoder: {hidden_size: 32, num_layers: 1, num_heads: 2, intermediate_size: 64, max_length: 16}
seeds: [13]
scales:
  - {scale: 1, steps: 12, runs_on: cpu, cpu_seconds: 60}
"""
QUESTION = SETUP + """\
title: "a row cut short"
evaluation:
  report: [tatoeba_mean]
conditions:
  - {name: "pairs", objectives: [{kind: contrastive, batch_size: 8}]}
"""


def _checkpoint(root: Path, step: int, *, complete: bool = True) -> Path:
    folder = root / f"step-{step:08d}"
    folder.mkdir(parents=True)
    (folder / "state.pt").write_bytes(b"state")
    if complete:
        (folder / "config.json").write_text("{}", encoding="utf-8")
    return folder


def test_a_stopped_rows_folder_keeps_its_checkpoints_and_nothing_else(tmp_path: Path) -> None:
    folder, marker = tmp_path / "pairs~s13~x1", {"training_key": "k1", "device": "cpu"}
    assert row_progress.prepare(folder, marker) is None
    assert json.loads((folder / "progress.json").read_text(encoding="utf-8")) == marker
    ckpts = folder / "train" / "checkpoints"
    _checkpoint(ckpts, 3)
    _checkpoint(ckpts, 6)
    (ckpts / ".tmp-step-00000009").mkdir()  # a checkpoint half written when the stop came
    (folder / "train" / "model").mkdir()
    (folder / "train" / "model" / "weights").write_bytes(b"w")
    (folder / "decision").mkdir()
    (folder / "decision" / "scores.json").write_text("{}", encoding="utf-8")

    assert row_progress.prepare(folder, marker) == 6
    left = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
    assert left == ["progress.json", "train", "train/checkpoints",
                    "train/checkpoints/step-00000003", "train/checkpoints/step-00000003/config.json",
                    "train/checkpoints/step-00000003/state.pt",
                    "train/checkpoints/step-00000006", "train/checkpoints/step-00000006/config.json",
                    "train/checkpoints/step-00000006/state.pt"]

    # another training key (the question or the kit changed) or another device: afresh
    for other in ({"training_key": "k2", "device": "cpu"}, {"training_key": "k1", "device": "cuda"}):
        _checkpoint(folder / "train" / "checkpoints", 9)
        assert row_progress.prepare(folder, other) is None
        assert [p.name for p in folder.iterdir()] == ["progress.json"]
        assert json.loads((folder / "progress.json").read_text(encoding="utf-8")) == other
        marker = other
    # no complete checkpoint (state.pt without config.json): afresh
    _checkpoint(folder / "train" / "checkpoints", 3, complete=False)
    assert row_progress.prepare(folder, marker) is None
    assert [p.name for p in folder.iterdir()] == ["progress.json"]


def test_rows_checkpoint_a_quarter_of_their_steps_on_the_cpu_only() -> None:
    assert row_progress.checkpoint_every(60, "cpu") == 15
    assert row_progress.checkpoint_every(300, "cpu") == 75
    assert row_progress.checkpoint_every(60, "cuda") == 0
    assert row_progress.checkpoint_every(row_progress.MIN_STEPS - 1, "cpu") == 0


def test_the_runner_resumes_a_stopped_training_and_scores_a_kept_one_again(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Three runs of one row: stopped in training after its checkpoint at step 3; resumed (the trainer finds the
    checkpoint, nothing else of the first run) and stopped in scoring; then scored without training again. The row
    records where it resumed; a stand-in trainer stands for the real one."""
    import models.training.train as training
    from experiments import runner

    stand_in_kit(tmp_path / "kits", {"bitext_pairs": "bitext/bitext_pairs.parquet"})
    monkeypatch.setattr(kits, "KITS", tmp_path / "kits")
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "question.yaml").write_text(QUESTION, encoding="utf-8")
    q = load_question(tmp_path / "q" / "question.yaml")
    calls: list[dict[str, Any]] = []

    class Stop(Exception):
        pass

    def train(settings: Any, tables: dict[str, Path], out: Path, **kw: Any) -> SimpleNamespace:
        ckpts = out / "checkpoints"
        calls.append({"every": settings.checkpoint_every, "keep": settings.keep_checkpoints,
                      "found": sorted(p.name for p in ckpts.iterdir()) if ckpts.is_dir() else [],
                      "other": sorted(p.name for p in out.iterdir() if p.name != "checkpoints")
                      if out.is_dir() else []})
        if len(calls) == 1:  # the first run: a checkpoint at step 3, a model half exported, then the stop
            _checkpoint(ckpts, 3)
            (out / "model").mkdir()
            raise Stop
        (out / "model").mkdir()
        pl.DataFrame({"step": list(range(1, 13)), "loss": [1.0] * 12}).write_parquet(out / "train_steps.parquet")
        return SimpleNamespace(stats={"precision": "fp32", "device": "cpu", "final_loss": 1.0, "resumed_from": 3,
                                      "resumed": True},
                               tables={"train_steps": "train_steps.parquet"})

    scored: list[Path] = []

    def score_report_and_full(q: Any, model: Path, *a: Any, **k: Any) -> tuple[dict, dict, float]:
        scored.append(model)
        if len(scored) == 1:
            raise Stop
        return {"tatoeba_mean": 50.0}, {}, 1.0

    monkeypatch.setattr(training, "train", train)
    monkeypatch.setattr(runner, "score_report_and_full", score_report_and_full)
    monkeypatch.setattr(runner, "score", lambda *a, **k: ({}, 0.0))
    run = dict(runs=tmp_path / "runs", results=tmp_path / "results", device="cpu")
    pairs = q.condition("pairs")
    with pytest.raises(Stop):
        runner.run_row(q, pairs, 13, 1, **run)
    assert calls[0] == {"every": 3, "keep": 1, "found": [], "other": []}
    with pytest.raises(Stop):
        runner.run_row(q, pairs, 13, 1, **run)
    assert calls[1] == {"every": 3, "keep": 1, "found": ["step-00000003"], "other": []}
    row = runner.run_row(q, pairs, 13, 1, **run)
    assert len(calls) == 2  # the third run trained nothing: the kept training was scored again
    assert len(scored) == 2 and scored[1].parent.parent.parent.name == "trained"  # the kept copy, scored again
    assert row["resumed_from_step"] == 3 and "training_from" not in row and row["metrics"]["tatoeba_mean"] == 50.0
    assert [r["condition"] for r in read_rows(tmp_path / "results")] == ["pairs"]
    trained = tmp_path / "runs" / "q" / "trained"  # released once no pending row needs it
    assert not trained.exists() or not any(trained.iterdir())
    assert not (tmp_path / "runs" / "q" / "pairs~s13~x1").exists()


def test_a_row_resumed_from_a_checkpoint_stays_out_of_the_training_rate(tmp_path: Path) -> None:
    """Its train_seconds count only the steps after the stop (at step 0, all but its pre-phase: VMSST's decoder
    warm-up); a row whose whole training was kept counts."""
    from experiments.plan import estimate

    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "question.yaml").write_text(QUESTION, encoding="utf-8")
    q = load_question(tmp_path / "q" / "question.yaml")
    row = {"question": "q", "condition": "pairs", "scale": 1, "device": "cpu", "steps": 12, "metrics": {},
           "eval_seconds": 10.0}
    whole = {**row, "seed": 13, "train_seconds": 120.0}
    resumed = {**row, "seed": 14, "train_seconds": 30.0, "resumed_from_step": 9}
    rescored = {**row, "seed": 15, "train_seconds": 120.0, "resumed_from_step": 12}
    assert estimate(q, [whole, resumed], "pairs", 1, "cpu") == pytest.approx(130.0)
    assert estimate(q, [whole, resumed, rescored], "pairs", 1, "cpu") == pytest.approx(130.0)
    assert estimate(q, [resumed], "pairs", 1, "cpu") == pytest.approx(10.0)  # no training rate known
    after_warm_up = {**row, "seed": 16, "train_seconds": 60.0, "resumed_from_step": 0}
    assert estimate(q, [whole, after_warm_up], "pairs", 1, "cpu") == pytest.approx(130.0)


def test_a_checkpoint_the_trainer_refuses_is_dropped_and_the_row_trains_afresh(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Same row, same tables, but a checkpoint written under settings the trainer now sees otherwise: the trainer's
    ResumeError would otherwise stop the row at every run; the runner drops the checkpoint and trains afresh."""
    import models.training.train as training
    from experiments import runner
    from models.training.checkpoints import ResumeError

    stand_in_kit(tmp_path / "kits", {"bitext_pairs": "bitext/bitext_pairs.parquet"})
    monkeypatch.setattr(kits, "KITS", tmp_path / "kits")
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "question.yaml").write_text(QUESTION, encoding="utf-8")
    q = load_question(tmp_path / "q" / "question.yaml")
    found: list[list[str]] = []

    class Stop(Exception):
        pass

    def train(settings: Any, tables: dict[str, Path], out: Path, **kw: Any) -> SimpleNamespace:
        ckpts = out / "checkpoints"
        found.append(sorted(p.name for p in ckpts.iterdir()) if ckpts.is_dir() else [])
        if len(found) == 1:
            _checkpoint(ckpts, 6)
            raise Stop
        if found[-1]:
            raise ResumeError(f"{ckpts}: written by a different configuration, refusing to resume")
        (out / "model").mkdir(parents=True)
        pl.DataFrame({"step": [12], "loss": [1.0]}).write_parquet(out / "train_steps.parquet")
        return SimpleNamespace(stats={"precision": "fp32", "device": "cpu", "final_loss": 1.0, "resumed_from": 0,
                                      "resumed": False},
                               tables={"train_steps": "train_steps.parquet"})

    monkeypatch.setattr(training, "train", train)
    monkeypatch.setattr(runner, "score_report_and_full", lambda *a, **k: ({"tatoeba_mean": 40.0}, {}, 1.0))
    monkeypatch.setattr(runner, "score", lambda *a, **k: ({}, 0.0))
    run = dict(runs=tmp_path / "runs", results=tmp_path / "results", device="cpu")
    with pytest.raises(Stop):
        runner.run_row(q, q.condition("pairs"), 13, 1, **run)
    row = runner.run_row(q, q.condition("pairs"), 13, 1, **run)
    assert found == [[], ["step-00000006"], []]
    assert "resumed_from_step" not in row and row["metrics"]["tatoeba_mean"] == 40.0


DECISION = SETUP + """\
title: "a search whose winner is scored on the full sets from the weights the decision read"
evaluation:
  report: [tatoeba_mean]
  decision: [stsb_mono]
  final: [tatoeba_mean]
conditions:
  - {name: "incumbent", objectives: [{kind: contrastive, batch_size: 8}], final: true}
  - {name: "winner", objectives: [{kind: contrastive, batch_size: 4}], decision_only: true%s}
  - {name: "loser", objectives: [{kind: contrastive, batch_size: 2}], decision_only: true}
decision:
  setting: "contrastive: batch size"
  incumbent: "incumbent"
  candidates: ["winner", "loser"]
  figures: [decision.stsb_mono]
  keep_trainings: true
"""


def test_a_decisions_candidates_keep_their_trainings_for_the_final_table(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """``decision.keep_trainings``: the candidates' trainings stay after their rows (the incumbent's, scored on the
    full sets already, does not); the winner, marked ``final: true`` after the decision, is scored on the full sets
    from its kept training without training again, and its training goes once that row is in; ``release`` then
    removes what no pending row reads (the loser's)."""
    import models.training.train as training
    from experiments import runner, shared_training
    from experiments.plan import plan

    stand_in_kit(tmp_path / "kits", {"bitext_pairs": "bitext/bitext_pairs.parquet"})
    monkeypatch.setattr(kits, "KITS", tmp_path / "kits")
    (tmp_path / "q").mkdir()
    yaml = tmp_path / "q" / "question.yaml"
    yaml.write_text(DECISION % "", encoding="utf-8")
    q = load_question(yaml)
    trained: list[int] = []

    def train(settings: Any, tables: dict[str, Path], out: Path, **kw: Any) -> SimpleNamespace:
        trained.append(settings.objectives[0].batch_size)
        (out / "model").mkdir(parents=True)
        (out / "model" / "weights").write_text(str(settings.objectives[0].batch_size), encoding="utf-8")
        pl.DataFrame({"step": [12], "loss": [1.0]}).write_parquet(out / "train_steps.parquet")
        return SimpleNamespace(stats={"precision": "fp32", "device": "cpu", "final_loss": 1.0, "resumed_from": 0,
                                      "resumed": False}, tables={"train_steps": "train_steps.parquet"})

    def weights(model: Path) -> int:
        return int((Path(model) / "weights").read_text(encoding="utf-8"))

    full: list[int] = []

    def score_report_and_full(q: Any, model: Path, report: Any, final: Any, *a: Any, **k: Any) -> tuple:
        if final:
            full.append(weights(model))
        return ({"tatoeba_mean": 50.0} if report else {}), ({"tatoeba_mean": 51.0} if final else {}), 1.0

    monkeypatch.setattr(training, "train", train)
    monkeypatch.setattr(runner, "score_report_and_full", score_report_and_full)
    monkeypatch.setattr(runner, "score", lambda q, model, *a, **k: ({"stsb_mono": float(weights(model))}, 0.0))
    runs = tmp_path / "runs"
    run = dict(runs=runs, results=tmp_path / "results", device="cpu")
    for name in ("incumbent", "winner", "loser"):
        runner.run_row(q, q.condition(name), 13, 1, **run)
    assert trained == [8, 4, 2]
    kept = {shared_training.load_kept(f)["row"] for f in shared_training.kept_trainings(runs, q)}
    assert kept == {"winner seed 13 ×1", "loser seed 13 ×1"}  # the incumbent's row is final already

    # the decision made: the winner is scored on the full sets; its row is stale and only scores again
    yaml.write_text(DECISION % ", final: true", encoding="utf-8")
    q = load_question(yaml)
    monkeypatch.setattr(q.__class__, "results", property(lambda self: tmp_path / "results"))
    assert [p.key.condition for p in plan(q, against_kit=False)
            if p.state != "done" and p.key.condition != "start"] == ["winner"]
    row = runner.run_row(q, q.condition("winner"), 13, 1, **run)
    assert trained == [8, 4, 2] and full == [8, 4]  # the winner's weights, not trained again
    assert row["metrics"]["final.tatoeba_mean"] == 51.0 and row["metrics"]["decision.stsb_mono"] == 4.0
    assert row["resumed_from_step"] == 12
    kept = {shared_training.load_kept(f)["row"] for f in shared_training.kept_trainings(runs, q)}
    assert kept == {"loser seed 13 ×1"}
    removed, still = shared_training.release_unneeded(runs, q, [], {}, dry_run=True)
    assert [shared_training.load_kept(f)["row"] for f in removed] == ["loser seed 13 ×1"] and not still
    assert shared_training.kept_trainings(runs, q) == removed  # a dry run removes nothing
    loser = q.condition("loser")
    removed, still = shared_training.release_unneeded(runs, q, [(loser, 13, 1)], kits.load_manifest(
        "me5_replication")["hashes"]["train"])
    assert not removed and len(still) == 1  # a pending row of the loser would read it
    removed, _ = shared_training.release_unneeded(runs, q, [], {})
    assert len(removed) == 1 and shared_training.kept_trainings(runs, q) == []
