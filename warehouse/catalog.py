"""The warehouse catalog: which artifact backs each stable table name, the DuckDB views, and run records.

Views are plain SQL over absolute Parquet paths (``catalog/views.sql``). ``polysent sql`` loads them into an in-memory
DuckDB, so queries never take a lock on a database file and work while a pipeline is running. The same views are also
written into ``warehouse.duckdb`` for other tools; that file is built under a temporary name and renamed into place.

Table families:
- corpus and result tables (``wiki_sentences``, ``xnli_groups``, ``bitext_pairs``, ``eval_results``, ...) show the
  artifacts of the most recent run of the pipeline; ``<table>_all`` unions every artifact ever built for it;
- ``artifacts`` and ``lineage`` come from the catalog rows every artifact carries (``_catalog/*.parquet``);
- ``runs`` and ``run_nodes`` from ``runs/``; ``bench_results`` from ``bench/``.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from filelock import FileLock

from warehouse.artifacts import ArtifactRef
from warehouse.atomic import atomic_path, write_text_atomic
from warehouse.layout import DataRoot
from warehouse.manifest import CATALOG_DIR

log = logging.getLogger("polysent.warehouse")


def _sql_str(s: str | Path) -> str:
    return "'" + str(s).replace("'", "''") + "'"


def _parquet_source(path: Path) -> str:
    return _sql_str(path / "**" / "*.parquet") if path.is_dir() else _sql_str(path)


# -- which artifact backs each table ---------------------------------------------------------------------------
def load_current(root: DataRoot) -> dict[str, dict[str, Any]]:
    try:
        return json.loads(root.current.read_text("utf-8"))
    except (FileNotFoundError, ValueError):
        return {}


def _entry(ref: ArtifactRef) -> dict[str, Any]:
    return {"stage": ref.stage, "key": ref.key, "path": str(ref.path), "tables": ref.tables}


def _write_current(root: DataRoot, current: Mapping[str, Mapping[str, Any]]) -> None:
    write_text_atomic(root.current, json.dumps(current, indent=2, sort_keys=True, ensure_ascii=False))
    write_views(root, current)


def record_current(root: DataRoot, node: str, ref: ArtifactRef) -> None:
    """Point the tables of ``node`` at ``ref`` and rewrite the views.

    Nodes finish concurrently (task threads, overlapping runs): the read-modify-write of ``current.json`` runs under a
    file lock so no update is lost.
    """
    with FileLock(str(root.catalog / "current.lock")):
        current = load_current(root)
        current[node] = _entry(ref)
        _write_current(root, current)


def set_current(root: DataRoot, refs: Mapping[str, ArtifactRef]) -> None:
    """At the end of a run: the views show exactly this run's nodes."""
    with FileLock(str(root.catalog / "current.lock")):
        _write_current(root, {node: _entry(ref) for node, ref in refs.items()})


# -- views ------------------------------------------------------------------------------------------------------
def view_statements(root: DataRoot, current: Mapping[str, Mapping[str, Any]] | None = None) -> list[str]:
    current = load_current(root) if current is None else current
    by_table: dict[str, list[Path]] = {}
    history: dict[str, set[tuple[str, str]]] = {}
    for entry in current.values():
        base = Path(entry["path"])
        for table, rel in sorted(entry["tables"].items()):
            by_table.setdefault(table, []).append(base / rel)
            history.setdefault(table, set()).add((entry["stage"], rel))
    stmts: list[str] = []
    for table, paths in sorted(by_table.items()):
        existing = [p for p in paths if p.exists()]
        if not existing:
            continue
        sources = ", ".join(_parquet_source(p) for p in existing)
        stmts.append(
            f"CREATE OR REPLACE VIEW {table} AS SELECT * FROM read_parquet([{sources}], "
            "hive_partitioning = true, union_by_name = true);"
        )
    for table, pairs in sorted(history.items()):
        globs = []
        for stage, rel in sorted(pairs):
            pattern = root.artifacts / stage / "*" / rel
            if any(root.artifacts.joinpath(stage).glob(f"*/{rel}")):
                globs.append(_sql_str(pattern / "**" / "*.parquet") if not rel.endswith(".parquet")
                             else _sql_str(pattern))
        if globs:
            stmts.append(
                f"CREATE OR REPLACE VIEW {table}_all AS SELECT * FROM read_parquet([{', '.join(globs)}], "
                "hive_partitioning = true, union_by_name = true, filename = true);"
            )
    fixed = {
        "artifacts": (root.artifacts, f"*/*/{CATALOG_DIR}/artifact.parquet"),
        "lineage": (root.artifacts, f"*/*/{CATALOG_DIR}/lineage.parquet"),
        "runs": (root.runs, "*.run.parquet"),
        "run_nodes": (root.runs, "*.nodes.parquet"),
        "bench_results": (root.root / "bench", "*.parquet"),
    }
    for table, (base, pattern) in fixed.items():
        if base.exists() and any(base.glob(pattern)):
            stmts.append(
                f"CREATE OR REPLACE VIEW {table} AS SELECT * FROM read_parquet({_sql_str(base / pattern)}, "
                "union_by_name = true);"
            )
    return stmts


