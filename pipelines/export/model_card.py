"""A trained run's model card (``README.md`` beside the weights), from the warehouse.

What a researcher needs before trusting a checkpoint, all read from the artifacts the run left — nothing typed by
hand, so the card cannot drift from the model:

* the Hub metadata header (https://huggingface.co/docs/hub/model-cards): ``language`` (the languages of the rows
  the run's objectives read), ``base_model`` (the start's public id), ``library_name: sentence-transformers``,
  ``pipeline_tag: sentence-similarity``, ``tags``, ``datasets`` (the training sources by their public names),
  ``license`` (where every source and the base model declare the same one; otherwise ``unknown``, and the card
  says why) and a ``model-index`` holding only the results mteb computes the same way
  (``pipelines.export.mteb_results``, its checks of protocol and row counts);
* the objectives with their settings and papers, steps, batches, learning rate, seed, precision, hardware and wall
  time (the ``train`` artifact's manifest);
* the training corpora: rows per language of each table an objective reads, the leakage guard's removals per
  evaluation set, and the content hash of every input (the corpus artifacts' manifests and tables);
* the training curve, summarised per objective (``train_steps``, ``train_objective_losses``);
* the evaluation beside the start model and the ``evaluation.models`` peers scored on the same evaluation sets,
  with the report's own headline rows (``pipelines.report.results.headlines``) so the card and the report agree;
  the line above them names each task's protocol as the task declares it (``EvalTask.card`` in
  ``pipelines/eval_tasks/<name>.py``), and the tasks declaring ``exposure`` (Tatoeba, xSIM) are also averaged over the
  languages the run trained on and those it never saw;
* a usage snippet that runs as written from the folder's parent.

``card_facts`` gathers (:class:`~pipelines.export.card_facts.CardFacts`, also written as ``polysent_card.json``);
``render_card`` writes the Markdown. Which tables and languages an objective reads, and the paper it follows, is the
objective registry's knowledge (``models``), so the caller passes ``describe_objectives``
(``flows.export_model_command`` does); this module needs neither torch nor the models package.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from pipelines.eval_task_registry import tasks
from pipelines.export.card_facts import CardFacts, Corpus, InputFile, ObjectiveInfo
from pipelines.export.mteb_results import RunResults, UnknownRunError, run_results, task_results
from pipelines.export.public_sources import PublicModel, PublicSource, identify_model, identify_source
from pipelines.language_codes import split_languages
from pipelines.report.results import KEY, delta_column, headlines, runs_as_columns

log = logging.getLogger("polysent.pipelines.export")

CARD_FILE = "README.md"
FACTS_FILE = "polysent_card.json"
AUXILIARY_TABLES = ("leakage", "bitext_filter_counts", "ease_drop_counts", "wiki_drop_counts")
CURVE_WINDOW = 10  # steps averaged at each end of the curve

INTERPOLATION_PAPER = ("Wortsman et al. 2022, \"Robust fine-tuning of zero-shot models\" (WiSE-FT, CVPR)",
                       "https://arxiv.org/abs/2109.01903")
INTERPOLATION_FILE = "polysent_interpolation.json"  # models.training.interpolation.LINEAGE_FILE
EVAL_STAGES = ("eval_sets",)  # artifacts a run reads to select its checkpoint: evaluation data, never training data
class CardError(ValueError):
    """The run cannot be described: no training artifact, or a damaged one (the message names the file)."""


# -- reading the warehouse ----------------------------------------------------------------------------------------
def _manifest(folder: Path) -> dict[str, Any]:
    path = folder / "manifest.json"
    try:
        data = json.loads(path.read_text("utf-8"))
    except OSError as exc:
        raise CardError(f"{path}: cannot read the artifact manifest ({exc})") from None
    except ValueError as exc:
        raise CardError(f"{path}: not JSON ({exc}); expected an artifact manifest") from None
    if not isinstance(data, dict):
        raise CardError(f"{path}: expected a JSON object (an artifact manifest)")
    return data


def trained_runs(artifacts: Path) -> dict[str, list[Path]]:
    """Training run name → its ``train`` artifact folders, newest first (manifest ``created_at``)."""
    found: dict[str, list[tuple[str, Path]]] = {}
    for m in sorted((artifacts / "train").glob("*/manifest.json")):
        try:
            data = json.loads(m.read_text("utf-8"))
        except (OSError, ValueError):
            log.warning("%s: unreadable manifest, skipped", m)
            continue
        node = str(data.get("node", ""))
        if node.startswith("train."):
            found.setdefault(node[len("train."):], []).append((str(data.get("created_at") or ""), m.parent))
    return {run: [p for _, p in sorted(v, key=lambda x: x[0], reverse=True)] for run, v in sorted(found.items())}


def train_artifact(artifacts: Path, run: str, results: RunResults | None) -> Path:
    """The ``train`` artifact whose model the run's newest evaluation scored; without evaluation, the newest one."""
    runs = trained_runs(artifacts)
    if results is not None:
        for art in results.artifacts:
            ref = (_manifest(Path(art)).get("inputs") or {}).get("model")
            if isinstance(ref, Mapping) and ref.get("stage") == "train" and ref.get("key"):
                folder = artifacts / "train" / str(ref["key"])[:20]
                if (folder / "manifest.json").is_file():
                    return folder
    if run not in runs:
        raise CardError(f"unknown training run {run!r}: no train.{run} artifact under {artifacts}; trained runs: "
                        f"{', '.join(runs) or '(none)'}")
    return runs[run][0]


