"""xSIM, pipelines part (scorer: ``models/evaluation/tasks/xsim.py``).

Set ``sources.eval.parallel``: a list of N-way parallel sets, ``{format: ntrex|flores, path: …}`` (reader:
``pipelines.eval_sets.parallel``; mteb's hub copies of FLORES and NTREX feed the same table) → ``eval_parallel``
(``dataset``, ``lang``, ``idx``, ``text``; row ``idx`` of every language is the same sentence). The geometry task reads
it too. Rows: ``laser`` error rate (%, lower is better) per language pair and its mean (the headline); no mteb
counterpart. Figure: ``xsim_error`` (the mean error rate; lower is better).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import Field

from pipelines.eval_sets import parallel as reader
from pipelines.eval_task_registry import EvalSet, EvalTask, Figures, Report, Table, Variant, located, register_task


def _files(entries: Sequence[Any]) -> dict[str, Path]:
    return {f"parallel/{i}/{p.relative_to(par.path)}": p for i, par in enumerate(entries)
            for p in located(f"parallel[{i}]", reader.parallel_files, par)}


def _read(entries: Sequence[Any], settings: Any, skipped: Any) -> Iterator[tuple[str, pl.DataFrame]]:
    for p in entries:
        yield reader.TABLE, reader.read_parallel(p, skipped)


def _figures(rows: Sequence[Mapping[str, Any]], trained: Sequence[str]) -> dict[str, float]:
    xsim = [r["value"] for r in rows if (r["task"], r["variant"], r["metric"]) == ("xsim", "laser", "error_rate")
            and str(r["subset"]).endswith("/mean")]
    return {"xsim_error": statistics.fmean(xsim)} if xsim else {}


TASK = register_task(EvalTask(
    name="xsim", order=60,
    set=EvalSet(
        key="parallel",
        source=(list[reader.ParallelSource], Field(default_factory=list, description="N-way parallel sets for xSIM")),
        tables={reader.TABLE: Table(reader.SCHEMA, ("dataset", "lang", "idx"))}, read=_read, files=_files),
    report=Report(
        title="xSIM (margin retrieval error)",
        variants={"laser": Variant("LASER xSIM: ratio margin, k = 4 (methods §7.8)", 11)},
        metrics=("error_rate",), headline=("error_rate",), headline_mean=True, per_language="language pair",
        lower_is_better=frozenset({"error_rate"})),
    card="xSIM error rate", exposure=True,
    figures=Figures(names=("xsim_error",), tables={"xsim": (reader.TABLE,)}, compute=_figures,
                    settings=lambda families: {"compare_text": False}, lower_is_better=frozenset({"xsim_error"}))))
