"""Bitext readers: any source format (``pipelines.bitext.formats``: Moses, TMX, N-way, OPUS zip, Parquet, hub) →
polars chunks of pairs.

Each chunk has exactly :data:`CHUNK_SCHEMA`. Pairs are oriented (pivot, other); when both sides are pivots the pivot
listed first is the source (``pipelines.bitext.pivots.orient``). How text is cut into lines and stripped:
``pipelines.bitext.streams``. The pivots are checked once, when a :class:`~pipelines.bitext.pivots.Pivots` is made
(the stage's settings make one; a plain list given here is checked here); each format checks its own languages when it
is asked for its chunks or its count, and reads its files lazily.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator, Sequence

import polars as pl

from pipelines.bitext.formats.base import BitextFormat
from pipelines.bitext.formats.hub import LOCAL_FORMATS, chunks_from_hub_dataset
from pipelines.bitext.pivots import Pivots
from pipelines.bitext.streams import CHUNK_SCHEMA, BitextFormatError

__all__ = ["CHUNK_SCHEMA", "LOCAL_FORMATS", "BitextFormatError", "chunks_from_hub_dataset", "count_pairs",
           "iter_chunks"]


def _format(source: object) -> BitextFormat:
    if not isinstance(source, BitextFormat):
        raise TypeError(f"not a bitext source: {type(source).__name__}")
    return source


def iter_chunks(source: BitextFormat, pivots: Sequence[str], chunk_rows: int = 1_000_000,
                stats: collections.Counter | None = None) -> Iterator[pl.DataFrame]:
    """Stream a bitext source as polars frames in :data:`CHUNK_SCHEMA` of at most ``chunk_rows`` rows.

    Languages are validated at call time; files are read lazily. ``stats`` gains ``tmx_malformed_units``.
    """
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be ≥ 1, got {chunk_rows}")
    checked = Pivots.of(pivots)
    return _format(source).chunks(checked, chunk_rows, stats)


def count_pairs(source: BitextFormat, pivots: Sequence[str]) -> dict[tuple[str, str], int]:
    """Pairs per (src_lang, tgt_lang) that :func:`iter_chunks` yields (blank sides included), without building frames:
    newline counts for line-aligned text, Parquet metadata, a parse without text extraction for TMX."""
    checked = Pivots.of(pivots)
    return _format(source).count(checked)
