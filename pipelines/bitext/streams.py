"""What every bitext format reads with: the chunk schema, line-aligned text streams, line counts, errors.

A format (``pipelines.bitext.formats``) turns its files into chunks of :data:`CHUNK_SCHEMA` through these. Text is
stripped of a file's UTF-8 BOM, of CR/LF and of leading/trailing whitespace (polars ``str.strip_chars``: Unicode
White_Space). Blank lines are kept as ``""`` so alignment never shifts; the caller counts and drops pairs with a blank
side. Lines are split on ``\\n`` only (a lone ``\\r``, ``\\x00``, ``\\x1f`` or a tab inside a line is text).

Moses read benchmark (2M-pair synthetic file pair, ~60-byte lines, 2 cores shared with another job's benchmarks, warm
page cache; seconds per 1M pairs including the chunk frame, wall min/median of 4 interleaved rounds):
``itertools.islice`` over text files + ``pl.Series`` 0.75/0.84; ``pyarrow.csv.open_csv`` with a never-used delimiter
0.31/0.38 (rejected: it also ends a row at a lone ``\\r`` and fails on a line holding the delimiter byte); 16 MiB binary
blocks + ``bytes.decode`` + Python ``str.split`` 0.76/0.84, + polars ``str.split`` 0.60/0.68, UTF-8-checked by one
polars Binary→Utf8 cast + polars ``str.split`` 0.33/0.35; the same with 4 MiB blocks 0.26/0.27 (one thread), 0.24/0.38
(two threads); 4 MiB blocks + cast check + numpy newline offsets, two threads 0.16/0.24; **this module 0.19/0.23**
(0.26 s CPU). gzip input: 0.75-1.1 (zlib inflate alone is ~0.47 s per 1M lines per file). ``count_pairs``: 0.10 plain.
"""

from __future__ import annotations

import lzma
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO

import numpy as np
import polars as pl
import pyarrow as pa

from pipelines.text_lines import open_binary

CHUNK_SCHEMA = {"src_lang": pl.Utf8, "tgt_lang": pl.Utf8, "src_text": pl.Utf8, "tgt_text": pl.Utf8,
                "origin": pl.Utf8, "line": pl.Int64}
READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError, zipfile.BadZipFile)

_BLOCK = 1 << 22  # 4 MiB: the split/strip passes stay in cache (16-64 MiB blocks were 2x slower)
_COUNT_BLOCK = 1 << 20
_BOM = b"\xef\xbb\xbf"


class BitextFormatError(ValueError):
    """A bitext file that cannot be read as its format says; the message names the file (and line where known)."""


# ---------------------------------------------------------------------------------------------------------- helpers


def frame(src_lang: str, tgt_lang: str, src_text: pl.Series, tgt_text: pl.Series, origin: str,
          line: int | pl.Series, strip: bool = True) -> pl.DataFrame:
    """A chunk in CHUNK_SCHEMA; ``line`` is the first line number (consecutive lines) or a Series of them."""
    n = len(src_text)
    lines = pl.int_range(line, line + n, dtype=pl.Int64, eager=True) if isinstance(line, int) else line
    src, tgt = src_text.cast(pl.Utf8), tgt_text.cast(pl.Utf8)
    if strip:
        src, tgt = src.str.strip_chars(), tgt.str.strip_chars()
    return pl.DataFrame({"src_text": src, "tgt_text": tgt, "line": lines.cast(pl.Int64)}).select(
        pl.lit(src_lang, pl.Utf8).alias("src_lang"), pl.lit(tgt_lang, pl.Utf8).alias("tgt_lang"),
        "src_text", "tgt_text", pl.lit(origin, pl.Utf8).alias("origin"), "line")


def swap(df: pl.DataFrame) -> pl.DataFrame:
    """A chunk with its two sides exchanged (languages and texts; ``origin`` and ``line`` stay)."""
    return df.select(pl.col("tgt_lang").alias("src_lang"), pl.col("src_lang").alias("tgt_lang"),
                     pl.col("tgt_text").alias("src_text"), pl.col("src_text").alias("tgt_text"), "origin", "line")


