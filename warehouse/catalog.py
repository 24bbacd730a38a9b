"""The warehouse catalog: which artifact backs each stable table name, the DuckDB views, and run records.

``catalog/current.json`` names each node's artifact by a path relative to the data root, so a copied or moved data
root reads its own files. A view lists the Parquet files of its artifacts' manifests — never a glob of their folders —
so a file written into a published artifact can neither add rows nor break a view (the next run rebuilds that artifact
anyway: ``warehouse.manifest.verify`` checks an artifact whole). ``polysent sql`` defines the views in an in-memory
DuckDB, so queries never take a lock on a database file and work while a pipeline is running. The same views, over
absolute paths, are written to ``catalog/views.sql`` and into ``warehouse.duckdb`` for other tools; that file is built
under a temporary name and renamed into place.

Table families:
- corpus and result tables (``wiki_sentences``, ``xnli_groups``, ``bitext_pairs``, ``eval_results``, ...) show the
  artifacts of the most recent run of the pipeline; ``<table>_all`` unions every artifact ever built for it;
- ``artifacts`` and ``lineage`` come from the catalog rows every artifact carries (``_catalog/*.parquet``);
- ``runs`` and ``run_nodes`` from ``runs/``; ``bench_results`` from ``bench/``.
"""

from __future__ import annotations

import datetime as dt
import functools
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
from warehouse.manifest import CATALOG_DIR, MANIFEST_NAME, Manifest

log = logging.getLogger("polysent.warehouse")


def _sql_str(s: str | Path) -> str:
    return "'" + str(s).replace("'", "''") + "'"


# -- which artifact backs each table ---------------------------------------------------------------------------
class CatalogError(ValueError):
    """``catalog/current.json`` cannot be read (invalid JSON, wrong shape); the message says what to do."""

    def __init__(self, path: Path, what: str) -> None:
        self.path, self.what = path, what
        super().__init__(f"{path} is damaged: {what}. The corpus and result views (wiki_sentences, eval_results, ...) "
                         "cannot be defined from it; run `polysent run CONFIG` to rewrite it (the artifacts are intact "
                         "and are cache hits), or delete the file")


_ENTRY_KEYS = ("stage", "key", "tables")


