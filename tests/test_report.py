"""The report stage and ``polysent report --compare`` on purpose-built ``eval_results`` tables.

Expected numbers are written out by hand from the tables below (means computed on paper), not by the report code.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from conftest import REPO

from pipelines.report import STAGE_VERSION, ReportSettings, TrainedRun, build_report, plots
from pipelines.report.compare import UnknownRunError, compare_runs, latest_per_run, write_comparison
from pipelines.report.corpora import corpora_section
from pipelines.report.document import render_markdown
from pipelines.report.results import EVAL_RESULTS_SCHEMA, read_results

needs_mpl = pytest.mark.skipif(not plots.available(), reason="matplotlib is not installed")


def _frame(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=EVAL_RESULTS_SCHEMA, orient="row")


def _rows_a() -> list[tuple]:
    r, m = "mpcl", "key-mpcl-0123456789"
    return [
        (r, m, "tatoeba", "canonical", "deu", "deu-eng", "accuracy_xx_en", 96.0, 1000),
        (r, m, "tatoeba", "canonical", "deu", "deu-eng", "accuracy_en_xx", 95.0, 1000),
        (r, m, "tatoeba", "canonical", "deu", "deu-eng", "accuracy_mean", 95.5, 1000),
        (r, m, "tatoeba", "canonical", "jav", "jav-eng", "accuracy_mean", 40.25, 205),
        (r, m, "tatoeba", "canonical", "xnli14", "14 languages", "accuracy_mean", 88.125, 13000),
        (r, m, "tatoeba", "canonical", "xtreme36", "36 languages", "accuracy_mean", 80.5, 30000),
        (r, m, "tatoeba", "canonical", "all", "36 languages", "accuracy_mean", 80.5, 30000),
        (r, m, "tatoeba", "xtreme", "deu", "deu-eng", "accuracy_en_xx", 95.0, 1000),
        (r, m, "bucc", "oracle", "zh-en", "zh-en", "f1", 71.2, 257),
        (r, m, "bucc", "oracle", "zh-en", "zh-en", "threshold", 1.0625, 257),
        (r, m, "bucc", "held_out", "zh-en", "zh-en", "f1", 65.4, 1899),
        (r, m, "sts", "canonical", "track5.en-en", "en-en", "spearman", 81.3, 250),
        (r, m, "sts", "canonical", "track2.ar-en", "ar-en", "spearman", 44.0, 250),
        (r, m, "clustering", "ease", "de", "de", "hungarian_accuracy", 37.5, 500),
        (r, m, "clustering", "ease", "ja", "ja", "hungarian_accuracy", 41.0, 500),
        (r, m, "xsim", "laser", "deu", "deu-eng", "error_rate", 2.0, 1012),
        (r, m, "xsim", "laser", "fra", "fra-eng", "error_rate", 5.0, 1012),
        (r, m, "geometry", "canonical", "deu-eng", "deu-eng", "alignment", 0.25, 1000),
        (r, m, "geometry", "canonical", "deu-eng", "deu-eng", "uniformity", -2.5, 2000),
        (r, m, "geometry", "canonical", "fra-eng", "fra-eng", "alignment", 0.35, 1000),
        (r, m, "geometry", "canonical", "fra-eng", "fra-eng", "uniformity", -2.0, 2000),
    ]


def _rows_b() -> list[tuple]:
    r, m = "simcse", "key-simcse-9876543210"
    return [
        (r, m, "tatoeba", "canonical", "deu", "deu-eng", "accuracy_xx_en", 90.0, 1000),
        (r, m, "tatoeba", "canonical", "deu", "deu-eng", "accuracy_en_xx", 91.0, 1000),
        (r, m, "tatoeba", "canonical", "deu", "deu-eng", "accuracy_mean", 90.5, 1000),
        (r, m, "tatoeba", "canonical", "xnli14", "14 languages", "accuracy_mean", 85.0, 13000),
        (r, m, "bucc", "oracle", "zh-en", "zh-en", "f1", 60.0, 257),
        (r, m, "sts", "canonical", "track5.en-en", "en-en", "spearman", 84.3, 250),
        (r, m, "clustering", "ease", "de", "de", "hungarian_accuracy", 30.0, 500),
        (r, m, "xsim", "laser", "deu", "deu-eng", "error_rate", 4.0, 1012),
        (r, m, "xsim", "laser", "fra", "fra-eng", "error_rate", 9.0, 1012),
        (r, m, "xsim", "laser", "rus", "rus-eng", "error_rate", 11.0, 1012),
        (r, m, "geometry", "canonical", "deu-eng", "deu-eng", "alignment", 0.5, 1000),
        (r, m, "geometry", "canonical", "deu-eng", "deu-eng", "uniformity", -3.0, 2000),
    ]


@pytest.fixture(scope="module")
def evals(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("evals")
    paths = {"evaluate.mpcl": tmp / "a.parquet", "evaluate.simcse": tmp / "b.parquet"}
    _frame(_rows_a()).write_parquet(paths["evaluate.mpcl"])
    _frame(_rows_b()).write_parquet(paths["evaluate.simcse"])
    return paths


@pytest.fixture(scope="module")
def built(evals: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    result = build_report(ReportSettings(), {}, evals, "demo", out)
    assert result.tables == {"report_counts": "report_counts.parquet"} and result.stats["report"] == "report.md"
    return out


def test_package_keeps_the_stage_interface() -> None:
    assert STAGE_VERSION == "8"
    assert not (REPO / "pipelines" / "report.py").exists()


def test_markdown_has_headline_numbers_per_task_and_variant(built: Path) -> None:
    md = (built / "report.md").read_text("utf-8")
    expected = [
        # Tatoeba aggregates as evaluated (simcse has xnli14 only: no mean is computed beside an aggregate)
        "| tatoeba | canonical | xnli14 | 14 languages | accuracy_mean | 88.12 | 85.00 |",
        "| tatoeba | canonical | xtreme36 | 36 languages | accuracy_mean | 80.50 | – |",
        "| tatoeba | canonical | all | 36 languages | accuracy_mean | 80.50 | – |",
        "| tatoeba | xtreme | mean | mean over subsets | accuracy_en_xx | 95.00 | – |",  # no aggregate row: mean
        # BUCC: oracle and held-out F1, clearly separate rows
        "| bucc | oracle | zh-en | zh-en | f1 | 71.20 | 60.00 |",
        "| bucc | held_out | zh-en | zh-en | f1 | 65.40 | – |",
        "| sts | canonical | track5.en-en | en-en | spearman | 81.30 | 84.30 |",
        "| sts | canonical | track2.ar-en | ar-en | spearman | 44.00 | – |",
        "| clustering | ease | de | de | hungarian_accuracy | 37.50 | 30.00 |",
        "| clustering | ease | ja | ja | hungarian_accuracy | 41.00 | – |",
        # xSIM mean error: (2 + 5) / 2 and (4 + 9 + 11) / 3
        "| xsim | laser | mean | mean over subsets | error_rate | 3.50 | 8.00 |",
        # alignment (0.25 + 0.35) / 2, uniformity (−2.5 − 2.0) / 2; simcse has one pair
        "| geometry | canonical | mean | mean over subsets | alignment | 0.3000 | 0.5000 |",
        "| geometry | canonical | mean | mean over subsets | uniformity | -2.2500 | -3.0000 |",
        # per-task detail tables keep every metric (threshold raw)
        "| zh-en | zh-en | threshold | 1.0625 | – |",
        "| deu | deu-eng | accuracy_xx_en | 96.00 | 90.00 |",
    ]
    for line in expected:
        assert line + "\n" in md, line
    head = md[md.index("| task | variant | subset"):]
    head = head[:head.index("\n\n")].splitlines()
    assert head[0] == "| task | variant | subset | languages | metric | mpcl | simcse |"
    assert len(head) == 2 + 13  # exactly the headline rows above
    for variant in ("canonical", "xtreme", "oracle", "held_out", "ease", "laser"):
        assert f"**Variant `{variant}`** — " in md
    assert "| mpcl | key-mpcl-0123456789 | bucc, clustering, geometry, sts, tatoeba, xsim | 21 | – |" in md
    assert "threshold tuned and scored on the same split" in md and "applied to another split" in md


@needs_mpl
def test_plots_are_linked_and_html_is_self_contained(built: Path) -> None:
    md = (built / "report.md").read_text("utf-8")
    page = (built / "report.html").read_text("utf-8")
    files = sorted(p.name for p in (built / "plots").glob("*.svg"))
    assert files == sorted(["headline_by_run.svg", "tatoeba_canonical_accuracy_mean_per_subset.svg",
                            "tatoeba_xtreme_accuracy_en_xx_per_subset.svg", "sts_canonical_spearman_per_subset.svg",
                            "clustering_ease_hungarian_accuracy_per_subset.svg",
                            "xsim_laser_error_rate_per_subset.svg", "geometry_alignment_uniformity.svg"])
    assert sorted(re.findall(r"\]\(plots/([^)]+\.svg)\)", md)) == files
    assert page.count("<svg") == len(files) and page.count("</svg>") == len(files)
    low = page.lower()
    for bad in ("http", "src=", "<script", "<link", "@import", "<img"):
        assert bad not in low, bad
    assert not re.search(r"url\((?!#)", page)  # only in-page references (SVG clip paths)
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), "inline SVGs share ids"
    # the same sections as the Markdown, and the same numbers
    for title in re.findall(r"^#{2,3} (.+)$", md, flags=re.M):
        assert f">{title}</h" in page, title
    assert "<td>xnli14</td>" in page and '<td class="num">88.12</td>' in page


@needs_mpl
def test_svg_content_matches_data(built: Path) -> None:
    svg = (built / "plots" / "tatoeba_canonical_accuracy_mean_per_subset.svg").read_text("utf-8")
    assert svg.startswith("<?xml") and "<svg" in svg and ">deu<" in svg and ">jav<" in svg
    assert "xnli14" not in svg  # aggregates are not languages
    geo = (built / "plots" / "geometry_alignment_uniformity.svg").read_text("utf-8")
    # one labelled point per run × language pair: mpcl deu-eng, fra-eng; simcse deu-eng
    assert geo.count(">deu-eng<") == 2 and geo.count(">fra-eng<") == 1
    assert "<dc:date>" not in svg and "Matplotlib v" not in svg


@needs_mpl
def test_svg_is_byte_deterministic() -> None:
    frame = _frame(_rows_a()).filter(pl.col("metric") == "accuracy_mean")
    args = dict(category="subset", group="run", value="value", title="t", label="accuracy")
    first, second = plots.grouped_bars(frame, **args), plots.grouped_bars(frame, **args)
    assert first == second and "clip-path" in first  # without svg.hashsalt the clip ids are random per call
    import matplotlib

    with matplotlib.rc_context({"svg.hashsalt": None}):
        assert matplotlib.rcParams["svg.hashsalt"] is None
        assert plots.grouped_bars(frame, **args) == first  # the report sets its own salt whatever the caller's


@needs_mpl
def test_report_files_identical_across_builds_and_processes(evals: dict[str, Path], built: Path,
                                                            tmp_path: Path) -> None:
    again = tmp_path / "again"
    again.mkdir()
    build_report(ReportSettings(), {}, evals, "demo", again)
    code = ("import sys; from pathlib import Path; from pipelines.report import build_report, ReportSettings; "
            "build_report(ReportSettings(), {}, {'evaluate.mpcl': Path(sys.argv[1]), "
            "'evaluate.simcse': Path(sys.argv[2])}, 'demo', Path(sys.argv[3]))")
    child = tmp_path / "child"
    child.mkdir()
    proc = subprocess.run([sys.executable, "-c", code, str(evals["evaluate.mpcl"]), str(evals["evaluate.simcse"]),
                           str(child)], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={"PATH": "", "PYTHONHASHSEED": "12345"})
    assert proc.returncode == 0, proc.stderr

    def files(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    reference = files(built)
    assert {"report.md", "report.html", "report_counts.parquet"} <= set(reference)
    assert files(again) == reference
    assert files(child) == reference


def test_evaluation_order_does_not_change_the_report(evals: dict[str, Path], built: Path, tmp_path: Path) -> None:
    reversed_evals = dict(reversed(list(evals.items())))
    build_report(ReportSettings(), {}, reversed_evals, "demo", tmp_path)
    assert (tmp_path / "report.md").read_bytes() == (built / "report.md").read_bytes()


def test_without_plots_the_report_has_no_figures(evals: dict[str, Path], tmp_path: Path) -> None:
    build_report(ReportSettings(plots=False), {}, evals, "demo", tmp_path)
    assert not (tmp_path / "plots").exists()
    assert "<svg" not in (tmp_path / "report.html").read_text("utf-8")
    assert "| bucc | oracle | zh-en | zh-en | f1 | 71.20 | 60.00 |" in (tmp_path / "report.md").read_text("utf-8")


def test_legacy_tatoeba_rows_are_converted_to_points(tmp_path: Path) -> None:
    """The first evaluate_tatoeba node wrote fractions per direction; the report shows canonical points."""
    legacy = pl.DataFrame({
        "train_run": ["tiny"] * 4, "model_key": ["k"] * 4, "task": ["tatoeba"] * 4,
        "lang": ["deu", "deu", "rus", "rus"], "direction": ["xx->eng", "eng->xx"] * 2,
        "metric": ["accuracy"] * 4, "value": [0.5, 0.25, 0.125, 0.375], "n": [8, 8, 8, 8]})
    legacy.write_parquet(tmp_path / "eval_results.parquet")
    results = read_results([tmp_path / "eval_results.parquet"])
    got = {(r["subset"], r["metric"]): r["value"] for r in results.iter_rows(named=True)}
    assert got == {("deu", "accuracy_xx_en"): 50.0, ("deu", "accuracy_en_xx"): 25.0, ("deu", "accuracy_mean"): 37.5,
                   ("rus", "accuracy_xx_en"): 12.5, ("rus", "accuracy_en_xx"): 37.5, ("rus", "accuracy_mean"): 25.0}
    out = tmp_path / "out"
    out.mkdir()
    build_report(ReportSettings(plots=False), {}, {"evaluate_tatoeba.tiny": tmp_path / "eval_results.parquet"},
                 "tiny", out)
    md = (out / "report.md").read_text("utf-8")
    # headline: (37.5 + 25) / 2 over the two languages
    assert "| tatoeba | canonical | mean | mean over subsets | accuracy_mean | 31.25 |" in md
    assert "| tiny |" in md


def test_bad_eval_results_name_the_file_and_row(tmp_path: Path) -> None:
    bad = tmp_path / "missing.parquet"
    _frame(_rows_a()).drop("languages").write_parquet(bad)
    with pytest.raises(ValueError, match=r"missing\.parquet: not an eval_results table: missing columns "
                                         r"\['languages'\]"):
        read_results([bad])
    empty_run = tmp_path / "empty_run.parquet"
    rows = _rows_a()
    rows[2] = ("", *rows[2][1:])
    _frame(rows).write_parquet(empty_run)
    with pytest.raises(ValueError, match=r"empty_run\.parquet: row 3: empty `run`"):
        read_results([empty_run])
    wrong_type = tmp_path / "wrong_type.parquet"
    _frame(_rows_a()).with_columns(pl.lit("many").alias("n")).write_parquet(wrong_type)
    with pytest.raises(ValueError, match=r"wrong_type\.parquet: eval_results columns do not have the expected types"):
        read_results([wrong_type])
    a, a_again = tmp_path / "a.parquet", tmp_path / "a_again.parquet"
    _frame(_rows_a()).write_parquet(a)
    _frame(_rows_a()[:1]).write_parquet(a_again)
    with pytest.raises(ValueError, match=r"run 'mpcl' has 2 values for task='tatoeba'.*\(in .*a\.parquet, "
                                         r".*a_again\.parquet\)"):
        read_results([a, a_again])


def test_compare_runs_deltas_and_one_sided_rows() -> None:
    results = pl.concat([_frame(_rows_a()), _frame(_rows_b())])
    cmp = compare_runs(results, "mpcl", "simcse")
    assert cmp.columns == ["task", "variant", "subset", "languages", "metric", "value_a", "value_b", "delta"]
    keys_a = {r[2:7] for r in _rows_a()}
    keys_b = {r[2:7] for r in _rows_b()}
    assert cmp.height == len(keys_a | keys_b) == 22
    got = {tuple(r[:5]): r[5:] for r in cmp.iter_rows()}
    assert got[("tatoeba", "canonical", "xnli14", "14 languages", "accuracy_mean")] == (88.125, 85.0, -3.125)
    assert got[("sts", "canonical", "track5.en-en", "en-en", "spearman")] == pytest.approx((81.3, 84.3, 3.0))
    assert got[("geometry", "canonical", "deu-eng", "deu-eng", "uniformity")] == (-2.5, -3.0, -0.5)
    # one-sided rows are kept with a null on the missing side and a null delta
    assert got[("bucc", "held_out", "zh-en", "zh-en", "f1")] == (65.4, None, None)
    assert got[("xsim", "laser", "rus", "rus-eng", "error_rate")] == (None, 11.0, None)
    assert cmp.filter(pl.col("value_a").is_null()).height == len(keys_b - keys_a) == 1
    assert cmp.filter(pl.col("value_b").is_null()).height == len(keys_a - keys_b) == 10
    # swapping the runs negates every delta
    swapped = compare_runs(results, "simcse", "mpcl")
    back = {tuple(r[:5]): r[7] for r in swapped.iter_rows()}
    assert all(back[k] == (None if v[2] is None else -v[2]) for k, v in got.items())
    with pytest.raises(UnknownRunError, match=r"unknown run\(s\) 'nope'; known runs: mpcl, simcse"):
        compare_runs(results, "mpcl", "nope")


def test_latest_artifact_per_run_task_and_variant() -> None:
    import datetime as dt

    old = _frame(_rows_a()).with_columns(value=pl.col("value") - 50)
    new = _frame([r for r in _rows_a() if r[2] == "tatoeba"])  # the newer artifact only re-evaluated tatoeba
    t0 = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    frame = pl.concat([
        old.with_columns(source=pl.lit("/w/artifacts/evaluate/old/eval_results.parquet"), created_at=pl.lit(t0)),
        new.with_columns(source=pl.lit("/w/artifacts/evaluate/new/eval_results.parquet"),
                         created_at=pl.lit(t0 + dt.timedelta(hours=1)))])
    got = latest_per_run(frame)
    by_key = {r[2:7]: r[7] for r in got.iter_rows()}
    assert by_key[("tatoeba", "canonical", "deu", "deu-eng", "accuracy_mean")] == 95.5  # newest artifact
    assert by_key[("bucc", "oracle", "zh-en", "zh-en", "f1")] == pytest.approx(21.2)  # only in the old one
    assert got.height == len(_rows_a())


@needs_mpl
def test_write_comparison(tmp_path: Path) -> None:
    results = pl.concat([_frame(_rows_a()), _frame(_rows_b())])
    md, page = write_comparison(results, "mpcl", "simcse", tmp_path)
    assert (md.name, page.name) == ("compare_mpcl_vs_simcse.md", "compare_mpcl_vs_simcse.html")
    text = md.read_text("utf-8")
    assert "| task | variant | subset | languages | metric | mpcl | simcse | Δ (simcse − mpcl) | better |" in text
    assert "| xsim | laser | deu | deu-eng | error_rate | 2.00 | 4.00 | 2.00 | lower |" in text
    # headline means over the subsets both runs have: xSIM deu, fra (not simcse's rus); geometry deu-eng only
    head = text[text.index("## Headline numbers"):text.index("## Largest differences")]
    assert "| xsim | laser | mean | mean over subsets | error_rate | 3.50 | 6.50 | 3.00 | lower |" in head
    assert "| geometry | canonical | mean | mean over subsets | alignment | 0.2500 | 0.5000 | 0.2500 | lower |" in head
    assert "| bucc | oracle | zh-en | zh-en | f1 | 71.20 | 60.00 | -11.20 | higher |" in head
    assert "held_out" not in head and "xtreme36" not in head  # one-sided rows are listed under "Only in"
    assert "## Only in mpcl" in text and "## Only in simcse" in text
    assert "![" in text and (tmp_path / "plots" / "compare_mpcl_vs_simcse.svg").exists()
    html = page.read_text("utf-8")
    assert "<svg" in html and "http" not in html.lower()


def test_corpora_section_unchanged(tmp_path: Path) -> None:
    pl.DataFrame({"lang": ["de", "de", "fr"], "x": [1, 2, 3]}).write_parquet(tmp_path / "pairs.parquet")
    pl.DataFrame({"x": [1, 2]}).write_parquet(tmp_path / "tok.parquet")
    pl.DataFrame({"corpus": ["pairs", "pairs"], "eval_set": ["tatoeba", "tatoeba"], "units_removed": [2, 3]}) \
        .write_parquet(tmp_path / "leak.parquet")
    section, counts = corpora_section({"pairs": tmp_path / "pairs.parquet", "tok": tmp_path / "tok.parquet",
                                       "leakage@corpus:pairs": tmp_path / "leak.parquet"})
    assert counts.rows() == [("pairs", "de", 2), ("pairs", "fr", 1), ("tok", "all", 1 + 1)]
    assert render_markdown("t", [], [section]) == "\n".join([
        "# t", "", "## Corpora", "",
        "| table | all | de | fr |", "|---|---|---|---|", "| pairs | – | 2 | 1 |", "| tok | 2 | – | – |", "",
        "Removed for overlap with evaluation sets (leakage guard):", "",
        "| corpus | eval_set | units_removed |", "|---|---|---|", "| pairs | tatoeba | 5 |", ""])


def test_a_corpus_of_many_languages_shows_a_row_per_language(tmp_path: Path) -> None:
    """Beyond ``MAX_LANGUAGE_COLUMNS`` languages (a 128-language NTREX corpus) the counts turn: languages as rows."""
    from pipelines.report.corpora import MAX_LANGUAGE_COLUMNS

    langs = [f"l{i:02d}" for i in range(MAX_LANGUAGE_COLUMNS + 1)]
    pl.DataFrame({"lang": [x for i, x in enumerate(langs) for _ in range(i + 1)]}).write_parquet(tmp_path / "p.parquet")
    pl.DataFrame({"lang": ["l00", "l00"]}).write_parquet(tmp_path / "g.parquet")
    section, counts = corpora_section({"pairs": tmp_path / "p.parquet", "groups": tmp_path / "g.parquet"})
    assert counts.height == len(langs) + 1  # the long table is unchanged
    lines = render_markdown("t", [], [section]).splitlines()
    assert f"{len(langs)} languages (`groups` 2 rows, `pairs` 91 rows); rows per language:" in lines
    head = lines.index("| lang | groups | pairs |")
    assert lines[head + 2:head + 4] == ["| l00 | 2 | 1 |", "| l01 | – | 2 |"]
    assert lines[head + 1 + len(langs)] == "| l12 | – | 13 |"


# -- the command line -------------------------------------------------------------------------------------------
@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    """A data root with published evaluation artifacts: an old and a newer one for mpcl, one for simcse."""
    from contract import StageResult
    from warehouse.artifacts import ArtifactStore
    from warehouse.catalog import set_current
    from warehouse.layout import DataRoot

    root = DataRoot.at(tmp_path / "data")
    store = ArtifactStore(root)

    def node(name: str, frame: pl.DataFrame):
        def build(out: Path) -> StageResult:
            frame.write_parquet(out / "eval_results.parquet")
            return StageResult(tables={"eval_results": "eval_results.parquet"})

        ref, _, _ = store.materialize(node=name, stage="evaluate", version="1", config={"node": name},
                                      inputs={}, build=build)
        return ref

    stale = node("evaluate.mpcl.old", _frame(_rows_a()).with_columns(value=pl.col("value") - 50))
    newer = node("evaluate.mpcl", _frame(_rows_a()))
    other = node("evaluate.simcse", _frame(_rows_b()))
    assert stale.path != newer.path
    set_current(root, {"evaluate.mpcl": newer, "evaluate.simcse": other})
    return root.root


def test_cli_report_compare_writes_both_files(warehouse: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from flows.cli import main

    out = tmp_path / "cmp"
    rc = main(["report", "--compare", "mpcl", "simcse", "--data-root", str(warehouse), "--out", str(out),
               "--top", "5"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    md, page = out / "compare_mpcl_vs_simcse.md", out / "compare_mpcl_vs_simcse.html"
    assert md.exists() and page.exists()
    assert str(md) in captured.out.replace("\n", "") and str(page) in captured.out.replace("\n", "")
    text = md.read_text("utf-8")
    # the newest mpcl artifact wins over the stale one (values − 50)
    assert "| tatoeba | canonical | xnli14 | 14 languages | accuracy_mean | 88.12 | 85.00 | -3.12 | higher |" in text
    assert "largest differences" in captured.out and "rows compared: 22 (only in mpcl: 10, only in simcse: 1)" \
        in captured.out


def test_cli_report_unknown_run_exits_2(warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from flows.cli import main

    rc = main(["report", "--compare", "mpcl", "nope", "--data-root", str(warehouse), "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "unknown run(s) 'nope'" in err and "known runs: mpcl, simcse" in err
    assert not (tmp_path / "x").exists()
    assert main(["report", "--compare", "mpcl", "mpcl", "--data-root", str(warehouse)]) == 2
    assert "two different runs" in capsys.readouterr().err
    assert main(["report", "--compare", "a", "b", "--data-root", str(tmp_path / "no_such_root")]) == 2
    assert "no warehouse at" in capsys.readouterr().err


def test_cli_report_takes_the_data_root_from_a_config(warehouse: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from flows.cli import main

    config = tmp_path / "cmp.yaml"  # data_root relative to the config's folder: tmp_path / "data"
    config.write_text("name: cmp\ndata_root: data\nsources: {}\n", encoding="utf-8")
    assert warehouse == tmp_path / "data"
    assert main(["report", "--compare", "simcse", "mpcl", "--config", str(config)]) == 0, capsys.readouterr().err
    assert (warehouse / "reports" / "compare_simcse_vs_mpcl.html").exists()


# -- start models, peers, training curves, per-language blocks ---------------------------------------------------
def _rows_trained() -> list[tuple]:
    """``ft`` began from ``start:base``; ``peer`` is an evaluation.models peer; ``scratch`` has no start model."""
    rows = []
    for run, deu, jav, x14, xsim, de, ja in (("ft", 90.0, 30.0, 80.0, 5.0, 40.0, 35.0),
                                             ("start:base", 85.5, 32.25, 78.0, 7.5, 41.0, 30.0),
                                             ("peer", 88.0, None, 79.0, 6.0, None, None),
                                             ("scratch", 20.0, 10.0, 15.0, None, None, None)):
        m = f"key-{run}"
        rows += [(run, m, "tatoeba", "canonical", "deu", "deu-eng", "accuracy_mean", deu, 1000),
                 (run, m, "tatoeba", "canonical", "xnli14", "14 languages", "accuracy_mean", x14, 13000)]
        rows += [(run, m, "tatoeba", "canonical", "jav", "jav-eng", "accuracy_mean", jav, 205)] if jav else []
        rows += [(run, m, "xsim", "laser", "ntrex128/deu-eng", "deu-eng", "error_rate", xsim, 1997)] if xsim else []
        rows += [(run, m, "clustering", "ease", "mewsc16/de", "de", "hungarian_accuracy", de, 500),
                 (run, m, "clustering", "ease", "mewsc16/ja", "ja", "hungarian_accuracy", ja, 500)] if de else []
    return rows


def _curves(tmp: Path, run: str, dev: bool) -> dict[str, Path]:
    steps = pl.DataFrame({"train_run": run, "step": [1, 2, 3, 4], "loss": [4.0, 3.0, 2.0, 1.5],
                          "lr": [1e-4, 2e-4, 1.5e-4, 0.5e-4], "sentences": 64, "seconds": [0.5, 0.7, 0.2, 0.3],
                          "sentences_per_second": [128.0, 91.4, 320.0, 213.3]})
    objectives = pl.DataFrame({"train_run": run, "step": [1, 1, 2, 2, 3, 3, 4, 4],
                               "objective": ["mpcl", "contrastive"] * 4, "weight": 1.0,
                               "loss": [2.0, 2.0, 1.5, 1.5, 1.0, 1.0, 0.5, 1.0]})
    dev_rows = pl.DataFrame({"train_run": run, "step": [2, 4], "metric": "tatoeba_accuracy", "value": [50.0, 45.0],
                             "best": [True, False]})
    files = {"train_steps": tmp / f"{run}_steps.parquet", "train_objective_losses": tmp / f"{run}_obj.parquet",
             "train_dev": tmp / f"{run}_dev.parquet"}
    steps.write_parquet(files["train_steps"])
    objectives.write_parquet(files["train_objective_losses"])
    (dev_rows if dev else dev_rows.clear()).write_parquet(files["train_dev"])
    return files


def _trained_inputs(tmp: Path) -> tuple[dict[str, Path], dict[str, Path], dict[str, TrainedRun]]:
    from pipelines.report import TrainedRun

    (tmp / "bitext_pairs" / "lang=de").mkdir(parents=True)
    pl.DataFrame({"pivot_lang": ["en", "en"], "text": ["a", "b"]}).write_parquet(
        tmp / "bitext_pairs" / "lang=de" / "part-0.parquet")
    pl.DataFrame({"lang": ["ja", "en", "fr"], "text": ["x", "y", "z"]}).write_parquet(tmp / "groups.parquet")
    corpora = {"bitext_pairs": tmp / "bitext_pairs", "xnli_groups": tmp / "groups.parquet"}
    _frame(_rows_trained()).write_parquet(tmp / "eval.parquet")
    runs = {"ft": TrainedRun("start:base", "base-model", _curves(tmp, "ft", dev=True), [(("bitext_pairs",), ())]),
            # an objective restricted to two of the corpus' languages
            "scratch": TrainedRun(None, None, _curves(tmp, "scratch", dev=False), [(("xnli_groups",), ("ja", "en"))])}
    return corpora, {"evaluate": tmp / "eval.parquet"}, runs


@pytest.fixture(scope="module")
def trained_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("trained")
    corpora, evals, runs = _trained_inputs(tmp)
    out = tmp / "report"
    build_report(ReportSettings(), corpora, evals, "demo", out, runs, ["peer"])
    return out


def test_trained_run_beside_its_start_model_and_peer_with_delta(trained_report: Path) -> None:
    md = (trained_report / "report.md").read_text("utf-8")
    # headline comparison over the keys ft and its start share: Δ = ft − start:base, by hand
    head = md[md.index("**`ft`** against its start model `start:base`"):]
    head = head[head.index("| task"):head.index("\n\n", head.index("| task"))].splitlines()
    assert head[0] == "| task | variant | subset | languages | metric | ft | start:base | Δ (ft − start:base) | peer |"
    assert head[2:] == [
        "| tatoeba | canonical | xnli14 | 14 languages | accuracy_mean | 80.00 | 78.00 | +2.00 | 79.00 |",
        "| clustering | ease | mewsc16/de | de | hungarian_accuracy | 40.00 | 41.00 | -1.00 | – |",
        "| clustering | ease | mewsc16/ja | ja | hungarian_accuracy | 35.00 | 30.00 | +5.00 | – |",
        "| xsim | laser | mean | mean over subsets | error_rate | 5.00 | 7.50 | -2.50 | 6.00 |"]
    # a run trained from scratch says so instead of failing; its peer still stands beside it
    assert ("**`scratch`** was trained from scratch (no `encoder.pretrained`): there is no start model to compare it "
            "with; beside the peer(s) `peer`.") in md
    # every per-task table carries the Δ column (runs sorted, then Δ)
    assert "| subset | languages | metric | ft | peer | scratch | start:base | Δ (ft − start:base) |" in md
    assert "| deu | deu-eng | accuracy_mean | 90.00 | 88.00 | 20.00 | 85.50 | +4.50 |" in md
    assert "| jav | jav-eng | accuracy_mean | 30.00 | – | 10.00 | 32.25 | -2.25 |" in md
    # roles in the runs table
    for line in ("| ft | key-ft | clustering, tatoeba, xsim | 6 | trained from start:base |",
                 "| start:base | key-start:base | clustering, tatoeba, xsim | 6 | start model of ft |",
                 "| peer | key-peer | tatoeba, xsim | 3 | evaluation.models peer |",
                 "| scratch | key-scratch | tatoeba | 3 | trained from scratch |"):
        assert line in md, line


def test_training_section_curves_and_languages(trained_report: Path) -> None:
    md = (trained_report / "report.md").read_text("utf-8")
    assert md.index("## Training") < md.index("## Evaluation")
    assert ("**`ft`** began from `base-model` (its start model, evaluated as `start:base`); training languages "
            "(from its corpora): de, en.") in md
    assert "4 steps, peak learning rate 0.0002; best dev tatoeba_accuracy 50.00 at step 2 (the exported " \
           "checkpoint)." in md
    # per objective and the weighted total: loss at the first and last step, minimum and where
    assert "\n".join(["| objective | first_loss | last_loss | min_loss | min_at_step |", "|---|---|---|---|---|",
                      "| mpcl | 2.0000 | 0.5000 | 0.5000 | 4 |", "| contrastive | 2.0000 | 1.0000 | 1.0000 | 3 |",
                      "| total (weighted) | 4.0000 | 1.5000 | 1.5000 | 4 |"]) in md
    assert ("**`scratch`** trained from scratch (no `encoder.pretrained`): there is no start model to compare it "
            "with; training languages (from its corpora): en, ja.") in md
    assert "no dev evaluation: the last step's weights are exported" in md
    if plots.available():
        svg = (trained_report / "plots" / "training_ft.svg").read_text("utf-8")
        for text in (">loss per objective<", ">learning rate<", ">dev metric<", ">best (step 2)<", ">mpcl<",
                     ">contrastive<", ">total (weighted)<", ">tatoeba_accuracy<"):
            assert text in svg, text
        assert "training_scratch.svg" in md and "sentences_per_second" not in svg


@needs_mpl
def test_per_language_charts_put_trained_languages_first(trained_report: Path) -> None:
    svg = (trained_report / "plots" / "tatoeba_canonical_accuracy_mean_per_subset.svg").read_text("utf-8")
    # ft trained on de/en (deu-eng); scratch on ja/en; nobody on Javanese
    assert ">trained by ft<" in svg and ">never trained<" in svg
    assert svg.index(">deu<") < svg.index(">jav<")
    # only ft (of the runs with known languages) has clustering rows: its languages decide alone
    clustering = (trained_report / "plots" / "clustering_ease_hungarian_accuracy_per_subset.svg").read_text("utf-8")
    assert ">trained<" in clustering and ">never trained<" in clustering
    assert clustering.index(">mewsc16/de<") < clustering.index(">mewsc16/ja<")
    assert (trained_report / "plots" / "xsim_laser_error_rate_per_subset.svg").exists()


def test_language_blocks_order_and_labels() -> None:
    from pipelines.report.results import language_blocks

    data = _frame([("a", "k", "tatoeba", "canonical", s, langs, "accuracy_mean", 1.0, 1)
                   for s, langs in (("jav", "jav-eng"), ("cmn", "cmn-eng"), ("deu", "deu-eng"), ("fra", "fra-eng"),
                                    ("odd", None))]
                  + [("b", "k", "tatoeba", "canonical", "deu", "deu-eng", "accuracy_mean", 2.0, 1)])
    # a's corpora name zh (XNLI) where Tatoeba says cmn: the macrolanguage matches; b's languages are known too
    trained = {"a": frozenset({"deu", "eng", "zho"}), "b": frozenset({"deu", "eng", "fra"}),
               "absent": frozenset({"jav", "eng"})}
    rows, order = language_blocks(data, trained)
    assert order == ["trained", "trained by a", "trained by b", "never trained", "no language"]
    assert rows.unique(subset="subset", maintain_order=True)["subset"].to_list() == ["deu", "cmn", "fra", "jav", "odd"]


def test_training_languages_from_corpora(tmp_path: Path) -> None:
    from pipelines.report import TrainedRun
    from pipelines.report.training import training_languages

    corpora, _, runs = _trained_inputs(tmp_path)
    pl.DataFrame({"entity": ["Q1"], "vector": [[0.0]]}).write_parquet(tmp_path / "vectors.parquet")
    corpora["entity_vectors"] = tmp_path / "vectors.parquet"
    assert training_languages(runs["ft"], corpora) == ("de", "en")
    assert training_languages(TrainedRun(sources=[(("xnli_groups",), ())]), corpora) == ("en", "fr", "ja")
    # a table without a language column next to one with: the known one counts; alone: unknown
    both = TrainedRun(sources=[(("bitext_pairs", "entity_vectors"), ())])
    assert training_languages(both, corpora) == ("de", "en")
    assert training_languages(TrainedRun(sources=[(("entity_vectors",), ())]), corpora) is None
    assert training_languages(TrainedRun(), corpora) is None


def test_long_curves_are_binned(tmp_path: Path) -> None:
    from pipelines.report.training import MAX_POINTS, _binned

    n = 2500
    frame = pl.DataFrame({"step": range(1, n + 1), "loss": [float(i) for i in range(1, n + 1)]})
    binned = _binned(frame, [], ["loss"], n)
    assert binned.height == -(-n // 3) and binned.height <= MAX_POINTS  # bins of ceil(2500 / 1000) = 3 steps
    assert binned.row(0) == (2.0, 2.0) and binned.row(-1) == (2500.0, 2500.0)
    assert _binned(frame.head(10), [], ["loss"], 10).equals(frame.head(10))


def test_bad_training_table_names_the_file(tmp_path: Path) -> None:
    from pipelines.report.training import read_curves

    pl.DataFrame({"step": [1], "lr": [0.1]}).write_parquet(tmp_path / "steps.parquet")
    with pytest.raises(ValueError, match=r"steps\.parquet: not a train_steps table of run 'r': missing columns "
                                         r"\['loss'\]"):
        read_curves("r", {"train_steps": tmp_path / "steps.parquet"})


def test_dag_evaluates_each_start_model_once_and_wires_the_report(tmp_path: Path) -> None:
    import copy

    from conftest import tiny_config_dict, write_config

    from flows.config import load_config
    from flows.dag import build_dag

    models = {}
    for name in ("base", "other"):
        models[name] = tmp_path / "models" / name
        models[name].mkdir(parents=True)
        (models[name] / "config.json").write_text(f'{{"name": "{name}"}}')
    cfg = tiny_config_dict(tmp_path / "data")
    for run, start in (("a", "base"), ("b", "base"), ("c", "other")):
        cfg["training"][run] = copy.deepcopy(cfg["training"]["tiny"])
        cfg["training"][run]["encoder"] = {"pretrained": str(models[start]), "max_length": 32}
    cfg["evaluation"]["models"] = {"peer_other": str(models["other"])}
    nodes = build_dag(load_config(write_config(tmp_path / "c.yaml", cfg)))
    # a and b share one start node keyed by the model's files; c's start is the peer naming the same folder
    assert sorted(n for n in nodes if n.startswith("evaluate.")) == [
        "evaluate.a", "evaluate.b", "evaluate.c", "evaluate.peer_other", "evaluate.start:base", "evaluate.tiny"]
    start = nodes["evaluate.start:base"]
    assert start.files == {"model/config.json": models["base"] / "config.json"} and start.config["model"] == "base"
    report = nodes["report"]
    runs = report.config["runs"]
    assert {r: (v["start"], v["pretrained"]) for r, v in runs.items()} == {
        "a": ("start:base", "base"), "b": ("start:base", "base"), "c": ("peer_other", "other"), "tiny": (None, None)}
    assert runs["tiny"]["sources"][0] == [["xnli_groups"], []] and report.config["peers"] == ["peer_other"]
    assert {f"train:{r}" for r in runs} | {"eval:evaluate.start:base"} <= set(report.deps)


def test_trained_report_is_byte_identical_when_rebuilt(trained_report: Path, tmp_path: Path) -> None:
    corpora, evals, runs = _trained_inputs(tmp_path / "inputs")
    build_report(ReportSettings(), corpora, evals, "demo", tmp_path / "again", runs, ["peer"])

    def files(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    assert files(tmp_path / "again") == files(trained_report)
