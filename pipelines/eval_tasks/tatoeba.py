"""Tatoeba bitext retrieval, pipelines part (scorer: ``models/evaluation/tasks/tatoeba.py``).

Set ``sources.eval.tatoeba``: a folder of LASER's Tatoeba v1 files ``tatoeba.{xxx}-eng.{xxx,eng}`` (reader:
``pipelines.eval_sets.tatoeba``; mteb's hub copy feeds the same table) → ``eval_tatoeba`` (``lang``, ``idx``, ``text``,
``eng``); ``corpora.eval_sets.tatoeba_languages`` selects. Rows: ``canonical`` accuracy per language and over the
``xnli14`` / ``xtreme36`` / ``all`` subsets (the report's headline: those aggregates, or the mean over languages),
``xtreme`` (en→xx), ``mteb`` (exported as mteb's ``Tatoeba``). Figures: ``tatoeba_trained`` / ``tatoeba_untrained``
(mean accuracy over the trained / other languages), ``tatoeba_mean`` and ``tatoeba.<lang>``.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import polars as pl
from pydantic import AfterValidator, Field

from pipelines.eval_sets import tatoeba as reader
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
    files = located("tatoeba", reader.tatoeba_files, folder)
    return by_name("tatoeba", [p for sides in files.values() for p in sides.values()])


def _read(folder: Path, settings: Any, skipped: Any) -> Iterator[tuple[str, pl.DataFrame]]:
    yield reader.TABLE, reader.read_tatoeba(folder, settings.tatoeba_languages, skipped)


def _languages(value: list[str]) -> list[str]:
    return checked_languages(value, "corpora.eval_sets.tatoeba_languages")


def _mteb(variant: str, subset: str, languages: str, run: Any) -> MtebTarget | str:
    return MtebTarget("Tatoeba", "test", languages)  # our mteb rows are xx→eng, named as mteb's subsets ("deu-eng")


def _figures(rows: Sequence[Mapping[str, Any]], trained: Sequence[str]) -> dict[str, float]:
    """Per-language canonical accuracy (mean of both directions), averaged over the trained languages, the others and
    all; each language as ``tatoeba.<lang>``."""
    out: dict[str, float] = {}
    tat = {r["subset"]: r["value"] for r in rows if (r["task"], r["variant"], r["metric"]) ==
           ("tatoeba", "canonical", "accuracy_mean") and r["languages"] == f"{r['subset']}-eng"}
    for name, langs in (("tatoeba_trained", [k for k in tat if k in trained]),
                        ("tatoeba_untrained", [k for k in tat if k not in trained]), ("tatoeba_mean", list(tat))):
        if langs:
            out[name] = statistics.fmean(tat[k] for k in langs)
    out.update({f"tatoeba.{k}": v for k, v in sorted(tat.items())})
    return out


TASK = register_task(EvalTask(
    name="tatoeba", order=10,
    set=EvalSet(
        key="tatoeba",
        source=(Path | None, Field(None, description="folder of LASER Tatoeba v1 tatoeba.{xxx}-eng.{xxx,eng} files")),
        tables={reader.TABLE: Table(reader.SCHEMA, ("lang", "idx"))}, read=_read, files=_files,
        settings={"tatoeba_languages": (Annotated[list[str], AfterValidator(_languages)], Field(
            default_factory=list, description="ISO 639-3 codes as in the Tatoeba file names, e.g. deu; empty = all"))}),
    report=Report(
        title="Tatoeba bitext retrieval",
        variants={"xtreme": Variant("XTREME: en→xx retrieval only (methods §7.1)", 1)},
        metrics=("accuracy_mean", "accuracy_xx_en", "accuracy_en_xx", "f1", "precision", "recall"),
        headline=("accuracy_mean", "accuracy_en_xx", "accuracy_xx_en", "f1", "accuracy"), headline_mean=True,
        per_language="language"),
    card="Tatoeba accuracy both directions", exposure=True,
    mteb=Mteb(_mteb, datasets={"Tatoeba": "mteb/tatoeba-bitext-mining"}),
    figures=Figures(names=("tatoeba_trained", "tatoeba_untrained", "tatoeba_mean"),
                    tables={"tatoeba": (reader.TABLE,)}, compute=_figures,
                    settings=lambda families: {"subsets": (), "xtreme": False, "mteb": False})))
