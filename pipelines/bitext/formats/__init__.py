"""The bitext formats: one module per format, each one class that knows how to read itself (``formats.base``).

A format's module holds its config entry — a strict pydantic model whose fields are its keys under
``sources.bitext[]``, told apart by ``format`` — and everything that reads it: its chunks, its pair count, the files
that enter the node's cache key and where it is for messages. Nothing else in the package names a format: the readers
(``pipelines.bitext.readers``) and the stage (``pipelines.bitext.sampling``) ask the class. Adding a format is its
module, one line in :data:`FORMATS` (the order of the configuration reference, the default ``moses`` first) and its
test (``tests/test_bitext_format_<name>.py``, built from a file laid out as its publisher lays it out).
"""

from __future__ import annotations

from pipelines.bitext.formats.base import BitextFormat, PairFormat
from pipelines.bitext.formats.hub import HubSource
from pipelines.bitext.formats.mined import MinedSource
from pipelines.bitext.formats.moses import MosesSource
from pipelines.bitext.formats.nway import NwaySource
from pipelines.bitext.formats.opus_zip import OpusZipSource
from pipelines.bitext.formats.parquet import ParquetSource
from pipelines.bitext.formats.tmx import TmxSource

FORMATS: tuple[type[BitextFormat], ...] = (MosesSource, TmxSource, NwaySource, OpusZipSource, ParquetSource,
                                           HubSource, MinedSource)
DEFAULT_FORMAT = "moses"  # the format of a ``sources.bitext`` entry that names none

__all__ = ["DEFAULT_FORMAT", "FORMATS", "BitextFormat", "HubSource", "MinedSource", "MosesSource", "NwaySource",
           "OpusZipSource", "PairFormat", "ParquetSource", "TmxSource"]
