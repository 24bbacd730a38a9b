"""TMX 1.1–1.4: translation units (``<tu>``) with one ``<tuv>`` per language, as OPUS publishes its TMX downloads
(``en-es.tmx``: ``<tuv xml:lang="en"><seg>…</seg></tuv>``) and CAT tools export translation memories."""

from __future__ import annotations

import collections
import itertools
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import polars as pl
from lxml import etree

from pipelines.bitext.formats.base import OneFilePairFormat
from pipelines.bitext.streams import READ_ERRORS, BitextFormatError, frame
from pipelines.language_codes import primary_subtag
from pipelines.text_lines import open_binary

log = logging.getLogger("polysent.pipelines.bitext")

_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
_TMX_CODES = frozenset({"bpt", "ept", "ph", "it", "ut"})  # their content is native markup, not text
_TMX_LOGGED = 5


class TmxSource(OneFilePairFormat):
    """A TMX 1.1–1.4 file; ``src``/``tgt`` match each ``<tuv>``'s ``xml:lang`` (or ``lang``) by primary subtag."""

    format: Literal["tmx"]
    """``tmx``: this format"""
    path: Path
    """the TMX file"""
    src: str
    """the language code of the source side (an ISO 639 code or a BCP-47 tag), matched to each ``<tuv>``'s ``xml:lang``
    by its primary subtag"""
    tgt: str
    """the language code of the target side (another language than ``src``), matched the same way"""

    def read(self, chunk_rows: int, stats: collections.Counter | None) -> Iterator[pl.DataFrame]:
        units = _tmx_units(self, stats)
        while batch := list(itertools.islice(units, chunk_rows)):
            lines, src, tgt = zip(*batch, strict=True)
            yield frame(self.src, self.tgt, pl.Series(src, dtype=pl.Utf8), pl.Series(tgt, dtype=pl.Utf8),
                        self.path.name, pl.Series(lines, dtype=pl.Int64))

    def count_rows(self) -> int:
        """A parse without text extraction."""
        return sum(1 for _ in _tmx_units(self, None, counting=True))


def _seg_text(seg: Any) -> str:
    """Text of a ``<seg>``: inline ``<hi>``/``<sub>`` text kept, ``<bpt>/<ept>/<ph>/<it>/<ut>`` codes dropped."""
    parts: list[str] = []

    def walk(el: Any, keep: bool) -> None:
        if keep and el.text:
            parts.append(el.text)
        for child in el:
            tag = child.tag
            if isinstance(tag, str):  # not a comment / processing instruction
                walk(child, tag == "sub" or (keep and tag not in _TMX_CODES))
            if keep and child.tail:
                parts.append(child.tail)

    walk(seg, True)
    return "".join(parts)


def _tmx_units(source: TmxSource, stats: collections.Counter | None, counting: bool = False
               ) -> Iterator[tuple[int, str, str]]:
    """(line of ``<tu>``, src text, tgt text) per well-formed unit, streaming with bounded memory.

    ``counting``: texts left empty and nothing logged (for ``count_rows``)."""
    path, name = source.path, str(source.path)
    want_src, want_tgt = primary_subtag(source.src), primary_subtag(source.tgt)
    malformed = 0
    with open_binary(path) as raw:
        context = etree.iterparse(raw, events=("end",), tag="tu", resolve_entities=False, no_network=True,
                                  huge_tree=True, remove_comments=True)
        try:
            for _, tu in context:
                line = tu.sourceline or 0
                segs: dict[str, Any] = {}
                for tuv in tu.iterchildren("tuv"):
                    lang = primary_subtag(tuv.get(_XML_LANG) or tuv.get("lang") or "")
                    if lang in (want_src, want_tgt) and lang not in segs:
                        segs[lang] = tuv.find("seg")
                reason = None
                if want_src not in segs or want_tgt not in segs:
                    reason = f"no <tuv> for {want_src if want_src not in segs else want_tgt!r}"
                elif segs[want_src] is None or segs[want_tgt] is None:
                    reason = "a <tuv> without <seg>"
                if reason is None:
                    yield (line, "", "") if counting else (line, _seg_text(segs[want_src]), _seg_text(segs[want_tgt]))
                else:
                    malformed += 1
                    if stats is not None:
                        stats["tmx_malformed_units"] += 1
                    if not counting and malformed <= _TMX_LOGGED:
                        log.warning("%s:%d: skipping malformed <tu> (%s)", name, line, reason)
                tu.clear(keep_tail=False)
                parent = tu.getparent()
                while parent is not None and tu.getprevious() is not None:
                    del parent[0]
        except etree.XMLSyntaxError as exc:
            raise BitextFormatError(f"{name}:{exc.lineno}: XML syntax error: {exc.msg}") from None
        except READ_ERRORS as exc:
            raise BitextFormatError(f"{name}: unreadable: {type(exc).__name__}: {exc}") from None
    if not counting and malformed > _TMX_LOGGED:
        log.warning("%s: skipped %d malformed <tu> in all (first %d logged)", name, malformed, _TMX_LOGGED)

