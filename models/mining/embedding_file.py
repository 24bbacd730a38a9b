"""Sentence embeddings streamed to a memory-mapped ``.npy`` file, chunk by chunk, with a sidecar naming the model.

A corpus side of millions of sentences is encoded ``chunk_rows`` texts at a time and each chunk is written into an
``np.lib.format.open_memmap`` file, so peak memory is one chunk (its tokens and vectors), never the corpus. The file is
written under a temporary name and renamed when complete, and its sidecar ``<file>.json`` — ``{"model", "dim", "rows",
"texts"}`` (``texts``: SHA-256 of the texts in order) — is written last, the same way: a file without its sidecar is
never read as complete, and a saved file is reused only for the same model, dimension and texts. Anything else is an
:class:`EmbeddingFileError` naming the file and what differs (a model whose dimension differs from the saved file's
included), never a silent mix of two models' vectors.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

log = logging.getLogger("polysent.models.mining")
CHUNK_ROWS = 16384


class EmbeddingFileError(ValueError):
    """A saved embedding file that does not belong to these texts and this model."""


def texts_digest(texts: Iterable[str]) -> str:
    """SHA-256 of the texts in order (each UTF-8 text and a NUL)."""
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def shared_path(folder: Path, model: str, texts: Sequence[str]) -> Path:
    """Where the embeddings of ``texts`` by ``model`` live in a folder shared by several mining runs: the name holds
    a hash of both, so a side mined twice (English against three languages) is encoded once."""
    key = hashlib.sha256(f"{model}\0{texts_digest(texts)}".encode()).hexdigest()[:24]
    return Path(folder) / f"{key}.npy"


def saved_embeddings(path: Path, *, model: str, dim: int, texts: str, rows: int) -> np.ndarray | None:
    """The saved embeddings at ``path`` (memory-mapped, read-only) when they are complete and belong to ``model``,
    ``dim`` and ``texts``; None when no complete file is there; :class:`EmbeddingFileError` when one is there for
    something else."""
    path = Path(path)
    meta_path = sidecar(path)
    if not path.exists() or not meta_path.exists():
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        arr = np.load(path, mmap_mode="r")
    except (OSError, ValueError) as exc:
        raise EmbeddingFileError(f"{path}: not a readable embedding file ({exc}); delete it and its "
                                 f"{meta_path.name} to encode again") from None
    saved_dim = arr.shape[1] if arr.ndim == 2 else None
    if saved_dim != dim or meta.get("dim") != dim:
        raise EmbeddingFileError(f"{path}: holds {saved_dim}-dimensional embeddings but the model {model} gives "
                                 f"{dim}-dimensional ones; use the model that wrote it ({meta.get('model')}) or "
                                 "another --embeddings path")
    if meta.get("model") != model:
        raise EmbeddingFileError(f"{path}: holds embeddings of model {meta.get('model')}, not of {model}; use "
                                 "another embeddings path or delete the file")
    if meta.get("texts") != texts or arr.shape[0] != rows:
        saved_texts = str(meta.get("texts"))[:12]
        raise EmbeddingFileError(f"{path}: holds embeddings of other texts ({arr.shape[0]} rows, texts "
                                 f"{saved_texts}…; these inputs have {rows} rows, texts {texts[:12]}…); use another "
                                 "embeddings path or delete the file")
    return arr


def encode_to_file(texts: Sequence[str], encode: Callable[[list[str]], np.ndarray], path: Path, *, model: str,
                   dim: int, chunk_rows: int = CHUNK_ROWS,
                   progress: Callable[[int], None] | None = None) -> np.ndarray:
    """Encode ``texts`` ``chunk_rows`` at a time into ``path`` (float32 ``.npy``) and return it memory-mapped
    read-only; a complete file of the same model and texts is reused (nothing encoded). ``encode(list) → [n, dim]``.
    Writers of one file take turns (a lock file beside it), so two runs sharing a side encode it once."""
    from filelock import FileLock  # a dependency of huggingface_hub / transformers: there wherever models/ runs

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # one writer per file: a second run mining the same side (another node, another process) waits, then reuses it
    with FileLock(str(path.with_name(path.name + ".lock"))):
        return _encode_locked(texts, encode, path, model=model, dim=dim, chunk_rows=chunk_rows, progress=progress)


def _encode_locked(texts: Sequence[str], encode: Callable[[list[str]], np.ndarray], path: Path, *, model: str,
                   dim: int, chunk_rows: int, progress: Callable[[int], None] | None) -> np.ndarray:
    digest = texts_digest(texts)
    saved = saved_embeddings(path, model=model, dim=dim, texts=digest, rows=len(texts))
    if saved is not None:
        log.info("%s: reusing %d saved embeddings of %s", path, len(texts), model)
        if progress is not None:
            progress(len(texts))
        return saved
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be positive, got {chunk_rows}")
    sidecar(path).unlink(missing_ok=True)  # the old sidecar first: a half-replaced pair is never read as complete
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")  # unique per writer and thread
    try:
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(len(texts), dim))
        for lo in range(0, len(texts), chunk_rows):
            chunk = list(texts[lo:lo + chunk_rows])
            vecs = np.asarray(encode(chunk), dtype=np.float32)
            if vecs.shape != (len(chunk), dim):
                raise ValueError(f"the encoder returned shape {vecs.shape} for {len(chunk)} texts; expected "
                                 f"({len(chunk)}, {dim})")
            out[lo:lo + len(chunk)] = vecs
            if progress is not None:
                progress(len(chunk))
        out.flush()
        del out
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    meta = {"model": model, "dim": dim, "rows": len(texts), "texts": digest}
    meta_tmp = sidecar(path).with_name(f".{sidecar(path).name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    meta_tmp.write_text(json.dumps(meta, indent=1), encoding="utf-8")
    os.replace(meta_tmp, sidecar(path))
    log.info("%s: wrote %d × %d embeddings of %s", path, len(texts), dim, model)
    return np.load(path, mmap_mode="r")
