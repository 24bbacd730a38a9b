"""Moses: two line-aligned text files, as OPUS, WMT and Multi30k publish them (``Europarl.de-en.de`` +
``Europarl.de-en.en``; ``train.en.gz`` + ``train.de.gz``), plain or compressed."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import polars as pl

from pipelines.bitext.formats.base import PairFormat
from pipelines.bitext.streams import count_files, paired_lines
from pipelines.text_lines import open_binary


class MosesSource(PairFormat):
    """Two line-aligned text files (plain, .gz, .bz2, .xz): line i of ``src_file`` translates line i of ``tgt_file``."""

    format: Literal["moses"] = "moses"
    """``moses``: this format (the default of an entry without ``format``)"""
    src: str
    """the language code of the source side (an ISO 639 code or a BCP-47 tag): the language of ``src_file``"""
    tgt: str
    """the language code of the target side (another language than ``src``): the language of ``tgt_file``"""
    src_file: Path
    """the source side's lines (plain, .gz, .bz2 or .xz)"""
    tgt_file: Path
    """the target side's lines: as many as ``src_file`` (unequal counts are refused)"""

    def where(self) -> str:
        return f"{self.src_file} / {self.tgt_file}"

    def input_files(self) -> dict[str, Path]:
        return {f"{self.src}-{self.tgt}/{self.src}/{self.src_file.name}": self.src_file,
                f"{self.src}-{self.tgt}/{self.tgt}/{self.tgt_file.name}": self.tgt_file}

    def read(self, chunk_rows: int, stats: collections.Counter | None) -> Iterator[pl.DataFrame]:
        with open_binary(self.src_file) as s, open_binary(self.tgt_file) as t:
            yield from paired_lines(s, t, str(self.src_file), str(self.tgt_file), self.src, self.tgt,
                                    self.src_file.name, chunk_rows)

    def count_rows(self) -> int:
        return next(iter(count_files([self.src_file, self.tgt_file]).values()))