def rechunk_rows(frames: Iterable[pl.DataFrame], chunk_rows: int) -> Iterator[pl.DataFrame]:
    """Group small frames (each ≤ chunk_rows rows) into chunks of at most chunk_rows rows."""
    group: list[pl.DataFrame] = []
    rows = 0
    for df in frames:
        if group and rows + df.height > chunk_rows:
            yield pl.concat(group, rechunk=False) if len(group) > 1 else group[0]
            group, rows = [], 0
        group.append(df)
        rows += df.height
    if group:
        yield pl.concat(group, rechunk=False) if len(group) > 1 else group[0]


# ------------------------------------------------------------------------------------------------- line streams


class LineReader:
    """Stripped lines of one binary stream, ``take(n)`` at a time.

    4 MiB blocks cut at their last ``\\n``; each block is UTF-8-checked by one polars Binary→Utf8 cast and split at
    numpy-found newlines into a zero-copy Arrow string array. Polars and numpy release the GIL, so two readers run in
    parallel on a thread pool.
    """

    def __init__(self, raw: IO[bytes], name: str, block_size: int | None = None) -> None:
        self.raw, self.name, self.block_size = raw, name, block_size or _BLOCK
        self.tail = b""
        self.started = self.eof = False
        self.pending: list[pl.Series] = []
        self.have = 0  # lines in pending
        self.split_lines = 0  # lines cut from blocks so far
        self.taken = 0  # lines handed out

    def _read(self, n: int) -> bytes:
        try:
            return self.raw.read(n)
        except READ_ERRORS as exc:
            raise BitextFormatError(f"{self.name}: unreadable beyond line {self.split_lines}: "
                                    f"{type(exc).__name__}: {exc}") from None

    def _check_utf8(self, data: bytes) -> None:
        try:
            pl.Series([data], dtype=pl.Binary).cast(pl.Utf8)  # one SIMD pass over the block
        except pl.exceptions.PolarsError:
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as exc:
                line_start = data.rfind(b"\n", 0, exc.start) + 1
                line = self.split_lines + data.count(b"\n", 0, exc.start) + 1
                raise BitextFormatError(
                    f"{self.name}:{line}: invalid UTF-8 ({exc.reason}, byte {data[exc.start:exc.end]!r} at column "
                    f"{exc.start - line_start + 1})") from None
            raise

    def _add(self, data: bytes) -> None:
        """Lines of ``data`` (whole lines, the last one without its newline)."""
        self._check_utf8(data)
        # line i = data[offsets[i]:offsets[i + 1]] (its "\n" included, removed by the strip): an Arrow string array
        # over the block without copying it
        newlines = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)
        offsets = np.empty(len(newlines) + 2, np.int64)
        offsets[0], offsets[-1] = 0, len(data)
        offsets[1:-1] = newlines
        offsets[1:-1] += 1
        arr = pa.Array.from_buffers(pa.large_string(), len(offsets) - 1, [None, pa.py_buffer(offsets),
                                                                            pa.py_buffer(data)])
        lines = pl.Series(self.name, arr).str.strip_chars()
        self.pending.append(lines)
        self.have += len(lines)
        self.split_lines += len(lines)

    def _next_block(self) -> None:
        data = self._read(self.block_size)
        if not self.started:
            self.started = True
            if data.startswith(_BOM):
                data = data[len(_BOM):]
        if not data:
            self.eof = True
            if self.tail:  # a last line without newline
                tail, self.tail = self.tail, b""
                self._add(tail)
            return
        if self.tail:
            data = self.tail + data
        cut = data.rfind(b"\n")
        if cut < 0:
            self.tail = data
            return
        self.tail = data[cut + 1:]
        self._add(data[:cut])

    def take(self, n: int) -> pl.Series:
        """The next ``n`` lines (fewer only at the end of the stream)."""
        while self.have < n and not self.eof:
            self._next_block()
        if not self.pending:
            return pl.Series(self.name, [], dtype=pl.Utf8)
        lines = pl.concat(self.pending, rechunk=False) if len(self.pending) > 1 else self.pending[0]
        out, rest = lines.slice(0, n), lines.slice(n)
        self.pending = [rest] if len(rest) else []
        self.have = len(rest)
        self.taken += len(out)
        return out

    def total_lines(self) -> int:
        """Lines in the whole stream (consumes what is left; for error messages)."""
        return self.taken + self.have + count_lines(self.raw, self.name, self.tail, self.eof)


