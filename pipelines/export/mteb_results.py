"""A run's ``eval_results`` in mteb's results layout (``polysent export-results RUN DIR``).

Why: a user wants to set a trained model's numbers next to the public MTEB leaderboard, and mteb's own tools
(``mteb.ResultCache``, ``mteb.TaskResult``, the leaderboard scripts) read a results folder, not our warehouse. The files
written here are the ones ``mteb.ResultCache.save_to_cache`` (installed mteb 2.26.24) writes::

    DIR/results/{model name, "/" → "__"}/{revision}/{TaskName}.json     one ``TaskResult`` per task
    DIR/results/{model name, "/" → "__"}/{revision}/model_meta.json     the ``ModelMeta`` of the model
    DIR/polysent_export.json                                              what was exported, from where, what was not

so ``mteb.ResultCache(DIR).load_results()`` or ``mteb.TaskResult.from_disk(path)`` reads them.

Only numbers computed with mteb's protocol are exported — a number is only worth setting next to the leaderboard when
it was computed the same way on the same data:

* the ``mteb`` variant rows (methods §9: mteb's evaluators reproduced on our embeddings), and for STS12–16 the
  ``senteval`` ``{dataset}/all`` row: mteb scores each of these as ONE pooled test set (cosine Spearman over every
  pair), which is SentEval's ``all``; our per-subset ``mteb`` rows have no mteb counterpart there;
* on mteb's data: each row's ``n`` (items scored) must equal the number of samples mteb's descriptive statistics give
  for that task, split and subset (``pipelines.export.mteb_tasks``), so a subsample, another split of the source (JMTEB
  kept half of MewsC-16 ja) or a different pooling (mteb's SICK-R is all 9,927 pairs) is not passed off as comparable;
* with mteb's settings where the row does not carry them (classification: 10 experiments of 8 samples per label
  trained on ``train``, seed 42; clustering: every document, not our 4 % sample). They are read from the evaluate
  artifact's manifest.

Everything else (other variants, other tasks, rows failing a check) is skipped, and the reason is logged and written to
``polysent_export.json``. Scale: our ``eval_results`` are points (×100); mteb stores fractions in [0, 1], so values are
divided by 100 — thresholds, which are raw cosine values, are kept as they are. Values are rounded to 6 digits as
``TaskResult.to_disk`` does.

Task names, splits, hf_subsets, their ``xxx-Scrp`` languages, revisions and main scores come from
``pipelines.export.mteb_tasks`` (generated from the installed mteb; a test compares it with mteb when mteb is
installed), so this module needs neither mteb nor torch. Which of our rows are mteb's protocol and which mteb task,
split and subset each fills is the evaluation task's own declaration (``pipelines/eval_tasks/<name>.py``: its
``Mteb`` mapping, gathered by ``pipelines.eval_task_registry``); this module checks the result against mteb's
metadata and writes it, and names no task.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from pipelines.eval_task_registry import MTEB_SPLITS, MtebTarget, task_of
from pipelines.export.mteb_tasks import MTEB_VERSION, TASKS

log = logging.getLogger("polysent.pipelines.export")

COLUMNS = ("run", "model", "task", "variant", "subset", "languages", "metric", "value", "n")
EXPORT_RECORD = "polysent_export.json"
NO_REVISION = "no_revision_available"  # mteb's name for a model without a revision
Target = MtebTarget  # where one of our rows goes in mteb's layout (task, split, hf_subset)

# mteb's score keys per task type (``mteb/abstasks/*``): other metrics of a row (our std, counts) are not written
_SCORE_KEYS: dict[str, Callable[[str], bool]] = {
    "BitextMining": lambda m: m in {"accuracy", "precision", "recall", "f1"},
    "STS": lambda m: re.fullmatch(r"(cosine_|manhattan_|euclidean_)?(pearson|spearman)", m) is not None,
    "Clustering": lambda m: m in {"v_measure", "v_measure_std"},
    "Classification": lambda m: m in {"accuracy", "f1", "f1_weighted", "precision", "precision_weighted", "recall",
                                      "recall_weighted", "ap", "ap_weighted"},
    "PairClassification": lambda m: re.fullmatch(
        r"(similarity|cosine|manhattan|euclidean|dot)_(accuracy|f1|precision|recall|ap)(_threshold)?|"
        r"max_(accuracy|f1|precision|recall|ap)", m) is not None,
}
class UnknownRunError(ValueError):
    """The run has no evaluation results; the message lists the runs that have some."""

    def __init__(self, run: str, known: Sequence[str]) -> None:
        self.run, self.known = run, list(known)
        super().__init__(f"unknown run {run!r}: no eval_results rows for it; known runs: "
                         f"{', '.join(self.known) if self.known else '(none: no evaluation results)'}")


@dataclass
class RunResults:
    """One run's evaluation rows with what the rows do not carry: the settings they were computed with.

    ``settings``: the evaluate artifact's ``config.settings`` (``evaluation`` section), ``sources``: the eval_sets
    artifact's ``config.sources``; ``seconds``: scoring time per task (manifest ``stats.seconds``); ``created_at``:
    when the artifact was built; ``adapted_from``: the start model of a trained run, when known.
    """

    run: str
    rows: pl.DataFrame
    settings: Mapping[str, Any] = field(default_factory=dict)
    sources: Mapping[str, Any] = field(default_factory=dict)
    seconds: Mapping[str, float] = field(default_factory=dict)
    created_at: str | None = None
    adapted_from: str | None = None
    artifacts: list[str] = field(default_factory=list)


@dataclass
class Export:
    """What ``export_mteb`` wrote (``files``: paths relative to DIR) and what it skipped (reason → our subsets)."""

    model_dir: Path
    files: list[str]
    tasks: dict[str, int]  # mteb task → subsets written
    skipped: dict[str, list[str]]


# -- which mteb task, split and subset a row belongs to -----------------------------------------------------------
def target(task: str, variant: str, subset: str, languages: str, n: int | None, ctx: RunResults) -> Target | str:
    """The mteb task/split/subset of one of our (task, variant, subset) results, or why it has none: the task's mteb
    mapping (``pipelines/eval_tasks/<task>.py``, ``Mteb``) places it, then it must be one of the mteb task's splits and
    subsets and have as many items as mteb scores there."""
    spec = task_of(task)
    mapping = spec.mteb if spec is not None else None
    if mapping is None:
        return f"mteb has no task with the {task} protocol"
    if variant not in mapping.variants:
        return f"not mteb's protocol (variant {variant})"
    got = mapping.target(variant, subset, languages or "", ctx)
    if isinstance(got, str):
        return got
    meta = TASKS[got.task]
    if got.split not in meta["eval_splits"] and MTEB_SPLITS.get(got.split) in meta["eval_splits"]:
        got = Target(got.task, MTEB_SPLITS[got.split], got.hf_subset)  # our "dev" is mteb's "validation"
    if got.split not in meta["eval_splits"]:
        return f"split {got.split!r} is not one of {got.task}'s evaluation splits {meta['eval_splits']}"
    if got.hf_subset not in meta["languages"]:
        return f"{got.task} has no subset {got.hf_subset!r}"
    expected = meta["num_samples"].get(got.split, {}).get(got.hf_subset)
    if expected is not None and n is not None and int(n) != expected:
        return (f"{n} items scored, mteb's {got.task} {got.split}/{got.hf_subset} has {expected}: not the same "
                "data")
    return got


def _rename(task: str, variant: str) -> Mapping[str, str]:
    """Our metric names that mteb spells differently, for rows of ``task`` / ``variant``."""
    spec = task_of(task)
    return spec.mteb.rename.get(variant, {}) if spec is not None and spec.mteb is not None else {}


# -- scores -------------------------------------------------------------------------------------------------------
def _mteb_value(metric: str, value: float) -> float:
    """Points (×100) → mteb's fraction; thresholds are raw similarities and stay as they are."""
    return round(float(value) if metric.endswith("_threshold") else float(value) / 100.0, 6)


