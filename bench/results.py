"""Appending benchmark figures to the warehouse's ``bench_results`` (one Parquet file per benchmark run)."""

from __future__ import annotations

import datetime as dt
import os
import platform
from pathlib import Path
from typing import Any


def append_results(data_root: Path, benchmark: str, rows: list[dict[str, Any]]) -> Path | None:
    """Write ``rows`` (plus host, cpus and the time) to ``<data_root>/bench/<benchmark>-<time>.parquet``, atomically."""
    if not rows:
        return None
    import pyarrow as pa
    import pyarrow.parquet as pq

    from warehouse.atomic import atomic_path

    now = dt.datetime.now(dt.UTC)
    keys = list(dict.fromkeys(k for r in rows for k in r))  # every row's keys: from_pylist reads the first row's only
    table = pa.Table.from_pylist([{**{k: r.get(k) for k in keys}, "host": platform.node(), "cpus": os.cpu_count()}
                                  for r in rows])
    table = table.append_column("measured_at", pa.array([now] * len(rows), pa.timestamp("us", tz="UTC")))
    folder = data_root / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{benchmark}-{now:%Y%m%dT%H%M%S}.parquet"
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
    print(f"appended to bench_results ({folder})")
    return path
