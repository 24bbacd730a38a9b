"""The artifact manifest: what a node produced, from what, and how to check it is intact."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warehouse.hashing import hash_obj, sha256_file

MANIFEST_NAME = "manifest.json"
CATALOG_DIR = "_catalog"
TIMINGS_DIR = "_timings"  # build measurements: verified, but not part of the content hash
FORMAT_VERSION = 1


@dataclass
class Manifest:
    stage: str
    key: str
    version: str
    node: str
    config: dict[str, Any]
    inputs: dict[str, dict[str, Any]]
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    tables: dict[str, str] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    content_hash: str = ""
    created_at: str = ""
    seconds: float = 0.0
    run_id: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    format: int = FORMAT_VERSION

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=2, sort_keys=True, ensure_ascii=False, default=str)

    @classmethod
    def load(cls, path: Path) -> Manifest:
        data = json.loads(Path(path).read_text("utf-8"))
        if data.get("format") != FORMAT_VERSION:
            raise ValueError(f"{path}: manifest format {data.get('format')!r}, expected {FORMAT_VERSION}")
        return cls(**data)


def scan_files(root: Path) -> dict[str, dict[str, Any]]:
    """Size, mtime and sha256 of every file below ``root`` except the manifest, keyed by POSIX relative path."""
    out: dict[str, dict[str, Any]] = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            if rel == MANIFEST_NAME:
                continue
            st = p.stat()
            out[rel] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256_file(p)}
    return dict(sorted(out.items()))


def content_hash(files: dict[str, dict[str, Any]]) -> str:
    """Hash of the data files. Excluded: catalog rows (they carry timestamps, the data must not) and ``_timings/``
    (measurements of how the build went — a training run's per-step wall times and throughput — which differ between
    two builds of identical data; they are still listed and verified, and queryable)."""
    return hash_obj({k: v["sha256"] for k, v in files.items()
                     if not k.startswith((CATALOG_DIR + "/", TIMINGS_DIR + "/"))})


def listed_files(root: Path) -> set[str]:
    """POSIX relative paths of every file below ``root`` except the manifest (folders alone do not count)."""
    out: set[str] = set()
    for dirpath, _dirs, names in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        prefix = "" if rel_dir == "." else rel_dir + "/"
        out.update(prefix + name for name in names)
    out.discard(MANIFEST_NAME)
    return out


def verify(root: Path, manifest: Manifest) -> str | None:
    """Return None when the folder holds exactly the manifest's files, each intact; else a reason naming the file.

    The artifact is verified *whole*: a file the manifest does not list (a user's ``COPY ... TO
    '<artifact>/hard_negatives/lang=hy/part-99999.parquet'``, an editor's backup) is as much a damage as a missing one,
    because every reader that globs a table folder (a stage reading its upstream, DuckDB over a partitioned table)
    would take it for data — doubling rows, or failing with a Hive partition mismatch on another schema. Empty folders
    are ignored (they hold no data).

    Fast path: a file whose size and mtime match the manifest is trusted; otherwise its sha256 is recomputed. The
    listing is one ``readdir`` per folder, cheap next to the ``stat`` of every file that the fast path already does.
    """
    extra = sorted(listed_files(root) - manifest.files.keys())
    if extra:
        named = ", ".join(extra[:3]) + (f" and {len(extra) - 3} more" if len(extra) > 3 else "")
        what = f"file {named} is" if len(extra) == 1 else f"files {named} are"
        return f"{what} not in the manifest (written into the artifact after it was published)"
    for rel, meta in manifest.files.items():
        p = root / rel
        try:
            st = p.stat()
        except FileNotFoundError:
            return f"file {rel} is missing"
        if st.st_size != meta["size"]:
            return f"file {rel} has {st.st_size} bytes, manifest says {meta['size']}"
        if st.st_mtime_ns != meta["mtime_ns"] and sha256_file(p) != meta["sha256"]:
            return f"file {rel} does not match its sha256 in the manifest"
    return None
