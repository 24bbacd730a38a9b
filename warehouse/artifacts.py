"""The node contract: content-addressed, verified, atomically published, lock-protected artifacts.

A stage's cache key is the hash of its name, its code version, its canonical configuration and the content hashes of
its inputs (upstream artifacts' content hashes; external files' sha256). ``ArtifactStore.materialize`` returns a
verified artifact for a key, building it only when no intact one exists:

1. a published artifact whose manifest verifies is a cache hit: its folder holds exactly the manifest's files (no
   extra, none missing), each intact;
2. otherwise the per-key file lock is taken (a second run building the same key waits here, then finds a hit);
3. the stage writes into a fresh folder under ``tmp/``; row counts, file hashes and catalog rows are recorded;
4. the folder is fsynced and renamed to ``artifacts/<stage>/<key>`` — nothing half-written is ever visible there.

A missing, corrupted or added-to artifact is logged with the reason (the file by name) and rebuilt. Temporary folders
and the atomic writer's temporary files of runs that died are swept at the start of the next run (``sweep_tmp``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import platform
import re
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from importlib import metadata
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from filelock import FileLock, Timeout

# the stage contract lives in the dependency-free ``contract`` package (pipelines and models return it without
# importing the storage layer); re-exported here because ``materialize`` takes builders returning it
from contract import StageResult
from warehouse.atomic import publish_dir, write_text_atomic
from warehouse.hashing import hash_obj
from warehouse.layout import DataRoot
from warehouse.manifest import CATALOG_DIR, MANIFEST_NAME, Manifest, content_hash, scan_files, verify

log = logging.getLogger("polysent.warehouse")

_VERSIONED_PACKAGES = ("polars", "duckdb", "pyarrow", "torch", "transformers", "tokenizers", "numpy")


@dataclass(frozen=True)
class ArtifactRef:
    stage: str
    key: str
    path: Path
    content_hash: str
    tables: dict[str, str]
    rows: dict[str, int]

    def table_path(self, table: str) -> Path:
        return self.path / self.tables[table]


class Outcome(StrEnum):
    HIT = "hit"
    BUILT = "built"
    REBUILT = "rebuilt"


def cache_key(stage: str, version: str, config: Mapping[str, Any], inputs: Mapping[str, str]) -> str:
    """Cache key of a node: stage name + code version + canonical config + input content hashes."""
    return hash_obj({"stage": stage, "version": version, "config": config, "inputs": dict(inputs)})


def input_key(stage: str, version: str, config: Mapping[str, Any], inputs: Mapping[str, Mapping[str, Any]]) -> str:
    """The key ``ArtifactStore.materialize`` gives a node with these input descriptions (each carrying
    ``content_hash`` or ``sha256``): one function, so a lookup made ahead of a run finds what the run would."""
    return cache_key(stage, version, config, {k: _input_hash(k, v) for k, v in inputs.items()})


def parquet_rows(path: Path) -> int:
    """Rows in a Parquet file, or in every ``*.parquet`` below a folder (from footers, no data read)."""
    files = [path] if path.is_file() else sorted(path.rglob("*.parquet"))
    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in _VERSIONED_PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[pkg] = metadata.version(pkg)
    return out


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ArtifactStore:
    def __init__(self, root: DataRoot, *, create: bool = True) -> None:
        """``create=False`` (``polysent plan``): only look up, and leave a data root that does not exist absent."""
        self.root = root
        if create:
            root.ensure()

    # -- lookup -----------------------------------------------------------------------------------------------
    def lookup(self, stage: str, key: str) -> tuple[ArtifactRef | None, str | None]:
        """The intact artifact for ``key``, or ``(None, reason)`` — reason is None when it simply does not exist."""
        folder = self.root.artifact_dir(stage, key)
        mpath = folder / MANIFEST_NAME
        if not folder.exists():
            return None, None
        try:
            manifest = Manifest.load(mpath)
        except FileNotFoundError:
            return None, f"{folder} has no {MANIFEST_NAME}"
        except (ValueError, TypeError) as exc:
            return None, f"{mpath} is unreadable ({exc})"
        if manifest.key != key:
            return None, f"{mpath} belongs to key {manifest.key[:20]}, expected {key[:20]}"
        reason = verify(folder, manifest)
        if reason:
            return None, f"{folder}: {reason}"
        return self._ref(folder, manifest), None

    @staticmethod
    def _ref(folder: Path, m: Manifest) -> ArtifactRef:
        return ArtifactRef(m.stage, m.key, folder, m.content_hash, dict(m.tables), dict(m.rows))

    # -- build ------------------------------------------------------------------------------------------------
    def materialize(
        self,
        *,
        node: str,
        stage: str,
        version: str,
        config: Mapping[str, Any],
        inputs: Mapping[str, Mapping[str, Any]],
        build: Callable[[Path], StageResult],
        run_id: str = "",
        force: bool = False,
    ) -> tuple[ArtifactRef, Outcome, float]:
        """Return ``(artifact, outcome, seconds)`` for this node, building it only when needed.

        ``inputs`` maps an input name to its description; each must carry ``content_hash`` (artifact) or ``sha256``
        (external file), which enter the key.
        """
        key = input_key(stage, version, config, inputs)
        t0 = time.perf_counter()
        if not force:
            ref, reason = self.lookup(stage, key)
            if ref is not None:
                log.info("%s: cache hit %s (%s)", node, key[:12], ref.path)
                return ref, Outcome.HIT, time.perf_counter() - t0
        lock = FileLock(str(self.root.lock_file(stage, key)))
        try:
            lock.acquire(blocking=False)
        except Timeout:
            log.info("%s: another run is building %s; waiting for it", node, key[:12])
            lock.acquire()
        try:
            ref, reason = self.lookup(stage, key)
            if ref is not None and not force:
                log.info("%s: built meanwhile by another run, cache hit %s", node, key[:12])
                return ref, Outcome.HIT, time.perf_counter() - t0
            outcome = Outcome.BUILT
            if reason:
                log.warning("%s: artifact %s is not intact — %s; rebuilding", node, key[:12], reason)
                outcome = Outcome.REBUILT
            elif force and self.root.artifact_dir(stage, key).exists():
                log.info("%s: --force, rebuilding %s", node, key[:12])
                outcome = Outcome.REBUILT
            ref = self._build(node, stage, version, key, config, inputs, build, run_id)
            return ref, outcome, time.perf_counter() - t0
        finally:
            lock.release()

    def _build(
        self,
        node: str,
        stage: str,
        version: str,
        key: str,
        config: Mapping[str, Any],
        inputs: Mapping[str, Mapping[str, Any]],
        build: Callable[[Path], StageResult],
        run_id: str,
    ) -> ArtifactRef:
        self.root.tmp.mkdir(parents=True, exist_ok=True)
        tmp = self.root.tmp / f"{stage}-{key[:12]}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        tmp.mkdir()
        started = dt.datetime.now(dt.UTC)
        t0 = time.perf_counter()
        try:
            log.info("%s: building %s into %s", node, key[:12], tmp)
            result = build(tmp)
            if not isinstance(result, StageResult):  # e.g. a stage still returning the old {"tables", "stats"} dict
                raise TypeError(f"stage {stage} (node {node}) returned {type(result).__name__}, expected "
                                "contract.StageResult")
            seconds = time.perf_counter() - t0
            for table, rel in result.tables.items():
                if not (tmp / rel).exists():
                    raise RuntimeError(f"stage {stage} declared table {table} at {rel} but did not write it")
            rows = {t: parquet_rows(tmp / rel) for t, rel in result.tables.items()}
            self._write_catalog_rows(tmp, node, stage, key, version, inputs, rows, started, seconds, run_id,
                                     self.root)
            files = scan_files(tmp)
            manifest = Manifest(
                stage=stage,
                key=key,
                version=version,
                node=node,
                config=dict(config),
                inputs={k: dict(v) for k, v in inputs.items()},
                files=files,
                tables=dict(result.tables),
                rows=rows,
                stats=dict(result.stats),
                content_hash=content_hash(files),
                created_at=started.isoformat(),
                seconds=round(seconds, 3),
                run_id=run_id,
                versions=_versions(),
            )
            write_text_atomic(tmp / MANIFEST_NAME, manifest.to_json())
            final = self.root.artifact_dir(stage, key)
            publish_dir(tmp, final, self.root.trash)
        except BaseException as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            # name the node: an OSError from a full disk (tests/faults) names at most a temporary file, and the local
            # executor logs nothing else about which node it was building
            log.error("%s: build failed (%s: %s); its temporary folder %s was removed, nothing was published", node,
                      type(exc).__name__, exc, tmp)
            log.debug("%s: the build's traceback", node, exc_info=True)
            with contextlib.suppress(AttributeError, TypeError):  # the CLI then says "above" instead of repeating it
                exc.polysent_reported = node  # type: ignore[attr-defined]
            raise
        log.info("%s: wrote %s (%s) in %.1fs", node, final, ", ".join(f"{t}={n}" for t, n in rows.items()), seconds)
        return self._ref(final, manifest)

    @staticmethod
    def _write_catalog_rows(
        tmp: Path,
        node: str,
        stage: str,
        key: str,
        version: str,
        inputs: Mapping[str, Mapping[str, Any]],
        rows: Mapping[str, int],
        started: dt.datetime,
        seconds: float,
        run_id: str,
        root: DataRoot,
    ) -> None:
        cat = tmp / CATALOG_DIR
        cat.mkdir()
        artifact = pa.table(
            {
                "artifact_key": [key],
                "stage": [stage],
                "node": [node],
                "version": [version],
                "tables": [",".join(sorted(rows))],
                "rows": [int(sum(rows.values()))],
                "created_at": pa.array([started], pa.timestamp("us", tz="UTC")),
                "seconds": [round(seconds, 3)],
                "run_id": [run_id],
            }
        )
        pq.write_table(artifact, cat / "artifact.parquet")
        lineage = pa.table(
            {
                "artifact_key": [key] * len(inputs),
                "stage": [stage] * len(inputs),
                "input_name": list(inputs),
                "input_kind": [str(v.get("kind", "")) for v in inputs.values()],
                "input_stage": [str(v.get("stage", "")) for v in inputs.values()],
                "input_key": [str(v.get("key", "")) for v in inputs.values()],
                "input_path": [_root_relative(root, str(v.get("path", ""))) for v in inputs.values()],
                "input_hash": [_input_hash(k, v) for k, v in inputs.items()],
            },
            schema=pa.schema(
                [(n, pa.string()) for n in ("artifact_key", "stage", "input_name", "input_kind", "input_stage",
                                            "input_key", "input_path", "input_hash")]
            ),
        )
        pq.write_table(lineage, cat / "lineage.parquet")

    # -- housekeeping -----------------------------------------------------------------------------------------
    def sweep_tmp(self) -> list[Path]:
        """Delete temporary folders left by runs that died (their pid is gone); return what was removed.

        The atomic writer's temporary files of such runs go too (``sweep_atomic_temps``; logged, not returned).
        """
        removed: list[Path] = []
        for p in (self.root.tmp.iterdir() if self.root.tmp.exists() else ()):
            if p.name == "trash":
                # replaced artifacts being deleted (``publish_dir``): only a dead run's. Sweeping all of ``trash``
                # broke a live run between creating its entry and moving the old folder into it (tests/faults).
                for old in p.iterdir():
                    owner = _owner_pid(old.name)
                    if owner is None or not _pid_alive(owner):
                        shutil.rmtree(old, ignore_errors=True)
                continue
            owner = _owner_pid(p.name)
            if owner is not None and not _pid_alive(owner):
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p)
        for p in removed:
            log.info("removed partial artifact %s left by a run that died", p)
        for p in self.sweep_atomic_temps():
            log.info("removed temporary file %s left by a run that died", p)
        return removed

    def sweep_atomic_temps(self) -> list[Path]:
        """Delete the atomic writer's temporary files (and DuckDB's ``.wal`` beside them) left by runs that died.

        ``warehouse.atomic.atomic_path`` writes ``.<name>.tmp-<pid>-<random>`` next to its target: ``current.json``
        and ``views.sql`` in ``catalog/``, run records in ``runs/``, report copies in ``reports/`` and
        ``warehouse.duckdb`` in the root — the last with a ``.wal`` of its own while DuckDB writes it. A kill -9 between
        writing and the rename leaves them behind; only a dead owner's are removed (a live run may be about to rename
        its file into place).
        """
        removed: list[Path] = []
        root = self.root
        for folder in (root.root, root.catalog, root.runs, root.reports):
            try:
                entries = list(folder.iterdir())
            except FileNotFoundError:
                continue
            for p in entries:
                m = _ATOMIC_TEMP.match(p.name)
                if m is None or _pid_alive(int(m["pid"])):
                    continue
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
                    removed.append(p)
        return removed


# ``.<name>.tmp-<pid>-<8 hex>`` of ``warehouse.atomic.atomic_path``, and the ``.wal`` DuckDB writes beside its database
_ATOMIC_TEMP = re.compile(r"^\..+\.tmp-(?P<pid>\d+)-[0-9a-f]{8}(?:\.wal)?$")


def _owner_pid(name: str) -> int | None:
    """The pid in a temporary name ``<stage>-<key>-<pid>-<random>`` (or ``<key>-<pid>-<random>`` in ``trash``)."""
    parts = name.rsplit("-", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


def _root_relative(root: DataRoot, path: str) -> str:
    """``path`` relative to the data root when it lies inside it (an upstream artifact), else unchanged (an external
    file): lineage rows stay true when the data root is copied or moved."""
    if not path:
        return path
    try:
        return Path(path).relative_to(root.root).as_posix()
    except ValueError:
        return path


def _input_hash(name: str, desc: Mapping[str, Any]) -> str:
    for field_name in ("content_hash", "sha256"):
        if desc.get(field_name):
            return str(desc[field_name])
    raise ValueError(f"input {name!r} has neither content_hash nor sha256: {dict(desc)}")
