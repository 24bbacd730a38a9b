"""The α sweep of weight-space interpolation (``experiments/interpolation_sweep.py``) at a tiny scale: a small encoder
and a fine-tune of it, interpolated at three α and scored on a kit's decision sets built from the embedded sample
(Tatoeba deu/fra, STS17-style tracks) through the evaluation suite; the rule that chooses α; the command line."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from conftest import SAMPLE
from tiny_start import TINY, bitext_and_start

from experiments.interpolation_sweep import SweepRow, check_alphas, choose, run_sweep, score_model
from experiments.kits import SCORING_SETS
from models.settings import TrainSettings

FIGURES = ("tatoeba_mean", "sts17_mono", "sts17_cross")


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A kit root whose ``me5_replication`` kit has decision sets from the sample, a start and its fine-tune."""
    from models.objectives.contrastive import ContrastiveObjective
    from models.training.train import train
    from pipelines.eval_sets import EvalSetsSettings, EvalSources, build_eval_sets

    root = tmp_path_factory.mktemp("sweep")
    kit = root / "kits" / "me5_replication"
    (kit / "decision").mkdir(parents=True)
    res = build_eval_sets(EvalSetsSettings(), EvalSources(tatoeba=SAMPLE / "eval" / "tatoeba",
                                                          sts=SAMPLE / "eval" / "sts"), kit / "decision")
    (kit / "manifest.json").write_text(json.dumps({"tables": {"decision": {
        k: f"decision/{v}" for k, v in res.tables.items()}}, "scoring_sets": SCORING_SETS["me5_replication"]}))
    bitext_and_start(root)
    settings = TrainSettings(objectives=(ContrastiveObjective(data="bitext_pairs", batch_size=16),),
                             encoder=dataclasses.replace(TINY, pretrained=str(root / "start")), steps=8, lr=5e-3,
                             warmup_steps=0, seed=1, device="cpu")
    train(settings, {"bitext_pairs": root / "bitext_pairs"}, root / "ft", progress=False)
    return {"kits": root / "kits", "start": root / "start", "finetuned": root / "ft" / "model", "root": root}


def test_each_alpha_is_scored_on_the_decision_sets(setup: dict[str, Path], tmp_path: Path) -> None:
    from experiments import kits

    s = run_sweep(setup["finetuned"], str(setup["start"]), [1, 0, 0.5], tmp_path / "out", kit_root=setup["kits"],
                  figure_names=FIGURES, device="cpu", batch_size=32, progress=False)
    assert [r.alpha for r in s.rows] == [0.0, 0.5, 1.0]
    tables = kits.tables("me5_replication", "decision", setup["kits"])
    # α = 0 scores as the start itself, α = 1 as the fine-tuned model: the sweep scores what it interpolated
    for alpha, folder in ((0.0, setup["start"]), (1.0, setup["finetuned"])):
        direct = score_model(folder, tables, FIGURES, tmp_path / f"direct-{alpha}", "d", kits.TRAINED_TATOEBA, "cpu",
                             32, False)
        row = next(r for r in s.rows if r.alpha == alpha)
        assert set(FIGURES) <= set(row.figures)
        for f in FIGURES:
            assert row.figures[f] == pytest.approx(direct[f], abs=1e-3), (alpha, f)
    assert s.rows[0].figures != s.rows[2].figures, "the fine-tune changed the scores"
    written = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert written["chosen"] == s.chosen and len(written["rows"]) == 3
    assert f"Chosen α = {s.chosen:g}" in (tmp_path / "out" / "sweep.md").read_text()
    best = max(s.rows, key=lambda r: (sum(r.figures[f] for f in FIGURES) / 3, -r.alpha))
    assert s.chosen == best.alpha
    assert not list((tmp_path / "out").glob("alpha-*")), "interpolated folders removed once scored"


def test_the_rule_keeps_the_start_quality_and_prefers_the_smaller_alpha() -> None:
    rows = [SweepRow(0.0, {"cross": 60.0, "mono": 80.0, "xsim_error": 10.0}, 1),
            SweepRow(0.5, {"cross": 70.0, "mono": 80.5, "xsim_error": 8.0}, 1),
            SweepRow(1.0, {"cross": 75.0, "mono": 77.0, "xsim_error": 6.0}, 1)]
    assert choose(rows, ["cross"], [], 0.0)[0] == 1.0
    chosen, rule = choose(rows, ["cross"], ["mono"], 0.0)
    assert chosen == 0.5 and not rows[2].eligible and "within 0 point(s) of the start's" in rule
    assert choose(rows, ["cross"], ["mono"], 3.5)[0] == 1.0  # a 3-point loss tolerated
    # a lower-is-better figure counts negated: xSIM error 6 beats 10
    assert choose(rows, ["xsim_error"], [], 0.0)[0] == 1.0
    assert choose(rows, ["xsim_error"], ["xsim_error"], 0.0)[0] == 1.0  # keeping an error rate: not above the start
    tied = [SweepRow(0.25, {"a": 1.0}, 1), SweepRow(0.75, {"a": 1.0}, 1)]
    assert choose(tied, ["a"], [], 0.0)[0] == 0.25
    with pytest.raises(ValueError, match="no figure stsb_cross on these sets"):
        choose(rows, ["stsb_cross"], [], 0.0)
    with pytest.raises(ValueError, match="needs α = 0"):
        choose(rows[1:], ["cross"], ["mono"], 0.0)


@pytest.mark.parametrize("bad", [[1.5], [], [-0.5, 0.5]])
def test_alphas_outside_zero_one_are_refused(bad: list[float]) -> None:
    with pytest.raises(ValueError, match=r"--alphas: .*\[0, 1\]"):
        check_alphas(bad)


def test_command_line(setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from experiments.cli import main

    out = tmp_path / "cli"
    assert main(["interpolation-sweep", "--model", str(setup["finetuned"]), "--start", str(setup["start"]),
                 "--alphas", "0", "1", "--kit-root", str(setup["kits"]), "--figures", *FIGURES,
                 "--maximize", "tatoeba_mean", "--keep", "sts17_mono", "--tolerance", "100", "--device", "cpu",
                 "--keep-models", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| α | tatoeba_mean | sts17_mono | sts17_cross | score | eligible | s |" in printed
    assert "chosen α = " in printed and (out / "alpha-1" / "polysent_interpolation.json").is_file()
    assert main(["interpolation-sweep", "--out", str(tmp_path / "x")]) == 2
    assert "give --model DIR and --start MODEL, or --run RUN" in capsys.readouterr().err
