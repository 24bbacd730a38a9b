"""bench.results.append_results: every row's columns reach bench_results, not only the first row's."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from bench.results import append_results


def test_columns_missing_from_the_first_row_are_kept(tmp_path: Path) -> None:
    rows = [{"method": "untrained", "score": 1.0}, {"method": "VMSST", "score": 2.0, "curve_loss": "[3.0, 2.0]"}]
    path = append_results(tmp_path, "demo", rows)
    t = pq.read_table(path).to_pydict()
    assert t["curve_loss"] == [None, "[3.0, 2.0]"] and t["score"] == [1.0, 2.0]
    assert {"host", "cpus", "measured_at"} <= set(t)
    assert not list((tmp_path / "bench").glob("*.tmp*"))
