"""Stage ``eval_sets``: every configured evaluation set → one Parquet table per kind, sorted deterministically.

The sets, their tables (schema and sort key) and their readers are the evaluation tasks' declarations
(``pipelines.eval_task_registry``: ``EvalSet``); with the nine built-in tasks the tables are ``eval_tatoeba``,
``eval_bucc``, ``eval_bucc_gold``, ``eval_sts``, ``eval_clustering``, ``eval_classification``, ``eval_parallel``,
``eval_langid``, ``eval_pair_classification`` and ``eval_pair_classification_bad_rows`` (its skipped rows with their
lines; columns: the reader modules), each written only when it has rows. Local files and mteb hub datasets feed the
same tables; a row key given by two sources (say, Tatoeba as a folder and from the hub) is an error. Stats: ``rows``
per table and ``skipped`` lines per table and reason (blank STS gold lines, STS17 track 6's unscored input lines,
duplicated BUCC gold lines, NTREX second references, …).
"""

from __future__ import annotations

import logging
from pathlib import Path

import polars as pl

from contract import StageResult
from pipelines.eval_sets.hub import Loader, load_hub
from pipelines.eval_sets.lines import Skipped
from pipelines.eval_sets.settings import EvalSetsSettings, EvalSources
from pipelines.eval_task_registry import Table, eval_sets

log = logging.getLogger("polysent.pipelines.eval_sets")


def tables() -> dict[str, Table]:
    """Every table of the stage (schema and sort key; the sort key is also the row key, unique), in task order."""
    return {name: table for s in eval_sets() for name, table in s.tables.items()}


def read_eval_sets(settings: EvalSetsSettings, sources: EvalSources, skipped: Skipped | None = None,
                   loader: Loader | None = None) -> dict[str, pl.DataFrame]:
    """Every configured set read into its tables (empty tables included), sorted by their keys (:func:`tables`)."""
    skipped = skipped if skipped is not None else Skipped()
    known = tables()
    parts: dict[str, list[pl.DataFrame]] = {name: [] for name in known}
    for s in eval_sets():
        value = getattr(sources, s.key)
        if value:
            for table, df in s.read(value, settings, skipped):
                parts[table].append(df)
    for name in sources.hub:
        for table, df in load_hub(name, settings.hub_subsets.get(name, []), loader).items():
            parts[table].append(df)
    out = {}
    for name, frames in parts.items():
        schema = known[name].schema
        df = pl.concat(frames, how="vertical") if frames else pl.DataFrame(schema=schema)
        out[name] = _unique_sorted(name, df.cast(schema), known[name].keys)  # type: ignore[arg-type]
    return out


def _unique_sorted(name: str, df: pl.DataFrame, key: tuple[str, ...]) -> pl.DataFrame:
    keys = list(key)
    dup = df.filter(pl.struct(keys).is_duplicated())
    if dup.height:
        row = dup.select(keys).row(0, named=True)
        raise ValueError(f"{name}: more than one row for {row}; an evaluation set is configured twice (e.g. as a "
                         "local folder and as an mteb hub dataset)")
    return df.sort(keys)


def build_eval_sets(settings: EvalSetsSettings, sources: EvalSources, out: Path,
                    loader: Loader | None = None) -> StageResult:
    """Write one Parquet file per non-empty table into ``out``; stats: rows per table and skipped lines."""
    skipped = Skipped()
    frames = read_eval_sets(settings, sources, skipped, loader)
    written: dict[str, str] = {}
    rows: dict[str, int] = {}
    for name, df in frames.items():
        if df.is_empty():
            continue
        df.write_parquet(Path(out) / f"{name}.parquet")
        written[name] = f"{name}.parquet"
        rows[name] = df.height
        log.info("%s: %d rows (%d lines skipped)", name, df.height, skipped.total(name))
    if not written:
        log.warning("eval_sets: no evaluation set configured or all were empty")
    return StageResult(tables=written, stats={"rows": rows, "skipped": skipped.as_dict()})