def task_results(results: RunResults) -> tuple[dict[str, dict[str, Any]], dict[str, list[str]]]:
    """``({mteb task name: TaskResult dict}, {skip reason: ["task/variant/subset", ...]})`` for one run.

    Raises ValueError when two of our rows land on the same mteb score (one task, split, subset and key).
    """
    rows = results.rows
    skipped: dict[str, list[str]] = {}
    # one entry per (task, variant, subset): the metrics of a subset decide together
    scores: dict[Target, dict[str, float]] = {}
    origin: dict[tuple[Target, str], str] = {}
    owner: dict[str, set[str]] = {}  # mteb task → our tasks whose rows fill it
    keyed = rows.group_by("task", "variant", "subset", "languages", maintain_order=True).agg(
        pl.col("metric"), pl.col("value"), pl.col("n").max())
    for r in keyed.sort("task", "variant", "subset").iter_rows(named=True):
        where = f"{r['task']}/{r['variant']}/{r['subset']}"
        got = target(r["task"], r["variant"], r["subset"], r["languages"], r["n"], results)
        if isinstance(got, str):
            skipped.setdefault(got, []).append(where)
            continue
        meta = TASKS[got.task]
        rename = _rename(r["task"], r["variant"])
        keep = _SCORE_KEYS[meta["type"]]
        entry = scores.setdefault(got, {})
        for metric, value in zip(r["metric"], r["value"], strict=True):
            key = rename.get(metric, metric)
            if not keep(key) or value is None:
                continue
            if key in entry:
                raise ValueError(f"eval_results: {where} and {origin[(got, key)]} both give {got.task} "
                                 f"{got.split}/{got.hf_subset} {key}")
            entry[key] = _mteb_value(key, value)
            origin[(got, key)] = where
        owner.setdefault(got.task, set()).add(r["task"])
    out: dict[str, dict[str, Any]] = {}
    for tgt, entry in sorted(scores.items(), key=lambda kv: (kv[0].task, kv[0].split, kv[0].hf_subset)):
        meta = TASKS[tgt.task]
        main = meta["main_score"]
        if main not in entry:
            skipped.setdefault(f"no {main} (the main score of {tgt.task})", []).append(
                f"{tgt.task}/{tgt.split}/{tgt.hf_subset}")
            continue
        res = out.setdefault(tgt.task, {
            "dataset_revision": meta["revision"], "task_name": tgt.task, "mteb_version": MTEB_VERSION,
            "scores": {}, "evaluation_time": None, "kg_co2_emissions": None, "date": None,
            "evaluation_phases": None})
        res["scores"].setdefault(tgt.split, []).append(
            {**dict(sorted(entry.items())), "main_score": entry[main], "hf_subset": tgt.hf_subset,
             "languages": list(meta["languages"][tgt.hf_subset]), "mteb_version": MTEB_VERSION})
    date = _timestamp(results.created_at)
    for name, res in out.items():
        # one of our tasks feeding several mteb tasks (STS): its scoring time is not split among them
        feeders = owner[name]
        single = len(feeders) == 1 and sum(1 for v in owner.values() if v == feeders) == 1
        seconds = results.seconds.get(next(iter(feeders))) if single else None
        res["evaluation_time"] = float(seconds) if seconds is not None else None
        res["date"] = date
    return out, skipped