def start_model_files(inputs: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(start model folder, sha256 of its weights) from a train manifest's ``model/encoder/*`` inputs."""
    folder = sha = None
    for name, ref in inputs.items():
        if name.startswith("model/encoder/") and isinstance(ref, Mapping) and ref.get("path"):
            rel = name[len("model/encoder/"):]
            path = str(ref["path"])
            folder = path[: -len(rel) - 1] if path.endswith(rel) else str(Path(path).parent)
            if rel in ("model.safetensors", "pytorch_model.bin"):
                sha = ref.get("sha256")
    return folder, sha


def rows_per_language(path: Path) -> dict[str, int]:
    """Rows of a corpus table (Parquet file or hive folder) per language: per ``pivot_lang-lang`` pair for a pair
    table with a pivot column (``bitext_pairs``), else per value of ``lang`` (or the first ``*_lang`` column);
    ``{"all": n}`` for a table without one."""
    frame = pl.scan_parquet(path / "**/*.parquet" if path.is_dir() else path, hive_partitioning=path.is_dir())
    cols = frame.collect_schema().names()
    lang = "lang" if "lang" in cols else next((c for c in cols if c.endswith("_lang")), None)
    if lang is None:
        return {"all": int(frame.select(pl.len()).collect().item())}
    key = (pl.concat_str([pl.col("pivot_lang"), pl.col(lang)], separator="-") if "pivot_lang" in cols and
           lang != "pivot_lang" else pl.col(lang).cast(pl.Utf8))
    counts = frame.group_by(key.alias("_k")).agg(pl.len().alias("n")).collect().sort("_k")
    return {str(k): int(n) for k, n in zip(counts["_k"], counts["n"], strict=True)}


def _leakage(folder: Path, tables: Mapping[str, str]) -> list[dict[str, Any]]:
    rel = tables.get("leakage")
    if not rel or not (folder / rel).exists():
        return []
    frame = pl.read_parquet(folder / rel)
    frame = frame.filter(pl.col("units_removed") > 0) if "units_removed" in frame.columns else frame
    return frame.sort(frame.columns).to_dicts()


def _corpus_inputs(manifest: Mapping[str, Any], hub_id: str | None) -> list[InputFile]:
    out = []
    for name, ref in sorted((manifest.get("inputs") or {}).items()):
        if not isinstance(ref, Mapping) or ref.get("kind") != "file" or name.startswith("leakage/"):
            continue
        src = identify_source(str(ref.get("path") or name), hub_id)
        out.append(InputFile(name, ref.get("sha256"), asdict(src)))
    if not out and hub_id:  # loaded from the hub: no local files
        out.append(InputFile(hub_id, None, asdict(identify_source(None, hub_id))))
    return out


def _hub_id(config: Mapping[str, Any]) -> str | None:
    """The hub dataset id a corpus artifact's source names (XNLI readers record ``hub_id`` under ``source`` or
    ``xnli``), whether it was loaded from the hub or read from local files."""
    for key in ("source", "xnli"):
        src = config.get(key)
        if isinstance(src, Mapping) and src.get("hub_id"):
            return str(src["hub_id"])
    return None


def _is_evaluation(stage: str, tables: Mapping[str, Any]) -> bool:
    return stage in EVAL_STAGES or (bool(tables) and all(str(t).startswith("eval_") for t in tables))


def _artifact_inputs(artifacts: Path, train_manifest: Mapping[str, Any]
                     ) -> Iterator[tuple[Mapping[str, Any], Path, dict[str, Any], dict[str, str]]]:
    """The training's ``artifact`` inputs in name order: (input reference, artifact folder, its manifest, its
    tables)."""
    for _, ref in sorted((train_manifest.get("inputs") or {}).items()):
        if not isinstance(ref, Mapping) or ref.get("kind") != "artifact":
            continue
        folder = artifacts / str(ref["stage"]) / str(ref["key"])[:20]
        m = _manifest(folder)
        yield ref, folder, m, dict(m.get("tables") or {})


def corpora(artifacts: Path, train_manifest: Mapping[str, Any], objectives: Sequence[ObjectiveInfo]) -> list[Corpus]:
    """The artifacts the training read (its ``artifact`` inputs) but the evaluation sets it selected its checkpoint
    on (``dev_sets``): corpora with rows per language of the tables its objectives read, and the others (a trained
    tokenizer) named with what they were built from."""
    wanted = {t for o in objectives for t in o.tables}
    out = []
    for ref, folder, m, tables in _artifact_inputs(artifacts, train_manifest):
        if _is_evaluation(str(ref["stage"]), tables):
            continue
        read = [t for t in tables if t in wanted] or [t for t in tables if t not in AUXILIARY_TABLES][:1]
        rows = {t: rows_per_language(folder / tables[t]) for t in read}
        config = m.get("config") if isinstance(m.get("config"), dict) else {}
        built_from = sorted({str(r.get("stage")) for r in (m.get("inputs") or {}).values()
                             if isinstance(r, Mapping) and r.get("kind") == "artifact"})
        out.append(Corpus(str(ref["stage"]), str(m.get("key") or ref["key"]), str(m.get("content_hash") or ""),
                          rows, _leakage(folder, tables), _corpus_inputs(m, _hub_id(config)), built_from,
                          dict(m.get("stats") or {})))
    return out


def dev_sets(artifacts: Path, train_manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The evaluation artifacts a run read to pick its best checkpoint (``training.<run>.dev``): evaluation data,
    listed apart from the training data."""
    out = []
    for ref, _folder, m, tables in _artifact_inputs(artifacts, train_manifest):
        if _is_evaluation(str(ref["stage"]), tables):
            out.append({"stage": str(ref["stage"]), "key": str(m.get("key") or ref["key"]),
                        "content_hash": str(m.get("content_hash") or ""), "tables": sorted(tables)})
    return out


def model_lengths(model: Path) -> dict[str, int | None]:
    """What the exported folder says about input length: ``trained`` (``max_seq_length`` of
    ``sentence_bert_config.json``, where sentence-transformers truncates), ``tokenizer`` (``model_max_length`` of
    ``tokenizer_config.json``, where plain 🤗 ``truncation=True`` cuts) and ``positions`` (``config.json``)."""
    def read(name: str, key: str) -> int | None:
        try:
            value = json.loads((model / name).read_text("utf-8")).get(key)
        except (OSError, ValueError):
            return None
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 1e9 \
            else None

    return {"trained": read("sentence_bert_config.json", "max_seq_length"),
            "tokenizer": read("tokenizer_config.json", "model_max_length"),
            "positions": read("config.json", "max_position_embeddings")}


def training_languages(objectives: Sequence[ObjectiveInfo], corpora_: Sequence[Corpus]) -> list[str]:
    """Languages of the rows the objectives read (each narrowed by its own ``languages``), sorted."""
    found: set[str] = set()
    for o in objectives:
        for c in corpora_:
            for table, per_lang in c.rows.items():
                if table in o.tables:
                    langs = {part for k in per_lang if k != "all" for part in split_languages(k)}
                    found |= (langs & set(o.languages)) if o.languages else langs
    return sorted(found)


def curve_summary(folder: Path, manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per objective (and ``total`` when there are several): mean loss over the first and the last
    ``CURVE_WINDOW`` steps, the lowest loss and its step, and the first step at which the loss is within 10 % of its
    last-window mean."""
    tables = manifest.get("tables") or {}
    parts = []
    if tables.get("train_objective_losses"):
        obj = pl.read_parquet(folder / tables["train_objective_losses"]).select("objective", "step", "loss")
        parts.append(obj)
    n_objectives = parts[0]["objective"].n_unique() if parts else 0
    if tables.get("train_steps") and n_objectives != 1:  # one objective: its own row is the total
        tot = pl.read_parquet(folder / tables["train_steps"]).select(pl.lit("total").alias("objective"), "step",
                                                                      "loss")
        parts.append(tot)
    out = []
    for frame in parts:
        for (name,), grp in frame.sort("step").group_by("objective", maintain_order=True):
            grp = grp.filter(pl.col("loss").is_not_null() & pl.col("loss").is_finite())
            if grp.height == 0:
                continue
            first = float(grp.head(CURVE_WINDOW)["loss"].mean())
            last = float(grp.tail(CURVE_WINDOW)["loss"].mean())
            low = grp.sort("loss", "step").row(0, named=True)
            settled = grp.filter(pl.col("loss") <= last * 1.1 + 1e-12)
            out.append({"objective": str(name), "steps": grp.height, "first": first, "last": last,
                        "min": float(low["loss"]), "min_step": int(low["step"]),
                        "settled_step": int(settled["step"][0]) if settled.height else None})
    return out


def _evaluate_artifacts(artifacts: Path) -> list[dict[str, Any]]:
    out = []
    for m in sorted((artifacts / "evaluate").glob("*/manifest.json")):
        try:
            out.append({**json.loads(m.read_text("utf-8")), "_folder": str(m.parent)})
        except (OSError, ValueError):
            log.warning("%s: unreadable manifest, skipped", m)
    return out


def start_and_peers(artifacts: Path, results: RunResults, start_sha: str | None) -> tuple[str | None, list[str]]:
    """The evaluation run name of the start model (an ``evaluate`` artifact over the same evaluation sets whose
    weights have the start's sha256) and the peers (the other external models scored on those sets)."""
    mine = [_manifest(Path(a)) for a in results.artifacts]
    sets = {str(((m.get("inputs") or {}).get("eval_sets") or {}).get("key")) for m in mine}
    same_weights, others = [], []
    for m in _evaluate_artifacts(artifacts):
        inputs = m.get("inputs") or {}
        if str((inputs.get("eval_sets") or {}).get("key")) not in sets:
            continue
        name = (m.get("config") or {}).get("run")
        if not name or name == results.run or (inputs.get("model") or {}).get("stage") == "train":
            continue
        shas = {str(ref.get("sha256")) for k, ref in inputs.items() if k.startswith("model/")
                and isinstance(ref, Mapping) and k.rsplit("/", 1)[-1] in ("model.safetensors", "pytorch_model.bin")}
        (same_weights if start_sha and start_sha in shas else others).append(str(name))
    # several evaluations of the start's weights (a peer naming it, and another name): the first name is the start
    names = sorted(set(same_weights))
    start = names[0] if names else None
    return start, sorted(set(others) | set(names[1:]))


def comparison(history: pl.DataFrame, run: str, start: str | None, peers: Sequence[str]) -> list[dict[str, Any]]:
    """The report's headline rows of ``run`` beside ``start`` (with Δ) and the peers: one dict per (task, variant,
    subset, languages, metric) with a float (or None) per model and ``delta``."""
    group = [r for r in dict.fromkeys((run, *([start] if start else []), *peers))]
    frames = {}
    for name in group:
        try:
            frames[name] = run_results(history, name).rows
        except UnknownRunError:
            continue
    if run not in frames:
        return []
    rows = pl.concat(list(frames.values()), how="vertical_relaxed")
    keys = rows.filter(pl.col("run") == run).select(*KEY)
    if start in frames:
        keys = keys.join(rows.filter(pl.col("run") == start).select(*KEY), on=list(KEY), how="semi",
                         nulls_equal=True)
    rows = rows.join(keys, on=list(KEY), how="semi", nulls_equal=True)
    head = headlines(rows)
    present = [g for g in group if g in frames]
    wide = head.pivot(on="run", on_columns=present, index=list(KEY), values="value")
    order = runs_as_columns(head, KEY, present).select(*KEY)  # the report's row order
    wide = order.join(wide, on=list(KEY), how="left", nulls_equal=True)
    out = []
    for r in wide.iter_rows(named=True):
        entry = {k: r[k] for k in KEY}
        entry["values"] = {g: (None if r.get(g) is None or (isinstance(r[g], float) and math.isnan(r[g]))
                               else float(r[g])) for g in present}
        a, b = entry["values"].get(run), entry["values"].get(start) if start else None
        entry["delta"] = None if a is None or b is None else a - b
        out.append(entry)
    return out


def exposure_tasks() -> tuple[str, ...]:
    """The tasks whose per-language headline rows the card averages by training exposure (``EvalTask.exposure``:
    Tatoeba, xSIM)."""
    return tuple(name for name, t in tasks().items() if t.exposure)


def mteb_datasets() -> dict[str, str]:
    """mteb task → the Hub dataset it scores (model-index ``dataset.type``), from the tasks' mteb mappings."""
    return {k: v for t in tasks().values() if t.mteb is not None for k, v in t.mteb.datasets.items()}


def by_exposure(history: pl.DataFrame, run: str, start: str | None, peers: Sequence[str],
                languages: Sequence[str]) -> list[dict[str, Any]]:
    """Per-language headline rows of Tatoeba and xSIM averaged over the languages the run trained on (every
    language of the pair among the training languages, compared as ISO 639-3 like the report) and over those it
    never saw — where a retrieval fine-tune's gains and losses differ most. One dict per (task, variant, metric,
    block) with the number of languages, a mean per model and ``delta`` (run − start)."""
    from pipelines.report.results import headline_metrics, is_aggregate
    from pipelines.report.training import iso3, subset_languages

    trained = {iso3(x) for x in languages}
    group = [r for r in dict.fromkeys((run, *([start] if start else []), *peers))]
    frames = []
    for name in group:
        try:
            frames.append(run_results(history, name).rows)
        except UnknownRunError:
            continue
    if not frames or not trained:
        return []
    rows = pl.concat(frames, how="vertical_relaxed").filter(pl.col("task").is_in(exposure_tasks()))
    rows = rows.join(headline_metrics(rows), on=["task", "variant", "metric"], how="semi").filter(~is_aggregate())
    if rows.height == 0:
        return []
    blocks = []
    for langs in rows["languages"].to_list():
        codes = subset_languages(langs)
        blocks.append(None if not codes else "trained" if codes <= trained else "never trained")
    rows = rows.with_columns(pl.Series("block", blocks, dtype=pl.Utf8)).filter(pl.col("block").is_not_null())
    # only the languages every model has, so each mean averages the same languages
    present = [g for g in group if g in set(rows["run"])]
    common = rows.group_by("task", "variant", "metric", "subset").agg(pl.col("run").n_unique().alias("k"))
    rows = rows.join(common.filter(pl.col("k") == len(present)), on=["task", "variant", "metric", "subset"],
                     how="semi")
    agg = rows.group_by("task", "variant", "metric", "block", "run").agg(pl.col("value").mean().alias("mean"),
                                                                         pl.len().alias("n"))
    out = []
    for (task, variant, metric, block), grp in agg.sort("task", "variant", "metric", "block").group_by(
            "task", "variant", "metric", "block", maintain_order=True):
        values = {r["run"]: float(r["mean"]) for r in grp.iter_rows(named=True)}
        a, b = values.get(run), values.get(start) if start else None
        out.append({"task": task, "variant": variant, "metric": metric, "block": block,
                    "languages": int(grp["n"].max()), "values": {g: values.get(g) for g in present},
                    "delta": None if a is None or b is None else a - b})
    return out


def model_index(results: RunResults) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The Hub ``model-index`` results of the rows mteb computes the same way (``task_results``), values in points
    (as mteb's own cards); the skipped rows counted per reason."""
    files, skipped = task_results(results)
    datasets = mteb_datasets()
    entries = []
    for task, data in files.items():
        ttype = _task_type(task)
        for split, scores in sorted(data["scores"].items()):
            for s in scores:
                metrics = [{"type": k, "value": round(float(v) * 100.0, 2) if not k.endswith("_threshold")
                            else round(float(v), 4)}
                           for k, v in sorted(s.items()) if k not in ("main_score", "hf_subset", "languages",
                                                                      "mteb_version")
                           and isinstance(v, (int, float))]
                entries.append({"task": {"type": ttype},
                                "dataset": {"type": datasets.get(task, task),
                                            "name": f"MTEB {task} ({s['hf_subset']})",
                                            "config": s["hf_subset"], "split": split,
                                            "revision": data["dataset_revision"]},
                                "metrics": metrics})
    return entries, {reason: len(w) for reason, w in sorted(skipped.items())}


def _task_type(task: str) -> str:
    from pipelines.export.mteb_tasks import TASKS

    return str(TASKS[task]["type"])


def decide_license(model: PublicModel, sources: Sequence[PublicSource]) -> tuple[str, str]:
    """(Hub license id, why): the one license every training source and the base model declare; ``unknown``
    otherwise, with the reason."""
    declared = [(f"base model {model.hub_id}", model.license)] if model.hub_id or model.note else []
    if model.hub_id is None and model.license is None and model.note.startswith("trained from randomly"):
        declared = []
    declared += [(s.name, s.license) for s in sources]
    missing = [name for name, lic in declared if lic is None]
    if not declared:
        return "unknown", "no training source was recognised"
    if missing:
        return "unknown", ("not every input declares a license: " + ", ".join(missing) + " declare(s) none; "
                           "the others: " + ", ".join(f"{n} {lic}" for n, lic in declared if lic) + ".")
    licenses = sorted({lic for _, lic in declared if lic})
    if len(licenses) == 1:
        return licenses[0], "every training source and the base model declare " + licenses[0] + "."
    return "unknown", ("the inputs declare different licenses (" + ", ".join(f"{n}: {lic}" for n, lic in declared)
                       + "); which terms bind the trained weights is a legal question this card does not decide — "
                       "the most restrictive of them may apply.")


def _hardware(stats: Mapping[str, Any]) -> dict[str, Any]:
    hw = stats.get("hardware") if isinstance(stats.get("hardware"), dict) else {}
    return {"device": stats.get("device"), "world_size": stats.get("world_size"), **hw}


def card_facts(artifacts: Path, history: pl.DataFrame | None, run: str, *,
               describe_objectives: Callable[[Sequence[Mapping[str, Any]]], list[ObjectiveInfo]],
               model_name: str | None = None) -> CardFacts:
    """Gather the card of training run ``run`` from a data root's ``artifacts`` folder and ``eval_results_all``
    (``history``, with each row's file as ``source``; ``None`` when nothing was evaluated)."""
    results = None
    if history is not None and history.height:
        try:
            results = run_results(history, run)
        except UnknownRunError:
            results = None
    folder = train_artifact(artifacts, run, results)
    m = _manifest(folder)
    config = m.get("config") or {}
    settings = dict(config.get("settings") or {})
    if not settings:
        raise CardError(f"{folder / 'manifest.json'}: no config.settings; expected a train artifact's manifest")
    stats = dict(m.get("stats") or {})
    objectives = describe_objectives(settings.get("objectives") or [])
    corp = corpora(artifacts, m, objectives)
    start_folder, start_sha = start_model_files(m.get("inputs") or {})
    encoder = settings.get("encoder") or {}
    base = identify_model(encoder.get("pretrained"), start_folder)
    sources: dict[str, PublicSource] = {}
    for c in corp:
        for f in c.inputs:
            src = PublicSource(**f.source)
            sources.setdefault(src.name, src)
    license_id, license_note = decide_license(base, list(sources.values()))
    name = model_name or f"polysent/{run}"
    facts = CardFacts(
        run=run, model_name=name, train_key=str(m.get("key") or ""), train_content_hash=str(m.get("content_hash")
                                                                                           or ""),
        created_at=m.get("created_at"), base_model=asdict(base), settings=settings, stats=stats,
        hardware=_hardware(stats), objectives=objectives, corpora=corp,
        languages=training_languages(objectives, corp), curve=curve_summary(folder, m),
        license=license_id, license_note=license_note,
        datasets=sorted({s.hub_id for s in sources.values() if s.hub_id}),
        sources=[asdict(s) for s in sources.values()], prompt=_prompt(folder / "model"),
        dev=dev_sets(artifacts, m), lengths=model_lengths(folder / "model"),
        interpolation=_interpolation(folder / "model", stats))
    if results is not None and history is not None:
        facts.start_run, facts.peers = start_and_peers(artifacts, results, start_sha)
        facts.results = comparison(history, run, facts.start_run, facts.peers)
        facts.exposure = by_exposure(history, run, facts.start_run, facts.peers, facts.languages)
        facts.model_index, facts.mteb_skipped = model_index(results)
    from pipelines.export.limitations import limitations

    facts.limitations = limitations(facts, run_results(history, run).rows if results is not None and
                                    history is not None else None)
    return facts


def _interpolation(model: Path, stats: Mapping[str, Any]) -> dict[str, Any] | None:
    """The lineage of a model trained with ``interpolate_start`` (its ``polysent_interpolation.json``, as the train
    stats recorded it): the pipeline evaluated these weights."""
    lineage = stats.get("interpolation")
    path = model / INTERPOLATION_FILE
    if not isinstance(lineage, dict) and path.is_file():
        try:
            lineage = json.loads(path.read_text("utf-8"))
        except ValueError as exc:
            raise CardError(f"{path}: not JSON ({exc}); expected an interpolation lineage") from None
    return {**lineage, "evaluated": True} if isinstance(lineage, dict) else None


def _prompt(model: Path) -> str | None:
    """The default prompt the sentence-transformers folder prepends (``query: `` for multilingual-e5), if any."""
    try:
        cfg = json.loads((model / "config_sentence_transformers.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    prompts, default = cfg.get("prompts") or {}, cfg.get("default_prompt_name")
    return prompts.get(default) if isinstance(prompts, dict) and default else None


# -- writing ------------------------------------------------------------------------------------------------------
def fmt(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}"


def fmt_delta(value: float | None) -> str:
    text = fmt(value)
    return text if value is None or text.startswith("-") or text == "–" else "+" + text


def _loss(value: float | None) -> str:
    return "–" if value is None else f"{value:.4f}"


def metadata(facts: CardFacts) -> dict[str, Any]:
    """The YAML header (Hub model-card metadata)."""
    meta: dict[str, Any] = {}
    if facts.languages:
        meta["language"] = facts.languages
    meta["license"] = facts.license
    meta["library_name"] = "sentence-transformers"
    meta["pipeline_tag"] = "sentence-similarity"
    if facts.base_model.get("hub_id"):
        meta["base_model"] = facts.base_model["hub_id"]
    meta["tags"] = ["sentence-transformers", "sentence-similarity", "feature-extraction", "polysent",
                    *sorted({o.kind for o in facts.objectives}), *(["wise-ft"] if facts.interpolation else [])]
    if facts.datasets:
        meta["datasets"] = facts.datasets
    if facts.model_index:
        meta["model-index"] = [{"name": facts.model_name, "results": facts.model_index}]
    return meta


def _objective_rows(facts: CardFacts) -> list[str]:
    lines = ["| objective | weight | batch | reads | settings | paper |", "|---|---|---|---|---|---|"]
    for o in facts.objectives:
        s = o.settings
        shown = ", ".join(f"{k}={_short(v)}" for k, v in s.items() if k not in ("kind", "weight", "batch_size"))
        cite = f"[{o.citation}]({o.citation_url})" if o.citation else "–"
        reads = ", ".join(o.tables) + (f" ({', '.join(o.languages)})" if o.languages else "")
        lines.append(f"| `{o.kind}` | {s.get('weight', '–')} | {s.get('batch_size', '–')} | {reads} | {shown} | "
                     f"{cite} |")
    return lines


def _short(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return "[" + " ".join(str(x) for x in v) + "]"
    return str(v)


def _corpus_rows(facts: CardFacts) -> list[str]:
    lines: list[str] = []
    for c in facts.corpora:
        if not c.rows:  # an artifact with no table the objectives read (a trained tokenizer): named, with its origin
            lines.append(f"- **`{c.stage}`** (content hash `{c.content_hash[:16]}`): {_artifact_text(c)}")
        for table, per_lang in c.rows.items():
            total = sum(per_lang.values())
            langs = ", ".join(f"{k} {v:,}" for k, v in per_lang.items())
            lines.append(f"- **`{table}`** ({c.stage}, content hash `{c.content_hash[:16]}`): {total:,} rows — "
                         f"{langs}")
        if c.rows and c.leakage:
            removed: dict[str, int] = {}
            for r in c.leakage:
                removed[str(r.get("eval_set"))] = removed.get(str(r.get("eval_set")), 0) + int(r["units_removed"])
            lines.append("  - leakage guard removed: " + ", ".join(f"{k} {v:,}" for k, v in removed.items()))
        elif c.rows:
            lines.append("  - leakage guard removed nothing")
        if c.inputs:
            srcs = sorted({f.source["name"] for f in c.inputs})
            lines.append("  - built from: " + ", ".join(srcs) + "; inputs: " + ", ".join(
                f"`{f.name}` (sha256 `{(f.sha256 or '–')[:16]}`)" for f in c.inputs))
        elif c.built_from:
            lines.append("  - built from the " + ", ".join(f"`{b}`" for b in c.built_from) + " artifact(s)")
    return lines


def _artifact_text(c: Corpus) -> str:
    """What an artifact without training tables is, from its stage and stats."""
    if c.stage == "tokenizer":
        vocab, texts = c.stats.get("vocab_size"), c.stats.get("texts")
        size = f"a {vocab:,}-entry " if isinstance(vocab, int) else "a "
        read = f" on {texts:,} texts of the training corpora" if isinstance(texts, int) else " on the training corpora"
        return f"{size}subword vocabulary (SentencePiece-style BPE) trained{read}; the model's tokenizer"
    return "read by the training; it holds no table the objectives read"


def _length_text(facts: CardFacts) -> str:
    """The trained length, as ``sentence_bert_config.json`` says it (the training setting when the folder does
    not), and the encoder's limit, as ``tokenizer_config.json`` says it."""
    ln = facts.lengths
    trained = ln.get("trained") or (facts.settings.get("encoder") or {}).get("max_length")
    text = f"{trained} tokens (trained; `max_seq_length` of sentence_bert_config.json — longer inputs are truncated)"
    limit = ln.get("tokenizer") or ln.get("positions")
    if limit and limit != trained:
        text += f"; the encoder reads up to {limit} (`model_max_length` of tokenizer_config.json)"
    return text


def _dev_text(facts: CardFacts) -> str:
    dev, st = facts.settings.get("dev"), facts.stats
    if not dev:
        return "the last step (no dev evaluation)"
    table = {"tatoeba": "eval_tatoeba", "stsb": "eval_sts"}.get(str(dev.get("metric")), "")
    sets = ", ".join(f"`{t}`" for d in facts.dev for t in d["tables"] if t == table) or "–"
    best = f"step {st['best_step']} ({st.get('dev_metric')} {fmt(st.get('best_dev'))})" if "best_step" in st else "–"
    return (f"best dev {dev.get('metric')} every {dev.get('every')} steps: {best}, on the evaluation sets {sets} "
            "(evaluation data, not training data)")


def _start_text(facts: CardFacts) -> str:
    base = facts.base_model
    if base.get("hub_id"):
        return f"fine-tuned with polysent from [{base['hub_id']}](https://huggingface.co/{base['hub_id']})"
    if not (facts.settings.get("encoder") or {}).get("pretrained"):
        return "trained with polysent from randomly initialised weights (no start model)"
    return f"fine-tuned with polysent from a start model with no public id ({base.get('note') or 'unknown'})"


def _results_intro(facts: CardFacts) -> list[str]:
    if not facts.results:
        return []
    peers = f" and the peer(s) {', '.join(f'`{p}`' for p in facts.peers)}" if facts.peers else ""
    if facts.start_run:
        head = f"Headline results of `{facts.run}` beside its start model `{facts.start_run}` (Δ = trained − start)"
    elif not (facts.settings.get("encoder") or {}).get("pretrained"):
        head = f"Headline results of `{facts.run}` (trained from scratch: no start model to compare with, so no Δ)"
    else:
        head = (f"Headline results of `{facts.run}` (its start model was not evaluated on these evaluation sets, so "
                "there is no Δ column)")
    protocols = ", ".join(t.card for t in tasks().values() if t.card)  # each task's card line, in task order
    text = [head + peers + ", on the same evaluation sets, in points (×100) except error rates in %; polysent's "
            f"evaluation protocols ({protocols})."]
    ip = facts.interpolation
    if ip and not ip.get("evaluated"):
        text += ["", f"**These are not the exported weights' results.** The folder holds the interpolation at "
                 f"α = {ip['alpha']:g} (see *Weight interpolation*), which this pipeline did not evaluate: the "
                 f"`{facts.run}` column is its fine-tuned parent (α = 1), the start column its other parent (α = 0). "
                 f"Set `training.{facts.run}.interpolate_start: {ip['alpha']:g}` to train, evaluate and export the "
                 "interpolated model with its own results."]
    return text


def _interpolation_section(facts: CardFacts) -> list[str]:
    ip = facts.interpolation
    if not ip:
        return []
    start, ft = ip.get("start") or {}, ip.get("finetuned") or {}
    base = facts.base_model.get("hub_id")

    def sha(parent: Mapping[str, Any]) -> str:
        return ", ".join(f"`{f}` sha256 `{h[:16]}`" for f, h in sorted((parent.get("weights_sha256") or {}).items()))

    how = ("by the training run (`interpolate_start`); the evaluation below scores these weights"
           if ip.get("evaluated") else "at export (`polysent export-model --interpolate-start`); the pipeline did "
           "not evaluate these weights")
    return ["### Weight interpolation (WiSE-FT)", "",
            f"The weights are {ip.get('formula', 'θ = (1 − α)·θ_start + α·θ_finetuned')} with **α = {ip['alpha']:g}**"
            f", written {how} ([{INTERPOLATION_PAPER[0]}]({INTERPOLATION_PAPER[1]})). Parents:", "",
            f"- start (α = 0): `{start.get('name')}`" + (f" ({base})" if base and base != start.get("name") else "")
            + f" — {sha(start)}",
            f"- fine-tuned (α = 1): training run `{facts.run}` (train artifact `{facts.train_key[:20]}`"
            + (f", step {ip['finetuned_step']}" if ip.get("finetuned_step") is not None else "") + f") — {sha(ft)}",
            f"- this model: {sha(ip)}", ""]


def _limitations_section(facts: CardFacts) -> list[str]:
    return ["## Limitations", "", *[f"- {text}" for text in facts.limitations], ""] if facts.limitations else []


def _results_table(facts: CardFacts) -> list[str]:
    if not facts.results:
        return ["This export carries no evaluation results (the run was not evaluated)."]
    models = list(facts.results[0]["values"])
    cols = [facts.run, *([facts.start_run] if facts.start_run in models else []),
            *[p for p in facts.peers if p in models]]
    head = ["task", "variant", "subset", "languages", "metric", *[f"`{c}`" for c in cols[:1]]]
    if facts.start_run in models:
        head += [f"`{facts.start_run}` (start)", delta_column(facts.run, facts.start_run)]
    head += [f"`{p}`" for p in cols[1 + (facts.start_run in models):]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in facts.results:
        v = r["values"]
        cells = [str(r[k] if r[k] is not None else "–") for k in KEY] + [fmt(v.get(facts.run))]
        if facts.start_run in models:
            cells += [fmt(v.get(facts.start_run)), fmt_delta(r["delta"])]
        cells += [fmt(v.get(p)) for p in cols[1 + (facts.start_run in models):]]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _exposure_table(facts: CardFacts) -> list[str]:
    if not facts.exposure:
        return []
    models = list(facts.exposure[0]["values"])
    has_start = facts.start_run in models
    peers = [m for m in models if m not in (facts.run, facts.start_run)]
    head = ["task", "variant", "metric", "languages", "n", f"`{facts.run}`"]
    if has_start:
        head += [f"`{facts.start_run}` (start)", delta_column(facts.run, facts.start_run)]
    head += [f"`{p}`" for p in peers]
    lines = ["### By training exposure", "",
             f"Means over the per-language results of languages the run trained on ({', '.join(facts.languages)}: "
             "every language of the pair seen in training) and of languages it never saw:", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in facts.exposure:
        v = r["values"]
        cells = [r["task"], r["variant"], r["metric"], r["block"], str(r["languages"]), fmt(v.get(facts.run))]
        if has_start:
            cells += [fmt(v.get(facts.start_run)), fmt_delta(r["delta"])]
        cells += [fmt(v.get(p)) for p in peers]
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]


def usage(facts: CardFacts, folder_name: str) -> str:
    prompt = facts.prompt
    texts = '["A man is playing a guitar.", "Ein Mann spielt Gitarre.", "Un homme joue de la guitare."]'
    return "\n".join([
        "```python",
        "from sentence_transformers import SentenceTransformer",
        "",
        f'model = SentenceTransformer("{folder_name}")  # this folder (or its Hub id once uploaded)',
        f"embeddings = model.encode({texts}, normalize_embeddings=True)",
        "similarities = model.similarity(embeddings, embeddings)",
        "print(embeddings.shape, similarities[0])",
        "```",
        *([f"The folder's default prompt `{prompt!s}` is prepended by `encode` (as during training and "
           "evaluation); pass `prompt_name=` to choose another."] if prompt else []),
    ])


def render_card(facts: CardFacts, folder_name: str) -> str:
    """The card: YAML header, then the prose and tables."""
    header = yaml.safe_dump(metadata(facts), sort_keys=False, allow_unicode=True, width=1000)
    s, st, hw = facts.settings, facts.stats, facts.hardware
    base = facts.base_model
    langs = ", ".join(facts.languages) or "unknown (the corpora carry no language column)"
    batches = " + ".join(f"{o.settings.get('batch_size')} ({o.kind})" for o in facts.objectives)
    wall = st.get("train_seconds")
    lines = [
        "---", header.rstrip("\n"), "---", "",
        f"# {facts.model_name}", "",
        f"A multilingual sentence-embedding model {_start_text(facts)} "
        f"with {len(facts.objectives)} objective(s) ({', '.join(o.kind for o in facts.objectives)}) on "
        f"{len(facts.languages)} language(s): {langs}. Every statement and number below was generated from the "
        "polysent warehouse that trained and evaluated it (training run "
        f"`{facts.run}`, train artifact `{facts.train_key[:20]}`, content hash `{facts.train_content_hash[:16]}`).",
        "", "## Usage", "", usage(facts, folder_name), "",
        "## Training", "",
        "| setting | value |", "|---|---|",
        f"| steps | {s.get('steps')} |",
        f"| sentences per step (batch per objective) | {batches} |",
        f"| learning rate | {s.get('lr')} (warm-up {s.get('warmup_steps')} steps, weight decay "
        f"{s.get('weight_decay')}) |",
        f"| gradient accumulation | {s.get('grad_accumulation')} |",
        f"| max sequence length | {_length_text(facts)} |",
        f"| checkpoint | {_dev_text(facts)} |",
        f"| seed | {s.get('seed')} |",
        f"| precision | {st.get('precision') or s.get('precision')} |",
        f"| hardware | {_hw_text(hw)} |",
        f"| wall time of training | {fmt(wall / 60.0, 1) + ' min' if isinstance(wall, (int, float)) else '–'} |",
        f"| parameters | {st.get('parameters'):,} |" if isinstance(st.get("parameters"), int) else
        "| parameters | – |",
        "", *_interpolation_section(facts), "### Objectives", "", *_objective_rows(facts), "",
        "### Training data", "",
        "Rows per language of each table the objectives read, after polysent's filters and its leakage guard (which "
        "removes every training unit that shares a normalised text with an evaluation set):", "",
        *_corpus_rows(facts), "",
        "### Training curve", "",
        f"Mean loss over the first and the last {CURVE_WINDOW} steps, the lowest loss, and the first step within "
        "10 % of the final level:", "",
        "| objective | steps | first | last | lowest (step) | settled by step |", "|---|---|---|---|---|---|",
        *[f"| {c['objective']} | {c['steps']} | {_loss(c['first'])} | {_loss(c['last'])} | {_loss(c['min'])} "
          f"({c['min_step']}) | {c['settled_step'] if c['settled_step'] is not None else '–'} |"
          for c in facts.curve], "",
        "## Evaluation", "",
        *_results_intro(facts), "",
        *_results_table(facts), "",
        *_exposure_table(facts),
        (f"The `model-index` above holds the {len(facts.model_index)} result(s) computed as mteb computes them "
         "(same protocol, same rows); the others are polysent's protocols and are not comparable with the MTEB "
         "leaderboard. The mteb result files are under `mteb/`.") if facts.model_index else
        ("The exported weights were not evaluated, so the card has no `model-index`." if facts.interpolation and
         not facts.interpolation.get("evaluated") else
         "No result here is computed as mteb computes it, so the card has no `model-index`."), "",
        *_limitations_section(facts),
        "## License", "",
        f"`{facts.license}`: {facts.license_note}", "",
        *[f"- {src['name']}: {src['license'] or 'no license declared'}"
          + (f" ({src['url']})" if src.get("url") else "") + (f" — {src['note']}" if src.get("note") else "")
          for src in facts.sources],
        *( [f"- base model {base['hub_id']}: {base.get('license') or 'no license recorded'}"]
           if base.get("hub_id") else []), "",
        "## Citation", "",
        *_citations(facts),
        *([f"- {INTERPOLATION_PAPER[0]}, {INTERPOLATION_PAPER[1]}"] if facts.interpolation else []), "",
    ]
    return "\n".join(lines)


def _citations(facts: CardFacts) -> list[str]:
    """One line per objective kind of the run, in the order the kinds first appear; a kind without a paper is left
    out."""
    first: dict[str, ObjectiveInfo] = {}
    for o in facts.objectives:
        first.setdefault(o.kind, o)
    return [f"- {o.citation}, {o.citation_url}" for o in first.values() if o.citation]


def _hw_text(hw: Mapping[str, Any]) -> str:
    parts = [str(hw.get("device") or "unknown")]
    if hw.get("gpu"):
        parts.append(str(hw["gpu"]))
    if hw.get("cpu"):
        parts.append(str(hw["cpu"]))
    if hw.get("cores"):
        parts.append(f"{hw['cores']} cores")
    if hw.get("threads"):
        parts.append(f"{hw['threads']} torch threads")
    if hw.get("world_size") and int(hw["world_size"]) > 1:
        parts.append(f"{hw['world_size']} processes")
    return ", ".join(parts)
