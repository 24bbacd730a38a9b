"""Writing a table as a hive-partitioned Parquet folder (``key=value/part-00000.parquet``), the key out of the files."""

from __future__ import annotations

from pathlib import Path

import polars as pl


def write_partitioned(df: pl.DataFrame, folder: Path, key: str) -> None:
    folder.mkdir()
    for (value,), part in df.partition_by(key, as_dict=True, maintain_order=True).items():
        d = folder / f"{key}={value}"
        d.mkdir()
        part.drop(key).write_parquet(d / "part-00000.parquet")
