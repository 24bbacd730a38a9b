"""Embedding cache: each sentence is encoded once per model, across tasks, nodes and runs.

Entries are keyed by the **model id** (the model's content hash plus the encoding settings that change the floats) and
the **text hash** (BLAKE2b-128 of the UTF-8 text). They live under ``<root>/<model id>/`` as shards: a
``<name>.vecs.npy`` (float32, one row per text) written first and a ``<name>.keys.npy`` (16-byte hashes) written last,
each to a temporary name and renamed, so a shard without its keys file is invisible and a killed run leaves nothing a
reader could take as complete.

Determinism. A transformer's output for one sentence changes in the last bits with the batch it is encoded in (other
rows change the GEMM blocking), so "encode what is missing" could make results depend on what an earlier run happened
to cache. Texts are therefore assigned to one of ``BUCKETS`` fixed buckets by their hash, and the missing texts of a
bucket are always encoded together, in hash order (the encoder then orders them by length): a bucket is either written
whole by a run or not at all, so a run killed half-way and rerun produces the same floats as an uninterrupted one, and
two runs with the same texts read identical vectors. Lookups are per text (first shard in name order wins), so a second
task or a second evaluation that shares sentences encodes none of them again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

log = logging.getLogger("polysent.models.evaluation")
BUCKETS = 64
KEY_BYTES = 16


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=KEY_BYTES).digest()


def folder_hash(path: Path) -> str:
    """Content hash of a model folder: every file's relative path and SHA-256 (weights, tokenizer, module configs)."""
    path = Path(path)
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        digest = hashlib.sha256()
        with open(f, "rb") as fh:
            for block in iter(lambda fh=fh: fh.read(1 << 22), b""):
                digest.update(block)
        h.update(f.relative_to(path).as_posix().encode() + b"\0" + digest.digest())
    return h.hexdigest()


def model_id(content_hash: str, **encoding: object) -> str:
    """Cache namespace of a model: its content hash and the settings that change its vectors (dtype, max length)."""
    blob = json.dumps({"model": content_hash, **encoding}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


class EmbeddingCache:
    """Vectors of one model. ``root=None`` disables storage (everything is encoded, nothing written)."""

    def __init__(self, root: Path | None, model: str) -> None:
        self.dir = Path(root) / model if root is not None else None
        self.encoded = 0  # texts encoded by this object (tests and logs)
        self.reused = 0
        self._index: dict[bytes, tuple[Path, int]] = {}
        if self.dir is not None and self.dir.exists():
            for keys_file in sorted(self.dir.glob("*.keys.npy")):
                keys = np.load(keys_file)
                for row, key in enumerate(keys):
                    self._index.setdefault(key.tobytes(), (keys_file, row))

    def __len__(self) -> int:
        return len(self._index)

    def embed(self, texts: Sequence[str], encode: Callable[[list[str]], np.ndarray],
              progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Vectors for ``texts`` (duplicates allowed) in input order; ``encode(list) -> float32 [n, d]`` is called
        once per bucket that has texts not cached yet."""
        keys = [text_key(t) for t in texts]
        unique: dict[bytes, str] = {}
        for k, t in zip(keys, texts, strict=True):
            unique.setdefault(k, t)
        vectors: dict[bytes, np.ndarray] = {}
        missing: dict[int, list[bytes]] = {}
        for k in unique:
            if k in self._index:
                continue
            missing.setdefault(k[0] % BUCKETS, []).append(k)
        self._read(unique.keys() - {k for ks in missing.values() for k in ks}, vectors)
        self.reused += len(vectors)
        if progress is not None and vectors:
            progress(len(vectors))
        for bucket in sorted(missing):
            bucket_keys = sorted(missing[bucket])
            emb = np.ascontiguousarray(encode([unique[k] for k in bucket_keys]), dtype=np.float32)
            if emb.shape[0] != len(bucket_keys):
                raise ValueError(f"encoder returned {emb.shape[0]} vectors for {len(bucket_keys)} texts")
            self.encoded += len(bucket_keys)
            vectors.update(zip(bucket_keys, emb, strict=True))
            self._write(bucket, bucket_keys, emb)
            if progress is not None:
                progress(len(bucket_keys))
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([vectors[k] for k in keys])

    def _read(self, wanted: set[bytes] | object, into: dict[bytes, np.ndarray]) -> None:
        by_file: dict[Path, list[tuple[bytes, int]]] = {}
        for k in wanted:  # type: ignore[attr-defined]
            keys_file, row = self._index[k]
            by_file.setdefault(keys_file, []).append((k, row))
        for keys_file, items in sorted(by_file.items()):
            vecs = np.load(str(keys_file).removesuffix(".keys.npy") + ".vecs.npy", mmap_mode="r")
            rows = np.fromiter((r for _, r in items), dtype=np.int64, count=len(items))
            block = np.asarray(vecs[rows], dtype=np.float32)
            into.update(zip((k for k, _ in items), block, strict=True))

    def _write(self, bucket: int, keys: list[bytes], emb: np.ndarray) -> None:
        if self.dir is None:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        name = f"{bucket:02d}-{hashlib.blake2b(b''.join(keys), digest_size=12).hexdigest()}"
        key_array = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), KEY_BYTES)
        vecs_file, keys_file = self.dir / f"{name}.vecs.npy", self.dir / f"{name}.keys.npy"
        for target, array in ((vecs_file, emb), (keys_file, key_array)):  # keys last: they make the shard visible
            tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
            with open(tmp, "wb") as fh:
                np.save(fh, array)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        for row, k in enumerate(keys):
            self._index.setdefault(k, (keys_file, row))