def _timestamp(created_at: str | None) -> float | None:
    if not created_at:
        return None
    try:
        return dt.datetime.fromisoformat(created_at).timestamp()
    except ValueError:
        return None


def model_meta(name: str, revision: str, adapted_from: str | None = None) -> dict[str, Any]:
    """``model_meta.json`` as ``ModelMeta.to_dict`` writes it, with what we know (the rest unknown: None)."""
    return {
        "loader": None, "loader_kwargs": {}, "name": name, "revision": revision, "release_date": None,
        "languages": None, "n_parameters": None, "n_active_parameters_override": None,
        "n_embedding_parameters": None, "memory_usage_mb": None, "max_tokens": None, "embed_dim": None,
        "license": None, "open_weights": None, "public_training_code": None, "public_training_data": None,
        "framework": ["Sentence Transformers"], "reference": None, "similarity_fn_name": "cosine",
        "use_instructions": False, "training_datasets": None, "adapted_from": adapted_from, "superseded_by": None,
        "modalities": ["text"], "model_type": ["dense"], "citation": None, "contacts": None,
        "experiment_kwargs": None, "output_dtypes": None, "extra_requirements_groups": None,
    }


def model_name_as_path(name: str) -> str:
    """mteb's ``ModelMeta.model_name_as_path``."""
    return name.replace("/", "__").replace(" ", "_")


