"""What the bitext format tests share: reading a source whole through the readers' API, and the awkward Moses pair."""

from __future__ import annotations

import bz2
import gzip
import lzma
from pathlib import Path

import polars as pl

from pipelines.bitext.readers import CHUNK_SCHEMA, iter_chunks
from pipelines.bitext.sources import MosesSource

PIVOTS = ["en", "es"]

# the awkward real-file cases at once: BOM, CRLF, a blank line in the middle, no newline at the end of one file
SRC = "\ufeffHello world\r\n  spaced  \r\n\r\nA tab\there\r\nlast line".encode()
TGT = "Hola mundo\nespaciado\nsolo español\n\tUn tabulador\taquí \núltima línea\n".encode()
EXPECTED = [("Hello world", "Hola mundo"), ("spaced", "espaciado"), ("", "solo español"),
            ("A tab\there", "Un tabulador\taquí"), ("last line", "última línea")]


def collect(source, pivots=PIVOTS, chunk_rows: int = 1_000_000, stats=None) -> pl.DataFrame:
    """Every chunk of ``source`` (each checked against the schema and ``chunk_rows``), concatenated."""
    chunks = list(iter_chunks(source, pivots, chunk_rows=chunk_rows, stats=stats))
    for df in chunks:
        assert df.schema == pl.Schema(CHUNK_SCHEMA)
        assert 0 < df.height <= chunk_rows
    return pl.concat(chunks) if chunks else pl.DataFrame(schema=CHUNK_SCHEMA)


def moses(tmp_path: Path, src: bytes, tgt: bytes, suffix: str = "", src_lang: str = "en",
          tgt_lang: str = "es") -> MosesSource:
    """A Moses pair ``c.<src_lang><suffix>`` + ``c.<tgt_lang><suffix>`` holding ``src`` and ``tgt``."""
    compress = {"": lambda b: b, ".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}[suffix]
    a, b = tmp_path / f"c.{src_lang}{suffix}", tmp_path / f"c.{tgt_lang}{suffix}"
    a.write_bytes(compress(src))
    b.write_bytes(compress(tgt))
    return MosesSource(src=src_lang, tgt=tgt_lang, src_file=a, tgt_file=b)
