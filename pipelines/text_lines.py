"""Line-oriented text files: small ones read whole (evaluation sets), and byte helpers for the corpus readers."""

from __future__ import annotations

import bz2
import gzip
import lzma
from pathlib import Path
from typing import IO


def read_lines(path: Path) -> list[str]:
    """Lines of a text file: BOM removed, CRLF/LF/CR endings, surrounding whitespace stripped."""
    text = Path(path).read_text(encoding="utf-8-sig")
    return [ln.strip() for ln in text.splitlines()]


def strip_bom(data: bytes) -> bytes:
    return data[3:] if data.startswith(b"\xef\xbb\xbf") else data


def line_count(data: bytes) -> int:
    """Lines in ``data``, a last line without a newline included."""
    return data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


def open_binary(path: Path) -> IO[bytes]:
    """A file for reading bytes, decompressed by its suffix (``.gz``, ``.bz2``, ``.xz``); a plain file unbuffered
    (the corpus readers read 4 MiB blocks: no second copy)."""
    suffix = Path(path).suffix.lower()
    if suffix == ".gz":
        return gzip.open(path, "rb")
    if suffix == ".bz2":
        return bz2.open(path, "rb")
    if suffix == ".xz":
        return lzma.open(path, "rb")
    return open(path, "rb", buffering=0)
