"""BUCC 2018 bitext mining, pipelines part (scorer: ``models/evaluation/tasks/bucc.py``).

Set ``sources.eval.bucc``: a folder of BUCC 2018 files ``{src}-en.{split}.{src,en,gold}`` (reader:
``pipelines.eval_sets.bucc``; mteb's hub copy ``BUCC.v2`` feeds the same tables) → ``eval_bucc`` (sentences) and
``eval_bucc_gold`` (gold pairs); ``corpora.eval_sets.bucc_pairs`` / ``bucc_splits`` select. Rows per pair and split:
``oracle``, ``held_out``, ``oracle_cosine`` mining F1 and ``mteb`` (mteb's retrieval-style BUCC, exported as mteb's
``BUCC``: its ``test`` split is BUCC's ``training`` data). Figure: ``bucc_f1`` (oracle F1, mean over pairs).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import polars as pl
from pydantic import AfterValidator, Field

from pipelines.eval_sets import bucc as reader
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
from pipelines.language_codes import check_language

GOLD_TABLE = "eval_bucc_gold"


def _files(folder: Path) -> dict[str, Path]:
    files = located("bucc", reader.bucc_files, folder)
    return by_name("bucc", [p for kinds in files.values() for p in kinds.values()])


def _read(folder: Path, settings: Any, skipped: Any) -> Iterator[tuple[str, pl.DataFrame]]:
    sentences, gold = reader.read_bucc(folder, settings.bucc_pairs, settings.bucc_splits, skipped)
    yield "eval_bucc", sentences
    yield GOLD_TABLE, gold


def _pairs(value: list[str]) -> list[str]:
    for pair in value:
        src, dash, tgt = pair.partition("-")
        if not dash or tgt != "en":
            raise ValueError(f"corpora.eval_sets.bucc_pairs: {pair!r}; expected xx-en (de-en, fr-en, ru-en, zh-en)")
        check_language(src, "corpora.eval_sets.bucc_pairs")
    return value


def _mteb(variant: str, subset: str, languages: str, run: Any) -> MtebTarget | str:
    pair, _, split = subset.partition("/")
    if split != "training":
        return (f"mteb's BUCC 'test' split is the BUCC 2018 training data (mteb/BUCC); our '{split}' split has no "
                "mteb counterpart")
    return MtebTarget("BUCC", "test", pair)  # bucc_mteb's default v1 is mteb's BUCC (BUCC.v2 retrieves among gold only)


def _figures(rows: Sequence[Mapping[str, Any]], trained: Sequence[str]) -> dict[str, float]:
    bucc = [r["value"] for r in rows if (r["task"], r["variant"], r["metric"]) == ("bucc", "oracle", "f1")]
    return {"bucc_f1": statistics.fmean(bucc)} if bucc else {}


TASK = register_task(EvalTask(
    name="bucc", order=20,
    set=EvalSet(
        key="bucc",
        source=(Path | None, Field(None, description="folder of BUCC 2018 {src}-en.{split}.{src,en,gold} files")),
        tables={"eval_bucc": Table(reader.SCHEMA, ("pair", "split", "lang", "line")),
                GOLD_TABLE: Table(reader.GOLD_SCHEMA, ("pair", "split", "src_id", "tgt_id"))},
        read=_read, files=_files,
        settings={
            "bucc_pairs": (Annotated[list[str], AfterValidator(_pairs)], Field(
                default_factory=list, description="BUCC pairs, e.g. de-en; empty = all found")),
            "bucc_splits": (list[str], Field(default_factory=list, description="BUCC splits (sample, training, test); "
                                                                               "empty = all found"))}),
    report=Report(
        title="BUCC 2018 bitext mining",
        variants={
            "oracle": Variant("threshold tuned and scored on the same split (optimistic; what mSimCSE reports)", 3),
            "held_out": Variant("threshold tuned on the sample split, applied to another split with gold "
                                "(XTREME-like)", 4),
            "oracle_cosine": Variant("mining with plain cosine instead of the ratio margin (as VMSST also reports), "
                                     "oracle threshold", 5)},
        metrics=("f1", "precision", "recall", "threshold"), headline=("f1",), raw_metrics=frozenset({"threshold"})),
    card="BUCC mining F1 with the LASER ratio margin",
    mteb=Mteb(_mteb, datasets={"BUCC": "mteb/bucc-bitext-mining"}),
    figures=Figures(names=("bucc_f1",), tables={"bucc": ("eval_bucc", GOLD_TABLE)}, compute=_figures,
                    settings=lambda families: {"cosine": False, "mteb": False})))