def count_lines(raw: IO[bytes], name: str, head: bytes = b"", eof: bool = False) -> int:
    """Lines left in ``raw`` after ``head``: newlines counted at C speed, plus a last line without newline."""
    count, last = head.count(b"\n"), head[-1:]
    while not eof:
        try:
            block = raw.read(_COUNT_BLOCK)
        except READ_ERRORS as exc:
            raise BitextFormatError(f"{name}: unreadable: {type(exc).__name__}: {exc}") from None
        if not block:
            break
        count += block.count(b"\n")
        last = block[-1:]
    return count + (1 if last and last != b"\n" else 0)


def _count_file(path: Path) -> int:
    with open_binary(path) as raw:
        return count_lines(raw, str(path))


def count_files(paths: list[Path]) -> dict[str, int]:
    """Line counts, two files at a time (decompression releases the GIL); unequal counts → BitextFormatError."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        counts = dict(zip(map(str, paths), pool.map(_count_file, paths), strict=True))
    if len(set(counts.values())) > 1:
        raise unequal(counts)
    return counts


def unequal(counts: dict[str, int]) -> BitextFormatError:
    """The error for line-aligned files of different lengths (file → line count)."""
    listed = ", ".join(f"{name} has {n} lines" for name, n in counts.items())
    return BitextFormatError(f"line-aligned files differ in length: {listed} (the shortest ends after line "
                             f"{min(counts.values())})")


def aligned_lines(readers: dict[str, LineReader], step: int) -> Iterator[dict[str, pl.Series]]:
    """Lockstep ``step`` lines from every reader (two at a time on threads); unequal lengths → BitextFormatError."""
    with ThreadPoolExecutor(max_workers=min(2, len(readers))) as pool:
        while True:
            futures = {key: pool.submit(r.take, step) for key, r in readers.items()}
            got = {key: f.result() for key, f in futures.items()}
            lengths = {len(s) for s in got.values()}
            if len(lengths) > 1:
                raise unequal({r.name: r.total_lines() for r in readers.values()})
            (n,) = lengths
            if n == 0:
                return
            yield got
            del got  # hold no finished chunk while reading the next one
            if n < step:
                return


def paired_lines(src_raw: IO[bytes], tgt_raw: IO[bytes], src_name: str, tgt_name: str, src: str, tgt: str,
                 origin: str, chunk_rows: int) -> Iterator[pl.DataFrame]:
    """Chunks (``src`` → ``tgt``, not pivot-oriented) of two line-aligned streams read in lockstep (Moses files, an
    OPUS zip's two members); line numbers from 1."""
    readers = {"src": LineReader(src_raw, src_name), "tgt": LineReader(tgt_raw, tgt_name)}
    line = 1
    for got in aligned_lines(readers, chunk_rows):
        n = len(got["src"])
        yield frame(src, tgt, got.pop("src"), got.pop("tgt"), origin, line, strip=False)
        line += n


def text_series(arr: pa.Array | pa.ChunkedArray | pl.Series, where: str, column: str) -> pl.Series:
    """A column of text as a polars Utf8 Series, nulls as ``""``; anything not text → BitextFormatError."""
    try:
        series = arr if isinstance(arr, pl.Series) else pl.from_arrow(arr)
        assert isinstance(series, pl.Series)
        return series.cast(pl.Utf8).fill_null("")
    except (pl.exceptions.PolarsError, pa.ArrowException) as exc:
        raise BitextFormatError(f"{where}: column {column!r} is not text ({exc})") from None

