"""Lazy reads of the Parquet tables that the Wikipedia stages leave in their artifact folders.

One place for the two layouts: a table folder of one artifact (``<artifact>/<table>/lang=<xx>/part-*.parquet``) and
one language's table spread over the shards of a dump. The hive ``lang=`` folders are not turned into a column: the
stages know their language, and files that carry their own ``lang`` column would clash with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl


def scan_table(folder: Path) -> pl.LazyFrame:
    """Every Parquet file below ``folder`` (one table of one artifact)."""
    return pl.scan_parquet(str(folder / "**" / "*.parquet"), hive_partitioning=False)


def shard_files(shards: Sequence[Path], table: str, lang: str) -> list[Path]:
    """The Parquet parts of ``table`` of language ``lang`` over the shard artifacts of a dump, in shard and file
    order; ``FileNotFoundError`` when there are none."""
    files = [f for s in shards for f in sorted((s / table / f"lang={lang}").glob("*.parquet"))]
    if not files:
        raise FileNotFoundError(f"no {table} parts for language {lang!r} in {len(shards)} shard(s)")
    return files


def scan_shards(shards: Sequence[Path], table: str, lang: str) -> pl.LazyFrame:
    """``table`` of language ``lang`` over the shard artifacts of a dump, parts in shard and file order."""
    return pl.scan_parquet([str(f) for f in shard_files(shards, table, lang)], hive_partitioning=False)
