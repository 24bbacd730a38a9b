"""Writing a table as a hive-partitioned Parquet folder (``key=value/part-00000.parquet``), the key out of the files."""

from __future__ import annotations

from pathlib import Path

import polars as pl

EMPTY_PART = "part-00000.parquet"


def write_partitioned(df: pl.DataFrame, folder: Path, key: str) -> None:
    """One file per value of ``key`` under ``key=value/``; a table without rows is one schema-only file.

    An empty table must still exist: a folder without a Parquet file breaks every reader downstream (polars cannot
    infer a schema from nothing, DuckDB's view of the table goes missing, the training node cannot say *why* there is
    nothing to train on). With no value to name a ``key=`` folder, the schema-only file sits directly in ``folder``
    and carries ``key`` as its last column, which is where hive readers (DuckDB, polars, pyarrow) put the partition
    column of a non-empty table: the table has the same columns either way.
    """
    folder.mkdir()
    if df.is_empty():
        df.select(*(c for c in df.columns if c != key), key).write_parquet(folder / EMPTY_PART)
        return
    for (value,), part in df.partition_by(key, as_dict=True, maintain_order=True).items():
        d = folder / f"{key}={value}"
        d.mkdir()
        part.drop(key).write_parquet(d / "part-00000.parquet")