def default_model_name(run: str) -> str:
    """``polysent/{run}``: mteb model names are ``organisation/model``."""
    return f"polysent/{run}"


def default_revision(model: str | None) -> str:
    """Our ``model`` column (the training artifact's key or the model's content hash) when it is a plain hash."""
    return model if model and re.fullmatch(r"[0-9a-f]{8,64}", model) else NO_REVISION


# -- writing --------------------------------------------------------------------------------------------------------
def export_mteb(results: RunResults, out: Path, *, model_name: str | None = None, revision: str | None = None,
                force: bool = False) -> Export:
    """Write ``results`` into ``out`` in mteb's layout (module docstring), all at once.

    ``out`` must be absent or an empty folder unless ``force`` (then it is replaced whole). The files are written into a
    temporary folder next to ``out`` and renamed into place, so ``out`` is never seen half-written. Raises
    FileExistsError for a non-empty ``out`` without ``force``, ValueError when nothing of the run can be exported (the
    message lists the reasons).
    """
    from warehouse.atomic import atomic_dir

    out = Path(out).absolute()
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise FileExistsError(f"{out} exists and is not empty; choose another folder or pass --force to replace it")
    models = sorted(set(results.rows["model"].drop_nulls()))
    name = model_name or default_model_name(results.run)
    if "/" not in name:
        raise ValueError(f"model name {name!r}: mteb model names are 'organisation/model'")
    rev = revision or default_revision(models[0] if len(models) == 1 else None)
    files, skipped = task_results(results)
    for reason, where in sorted(skipped.items()):
        log.info("export-results %s: skipped %d result(s), %s: %s%s", results.run, len(where), reason,
                 ", ".join(where[:4]), "…" if len(where) > 4 else "")
    if not files:
        raise ValueError(f"run {results.run!r}: nothing to export in mteb's format; every result was skipped: "
                         + "; ".join(f"{reason} ({len(w)})" for reason, w in sorted(skipped.items())))
    with atomic_dir(out) as tmp:
        rel_dir, written, record = write_mteb_files(results, tmp, files, skipped, name, rev, models)
    return Export(out / rel_dir, written, record["tasks"], skipped)


def write_mteb_files(results: RunResults, folder: Path, files: Mapping[str, dict[str, Any]],
                     skipped: Mapping[str, list[str]], name: str, rev: str, models: Sequence[str]
                     ) -> tuple[Path, list[str], dict[str, Any]]:
    """Write ``files`` (``task_results``) under ``folder`` in mteb's layout with ``model_meta.json`` and the export
    record; ``folder`` is the caller's temporary folder (it publishes it). Returns (the results folder relative to
    ``folder``, the files written, the record)."""
    rel_dir = Path("results") / model_name_as_path(name) / rev
    model_dir = folder / rel_dir
    model_dir.mkdir(parents=True)
    written = []
    for task, data in sorted(files.items()):
        (model_dir / f"{task}.json").write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", "utf-8")
        written.append((rel_dir / f"{task}.json").as_posix())
    meta = model_meta(name, rev, results.adapted_from)
    (model_dir / "model_meta.json").write_text(json.dumps(meta, indent=4) + "\n", "utf-8")
    written.append((rel_dir / "model_meta.json").as_posix())
    record = {"run": results.run, "model": list(models), "model_name": name, "revision": rev,
              "mteb_layout_version": MTEB_VERSION, "artifacts": results.artifacts,
              "tasks": {t: sum(len(v) for v in d["scores"].values()) for t, d in sorted(files.items())},
              "skipped": {reason: where for reason, where in sorted(skipped.items())}}
    (folder / EXPORT_RECORD).write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", "utf-8")
    return rel_dir, written, record


