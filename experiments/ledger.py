"""The ledger: one JSON file per finished run under ``experiments/<question>/results/``, committed to git.

A row is written once, when its run has trained and been scored, under a temporary name and renamed into place, so a
reader (``status``, ``tables``, a merge) sees either the whole row or none. One file per row rather than one appended
file: two machines that each finish rows produce files with different names, so their ledgers merge in git without a
conflict, and a row's presence alone says the run is done.

A row's file name is its identity, ``<condition>~s<seed>~x<scale>.json`` with the condition made file-safe; the row
holds that identity, the metrics, wall times, hardware, the commit and the content hash of what was trained (the
training settings as run, the start model and the corpus tables' hashes), and ``origin`` (``run`` for rows this code
wrote; an imported row says where it came from).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROW_FIELDS = ("question", "condition", "seed", "scale", "precision", "device", "metrics", "train_seconds",
              "eval_seconds", "hardware", "commit", "trained_hash", "origin", "finished_at")


@dataclass(frozen=True, order=True)
class RowKey:
    """The identity of one run: a condition of a question, trained with one seed at one scale."""

    condition: str
    seed: int
    scale: int

    def file_name(self) -> str:
        return f"{safe_name(self.condition)}~s{self.seed}~x{self.scale}.json"

    def __str__(self) -> str:
        return f"{self.condition} seed {self.seed} ×{self.scale}"


def safe_name(text: str) -> str:
    """``mpcl[none,t0.05]`` → ``mpcl_none_t0.05``: letters, digits, ``.``, ``-`` and ``_`` only (a file name that
    also survives the GPU machine's copy-back rules)."""
    return re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9.\-]+", "_", text)).strip("_")


def canonical_hash(obj: Any) -> str:
    """sha256 of ``obj`` as canonical JSON (sorted keys, no spaces): the same settings give the same hash anywhere."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_row(folder: Path, row: Mapping[str, Any]) -> Path:
    """Write ``row`` as ``folder/<key>.json`` atomically (temporary name in the same folder, fsync, rename).

    An existing row of the same key is replaced: a re-run of a stale row (its condition changed) supersedes it."""
    missing = [k for k in ("question", "condition", "seed", "scale", "metrics") if k not in row]
    if missing:
        raise ValueError(f"ledger row without {', '.join(missing)}: {dict(row)}")
    key = RowKey(str(row["condition"]), int(row["seed"]), int(row["scale"]))
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / key.file_name()
    tmp = folder / f".{target.name}.{os.getpid()}.tmp"
    text = json.dumps(dict(row), indent=1, sort_keys=True, default=str, ensure_ascii=False) + "\n"
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, target)
    return target


def read_rows(folder: Path) -> list[dict[str, Any]]:
    """Every row under ``folder`` (``*.json``; temporary files are not rows), sorted by key. A file that is not a
    row is an error naming the file."""
    rows = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            row = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{e.lineno}: not a ledger row: {e.msg}") from None
        if not isinstance(row, dict) or any(k not in row for k in ("condition", "seed", "scale", "metrics")):
            raise ValueError(f"{path}: not a ledger row: expected an object with condition, seed, scale, metrics")
        expected = RowKey(str(row["condition"]), int(row["seed"]), int(row["scale"])).file_name()
        if path.name != expected:
            raise ValueError(f"{path}: row for {row['condition']!r} seed {row['seed']} ×{row['scale']} must be named "
                             f"{expected}")
        rows.append(row)
    return sorted(rows, key=row_key)


def row_key(row: Mapping[str, Any]) -> RowKey:
    return RowKey(str(row["condition"]), int(row["seed"]), int(row["scale"]))


def iter_json_rows(folder: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Row files under ``folder`` and its sub-folders (what a GPU drain left under ``$OUT``), for ``merge``."""
    for path in sorted(folder.rglob("*.json")):
        try:
            row = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{e.lineno}: not a ledger row: {e.msg}") from None
        if isinstance(row, dict) and "question" in row and "condition" in row:
            yield path, row
