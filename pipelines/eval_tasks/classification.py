"""Classification probes, pipelines part (scorer: ``models/evaluation/tasks/classification.py``).

Set ``sources.eval.classification``: a list of ``{format: mtop|mldoc|sib200, path: …}`` (reader:
``pipelines.eval_sets.classification``; mteb's hub copies of MTOP and SIB-200 feed the same table) →
``eval_classification`` (``dataset``, ``lang``, ``split``, ``idx``, ``text``, ``label``). Rows: ``mteb`` (in-language
probe) and ``zero_shot`` (probe trained on the source language; languages whose labels share none with the source's
are skipped) per dataset and language; mteb export: SIB-200 as ``SIB200Classification``, when scored with mteb's
classification settings (:data:`MTEB_CLASSIFICATION`).

Figure: ``topic_accuracy`` — the in-language probe's accuracy (points), mean over the datasets and languages of the
scored ``eval_classification``. The experiments' kit fills it with MewsC-16's topic sets (news sentences and their
category, ``experiments.kits.topic_sets``), so it reads "does a linear probe still find the topic", and scores it
with :data:`TOPIC_PROBE`: one logistic regression on the whole training split of each language (mteb's 8 rows a
label × 10 fits is a few-shot reading whose spread would drown a sub-point difference).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import Field

from pipelines.eval_sets import classification as reader
from pipelines.eval_task_registry import (
    EvalSet,
    EvalTask,
    Figures,
    Mteb,
    MtebTarget,
    Report,
    Table,
    Variant,
    located,
    register_task,
)

# mteb's ``AbsTaskClassification`` defaults (SIB200Classification keeps them) and its seed
MTEB_CLASSIFICATION = {"n_experiments": 10, "samples_per_label": 8, "train_split": "train", "seed": 42}
# the experiments' topic probe (``topic_accuracy``): one fit on each language's whole training split
TOPIC_PROBE = {"n_experiments": 1, "samples_per_label": None}


def _files(entries: Sequence[Any]) -> dict[str, Path]:
    return {f"classification/{i}/{p.relative_to(c.path)}": p for i, c in enumerate(entries)
            for p in located(f"classification[{i}]", reader.classification_files, c)}


def _read(entries: Sequence[Any], settings: Any, skipped: Any) -> Iterator[tuple[str, pl.DataFrame]]:
    for c in entries:
        yield reader.TABLE, reader.read_classification(c, skipped)


def _mteb(variant: str, subset: str, languages: str, run: Any) -> MtebTarget | str:
    dataset, _, lang = subset.partition("/")
    if dataset != "sib200":
        return f"no mteb classification task mapped for {dataset!r}"
    settings = run.settings.get("classification")
    if not isinstance(settings, Mapping):
        return "the classification settings are unknown (no evaluate manifest)"
    differ = {k: settings.get(k) for k, v in MTEB_CLASSIFICATION.items() if settings.get(k) != v}
    if differ:
        return f"classification settings {differ} differ from mteb's {MTEB_CLASSIFICATION}"
    return MtebTarget("SIB200Classification", str(settings.get("test_split", "test")), lang)


def _figures(rows: Sequence[Mapping[str, Any]], trained: Sequence[str]) -> dict[str, float]:
    acc = [r["value"] for r in rows if (r["task"], r["variant"], r["metric"]) == ("classification", "mteb", "accuracy")]
    return {"topic_accuracy": statistics.fmean(acc)} if acc else {}


TASK = register_task(EvalTask(
    name="classification", order=50,
    set=EvalSet(
        key="classification",
        source=(list[reader.ClassificationSource], Field(default_factory=list, description="classification probes")),
        tables={reader.TABLE: Table(reader.SCHEMA, ("dataset", "lang", "split", "idx"))}, read=_read, files=_files),
    report=Report(
        title="Classification probes",
        variants={"zero_shot": Variant("zero-shot cross-lingual transfer: probe trained on English, tested on each "
                                       "language (methods §7.6)", 8)},
        metrics=("accuracy", "f1"), headline=("accuracy", "f1")),
    mteb=Mteb(_mteb, datasets={"SIB200Classification": "mteb/sib200"}),
    figures=Figures(names=("topic_accuracy",), tables={"topic": (reader.TABLE,)}, compute=_figures,
                    settings=lambda families: TOPIC_PROBE)))
