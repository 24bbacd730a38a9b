"""An evaluation task is added in one place per layer (issue 52 item 1): ``pipelines/eval_tasks/<name>.py`` declares
its set, report labels, card line, mteb mapping and figures; ``models/evaluation/tasks/<name>.py`` its settings and
scorer. The registries find both, and the eval-set stage, the suite, the report, the card, the mteb export and the
experiments' figures read them — so a toy task written as one new file per layer (and nothing else) is read from a
pipeline config (its ``sources.eval`` entry, its ``corpora.eval_sets`` setting, its ``evaluation`` section), built,
scored through ``polysent run`` into the warehouse, reported, carded and exported in mteb's layout. And the nine
built-in tasks give the settings keys, orders and labels the project always had (no cache key moves)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest
import yaml
from conftest import REPO, SAMPLE

from models.evaluation import task_registry as scorers
from pipelines import eval_task_registry as registry

BUILT_IN = ("tatoeba", "bucc", "sts", "clustering", "classification", "xsim", "geometry", "langid",
            "pair_classification")


def test_each_built_in_task_has_both_parts_in_the_same_order() -> None:
    pipelines_side = {name: t.order for name, t in registry.tasks().items() if name in BUILT_IN}
    models_side = {name: s.order for name, s in scorers.tasks().items() if name in BUILT_IN}
    assert tuple(pipelines_side) == tuple(models_side) == BUILT_IN
    assert pipelines_side == models_side == {name: 10 * (i + 1) for i, name in enumerate(BUILT_IN)}


def test_the_settings_keep_their_keys_in_task_order() -> None:
    """The keys (and so every cache key and docs/configuration.md) the classes had when they named the tasks."""
    from models.evaluation.settings import EvaluationSettings
    from pipelines.eval_sets import EvalSetsSettings, EvalSources

    assert [f.name for f in dataclasses.fields(EvaluationSettings)] == [
        *BUILT_IN, "models", "batch_size", "batch_tokens", "max_length", "dtype", "device", "cache"]
    assert list(EvalSources.model_fields) == ["tatoeba", "bucc", "sts", "clustering", "classification", "parallel",
                                              "langid", "pair_classification", "hub"]
    assert list(EvalSetsSettings.model_fields) == [
        "tatoeba_languages", "bucc_pairs", "bucc_splits", "clustering_languages", "clustering_dataset",
        "clustering_empty_sentences", "clustering_max_per_language", "hub_subsets"]
    assert all(f.metadata["description"] for f in dataclasses.fields(EvaluationSettings) if f.name in BUILT_IN)
    assert "clustering_max_per_language" not in EvalSetsSettings().model_dump()  # kept out of keys while unset
    assert EvalSetsSettings(clustering_max_per_language=5).model_dump()["clustering_max_per_language"] == 5


def test_the_report_orders_what_it_always_ordered() -> None:
    from pipelines.report.results import vocabulary

    v = vocabulary()
    assert tuple(v.titles)[:9] == BUILT_IN
    assert v.variant_order == ("canonical", "xtreme", "mteb", "oracle", "held_out", "oracle_cosine", "ease", "senteval",
                               "zero_shot", "msimcse", "wang_isola", "laser")
    assert v.metric_order == (
        "accuracy_mean", "accuracy_xx_en", "accuracy_en_xx", "f1", "precision", "recall", "threshold", "spearman",
        "pearson", "hungarian_accuracy", "v_measure", "accuracy", "error_rate", "alignment", "uniformity", "max_ap",
        "cosine_ap", "max_f1", "cosine_f1", "max_accuracy", "cosine_accuracy", "max_precision", "cosine_precision",
        "max_recall", "cosine_recall", "cosine_f1_threshold", "cosine_accuracy_threshold")
    assert v.raw == {"alignment", "uniformity", "threshold", "cosine_f1_threshold", "cosine_accuracy_threshold"}
    assert v.lower == {"error_rate", "alignment", "uniformity"}


@pytest.mark.parametrize("name", BUILT_IN)
def test_each_task_declares_a_consistent_whole(name: str) -> None:
    """Its set's sort keys are columns of its tables; its mteb targets are mteb tasks with a Hub dataset; its figures
    are scored on tables some set fills and their settings are its own settings' fields; its scorer's settings are a
    frozen dataclass whose defaults construct."""
    from pipelines.export.mteb_tasks import TASKS as MTEB

    task, spec = registry.tasks()[name], scorers.tasks()[name]
    assert task.report.title and task.report.headline
    if task.set is not None:
        assert task.set.tables and all(set(t.keys) <= set(t.schema) for t in task.set.tables.values())
        assert all(n.startswith(f"{task.set.key}_") for n in task.set.settings)
    if task.mteb is not None:
        assert task.mteb.datasets and set(task.mteb.datasets) <= set(MTEB)
    if task.figures is not None:
        filled = {t for s in registry.eval_sets() for t in s.tables}
        assert all(set(tables) <= filled for tables in task.figures.tables.values())
        fields = {f.name for f in dataclasses.fields(spec.settings)}
        assert set(task.figures.settings(set(task.figures.tables))) <= fields
    assert spec.settings.__dataclass_params__.frozen and spec.settings() is not None  # type: ignore[attr-defined]


def test_task_modules_load_neither_torch_nor_the_protocols() -> None:
    """The config loader reads the tasks' settings: no torch, no scikit-learn, no pyarrow on either side."""
    code = ("import sys\nfrom models.evaluation.settings import EvaluationSettings\n"
            "from pipelines.eval_sets import EvalSources\nfrom pipelines.eval_task_registry import tasks\n"
            "assert len(tasks()) >= 9 and EvalSources and EvaluationSettings\n"
            "print(sorted(m for m in ('torch', 'sklearn', 'pyarrow', 'models.evaluation.bitext') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_a_set_that_clashes_with_another_tasks_set_is_refused() -> None:
    tatoeba = registry.tasks()["tatoeba"]
    clash = dataclasses.replace(tatoeba, name="copy_of_tatoeba", order=999)
    with pytest.raises(ValueError, match=r"'copy_of_tatoeba': its set 'tatoeba'.*clashes with task 'tatoeba'"):
        registry.register_task(clash)
    assert "copy_of_tatoeba" not in registry.tasks()


def test_a_task_module_that_asks_the_registry_while_it_is_imported_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It would see a half-filled table (the settings built from it would lack the tasks not yet imported)."""
    import pipelines.eval_tasks

    (tmp_path / "eager.py").write_text("from pipelines.eval_task_registry import tasks\ntasks()\n", encoding="utf-8")
    monkeypatch.setattr(pipelines.eval_tasks, "__path__", [*pipelines.eval_tasks.__path__, str(tmp_path)])
    try:
        with pytest.raises(RuntimeError, match=r"while a module of pipelines\.eval_tasks was being imported"):
            registry.tasks()
    finally:
        sys.modules.pop("pipelines.eval_tasks.eager", None)


# -- a toy task, one new file per layer ----------------------------------------------------------------------------
TOY_PIPELINES = '''"""A toy evaluation task, pipelines part, as docs/evaluation.md ("Adding an evaluation task")
says: English sentence pairs with a similarity score, one ``s1<TAB>s2<TAB>score`` line each, in one file
(``sources.eval.toy``)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from pydantic import Field

from pipelines.eval_task_registry import EvalSet, EvalTask, Mteb, MtebTarget, Report, Table, register_task

SCHEMA = {"idx": pl.Int32, "s1": pl.String, "s2": pl.String, "score": pl.Float64}


def read(path, settings, skipped):
    rows = [line.split("\\t") for line in Path(path).read_text(encoding="utf-8").splitlines()]
    rows = rows[: settings.toy_max_pairs] if settings.toy_max_pairs else rows
    yield "eval_toy", pl.DataFrame({"idx": range(1, len(rows) + 1), "s1": [r[0] for r in rows],
                                    "s2": [r[1] for r in rows], "score": [float(r[2]) for r in rows]}, schema=SCHEMA)


def files(path):
    if not Path(path).is_file():
        raise FileNotFoundError(f"sources.eval.toy: no file {path}")
    return {f"toy/{Path(path).name}": Path(path)}


TASK = register_task(EvalTask(
    name="toy", order=1000,
    set=EvalSet(key="toy", source=(Path | None, Field(None, description="a TSV file of s1, s2, score")),
                tables={"eval_toy": Table(SCHEMA, ("idx",))}, read=read, files=files,
                settings={"toy_max_pairs": (int | None, Field(None, ge=1, description="the first N pairs only"))},
                key_when_set=("toy_max_pairs",)),
    report=Report(title="Toy sentence similarity", headline=("cosine_spearman",)),
    card="toy cosine Spearman",
    mteb=Mteb(lambda variant, subset, languages, run: MtebTarget("STS17", "test", languages))))
'''

TOY_MODELS = '''"""A toy evaluation task, models part: the Spearman correlation (× ``scale``) of the pairs' cosine
with their score."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.evaluation.task_registry import Task, columns, evaluation_task


@dataclass(frozen=True)
class ToySettings:
    scale: float = 100.0


@evaluation_task(settings=ToySettings, order=1000)
class Toy(Task):
    name = "toy"

    def __init__(self, settings, tables):
        super().__init__(settings, tables)
        self.cols = columns(tables.get("eval_toy"), "s1", "s2", "score") or {"s1": [], "s2": [], "score": []}

    def texts(self):
        yield from self.cols["s1"]
        yield from self.cols["s2"]

    def score(self, vec, out):
        if self.cols["s1"]:
            a, b = vec(self.cols["s1"]), vec(self.cols["s2"])
            cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
            rank = lambda x: np.argsort(np.argsort(x))  # noqa: E731
            rho = np.corrcoef(rank(cos), rank(np.asarray(self.cols["score"])))[0, 1]
            out.add("toy", "mteb", "toy/en-en", "en-en", {"cosine_spearman": self.settings.scale * float(rho)},
                    len(cos))
'''

# the toy's part of each layer goes on its package's path before any settings class is built from the registry
RUNNER = """import json, sys
import models.evaluation.tasks, pipelines.eval_tasks
pipelines.eval_tasks.__path__.append(sys.argv[1])
models.evaluation.tasks.__path__.append(sys.argv[2])
from flows.cli import main
for args in json.loads(sys.argv[3]):
    if main(args) != 0:
        sys.exit(f"polysent {' '.join(args)} failed")
"""


def _toy_config(tmp_path: Path) -> Path:
    """The sample's en–de bitext, a tiny run, and 250 scored English pairs (as many as mteb's STS17 en-en)."""
    xnli = [line.split("\t") for line in (SAMPLE / "xnli" / "dev-en.tsv").read_text(encoding="utf-8").splitlines()]
    score = {"entailment": 5.0, "neutral": 2.5, "contradiction": 0.0}
    pairs = [(p, h, score[label]) for p, h, label in xnli]
    en = (SAMPLE / "bitext" / "en-de.en").read_text(encoding="utf-8").splitlines()
    pairs += [(en[i], en[i + 1], 1.0) for i in range(250 - len(pairs))]
    (tmp_path / "toy.tsv").write_text("".join(f"{a}\t{b}\t{s}\n" for a, b, s in pairs), encoding="utf-8")
    cfg = {"name": "toy", "data_root": str(tmp_path / "data"),
           "sources": {"bitext": [{"src": "en", "tgt": "de", "src_file": str(SAMPLE / "bitext" / "en-de.en"),
                                   "tgt_file": str(SAMPLE / "bitext" / "en-de.de")}],
                       "eval": {"toy": str(tmp_path / "toy.tsv")}},
           "corpora": {"bitext_pairs": {"pivots": ["en"]}, "eval_sets": {"toy_max_pairs": 250}},
           "training": {"toy_run": {"steps": 3, "warmup_steps": 1, "device": "cpu",
                                    "encoder": {"hidden_size": 32, "num_layers": 1, "num_heads": 2,
                                                "intermediate_size": 64, "max_length": 24}}},
           "evaluation": {"toy": {"scale": 100.0}}}
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


def test_a_toy_task_in_one_new_file_per_layer_is_run_reported_carded_and_exported(tmp_path: Path) -> None:
    (tmp_path / "pipelines_part").mkdir()
    (tmp_path / "pipelines_part" / "toy.py").write_text(TOY_PIPELINES, encoding="utf-8")
    (tmp_path / "models_part").mkdir()
    (tmp_path / "models_part" / "toy.py").write_text(TOY_MODELS, encoding="utf-8")
    config, root = _toy_config(tmp_path), tmp_path / "data"
    commands = [["run", str(config), "--executor", "local"],
                ["export-model", "toy_run", str(tmp_path / "model"), "--data-root", str(root)],
                ["export-results", "toy_run", str(tmp_path / "mteb"), "--data-root", str(root)]]
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(tmp_path / "pipelines_part"),
                           str(tmp_path / "models_part"), json.dumps(commands)],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]

    # the eval_sets stage read the toy's set with its setting; the warehouse holds the toy's rows
    con = duckdb.connect(str(root / "warehouse.duckdb"), read_only=True)
    try:
        pairs = con.execute("select count(*) from eval_toy").fetchone()
        rows = con.execute("select variant, subset, languages, metric, n from eval_results "
                           "where run = 'toy_run' and task = 'toy'").fetchall()
    finally:
        con.close()
    assert pairs == (250,) and rows == [("mteb", "toy/en-en", "en-en", "cosine_spearman", 250)]
    # the report has its section, under the title the toy declares
    report = (root / "reports" / "latest.md").read_text(encoding="utf-8")
    assert "### Toy sentence similarity" in report and "Task `toy`" in report
    # the card names its protocol and shows its headline row
    card = (tmp_path / "model" / "README.md").read_text(encoding="utf-8")
    assert "toy cosine Spearman)." in card and "| toy | mteb | toy/en-en | en-en | cosine_spearman |" in card
    # export-results wrote it where the toy's mteb mapping says
    record = json.loads((tmp_path / "mteb" / "polysent_export.json").read_text(encoding="utf-8"))
    assert record["tasks"] == {"STS17": 1}
    (result,) = (tmp_path / "mteb" / "results").rglob("STS17.json")
    score = json.loads(result.read_text(encoding="utf-8"))["scores"]["test"][0]
    assert score["hf_subset"] == "en-en" and -1 <= score["main_score"] == score["cosine_spearman"] <= 1
    assert pl.read_parquet(next(root.glob("artifacts/evaluate/*/eval_results.parquet")))["task"].unique().to_list() \
        == ["toy"]
