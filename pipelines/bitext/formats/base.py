"""The base of every bitext format: a config entry of ``sources.bitext`` that knows how to read itself.

A format is one class (a strict pydantic model whose fields are its config keys, ``format: Literal["<name>"]`` first)
with four answers:

* ``where()`` — where its data is, for messages;
* ``input_files()`` — the local files it reads, by a stable name: their content enters the ``bitext_pairs`` node's
  cache key beside the leakage guard's evaluation files (``flows.stages.corpora``);
* ``chunks(pivots, chunk_rows, stats)`` — its pairs as polars frames of ``CHUNK_SCHEMA``, oriented (pivot, other)
  (``pipelines.bitext.pivots.orient``), at most ``chunk_rows`` rows each; languages are checked when it is called,
  files are read lazily (a generator);
* ``count(pivots)`` — the pairs per oriented (pivot, other) that ``chunks`` yields, blank sides included, without
  building frames (proportional quotas need every language's count before the selection).

A format with two languages (``src``, ``tgt``: Moses, TMX, OPUS zip, Parquet, hub) derives from :class:`PairFormat`
and answers two simpler questions, ``read`` (its chunks, ``src`` → ``tgt``) and ``count_rows``; the orientation is
done here once. The stage (``pipelines.bitext.sampling``) filters, guards and samples whatever a format yields.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
from pydantic import BaseModel, ConfigDict

from pipelines.bitext.pivots import Pivots, orient
from pipelines.bitext.streams import swap
from pipelines.language_codes import check_language


class BitextFormat(BaseModel):
    """A bitext source: its config keys and how it reads itself (module docstring)."""

    model_config = ConfigDict(extra="forbid")

    def where(self) -> str:
        """Where the data is, for messages."""
        raise NotImplementedError

    def input_files(self) -> dict[str, Path]:
        """The local files it reads (name → path), whose content enters the node's cache key; none by default."""
        return {}

    def chunks(self, pivots: Pivots, chunk_rows: int,
               stats: collections.Counter | None = None) -> Iterator[pl.DataFrame]:
        """Frames of ``CHUNK_SCHEMA``, oriented (pivot, other), at most ``chunk_rows`` rows each."""
        raise NotImplementedError

    def count(self, pivots: Pivots) -> dict[tuple[str, str], int]:
        """Pairs per oriented (pivot, other) that :meth:`chunks` yields, blank sides included."""
        raise NotImplementedError


class PairFormat(BitextFormat):
    """A format holding one language pair, ``src`` → ``tgt`` (fields the subclass declares, in its own key order)."""

    if TYPE_CHECKING:  # declared by each subclass, so that its fields keep their order (and its dump, its cache key)
        src: str
        tgt: str

    def read(self, chunk_rows: int, stats: collections.Counter | None) -> Iterator[pl.DataFrame]:
        """Its chunks as the data has them (``src`` → ``tgt``), lazily: nothing is read before the first one."""
        raise NotImplementedError

    def count_rows(self) -> int:
        """The pairs :meth:`read` yields."""
        raise NotImplementedError

    def swapped(self, pivots: Pivots) -> bool:
        """Check both languages; True when the pivot is ``tgt`` (the chunks are swapped to put it first)."""
        where = self.where()
        check_language(self.src, where)
        check_language(self.tgt, where)
        if self.src == self.tgt:
            raise ValueError(f"{where}: source and target language are both {self.src!r}")
        try:
            return orient(self.src, self.tgt, pivots) != (self.src, self.tgt)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None

    def chunks(self, pivots: Pivots, chunk_rows: int,
               stats: collections.Counter | None = None) -> Iterator[pl.DataFrame]:
        swap_sides = self.swapped(pivots)
        chunks = self.read(chunk_rows, stats)
        return (swap(df) for df in chunks) if swap_sides else chunks

    def count(self, pivots: Pivots) -> dict[tuple[str, str], int]:
        key = (self.tgt, self.src) if self.swapped(pivots) else (self.src, self.tgt)
        return {key: self.count_rows()}


class OneFilePairFormat(PairFormat):
    """A one-pair format read from one local file, ``path`` (a field the subclass declares, in its own key order):
    TMX, the OPUS Moses zip. Its data is the file; the file enters the cache key as ``<src>-<tgt>/<file name>``."""

    if TYPE_CHECKING:  # declared by each subclass (its own docstring, its own key order)
        path: Path

    def where(self) -> str:
        return str(self.path)

    def input_files(self) -> dict[str, Path]:
        return {f"{self.src}-{self.tgt}/{self.path.name}": self.path}