def write_views(root: DataRoot, current: Mapping[str, Mapping[str, Any]] | None = None) -> Path:
    stmts = view_statements(root, current)
    header = f"-- polysent warehouse views over {root.root}; regenerated after every node. Load with: .read this file\n"
    write_text_atomic(root.views_sql, header + "\n".join(stmts) + "\n")
    return root.views_sql


def write_duckdb_file(root: DataRoot) -> Path:
    """Materialise the views into ``warehouse.duckdb`` under a temporary name, then rename it into place.

    Readers that have the old file open keep reading it; nobody ever holds a write lock on the published file.
    """
    stmts = view_statements(root)
    with atomic_path(root.duckdb_file) as tmp:
        con = duckdb.connect(str(tmp))
        try:
            for s in stmts:
                con.execute(s)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        wal = Path(str(tmp) + ".wal")
        if wal.exists():
            wal.unlink()
    return root.duckdb_file


def connect(root: DataRoot) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with every warehouse view defined (no file lock taken)."""
    con = duckdb.connect(":memory:")
    for stmt in view_statements(root):
        try:
            con.execute(stmt)
        except duckdb.Error as exc:  # an artifact vanished between listing and reading: skip that view
            log.warning("view skipped: %s (%s)", stmt.split(" AS ")[0], exc)
    return con


# -- run records ------------------------------------------------------------------------------------------------
@dataclass
class RunRecord:
    run_id: str
    pipeline: str
    config_path: str
    config_hash: str
    started_at: dt.datetime
    status: str = "running"
    finished_at: dt.datetime | None = None
    nodes_total: int = 0
    nodes_built: int = 0
    nodes_hit: int = 0
    seconds: float = 0.0
    pid: int = os.getpid()
    host: str = socket.gethostname()

    def write(self, root: DataRoot) -> None:
        ts = pa.timestamp("us", tz="UTC")
        table = pa.table(
            {
                "run_id": [self.run_id],
                "pipeline": [self.pipeline],
                "config_path": [self.config_path],
                "config_hash": [self.config_hash],
                "started_at": pa.array([self.started_at], ts),
                "finished_at": pa.array([self.finished_at], ts),
                "status": [self.status],
                "nodes_total": pa.array([self.nodes_total], pa.int32()),
                "nodes_built": pa.array([self.nodes_built], pa.int32()),
                "nodes_hit": pa.array([self.nodes_hit], pa.int32()),
                "seconds": [float(self.seconds)],
                "pid": pa.array([self.pid], pa.int64()),
                "host": [self.host],
            }
        )
        with atomic_path(root.runs / f"{self.run_id}.run.parquet") as tmp:
            pq.write_table(table, tmp)


def write_run_nodes(root: DataRoot, run_id: str, rows: list[dict[str, Any]]) -> None:
    schema = pa.schema(
        [("run_id", pa.string()), ("node", pa.string()), ("stage", pa.string()), ("artifact_key", pa.string()),
         ("outcome", pa.string()), ("seconds", pa.float64())]
    )
    table = pa.Table.from_pylist([{"run_id": run_id, **r} for r in rows], schema=schema)
    with atomic_path(root.runs / f"{run_id}.nodes.parquet") as tmp:
        pq.write_table(table, tmp)


def mark_dead_runs(root: DataRoot) -> int:
    """Runs recorded as 'running' whose process is gone are marked 'killed'; returns how many."""
    n = 0
    if not root.runs.exists():
        return 0
    for f in root.runs.glob("*.run.parquet"):
        row = pq.read_table(f).to_pylist()[0]
        if row["status"] != "running" or row["host"] != socket.gethostname():
            continue
        try:
            os.kill(int(row["pid"]), 0)
            continue
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        rec = RunRecord(**{k: row[k] for k in RunRecord.__dataclass_fields__})
        rec.status = "killed"
        rec.write(root)
        n += 1
    return n
