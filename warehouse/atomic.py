"""Atomic file and folder publication.

Readers must never see half-written data under a final name. Every writer here writes to a temporary name in the
same folder (same filesystem), fsyncs, then ``os.replace``s it into place; folders are published with a rename of a
fully written temporary folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def fsync_dir(path: Path) -> None:
    """Flush a directory entry (after a rename) to disk; a no-op where the OS does not allow it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_path(final: Path) -> Iterator[Path]:
    """Yield a temporary path next to ``final``; on success fsync it and rename it over ``final``.

    On an exception the temporary file is removed and ``final`` is left untouched.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        yield tmp
        if tmp.exists():
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp, final)
        fsync_dir(final.parent)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_bytes_atomic(final: Path, data: bytes) -> None:
    with atomic_path(final) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(final: Path, text: str) -> None:
    write_bytes_atomic(final, text.encode("utf-8"))


def fsync_tree(root: Path) -> None:
    """fsync every file and folder below ``root`` (before publishing it by rename)."""
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            with open(os.path.join(dirpath, name), "rb") as fh:
                os.fsync(fh.fileno())
        fsync_dir(Path(dirpath))


def publish_dir(tmp_dir: Path, final: Path, trash: Path) -> None:
    """Rename a completely written ``tmp_dir`` to ``final``.

    If ``final`` exists (a corrupted artifact being replaced) it is first renamed into ``trash`` and deleted, so at any
    instant ``final`` is either absent, the old folder, or the complete new one.
    """
    fsync_tree(tmp_dir)
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists():
        trash.mkdir(parents=True, exist_ok=True)
        # named <name>-<pid>-<random> like a temporary artifact folder: another run's start-up sweep removes it only
        # once this process is dead (it used to delete all of ``trash`` and make this rename fail; tests/faults)
        doomed = Path(tempfile.mkdtemp(prefix=f"{final.name}-{os.getpid()}-", dir=trash))
        os.replace(final, doomed / "old")
        shutil.rmtree(doomed, ignore_errors=True)
    os.rename(tmp_dir, final)
    fsync_dir(final.parent)


@contextmanager
def atomic_dir(final: Path) -> Iterator[Path]:
    """Yield a fresh temporary folder beside ``final``; on success publish it as ``final`` (``publish_dir``,
    readable by all: ``0o755``), replacing a folder already there. On an exception the temporary folder is removed
    and ``final`` is left untouched. The trash folder ``.<name>.trash`` beside it is removed once empty."""
    final = Path(final).absolute()
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-{os.getpid()}-", dir=final.parent))
    trash = final.parent / f".{final.name}.trash"
    try:
        yield tmp
        tmp.chmod(0o755)
        publish_dir(tmp, final, trash)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if trash.is_dir() and not any(trash.iterdir()):
            trash.rmdir()
