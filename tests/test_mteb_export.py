"""``polysent export-results``: a run's ``eval_results`` in mteb's results layout (pipelines/export/mteb_results.py).

The rows are purpose-built: each mteb-protocol row has mteb's own sample count for its subset (so it is exported), and
beside it rows that must be skipped (another variant, another split, a subsample, a per-subset STS12 score). The files
are read back with mteb's own classes (``mteb.TaskResult.from_disk``, ``mteb.ResultCache``, ``mteb.ModelMeta``; dev
extra) where mteb is installed. The mteb task table (``pipelines/export/mteb_tasks.json``, package data) is
regenerated from the installed mteb with ``make mteb-tasks`` (``tools/mteb_tasks.py``).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from pipelines.export import mteb_results as mr
from pipelines.export.mteb_tasks import DATA_FILE, MTEB_TASK_NAMES, MTEB_VERSION, TASKS

RUN, MODEL = "xnli_mpcl", "0123456789abcdef0123456789abcdef01234567"
SETTINGS = {"classification": {"n_experiments": 10, "samples_per_label": 8, "seed": 42, "train_split": "train",
                               "test_split": "test", "source_language": "en"},
            "clustering": {"mteb_document_sample": False, "seed": 42}}


# -- the mteb task table: package data, generated from (and checked against) the installed mteb -----------------------
def test_task_table_is_what_the_generator_writes_from_the_installed_mteb() -> None:
    import importlib.metadata
    import importlib.util

    if importlib.util.find_spec("mteb") is None:
        pytest.skip("mteb is not installed (dev extra: pip install -e '.[dev]'); the task table is checked against it")
    from tools.mteb_tasks import render

    installed = importlib.metadata.version("mteb")
    assert installed == MTEB_VERSION, (f"the installed mteb is {installed}, the task table was generated from "
                                       f"{MTEB_VERSION}; regenerate it with `make mteb-tasks`")
    text = resources.files("pipelines.export").joinpath(DATA_FILE).read_text(encoding="utf-8")
    assert render(MTEB_TASK_NAMES) == text, "pipelines/export/mteb_tasks.json is stale: run `make mteb-tasks`"


def test_task_table_is_package_data_the_module_reads() -> None:
    """The JSON ships inside the package (``[tool.setuptools.package-data]``) and the module exposes it as read."""
    import tomllib

    from pipelines.export import mteb_tasks

    path = Path(mteb_tasks.__file__).with_name(DATA_FILE)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert (data["mteb_version"], tuple(data["task_names"]), data["tasks"]) == (MTEB_VERSION, MTEB_TASK_NAMES, TASKS)
    assert list(TASKS) == list(MTEB_TASK_NAMES)
    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    assert DATA_FILE in pyproject["tool"]["setuptools"]["package-data"]["pipelines.export"]


# -- purpose-built rows -----------------------------------------------------------------------------------------------
def rows(*specs: tuple[str, str, str, str, dict[str, float], int], run: str = RUN) -> pl.DataFrame:
    out = [(run, MODEL, task, variant, subset, langs, metric, float(value), n)
           for task, variant, subset, langs, metrics, n in specs for metric, value in metrics.items()]
    return pl.DataFrame(out, schema=dict(zip(mr.COLUMNS, (pl.Utf8,) * 7 + (pl.Float64, pl.Int64), strict=True)),
                        orient="row")


def n_of(task: str, split: str, subset: str) -> int:
    return TASKS[task]["num_samples"][split][subset]


BITEXT = {"accuracy": 97.5, "precision": 96.8, "recall": 97.5, "f1": 97.0}
PAIR = {"cosine_accuracy": 61.0, "cosine_accuracy_threshold": 0.93, "cosine_f1": 62.5, "cosine_ap": 58.25,
        "max_accuracy": 61.0, "max_f1": 62.5, "max_ap": 59.75}
SPECS = [
    ("tatoeba", "mteb", "deu", "deu-eng", BITEXT, n_of("Tatoeba", "test", "deu-eng")),
    ("tatoeba", "mteb", "fry", "fry-eng", {**BITEXT, "f1": 60.0}, n_of("Tatoeba", "test", "fry-eng")),
    ("tatoeba", "mteb", "kur", "kur-eng", BITEXT, 50),  # a subsample: not mteb's data
    ("tatoeba", "canonical", "deu", "deu-eng", {"accuracy_mean": 98.0}, n_of("Tatoeba", "test", "deu-eng")),
    ("bucc", "mteb", "de-en/training", "de-en", {**BITEXT, "f1": 91.25}, n_of("BUCC", "test", "de-en")),
    ("bucc", "mteb", "de-en/sample", "de-en", BITEXT, 2000),
    ("bucc", "oracle", "de-en/training", "de-en", {"f1": 95.0, "threshold": 1.05}, 9580),
    ("sts", "mteb", "sts17/track2.ar-en", "en-ar", {"cosine_spearman": 71.5, "cosine_pearson": 70.0},
     n_of("STS17", "test", "en-ar")),
    ("sts", "mteb", "sts12/MSRpar", "en-en", {"cosine_spearman": 50.0, "cosine_pearson": 49.0}, 750),
    ("sts", "senteval", "sts12/all", "en-en", {"spearman": 68.4, "pearson": 70.1}, n_of("STS12", "test", "default")),
    ("sts", "senteval", "sts12/mean", "en-en", {"spearman": 60.0, "pearson": 61.0}, 3108),
    ("sts", "mteb", "stsb/test", "en-en", {"cosine_spearman": 80.25, "cosine_pearson": 81.0},
     n_of("STSBenchmark", "test", "default")),
    ("sts", "mteb", "sick-r/test", "en-en", {"cosine_spearman": 75.0, "cosine_pearson": 74.0}, 4906),
    ("clustering", "mteb", "mewsc16/ja", "ja", {"v_measure": 40.0, "v_measure_std": 1.5, "ami": 35.0}, 1983),
    ("classification", "mteb", "sib200/deu_Latn", "deu_Latn", {"accuracy": 72.5, "f1": 70.0, "accuracy_std": 2.0},
     n_of("SIB200Classification", "test", "deu_Latn")),
    ("pair_classification", "mteb", "pawsx/test/de", "de", PAIR, n_of("PawsXPairClassification", "test", "de")),
    ("pair_classification", "mteb", "pawsx/dev/de", "de", {**PAIR, "max_ap": 66.5},
     n_of("PawsXPairClassification", "validation", "de")),
    ("pair_classification", "mteb", "pawsx/test/mean", "2 languages", PAIR, 2),
    ("xsim", "laser", "flores/deu-eng", "deu-eng", {"error_rate": 1.5}, 1012),
]


def run_results(**kw: Any) -> mr.RunResults:
    return mr.RunResults(RUN, rows(*SPECS), settings=kw.pop("settings", SETTINGS),
                         seconds={"tatoeba": 1.5, "bucc": 2.0, "sts": 0.5}, created_at="2026-01-02T03:04:05+00:00",
                         **kw)


EXPECTED = {  # mteb task → split → hf_subset → main score (fractions)
    "Tatoeba": {"test": {"deu-eng": 0.97, "fry-eng": 0.60}},
    "BUCC": {"test": {"de-en": 0.9125}},
    "STS17": {"test": {"en-ar": 0.715}},
    "STS12": {"test": {"default": 0.684}},
    "STSBenchmark": {"test": {"default": 0.8025}},
    "SIB200Classification": {"test": {"deu_Latn": 0.725}},
    "PawsXPairClassification": {"test": {"de": 0.5975}, "validation": {"de": 0.665}},
}


def test_rows_map_to_mteb_scores_in_fractions() -> None:
    files, skipped = mr.task_results(run_results())
    assert set(files) == set(EXPECTED)
    for task, splits in EXPECTED.items():
        got = {split: {e["hf_subset"]: e["main_score"] for e in entries} for split, entries in
               files[task]["scores"].items()}
        assert got == splits, task
    pawsx = files["PawsXPairClassification"]["scores"]["test"][0]
    assert pawsx["cosine_accuracy_threshold"] == 0.93  # a raw similarity, not points
    assert pawsx["cosine_ap"] == 0.5825 and pawsx["languages"] == ["deu-Latn"]
    sib = files["SIB200Classification"]["scores"]["test"][0]
    assert "accuracy_std" not in sib and sib["f1"] == 0.7  # not an mteb key: left out
    assert files["STS12"]["scores"]["test"][0]["cosine_pearson"] == 0.701
    assert files["Tatoeba"]["evaluation_time"] == 1.5 and files["STS12"]["evaluation_time"] is None
    reasons = {w: r for r, where in skipped.items() for w in where}
    assert "50 items scored" in reasons["tatoeba/mteb/kur"]
    assert "not mteb's protocol" in reasons["tatoeba/canonical/deu"]
    assert "BUCC 2018 training data" in reasons["bucc/mteb/de-en/sample"]
    assert "pooled" in reasons["sts/mteb/sts12/MSRpar"] and "pooled" in reasons["sts/senteval/sts12/mean"]
    assert "has 9927" in reasons["sts/mteb/sick-r/test"]
    assert "has 992" in reasons["clustering/mteb/mewsc16/ja"]  # JMTEB's half of the ja file
    assert "mteb has no task" in reasons["xsim/laser/flores/deu-eng"]
    assert "no subset 'mean'" in reasons["pair_classification/mteb/pawsx/test/mean"]


def test_protocol_settings_that_differ_from_mteb_are_skipped() -> None:
    settings = {"classification": {**SETTINGS["classification"], "samples_per_label": 16},
                "clustering": SETTINGS["clustering"]}
    files, skipped = mr.task_results(run_results(settings=settings))
    assert "SIB200Classification" not in files
    assert any("samples_per_label" in r and "sib200/deu_Latn" in w[0] for r, w in skipped.items())
    _, unknown = mr.task_results(run_results(settings={}))
    assert any("settings are unknown" in r for r in unknown)


def test_two_rows_for_one_mteb_score_are_an_error() -> None:
    twice = mr.RunResults(RUN, rows(("tatoeba", "mteb", "deu", "deu-eng", BITEXT, 1000),
                                    ("tatoeba", "mteb", "deu2", "deu-eng", BITEXT, 1000)))
    with pytest.raises(ValueError, match=r"tatoeba/mteb/deu2 and tatoeba/mteb/deu both give Tatoeba test/deu-eng"):
        mr.task_results(twice)


def test_files_load_with_mteb_result_classes(tmp_path: Path) -> None:
    mteb = pytest.importorskip("mteb")
    out = tmp_path / "mteb-results"
    export = mr.export_mteb(run_results(adapted_from="intfloat/multilingual-e5-small"), out)
    model_dir = out / "results" / "polysent__xnli_mpcl" / MODEL
    assert export.model_dir == model_dir
    assert sorted(p.name for p in model_dir.iterdir()) == sorted([f"{t}.json" for t in EXPECTED] + ["model_meta.json"])
    for task, splits in EXPECTED.items():
        res = mteb.TaskResult.from_disk(model_dir / f"{task}.json")
        assert res.task_name == task and res.dataset_revision == TASKS[task]["revision"]
        assert sorted(res.eval_splits) == sorted(splits)
        assert sorted(res.hf_subsets) == sorted({s for per in splits.values() for s in per})
        for split, per in splits.items():
            for entry in res.scores[split]:
                assert entry["main_score"] == pytest.approx(per[entry["hf_subset"]])
                assert entry["languages"] == TASKS[task]["languages"][entry["hf_subset"]]
        assert res.get_score() == pytest.approx(sum(v for per in splits.values() for v in per.values())
                                                / sum(len(per) for per in splits.values()))
    assert mteb.TaskResult.from_disk(model_dir / "Tatoeba.json").get_score(languages=["fry"]) == pytest.approx(0.6)
    from mteb.models.model_meta import ModelMeta

    meta = ModelMeta.model_validate_json_resolved((model_dir / "model_meta.json").read_text("utf-8"))
    assert (meta.name, meta.revision, meta.adapted_from) == ("polysent/xnli_mpcl", MODEL,
                                                             "intfloat/multilingual-e5-small")
    # mteb's own cache reader finds the model and every task through the layout
    loaded = mteb.ResultCache(cache_path=out).load_results(models=["polysent/xnli_mpcl"], include_remote=False)
    got = {r.task_name for m in loaded.model_results for r in m.task_results}
    assert got == set(EXPECTED)
    record = json.loads((out / mr.EXPORT_RECORD).read_text("utf-8"))
    assert record["tasks"]["Tatoeba"] == 2 and any("tatoeba/canonical/deu" in w for w in record["skipped"].values())


def test_existing_folder_is_refused_unless_forced_and_never_half_written(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    with pytest.raises(FileExistsError, match=r"out exists and is not empty.*--force"):
        mr.export_mteb(run_results(), out)
    assert (out / "mine.txt").read_text() == "keep"

    def broken(*a: Any, **k: Any) -> dict[str, Any]:
        raise OSError("disk full")

    monkeypatch.setattr(mr, "model_meta", broken)  # fails after the task files are written
    with pytest.raises(OSError, match="disk full"):
        mr.export_mteb(run_results(), out, force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary folder left behind
    assert [p.name for p in out.iterdir()] == ["mine.txt"]  # the old folder untouched
    monkeypatch.undo()
    mr.export_mteb(run_results(), out, force=True)
    assert not (out / "mine.txt").exists() and (out / mr.EXPORT_RECORD).is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_nothing_exportable_and_unknown_run_are_clear_errors(tmp_path: Path) -> None:
    only_canonical = mr.RunResults(RUN, rows(("tatoeba", "canonical", "deu", "deu-eng", {"accuracy_mean": 9.0}, 1)))
    with pytest.raises(ValueError, match=r"nothing to export.*not mteb's protocol \(variant canonical\) \(1\)"):
        mr.export_mteb(only_canonical, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    history = pl.concat([rows(SPECS[0]), rows(SPECS[0], run="other")]).with_columns(source=pl.lit("/x/e.parquet"))
    with pytest.raises(mr.UnknownRunError, match=r"unknown run 'nope'.*known runs: other, xnli_mpcl"):
        mr.run_results(history, "nope")


# -- the command line on a small data root --------------------------------------------------------------------------
def _artifact(root: Path, stage: str, key: str, config: dict[str, Any], inputs: dict[str, Any],
              table: pl.DataFrame | None = None, created_at: str = "2026-01-02T03:04:05+00:00") -> Path:
    folder = root / "artifacts" / stage / key[:20]
    folder.mkdir(parents=True)
    files, tables = {}, {}
    if table is not None:
        table.write_parquet(folder / "eval_results.parquet")
        files = {"eval_results.parquet": {"size": (folder / "eval_results.parquet").stat().st_size}}
        tables = {"eval_results": "eval_results.parquet"}
    manifest = {"stage": stage, "key": key, "version": "1", "node": f"{stage}.x", "config": config,
                "inputs": inputs, "files": files, "tables": tables, "rows": {}, "stats": {"seconds": {"tatoeba": 3.0}},
                "content_hash": key, "created_at": created_at, "seconds": 0.0, "run_id": "r", "versions": {},
                "format": 1}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def test_cli_exports_a_run_from_the_warehouse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from flows.cli import main

    root = tmp_path / "data"
    sets = _artifact(root, "eval_sets", "e" * 64, {"sources": {"sts": [{"format": "stsb_multi_mt", "split": "test",
                                                                        "languages": ["en", "de"]}]}}, {})
    train = _artifact(root, "train", MODEL, {"run": RUN, "settings": {"encoder": {"pretrained": "xlm-roberta-base"}}},
                      {})
    inputs = {"eval_sets": {"stage": "eval_sets", "key": "e" * 64}, "model": {"stage": "train", "key": MODEL}}
    n_de = n_of("STSBenchmarkMultilingualSTS", "test", "de")
    table = rows(SPECS[0], ("sts", "mteb", "stsb-multi-mt/de-de", "de-de", {"cosine_spearman": 77.0}, n_de),
                 ("sts", "mteb", "stsb-multi-mt/en-de", "en-de", {"cosine_spearman": 70.0}, n_de))
    old = table.with_columns(pl.col("value") / 2)  # an older evaluation of the same run: not exported
    _artifact(root, "evaluate", "a" * 64, {"run": RUN, "settings": SETTINGS}, inputs, old, "2025-01-01T00:00:00+00:00")
    evaluate = _artifact(root, "evaluate", "b" * 64, {"run": RUN, "settings": SETTINGS}, inputs, table)
    (root / "catalog").mkdir()
    (root / "catalog" / "current.json").write_text(json.dumps({
        f"evaluate.{RUN}": {"stage": "evaluate", "key": "b" * 64, "path": evaluate.relative_to(root).as_posix(),
                            "tables": {"eval_results": "eval_results.parquet"}}}))
    assert sets.is_dir() and train.is_dir()

    out = tmp_path / "export"
    assert main(["export-results", RUN, str(out), "--data-root", str(root)]) == 0
    model_dir = out / "results" / "polysent__xnli_mpcl" / MODEL
    stsb = json.loads((model_dir / "STSBenchmarkMultilingualSTS.json").read_text())
    assert stsb["scores"] == {"test": [{"cosine_spearman": 0.77, "main_score": 0.77, "hf_subset": "de",
                                        "languages": ["deu-Latn"], "mteb_version": MTEB_VERSION}]}
    tatoeba = json.loads((model_dir / "Tatoeba.json").read_text())
    assert tatoeba["scores"]["test"][0]["f1"] == 0.97 and tatoeba["evaluation_time"] == 3.0
    assert json.loads((model_dir / "model_meta.json").read_text())["adapted_from"] == "xlm-roberta-base"
    printed = capsys.readouterr().out
    assert "Tatoeba" in printed and "STSBenchmarkMultilingualSTS" in printed

    assert main(["export-results", RUN, str(out), "--data-root", str(root)]) == 2  # exists, no --force
    assert "--force" in capsys.readouterr().err
    assert main(["export-results", "nope", str(tmp_path / "x"), "--data-root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "unknown run 'nope'" in err and "known runs: xnli_mpcl" in err
    assert not (tmp_path / "x").exists()


def test_split_names_follow_each_mteb_task() -> None:
    """Our ``dev`` is ``validation`` where mteb says so (PAWS-X, SIB-200) and stays ``dev`` where mteb keeps it
    (STSBenchmarkMultilingualSTS)."""
    dev = mr.RunResults(RUN, rows(), settings=SETTINGS, sources={"sts": [{"format": "stsb_multi_mt", "split": "dev"}]})
    assert mr.target("sts", "mteb", "stsb-multi-mt/de-de", "de-de", 1500, dev) == \
        mr.Target("STSBenchmarkMultilingualSTS", "dev", "de")
    assert mr.target("pair_classification", "mteb", "pawsx/dev/fr", "fr", 2000, dev) == \
        mr.Target("PawsXPairClassification", "validation", "fr")
    assert "not one of STSBenchmark's evaluation splits" in mr.target("sts", "mteb", "stsb/dev", "en-en", 1500, dev)
