"""Parquet: one row per pair, in two text columns — a file or a folder of files, as the hub's Parquet conversions and
this project's own ``mined_pairs`` tables are published."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.bitext.formats.base import PairFormat
from pipelines.bitext.streams import BitextFormatError, frame, text_series

_PARQUET_BATCH = 1 << 19  # rows per Parquet batch at most (see ParquetSource.read)


class ParquetSource(PairFormat):
    """A Parquet file (or folder of files) with one row per pair."""

    format: Literal["parquet"]
    """``parquet``: this format"""
    path: Path
    """a Parquet file, or a folder: every ``*.parquet`` file under it, in path order"""
    src: str
    """the language code of the source side (an ISO 639 code or a BCP-47 tag): the language of ``src_column``"""
    tgt: str
    """the language code of the target side (another language than ``src``): the language of ``tgt_column``"""
    src_column: str = "src"
    """the column holding the source texts"""
    tgt_column: str = "tgt"
    """the column holding the target texts"""

    def where(self) -> str:
        return str(self.path)

    def input_files(self) -> dict[str, Path]:
        if self.path.is_dir():
            return {f"{self.src}-{self.tgt}/{p.relative_to(self.path)}": p
                    for p in sorted(self.path.rglob("*.parquet"))}
        return {f"{self.src}-{self.tgt}/{self.path.name}": self.path}

    def read(self, chunk_rows: int, stats: collections.Counter | None) -> Iterator[pl.DataFrame]:
        """polars' streaming Parquet scan: 0.8 GB peak and 1.9 s for 10M pairs here, against 1.5 GB and 2.7 s for
        pyarrow's ``iter_batches`` (which holds whole row groups plus read-ahead). Batches are at most 512k rows: the
        scan keeps several in flight, and with 1M-row batches pivot sampling over 20M pairs peaked at 1.8–2.1 GiB, with
        512k at 1.7 GiB for the same speed within noise."""
        for path, origin in self._files():
            self._open(path)  # readable, and has the columns (clear errors)
            line = 1
            scan = pl.scan_parquet(path).select(self.src_column, self.tgt_column)
            try:
                for batch in scan.collect_batches(chunk_size=min(chunk_rows, _PARQUET_BATCH)):
                    src = text_series(batch.get_column(self.src_column), str(path), self.src_column)
                    tgt = text_series(batch.get_column(self.tgt_column), str(path), self.tgt_column)
                    yield frame(self.src, self.tgt, src, tgt, origin, line)
                    line += batch.height
            except (pl.exceptions.PolarsError, OSError) as exc:
                raise BitextFormatError(f"{path}: unreadable after row {line - 1}: {exc}") from None

    def count_rows(self) -> int:
        """From the files' metadata."""
        return sum(self._open(path).metadata.num_rows for path, _ in self._files())

    def _files(self) -> list[tuple[Path, str]]:
        """(file, origin) per Parquet file read."""
        if self.path.is_dir():
            files = [(p, str(p.relative_to(self.path))) for p in sorted(self.path.rglob("*.parquet"))]
            if not files:
                raise BitextFormatError(f"{self.path}: folder holds no *.parquet files")
            return files
        return [(self.path, self.path.name)]

    def _open(self, path: Path) -> pq.ParquetFile:
        try:
            pf = pq.ParquetFile(path)
        except (pa.ArrowException, OSError) as exc:
            raise BitextFormatError(f"{path}: not a readable Parquet file ({exc})") from None
        names = pf.schema_arrow.names
        missing = [c for c in (self.src_column, self.tgt_column) if c not in names]
        if missing:
            raise BitextFormatError(f"{path}: no column {', '.join(map(repr, missing))} (src_column/tgt_column); "
                                    f"columns present: {names}")
        return pf