# -- reading a run from the warehouse --------------------------------------------------------------------------------
def known_runs(frame: pl.DataFrame) -> list[str]:
    return sorted(set(frame["run"].drop_nulls())) if "run" in frame.columns else []


def _manifest(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / "manifest.json").read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def run_results(history: pl.DataFrame, run: str) -> RunResults:
    """``history``: ``eval_results_all`` with each row's file as ``source`` (``filename = true``). Keeps, per (task,
    variant), the rows of the run's most recent evaluate artifact (manifest ``created_at``; ties: the larger path) and
    reads that artifact's manifest (and its eval_sets and train inputs') for the settings the rows do not carry.

    Raises UnknownRunError (listing the known runs) when the run has no rows, ValueError for a table lacking columns.
    """
    missing = [c for c in (*COLUMNS, "source") if c not in history.columns]
    if missing:
        raise ValueError(f"eval_results_all: missing columns {missing} (expected {', '.join(COLUMNS)} and the file)")
    mine = history.filter(pl.col("run") == run)
    if mine.height == 0:
        raise UnknownRunError(run, known_runs(history))
    manifests = {src: _manifest(Path(src).parent) for src in mine["source"].unique().to_list()}
    created = pl.DataFrame({"source": list(manifests), "created_at": [str(m.get("created_at") or "")
                                                                      for m in manifests.values()]})
    best = (mine.select("task", "variant", "source").unique().join(created, on="source")
            .sort("created_at", "source").group_by("task", "variant").agg(pl.col("source").last()))
    rows = mine.join(best, on=["task", "variant", "source"], how="semi")
    chosen = sorted(set(rows["source"]))
    # the newest artifact's settings describe the rows (one artifact in practice; several only after a partial rerun)
    newest = max(chosen, key=lambda s: (str(manifests[s].get("created_at") or ""), s))
    m = manifests[newest]
    config = m.get("config") if isinstance(m.get("config"), dict) else {}
    inputs = m.get("inputs") if isinstance(m.get("inputs"), dict) else {}
    sources = _input_config(inputs, "eval_sets", Path(newest).parent).get("sources") or {}
    train = _input_config(inputs, "model", Path(newest).parent)
    encoder = (train.get("settings") or {}).get("encoder") if isinstance(train.get("settings"), dict) else None
    adapted = encoder.get("pretrained") if isinstance(encoder, dict) else None
    stats = m.get("stats") if isinstance(m.get("stats"), dict) else {}
    return RunResults(run=run, rows=rows.select(COLUMNS), settings=config.get("settings") or {},
                      sources=sources if isinstance(sources, dict) else {},
                      seconds=stats.get("seconds") if isinstance(stats.get("seconds"), dict) else {},
                      created_at=m.get("created_at") or None,
                      adapted_from=adapted if isinstance(adapted, str) else None,
                      artifacts=[str(Path(s).parent) for s in chosen])


def _input_config(inputs: Mapping[str, Any], name: str, artifact: Path) -> dict[str, Any]:
    """The ``config`` of an input artifact, found next to ``artifact`` (``artifacts/<stage>/<key[:20]>``), so a
    moved or copied data root reads its own copy."""
    ref = inputs.get(name)
    if not isinstance(ref, Mapping) or not ref.get("stage") or not ref.get("key"):
        return {}
    folder = artifact.parent.parent / str(ref["stage"]) / str(ref["key"])[:20]
    config = _manifest(folder).get("config")
    return config if isinstance(config, dict) else {}


def eval_history(root: Any) -> pl.DataFrame | None:
    """``eval_results_all`` of the data root ``root`` (a ``warehouse.layout.DataRoot``) with each row's file as
    ``source``; None when nothing was evaluated there."""
    from warehouse.catalog import connect

    con = connect(root)
    try:
        views = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        if "eval_results_all" not in views:
            return None
        return con.sql("SELECT * EXCLUDE (filename), filename AS source FROM eval_results_all").pl()
    finally:
        con.close()


def read_run(root: Any, run: str) -> RunResults:
    """``run_results`` over the warehouse at ``root`` (a ``warehouse.layout.DataRoot``)."""
    history = eval_history(root)
    if history is None:
        raise UnknownRunError(run, [])
    return run_results(history, run)
