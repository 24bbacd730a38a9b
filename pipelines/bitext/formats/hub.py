"""Hub datasets: rows with a ``translation`` dict ``{lang: text}``, as Helsinki-NLP publishes OPUS-100, Europarl and
the other OPUS sets on the Hugging Face hub (``Helsinki-NLP/opus-100``, config ``en-es``)."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Any, Literal

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.bitext.formats.base import PairFormat
from pipelines.bitext.streams import BitextFormatError, frame, text_series
from pipelines.hub import load_hub_dataset

# what an offline run is told to use instead of the hub
LOCAL_FORMATS = ("format moses (src_file + tgt_file, plain/.gz/.bz2/.xz), opus_zip (an OPUS "
                 "Moses .txt.zip), tmx, parquet (src_column/tgt_column) or nway (one file per language)")


class HubSource(PairFormat):
    """A hub dataset with a ``translation`` dict per row, e.g. ``Helsinki-NLP/opus-100`` config ``en-es``."""

    format: Literal["hub"]
    """``hub``: this format"""
    hub_id: str
    """the dataset id (``Helsinki-NLP/opus-100``); read from the local hub cache when offline"""
    config: str | None = None
    """the dataset's config (``en-es``); null: its default"""
    split: str = "train"
    """the split read"""
    src: str
    """the language code of the source side (an ISO 639 code or a BCP-47 tag): its key in ``field``"""
    tgt: str
    """the language code of the target side (another language than ``src``): its key in ``field``"""
    field: str = "translation"
    """the column holding a ``{language: text}`` mapping per row"""

    def where(self) -> str:
        return f"hub:{self.hub_id}"

    def read(self, chunk_rows: int, stats: collections.Counter | None) -> Iterator[pl.DataFrame]:
        yield from chunks_from_hub_dataset(self._load(), self, chunk_rows)

    def count_rows(self) -> int:
        ds = self._load()
        _field_check(list(ds.column_names), self)
        return ds.num_rows

    def _load(self) -> Any:
        return load_hub_dataset(self.hub_id, self.config, self.split, local_formats=LOCAL_FORMATS)


def _field_check(column_names: list[str], source: HubSource) -> None:
    if source.field not in column_names:
        raise BitextFormatError(f"hub:{source.hub_id}: no column {source.field!r}; columns: {column_names}")


def chunks_from_hub_dataset(ds: Any, source: HubSource, chunk_rows: int) -> Iterator[pl.DataFrame]:
    """Chunks (``source.src`` → ``source.tgt``, not pivot-oriented) from a ``datasets.Dataset`` whose ``source.field``
    holds ``{lang: text}`` per row; converted through Arrow ``chunk_rows`` rows at a time."""
    _field_check(list(ds.column_names), source)
    origin, line = f"hub:{source.hub_id}", 1
    for table in ds.with_format("arrow").iter(batch_size=chunk_rows):
        col = table.column(source.field)
        if not pa.types.is_struct(col.type):
            raise BitextFormatError(f"{origin}: column {source.field!r} is {col.type}, not a {{lang: text}} struct")
        keys = [f.name for f in col.type]
        for lang in (source.src, source.tgt):
            if lang not in keys:
                raise BitextFormatError(f"{origin}: {source.field!r} has no language {lang!r}; it has {keys}")
        src = text_series(pc.struct_field(col, source.src), origin, f"{source.field}.{source.src}")
        tgt = text_series(pc.struct_field(col, source.tgt), origin, f"{source.field}.{source.tgt}")
        yield frame(source.src, source.tgt, src, tgt, origin, line)
        line += table.num_rows
