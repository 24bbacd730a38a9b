"""The language-identification probe, pipelines part (scorer: ``models/evaluation/tasks/langid.py``).

Set ``sources.eval.langid``: an XNLI folder in XTREME's layout and the languages to tell apart (reader:
``pipelines.eval_sets.langid``) → ``eval_langid`` (``lang``, ``split``, ``idx``, ``text``: distinct premises, XNLI dev
as ``train``, test as ``test``). Rows: ``msimcse`` probe accuracy (lower = more language-agnostic). No mteb
counterpart.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import Field

from pipelines.eval_sets import langid as reader
from pipelines.eval_task_registry import EvalSet, EvalTask, Report, Table, Variant, by_name, register_task

TABLE = "eval_langid"


def _files(source: Any) -> dict[str, Path]:
    paths = reader.langid_files(source.path, source.languages)
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"sources.eval.langid: {source.path} lacks {missing}")
    return by_name("langid", paths)


def _read(source: Any, settings: Any, skipped: Any) -> Iterator[tuple[str, pl.DataFrame]]:
    yield TABLE, reader.read_langid(source.path, source.languages, source.max_per_language)


TASK = register_task(EvalTask(
    name="langid", order=80,
    set=EvalSet(
        key="langid",
        source=(reader.LangidSource | None, Field(None, description="XNLI sentences for the language-identification "
                                                                     "probe")),
        tables={TABLE: Table(reader.SCHEMA, ("lang", "split", "idx"))}, read=_read, files=_files),
    report=Report(
        title="Language-identification probe",
        variants={"msimcse": Variant("mSimCSE Table 7: logistic-regression language-ID probe accuracy (lower = more "
                                     "language-agnostic)", 9)},
        metrics=("accuracy",), headline=("accuracy",))))
