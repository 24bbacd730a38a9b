"""OPUS Moses zips: the ``moses`` download of an OPUS corpus (``en-es.txt.zip``) holding ``<Corpus>.en-es.en`` and
``<Corpus>.en-es.es`` beside its ``README``, ``LICENSE`` and ``<Corpus>.en-es.xml`` (and, for some corpora, ``.ids``),
read inside the zip without unpacking it."""

from __future__ import annotations

import collections
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import polars as pl

from pipelines.bitext.formats.base import OneFilePairFormat
from pipelines.bitext.streams import BitextFormatError, count_lines, paired_lines, unequal


class OpusZipSource(OneFilePairFormat):
    """An OPUS Moses download (``en-es.txt.zip`` holding ``Corpus.en-es.en`` and ``Corpus.en-es.es``)."""

    format: Literal["opus_zip"]
    """``opus_zip``: this format"""
    path: Path
    """the OPUS Moses zip (``en-es.txt.zip``)"""
    src: str
    """the language code of the source side (an ISO 639 code or a BCP-47 tag): the suffix of its member
    (``Corpus.en-es.en``)"""
    tgt: str
    """the language code of the target side (another language than ``src``): the suffix of the other member"""

    def read(self, chunk_rows: int, stats: collections.Counter | None) -> Iterator[pl.DataFrame]:
        with _open_zip(self.path) as zf:
            src_member, tgt_member = _zip_members(zf, self.path, self.src, self.tgt)
            with zf.open(src_member) as s, zf.open(tgt_member) as t:
                yield from paired_lines(s, t, f"{self.path}:{src_member}", f"{self.path}:{tgt_member}", self.src,
                                        self.tgt, f"{self.path.name}:{src_member}", chunk_rows)

    def count_rows(self) -> int:
        with _open_zip(self.path) as zf:
            counts = {}
            for m in _zip_members(zf, self.path, self.src, self.tgt):
                with zf.open(m) as raw:
                    counts[f"{self.path}:{m}"] = count_lines(raw, f"{self.path}:{m}")
        if len(set(counts.values())) > 1:
            raise unequal(counts)
        return next(iter(counts.values()))


def _zip_members(zf: zipfile.ZipFile, path: Path, src: str, tgt: str) -> tuple[str, str]:
    """The two text members ``<corpus>.<src>`` and ``<corpus>.<tgt>`` (README, LICENSE and XML members ignored)."""

    def usable(member: str) -> bool:
        base = member.rsplit("/", 1)[-1]
        return (not member.endswith("/") and not base.upper().startswith(("README", "LICENSE"))
                and not base.lower().endswith(".xml"))

    names = [m for m in zf.namelist() if usable(m)]
    src_stems = {m[: -len(src) - 1] for m in names if m.endswith(f".{src}")}
    tgt_stems = {m[: -len(tgt) - 1] for m in names if m.endswith(f".{tgt}")}
    stems = sorted(src_stems & tgt_stems)
    if len(stems) != 1:
        what = "no" if not stems else "more than one"
        found = f" (candidates: {', '.join(f'{s}.{{{src},{tgt}}}' for s in stems)})" if stems else ""
        raise BitextFormatError(f"{path}: {what} pair of members '<corpus>.{src}' + '<corpus>.{tgt}'{found}; the zip "
                                f"holds: {', '.join(zf.namelist()) or '(nothing)'}")
    return f"{stems[0]}.{src}", f"{stems[0]}.{tgt}"


def _open_zip(path: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise BitextFormatError(f"{path}: not a zip file ({exc})") from None
