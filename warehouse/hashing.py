"""Content hashes: canonical JSON of configuration, file digests with a size + mtime fast path."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from warehouse.atomic import write_text_atomic

_CHUNK = 1 << 20


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace: equal data gives equal text (and so equal hashes)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def hash_obj(obj: Any) -> str:
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


class FileHashCache:
    """sha256 of external input files, re-hashed only when size or mtime changed.

    The cache is a JSON file under the data root; it is only a speed-up: losing it costs one full hash per file.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._dirty = False
        try:
            self._entries: dict[str, dict[str, Any]] = json.loads(path.read_text("utf-8"))
        except (FileNotFoundError, ValueError):
            self._entries = {}

    def __getstate__(self) -> dict[str, Any]:
        """Picklable (a Dask worker receives the run context): the lock is recreated on the other side, and hashes
        that worker computes stay there (the next run recomputes them once)."""
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def digest(self, file: Path) -> dict[str, Any]:
        """Return ``{"sha256", "size"}`` of ``file`` (raises FileNotFoundError naming the file)."""
        file = Path(file).resolve()
        st = file.stat()
        key = str(file)
        with self._lock:
            hit = self._entries.get(key)
            if hit and hit["size"] == st.st_size and hit["mtime_ns"] == st.st_mtime_ns:
                return {"sha256": hit["sha256"], "size": st.st_size}
        digest = sha256_file(file)
        with self._lock:
            self._entries[key] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}
            self._dirty = True
        return {"sha256": digest, "size": st.st_size}

    def save(self) -> None:
        with self._lock:
            if not self._dirty:
                return
            write_text_atomic(self.path, json.dumps(self._entries, indent=0, sort_keys=True))
            self._dirty = False
