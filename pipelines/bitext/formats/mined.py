"""Mined bitext: the ``mined_pairs`` table a ``mine.<name>`` node wrote, read as Parquet once the DAG knows where."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Literal

import polars as pl

from pipelines.bitext.formats.base import BitextFormat
from pipelines.bitext.pivots import Pivots


class MinedSource(BitextFormat):
    """The pairs a ``mine.<name>`` node mined (``mining.<name>`` in the config): its ``mined_pairs`` table, read as a
    Parquet source with the languages of the mining entry's two sides. The bitext stage treats it as any other source
    (filters, leakage guard, pivot quotas); the node's artifact enters the bitext node's key as an upstream input."""

    format: Literal["mined"]
    """``mined``: this format"""
    mining: str
    """the name of an entry of ``mining``: its ``mined_pairs`` table, in the languages of its two sides"""

    def where(self) -> str:
        return f"mining.{self.mining}"

    def chunks(self, pivots: Pivots, chunk_rows: int,
               stats: collections.Counter | None = None) -> Iterator[pl.DataFrame]:
        raise self._unresolved()

    def count(self, pivots: Pivots) -> dict[tuple[str, str], int]:
        raise self._unresolved()

    def _unresolved(self) -> TypeError:
        """Its table exists only as its node's artifact: ``flows.stages.corpora`` reads it as a ``ParquetSource``."""
        return TypeError(f"not a bitext source: a mined source ({self.where()}) is read as its node's mined_pairs "
                         "table (a ParquetSource the bitext node builds from its upstream artifact)")