def load_current(root: DataRoot) -> dict[str, dict[str, Any]]:
    """Node → ``{stage, key, path, tables}`` of the artifacts the views show; ``{}`` when there is no catalog yet.

    ``path`` is relative to the data root (so a copied or moved data root reads its own files). An entry written with
    an absolute path (before paths were relative) is read as this root's ``artifacts/<stage>/<key>`` — never as the
    other root's folder it names — and written back relative by the next update.

    Raises ``CatalogError`` naming the file when it is damaged: silently reading it as empty used to leave a user with
    a later, puzzling "table ... does not exist".
    """
    path = root.current
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(path, f"unreadable ({exc})") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CatalogError(path, f"not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise CatalogError(path, f"a JSON {type(data).__name__}, expected an object of node → artifact")
    out: dict[str, dict[str, Any]] = {}
    for node, entry in data.items():
        bad = _entry_problem(entry)
        if bad:
            raise CatalogError(path, f"entry {node!r} {bad}")
        out[node] = {**entry, "path": _relative_entry_path(root, entry)}
    return out


def _entry_problem(entry: Any) -> str | None:
    if not isinstance(entry, dict):
        return f"is a {type(entry).__name__}, expected an object with {', '.join(_ENTRY_KEYS)}"
    missing = [k for k in _ENTRY_KEYS if k not in entry]
    if missing:
        return f"lacks {', '.join(missing)}"
    if not all(isinstance(entry[k], str) for k in ("stage", "key")):
        return "has a stage or key that is not a string"
    tables = entry["tables"]
    if not isinstance(tables, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in tables.items()):
        return "has tables that are not an object of table name → relative path"
    if "path" in entry and not isinstance(entry["path"], str):
        return "has a path that is not a string"
    return None


def _relative_entry_path(root: DataRoot, entry: Mapping[str, Any]) -> str:
    """The entry's artifact folder relative to the data root; absolute (older) entries resolve to this root's copy."""
    raw = entry.get("path") or ""
    if raw and not Path(raw).is_absolute():
        return Path(raw).as_posix()
    return root.artifact_dir(entry["stage"], entry["key"]).relative_to(root.root).as_posix()


def entry_dir(root: DataRoot, entry: Mapping[str, Any]) -> Path:
    """The absolute artifact folder of a ``load_current`` entry, inside this data root."""
    return root.root / _relative_entry_path(root, entry)


def _entry(root: DataRoot, ref: ArtifactRef) -> dict[str, Any]:
    try:
        rel = ref.path.relative_to(root.root).as_posix()
    except ValueError:  # not below this root (never made by the store): keep this root's own folder for the key
        rel = root.artifact_dir(ref.stage, ref.key).relative_to(root.root).as_posix()
    return {"stage": ref.stage, "key": ref.key, "path": rel, "tables": ref.tables}


def _load_current_for_update(root: DataRoot) -> dict[str, dict[str, Any]]:
    """``load_current`` for a writer: a damaged file is reported and replaced (the run rewrites it whole)."""
    try:
        return load_current(root)
    except CatalogError as exc:
        log.warning("%s is damaged: %s; this run rewrites it", exc.path, exc.what)
        return {}


def _write_current(root: DataRoot, current: Mapping[str, Mapping[str, Any]]) -> None:
    write_text_atomic(root.current, json.dumps(current, indent=2, sort_keys=True, ensure_ascii=False))
    write_views(root, current)


def record_current(root: DataRoot, node: str, ref: ArtifactRef) -> None:
    """Point the tables of ``node`` at ``ref`` and rewrite the views.

    Nodes finish concurrently (task threads, overlapping runs): the read-modify-write of ``current.json`` runs under a
    file lock so no update is lost.
    """
    with FileLock(str(root.catalog / "current.lock")):
        current = _load_current_for_update(root)
        current[node] = _entry(root, ref)
        _write_current(root, current)


def set_current(root: DataRoot, refs: Mapping[str, ArtifactRef]) -> None:
    """At the end of a run: the views show exactly this run's nodes."""
    with FileLock(str(root.catalog / "current.lock")):
        _write_current(root, {node: _entry(root, ref) for node, ref in refs.items()})


# -- views ------------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=4096)
def _manifest_cached(path: str, _size: int, _mtime_ns: int) -> Manifest | None:
    try:
        return Manifest.load(Path(path))
    except (OSError, ValueError, TypeError):
        return None


def _manifest(folder: Path) -> Manifest | None:
    """The manifest of an artifact folder, or None (gone, unreadable). Views are rewritten after every node, over
    every artifact of a table's history: manifests are immutable once published (a rebuild writes a new file), so
    they are parsed once per (path, size, mtime)."""
    mpath = folder / MANIFEST_NAME
    try:
        st = mpath.stat()
    except OSError:
        return None
    return _manifest_cached(str(mpath), st.st_size, st.st_mtime_ns)


def _table_files(folder: Path, manifest: Manifest, rel: str) -> list[Path]:
    """The Parquet files of one table as the manifest lists them — never a glob of the folder, so a file written into
    a published artifact afterwards can neither add rows nor break the view (a Hive partition mismatch)."""
    rel = rel.strip("/")
    if rel.endswith(".parquet"):
        names = [rel] if rel in manifest.files else []
    else:
        names = [n for n in manifest.files if n.startswith(rel + "/") and n.endswith(".parquet")]
    return [folder / n for n in sorted(names)]


def _read_parquet(files: list[Path], *options: str) -> str:
    listed = ", ".join(_sql_str(f) for f in files)
    return f"read_parquet([{listed}], {', '.join(options)})"


def view_plan(root: DataRoot, current: Mapping[str, Mapping[str, Any]] | None = None) -> tuple[list[str], list[str]]:
    """``(CREATE VIEW statements, notes)``: a note says why a table has no view (no Parquet file in its artifacts).

    A table whose only file has zero rows (a schema-only Parquet file) gets a view with its columns and no rows. An
    artifact that holds no file at all for a table (written before empty tables were stored as schema-only files)
    contributes nothing; when no artifact of the table has a file, the table has no view and the note says so.
    """
    current = load_current(root) if current is None else current
    by_table: dict[str, list[Path]] = {}
    empty: dict[str, list[str]] = {}
    history: dict[str, set[str]] = {}
    for entry in current.values():
        folder = entry_dir(root, entry)
        manifest = _manifest(folder)
        for table, rel in sorted(entry["tables"].items()):
            history.setdefault(table, set()).add(entry["stage"])
            if manifest is None:
                continue
            files = [f for f in _table_files(folder, manifest, rel) if f.exists()]
            if files:
                by_table.setdefault(table, []).extend(files)
            else:
                empty.setdefault(table, []).append(folder.relative_to(root.root).as_posix())
    stmts: list[str] = []
    notes: list[str] = []
    for table in sorted(set(by_table) | set(empty)):
        files = by_table.get(table)
        if not files:
            notes.append(f"table {table}: no view — its artifact ({', '.join(sorted(empty[table]))}) holds no Parquet "
                         "file for it (an artifact written before empty tables were stored as schema-only files); "
                         "rebuild it (`polysent run CONFIG --force`) to get the view")
            continue
        stmts.append(f"CREATE OR REPLACE VIEW {table} AS SELECT * FROM "
                     f"{_read_parquet(files, 'hive_partitioning = true', 'union_by_name = true')};")
    for table, stages in sorted(history.items()):
        files = []
        for stage in sorted(stages):
            stage_dir = root.artifacts / stage
            for folder in sorted(stage_dir.iterdir()) if stage_dir.is_dir() else ():
                manifest = _manifest(folder)
                if manifest is not None and table in manifest.tables:
                    files += [f for f in _table_files(folder, manifest, manifest.tables[table]) if f.exists()]
        if files:
            source = _read_parquet(files, "hive_partitioning = true", "union_by_name = true", "filename = true")
            stmts.append(f"CREATE OR REPLACE VIEW {table}_all AS SELECT * FROM {source};")
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
    return stmts, notes


def view_statements(root: DataRoot, current: Mapping[str, Mapping[str, Any]] | None = None) -> list[str]:
    """The ``CREATE VIEW`` statements of the warehouse (see ``view_plan``)."""
    return view_plan(root, current)[0]


def write_views(root: DataRoot, current: Mapping[str, Mapping[str, Any]] | None = None) -> Path:
    """``catalog/views.sql`` for the DuckDB command line. Its paths are absolute (DuckDB resolves relative ones against
    the working directory), so a copied data root's file is right again after its first run; ``polysent sql`` does
    not read it (``connect`` defines the views from ``current.json``, whose paths are relative)."""
    stmts, notes = view_plan(root, current)
    header = f"-- polysent warehouse views over {root.root}; regenerated after every node. Load with: .read this file\n"
    header += "".join(f"-- {note}\n" for note in notes)
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
    """An in-memory DuckDB connection with every warehouse view defined (no file lock taken).

    A damaged ``current.json`` is reported (file, problem, what to do) and the views it defines are left out; the
    ones that do not depend on it (``runs``, ``artifacts``, ``lineage``, ...) are still there.
    """
    con = duckdb.connect(":memory:")
    try:
        stmts, notes = view_plan(root)
    except CatalogError as exc:
        log.warning("%s", exc)
        stmts, notes = view_plan(root, {})
    for note in notes:
        log.warning("%s", note)
    for stmt in stmts:
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


def built_by_run(root: DataRoot, run_id: str) -> list[dict[str, Any]]:
    """The nodes ``run_id`` built, from the catalog rows its artifacts carry (``_catalog/artifact.parquet``).

    A run writes its node outcomes only when it completes; the artifacts it published before it failed or was killed
    (kill -9, possibly from another process: a Dask worker) say by their ``run_id`` that it built them, so its record
    can count them. Hits leave no trace in an artifact and are not counted.
    """
    pattern = root.artifacts / "*" / "*" / CATALOG_DIR / "artifact.parquet"
    if not any(root.artifacts.glob(f"*/*/{CATALOG_DIR}/artifact.parquet")):
        return []
    con = duckdb.connect(":memory:")
    try:
        rows = con.execute(
            f"SELECT node, stage, artifact_key, seconds FROM read_parquet({_sql_str(pattern)}, union_by_name = true) "
            "WHERE run_id = ? ORDER BY node", [run_id]).fetchall()
    except duckdb.Error as exc:  # an artifact replaced while being read: the count is a record, not worth a failure
        log.warning("could not count the nodes run %s built (%s)", run_id, exc)
        return []
    finally:
        con.close()
    return [{"node": n, "stage": st, "artifact_key": k, "outcome": "built", "seconds": float(sec)}
            for n, st, k, sec in rows]


def record_unfinished_run(root: DataRoot, rec: RunRecord) -> None:
    """Write the record of a run that did not complete (failed, killed) with the nodes it did build: its count and,
    unless the run wrote them itself, its ``run_nodes`` rows (outcome ``built``; a rebuild is not told apart here)."""
    built = built_by_run(root, rec.run_id)
    rec.nodes_built = len(built)
    if built and not (root.runs / f"{rec.run_id}.nodes.parquet").exists():
        write_run_nodes(root, rec.run_id, built)
    rec.write(root)


def mark_dead_runs(root: DataRoot) -> int:
    """Runs recorded as 'running' whose process is gone are marked 'killed' with the nodes they built; how many."""
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
        record_unfinished_run(root, rec)
        n += 1
    return n
