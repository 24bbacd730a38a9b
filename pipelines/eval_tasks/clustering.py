"""Clustering, pipelines part (scorer: ``models/evaluation/tasks/clustering.py``).

Set ``sources.eval.clustering``: a MewsC-16 folder (``{lang}_sentences.txt``, ``{lang}_categories.txt``; reader:
``pipelines.eval_sets.clustering``; mteb's hub copy of the Japanese half feeds the same table) → ``eval_clustering``
(``dataset``, ``lang``, ``idx``, ``text``, ``label``); ``corpora.eval_sets.clustering_*`` select languages, name the
dataset, decide on empty lines and cap the texts per language. Rows: ``ease`` (Hungarian accuracy) and ``mteb``
(V-measure) per dataset and language; mteb export: MewsC-16 ja as JMTEB's ``MewsC16JaClustering``, when scored on
every document with mteb's seed. Figure: ``mewsc_accuracy`` (EASE's accuracy, mean over languages).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import polars as pl
from pydantic import AfterValidator, Field

from pipelines.eval_sets import clustering as reader
from pipelines.eval_sets.source_config import checked_languages
from pipelines.eval_task_registry import (
    EvalSet,
    EvalTask,
    Figures,
    Mteb,
    MtebTarget,
    Report,
    Table,
    Variant,
    by_name,
    located,
    register_task,
)


def _files(folder: Path) -> dict[str, Path]:
    files = located("clustering", reader.clustering_files, folder)
    return by_name("clustering", [p for pair in files.values() for p in pair])


def _read(folder: Path, settings: Any, skipped: Any) -> Iterator[tuple[str, pl.DataFrame]]:
    yield reader.TABLE, reader.read_clustering(folder, settings.clustering_languages, settings.clustering_dataset,
                                               settings.clustering_empty_sentences, skipped,
                                               settings.clustering_max_per_language)


def _languages(value: list[str]) -> list[str]:
    return checked_languages(value, "corpora.eval_sets.clustering_languages")


def _mteb(variant: str, subset: str, languages: str, run: Any) -> MtebTarget | str:
    dataset, _, lang = subset.partition("/")
    if (dataset, lang) != ("mewsc16", "ja"):
        return f"no mteb clustering task for {dataset}/{lang} (mteb has MewsC-16 only as MewsC16JaClustering)"
    settings = run.settings.get("clustering")
    if not isinstance(settings, Mapping):
        return "the clustering settings are unknown (no evaluate manifest)"
    if settings.get("mteb_document_sample"):
        return ("scored on mteb's default 4 % document sample; MewsC16JaClustering embeds up to 992 documents "
                "(mteb_document_sample: false)")
    if settings.get("seed", 42) != 42:
        return f"clustering seed {settings.get('seed')}; mteb's is 42"
    return MtebTarget("MewsC16JaClustering", "test", "default")


def _figures(rows: Sequence[Mapping[str, Any]], trained: Sequence[str]) -> dict[str, float]:
    clu = [r["value"] for r in rows if (r["task"], r["variant"], r["metric"]) ==
           ("clustering", "ease", "hungarian_accuracy")]
    return {"mewsc_accuracy": statistics.fmean(clu)} if clu else {}


TASK = register_task(EvalTask(
    name="clustering", order=40,
    set=EvalSet(
        key="clustering",
        source=(Path | None, Field(None, description="MewsC-16 folder ({lang}_sentences.txt, {lang}_categories.txt)")),
        tables={reader.TABLE: Table(reader.SCHEMA, ("dataset", "lang", "idx"))}, read=_read, files=_files,
        settings={
            "clustering_languages": (Annotated[list[str], AfterValidator(_languages)], Field(
                default_factory=list, description="MewsC-16 languages; empty = all")),
            "clustering_dataset": (str, Field("mewsc16", description="dataset column of eval_clustering rows read "
                                                                     "from sources.eval.clustering")),
            "clustering_empty_sentences": (Literal["error", "skip"], Field(
                "error", description="an empty sentence line in the clustering files: error, or skip (counted; the "
                                     "real MewsC-16 de_sentences.txt has one)")),
            "clustering_max_per_language": (int | None, Field(
                None, ge=2, description="at most this many clustering texts per language, chosen by a hash of the "
                                        "text (the same rows for every model; MewsC-16 whole is ~12 min of scoring "
                                        "per model on 2 cores); null = all. mteb export skips a capped set (its "
                                        "counts differ)"))},
        key_when_set=("clustering_max_per_language",)),
    report=Report(
        title="Clustering",
        variants={"ease": Variant("EASE protocol (methods §4.5): KMeans on raw embeddings, Hungarian accuracy", 6)},
        metrics=("hungarian_accuracy", "v_measure", "accuracy"), headline=("hungarian_accuracy", "v_measure",
                                                                          "accuracy"),
        per_language="language"),
    card="MewsC-16 clustering",
    mteb=Mteb(_mteb, datasets={"MewsC16JaClustering": "sbintuitions/JMTEB"}),
    figures=Figures(names=("mewsc_accuracy",), tables={"mewsc": (reader.TABLE,)}, compute=_figures,
                    settings=lambda families: {"v_measure": False, "n_init": 3})))
