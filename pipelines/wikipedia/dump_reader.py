"""Reading MediaWiki XML export dumps (``pages-articles``) in independent byte ranges, in bounded memory.

Formats: plain ``.xml``, single-stream ``.xml.bz2`` / ``.xml.gz``, and the **multistream** ``.xml.bz2`` Wikipedia
publishes (one bz2 stream per 100 pages; ``…-multistream-index.txt.bz2`` lists ``offset:page_id:title``).

A dump is cut into byte ranges that can be read by different processes or machines without coordination:

* **multistream bz2**: a range owns the bz2 streams that *start* inside it. A stream starts at a byte-aligned
  ``BZh[1-9]`` header followed by the block magic ``1AY&SY`` (pi in BCD); a worker scans forward from its range start
  for that 10-byte signature (false positives inside compressed data have probability ~2⁻⁸⁰ per byte, and would fail
  to decompress) or takes the stream offsets from the index file when one is given.
* **plain XML**: a range owns the pages whose ``<page>`` tag starts inside it (``<page>`` cannot occur escaped in
  text, where it is ``&lt;page&gt;``).
* **single-stream bz2 / gz**: not seekable, so one range; the caller decompresses once and fans page batches out.

Whatever the cut, every page is read exactly once and pages come out in dump order, so sharded and single-process
runs produce the same rows. Fragments handed to the parser are whole ``<page>…</page>`` elements.

Errors: a truncated file raises ``TruncatedDumpError`` naming the file and the last complete page; with
``allow_truncated`` the complete pages are kept and the cut is reported. A page that does not parse is skipped and
counted (the first titles are logged). A page with invalid UTF-8 is skipped and counted too (``invalid_utf8_pages``,
the first titles in ``invalid_utf8_titles``): replacing the bytes would put U+FFFD into its sentences and link
surfaces, and a page whose bytes are damaged cannot be trusted to be whole — a flag per page would leave every consumer
to remember it, while a dropped page costs one article out of millions.
"""

from __future__ import annotations

import bz2
import gzip
import itertools
import logging
import re
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

from lxml import etree

from pipelines.language_codes import wiki_lang

log = logging.getLogger("polysent.pipelines.wiki")

DumpKind = Literal["xml", "bz2", "bz2-multistream", "gz"]
_BZ2_STREAM = re.compile(rb"BZh[1-9]1AY&SY")
_PAGE_OPEN = b"<page>"
_PAGE_CLOSE = b"</page>"
_READ = 1 << 20
_FRAGMENT_BYTES = 4 << 20


@dataclass(frozen=True)
class Page:
    page_id: int
    title: str
    ns: int
    redirect: str | None
    text: str


@dataclass(frozen=True)
class SiteInfo:
    dbname: str
    lang: str
    namespaces: dict[int, str]


@dataclass(frozen=True)
class ByteRange:
    """Pages (plain XML) or bz2 streams (multistream) that start in ``[start, end)``; ``index`` (the start offset, or
    a fragment number for single-stream dumps) names the output parts, so they sort in dump order."""

    index: int
    start: int
    end: int


@dataclass
class ReadCounts:
    malformed_pages: int = 0
    malformed_titles: list[str] = field(default_factory=list)
    invalid_utf8_pages: int = 0
    invalid_utf8_titles: list[str] = field(default_factory=list)
    truncated: bool = False
    last_complete_page: str | None = None

    def merge(self, other: ReadCounts) -> None:
        self.malformed_pages += other.malformed_pages
        self.malformed_titles.extend(other.malformed_titles[: max(0, 10 - len(self.malformed_titles))])
        self.invalid_utf8_pages += other.invalid_utf8_pages
        self.invalid_utf8_titles.extend(other.invalid_utf8_titles[: max(0, 10 - len(self.invalid_utf8_titles))])
        self.truncated |= other.truncated
        self.last_complete_page = other.last_complete_page or self.last_complete_page


class DumpFormatError(ValueError):
    """A dump that is not a MediaWiki XML export (message names the file and what was expected)."""


class TruncatedDumpError(DumpFormatError):
    """The file ends inside a page or inside a compressed stream; the message names the last complete page."""


def dump_kind(path: Path) -> DumpKind:
    """Detect the container from the magic bytes; a bz2 file with a second stream in its first MiB is multistream
    (real multistream dumps put only ``<siteinfo>`` in the first stream)."""
    with open(path, "rb") as fh:
        head = fh.read(1 << 20)
    if head[:3] == b"BZh":
        return "bz2-multistream" if _BZ2_STREAM.search(head, 4) else "bz2"
    if head[:2] == b"\x1f\x8b":
        return "gz"
    if b"<mediawiki" in head[:4096] or head.lstrip()[:5] == b"<?xml":
        return "xml"
    raise DumpFormatError(f"{path}: neither bz2, gzip nor MediaWiki XML (first bytes {head[:16]!r})")


def open_dump(path: Path) -> IO[bytes]:
    """A decompressing file object over the whole dump (bz2 handles concatenated multistream streams)."""
    kind = dump_kind(path)
    if kind.startswith("bz2"):
        return bz2.open(path, "rb")
    if kind == "gz":
        return gzip.open(path, "rb")
    return open(path, "rb")


def read_siteinfo(path: Path) -> SiteInfo:
    """Parse ``<siteinfo>`` from the head of the dump (reads only the first stream / first MiBs)."""
    path = Path(path)
    cut_by: Exception | None = None
    with open_dump(path) as fh:
        head = b""
        while b"</siteinfo>" not in head and _PAGE_OPEN not in head and len(head) < (64 << 20):
            try:
                chunk = fh.read1(_READ)  # read1: what was decompressed before a cut is kept
            except (EOFError, OSError, zlib.error) as exc:
                cut_by = exc  # truncated or corrupt: the page reader reports it (naming the last complete page)
                break
            if not chunk:
                break
            head += chunk
    cut = head.find(b"</siteinfo>")
    start = head.find(b"<mediawiki")
    if cut < 0 and isinstance(cut_by, EOFError):
        raise TruncatedDumpError(f"{path}: the compressed data ends before the end of <siteinfo> (truncated file), "
                                 "before any complete page")
    if start < 0 or cut < 0:
        raise DumpFormatError(f"{path}: no <mediawiki> root with a <siteinfo> before the first <page>; expected a "
                              "MediaWiki XML export")
    xml = head[start:cut + len(b"</siteinfo>")] + b"</mediawiki>"
    try:
        root = etree.fromstring(xml)
    except etree.XMLSyntaxError as exc:
        raise DumpFormatError(f"{path}: unreadable <siteinfo> ({exc.msg})") from exc
    ns = root.nsmap.get(None)
    q = (lambda t: f"{{{ns}}}{t}") if ns else (lambda t: t)
    site = root.find(q("siteinfo"))
    dbname = site.findtext(q("dbname")) or ""
    base = site.findtext(q("base")) or ""
    lang = wiki_lang(dbname) if dbname.endswith("wiki") else base.split("//")[-1].split(".")[0]
    namespaces: dict[int, str] = {}
    nss = site.find(q("namespaces"))
    if nss is not None:
        for n in nss:
            namespaces[int(n.get("key"))] = n.text or ""
    return SiteInfo(dbname=dbname, lang=lang, namespaces=namespaces)


def plan_ranges(path: Path, target_bytes: int, start: int = 0, end: int | None = None,
                index: Path | None = None) -> list[ByteRange]:
    """Cut ``[start, end)`` of the dump file into ranges of about ``target_bytes`` (compressed bytes for bz2).

    With a multistream index the cuts fall on listed stream offsets; otherwise on plain offsets (each reader finds
    its first stream or page itself). Single-stream bz2 and gz dumps give one range (the whole file, only for the
    range that contains offset 0).
    """
    size = path.stat().st_size
    end = size if end is None else min(end, size)
    kind = dump_kind(path)
    if kind in ("bz2", "gz"):
        return [ByteRange(0, 0, size)] if start == 0 else []
    if index is not None and kind == "bz2-multistream":
        offsets = [o for o in read_index_offsets(index) if start <= o < end]
        cuts = [start]
        for o in offsets:
            if o - cuts[-1] >= target_bytes:
                cuts.append(o)
    else:
        cuts = list(range(start, end, max(1, target_bytes)))
    cuts.append(end)
    return [ByteRange(a, a, b) for a, b in itertools.pairwise(cuts) if b > a]


def sibling_index(dump: Path) -> Path | None:
    """The index Wikipedia publishes beside a multistream dump (``…-multistream-index.txt.bz2``), when present."""
    name = dump.name
    if "multistream" in name and name.endswith(".xml.bz2"):
        sibling = dump.with_name(name.replace(".xml.bz2", "-index.txt.bz2"))
        if sibling.exists():
            return sibling
    return None


def read_index_offsets(index: Path) -> list[int]:
    """Distinct stream offsets of a ``…-multistream-index.txt[.bz2]`` file (``offset:page_id:title`` lines)."""
    opener = bz2.open if index.suffix == ".bz2" else open
    offsets: list[int] = []
    last = -1
    with opener(index, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            head, sep, _ = line.partition(b":")
            if not sep or not head.isdigit():
                raise DumpFormatError(f"{index}:{lineno}: expected 'offset:page_id:title', got {line[:80]!r}")
            off = int(head)
            if off != last:
                offsets.append(off)
                last = off
    return sorted(set(offsets))


# ---------------------------------------------------------------------------------------------------- fragments


def iter_fragments(path: Path, rng: ByteRange, kind: DumpKind, counts: ReadCounts,
                   allow_truncated: bool = False) -> Iterator[bytes]:
    """Yield XML fragments made of whole ``<page>`` elements for the pages ``rng`` owns, in dump order."""
    if kind == "bz2-multistream":
        yield from _batch(_multistream_pages(path, rng, counts, allow_truncated))
    elif kind == "xml":
        yield from _batch(_xml_range_pages(path, rng, counts, allow_truncated))
    else:
        yield from _batch(_stream_pages(path, kind, counts, allow_truncated))


def _batch(chunks: Iterator[bytes]) -> Iterator[bytes]:
    buf: list[bytes] = []
    size = 0
    for c in chunks:
        buf.append(c)
        size += len(c)
        if size >= _FRAGMENT_BYTES:
            yield b"".join(buf)
            buf, size = [], 0
    if buf:
        yield b"".join(buf)


def _complete_pages(data: bytes) -> tuple[bytes, int]:
    """The run of whole ``<page>`` elements in ``data`` and the offset where the unfinished rest begins."""
    first = data.find(_PAGE_OPEN)
    if first < 0:
        return b"", len(data)
    last = data.rfind(_PAGE_CLOSE)
    if last < first:
        return b"", first
    stop = last + len(_PAGE_CLOSE)
    return data[first:stop], stop


def _last_title(fragment: bytes) -> str | None:
    i = fragment.rfind(b"<title>")
    if i < 0:
        return None
    j = fragment.find(b"</title>", i)
    return fragment[i + 7:j].decode("utf-8", "replace") if j > 0 else None


def _truncated(path: Path, counts: ReadCounts, last_fragment: bytes | None, allow: bool, what: str,
               range_start: int = 0, kind: DumpKind = "xml") -> None:
    last = _last_title(last_fragment) if last_fragment else counts.last_complete_page
    if last is None and range_start > 0:  # the cut is in this range's first stream/page: look before the range
        last = title_before(path, range_start, kind)
    counts.truncated = True
    counts.last_complete_page = last
    msg = f"{path}: {what}; the last complete page is {last!r}" if last else f"{path}: {what} before any complete page"
    if not allow:
        raise TruncatedDumpError(msg + " (set allow_truncated to keep the complete pages)")
    log.warning("%s; keeping the complete pages before the cut", msg)


def title_before(path: Path, offset: int, kind: DumpKind) -> str | None:
    """Title of the last page that starts before byte ``offset`` (plain XML), or of the last page of the last bz2
    stream that starts before it (multistream): what a range that begins with the cut reports as the last complete
    page. Reads backwards one MiB at a time."""
    with open(path, "rb") as fh:
        end = offset
        while end > 0:
            start = max(0, end - _READ)
            fh.seek(start)
            block = fh.read(end - start + (9 if kind != "xml" else 0))
            if kind == "xml":
                i = block.rfind(b"<title>", 0, end - start)
                if i >= 0:
                    j = block.find(b"</title>", i)
                    if j < 0:
                        fh.seek(start + i)
                        j_block = fh.read(4096)
                        j = j_block.find(b"</title>")
                        return j_block[7:j].decode("utf-8", "replace") if j > 0 else None
                    return block[i + 7:j].decode("utf-8", "replace")
            else:
                hits = [m.start() for m in _BZ2_STREAM.finditer(block) if start + m.start() < end]
                for hit in reversed(hits):
                    fh.seek(start + hit)
                    dec = bz2.BZ2Decompressor()
                    out = []
                    while not dec.eof:
                        chunk = fh.read(_READ)
                        if not chunk:
                            break
                        out.append(dec.decompress(chunk))
                    title = _last_title(b"".join(out))
                    if title is not None:
                        return title
                end = start + min(hits) if hits else start
                continue
            end = start
    return None


def _multistream_pages(path: Path, rng: ByteRange, counts: ReadCounts, allow: bool) -> Iterator[bytes]:
    with open(path, "rb") as fh:
        pos = _first_stream_at_or_after(fh, rng.start, rng.end)
        size = path.stat().st_size
        last: bytes | None = None
        closed = False
        while pos is not None and pos < rng.end:
            fh.seek(pos)
            dec = bz2.BZ2Decompressor()
            out: list[bytes] = []
            consumed = 0
            while not dec.eof:
                chunk = fh.read(_READ)
                if not chunk:
                    if last is None and out:
                        last, _ = _complete_pages(b"".join(out))
                    _truncated(path, counts, last, allow, f"bz2 stream at byte {pos} ends early (truncated file)",
                               rng.start, "bz2-multistream")
                    pages, _ = _complete_pages(b"".join(out))
                    if pages:
                        yield pages
                    return
                try:
                    out.append(dec.decompress(chunk))
                except OSError as exc:
                    raise DumpFormatError(f"{path}: corrupt bz2 stream at byte {pos}: {exc}") from exc
                consumed += len(chunk) - (len(dec.unused_data) if dec.eof else 0)
            data = b"".join(out)
            pages, _ = _complete_pages(data)
            if pages:
                last = pages
                yield pages
            closed = b"</mediawiki>" in data[-64:]
            pos += consumed
            if pos >= size:
                if not closed:
                    _truncated(path, counts, last, allow, "the last bz2 stream has no </mediawiki> (truncated file)",
                               rng.start, "bz2-multistream")
                break


def _first_stream_at_or_after(fh: IO[bytes], start: int, end: int) -> int | None:
    if start == 0:
        return 0
    pos = start
    fh.seek(pos)
    tail = b""
    while pos < end:
        block = fh.read(_READ)
        if not block:
            return None
        data = tail + block
        m = _BZ2_STREAM.search(data)
        if m:
            found = pos - len(tail) + m.start()
            return found if found < end else None
        tail = data[-9:]
        pos += len(block)
    return None


def _xml_range_pages(path: Path, rng: ByteRange, counts: ReadCounts, allow: bool) -> Iterator[bytes]:
    with open(path, "rb") as fh:
        fh.seek(rng.start)
        buf = b""
        pos = rng.start  # file offset of buf[0]
        started = False
        last: bytes | None = None
        while True:
            chunk = fh.read(_READ)
            buf += chunk
            if not started:
                i = buf.find(_PAGE_OPEN)
                if i < 0:
                    if not chunk or pos + len(buf) >= rng.end + len(_PAGE_OPEN):
                        return
                    keep = len(buf) - len(_PAGE_OPEN)
                    buf, pos = buf[keep:], pos + keep
                    continue
                if pos + i >= rng.end:
                    return
                buf, pos, started = buf[i:], pos + i, True
            pages, rest = _complete_pages(buf)
            if pages:
                # pages must start before rng.end: cut the run at the first page that starts at or after it
                limit = rng.end - pos
                if limit < len(pages):
                    cut = pages.find(_PAGE_OPEN, max(limit, 0))
                    if cut >= 0:
                        if cut:
                            yield pages[:cut]
                        return
                last = pages
                yield pages
                buf, pos = buf[rest:], pos + rest
                if pos >= rng.end:
                    nxt = buf.find(_PAGE_OPEN)
                    if nxt < 0 or pos + nxt >= rng.end:
                        return
            if not chunk:
                if _PAGE_OPEN in buf:
                    _truncated(path, counts, last, allow, "the file ends inside a <page> (truncated XML)", rng.start)
                elif b"</mediawiki>" not in buf and rng.end >= path.stat().st_size:
                    _truncated(path, counts, last, allow, "the file ends without </mediawiki> (truncated XML)",
                               rng.start)
                return


def _stream_pages(path: Path, kind: DumpKind, counts: ReadCounts, allow: bool) -> Iterator[bytes]:
    last: bytes | None = None
    buf = bytearray()  # read1 gives small chunks (64 KiB for gzip): append in place
    with bz2.open(path, "rb") if kind == "bz2" else gzip.open(path, "rb") as fh:
        while True:
            try:
                chunk = fh.read1(_READ)  # not read(): it drops what it decompressed when the data ends early
            except (EOFError, OSError, zlib.error) as exc:
                pages, _ = _complete_pages(bytes(buf))
                if pages:
                    yield pages
                    last = pages
                _truncated(path, counts, last, allow, f"the compressed data ends early ({exc})")
                return
            if not chunk:
                pages, rest = _complete_pages(bytes(buf))
                if pages:
                    yield pages
                    last = pages
                tail = buf[rest:] if pages else buf  # no page left: rest is len(buf), the tail is all of buf
                if _PAGE_OPEN in tail or b"</mediawiki>" not in tail:
                    _truncated(path, counts, last, allow, "the XML ends inside a <page> or without </mediawiki>")
                return
            buf += chunk
            if len(buf) >= _FRAGMENT_BYTES:
                pages, rest = _complete_pages(bytes(buf))
                if pages:
                    last = pages
                    yield pages
                buf = buf[rest:]


# ---------------------------------------------------------------------------------------------------- pages


_PAGE_SPLIT = re.compile(rb"(?=<page>)")


def parse_fragment(fragment: bytes, counts: ReadCounts) -> Iterator[Page]:
    """Pages of one fragment of whole ``<page>`` elements. A page that does not parse, or whose bytes are not valid
    UTF-8, is skipped and counted."""
    try:
        root = etree.fromstring(b"<pages>" + fragment + b"</pages>", _parser())
    except etree.XMLSyntaxError:
        for piece in _PAGE_SPLIT.split(fragment):
            if piece.strip():
                yield from _parse_one(piece, counts)
        return
    for elem in root:
        page = _page(elem)
        if page is not None:
            yield page


_PARSERS = threading.local()


def _parser() -> etree.XMLParser:
    """This thread's parser: an lxml parser must not be used by two threads at once."""
    p = getattr(_PARSERS, "parser", None)
    if p is None:
        p = _PARSERS.parser = etree.XMLParser(huge_tree=True, resolve_entities=False, remove_comments=True)
    return p


def _parse_one(piece: bytes, counts: ReadCounts) -> Iterator[Page]:
    try:
        piece.decode("utf-8")
    except UnicodeDecodeError as exc:
        counts.invalid_utf8_pages += 1
        title = _last_title(piece) or "?"
        if len(counts.invalid_utf8_titles) < 10:
            counts.invalid_utf8_titles.append(title)
            log.warning("skipping page %r: invalid UTF-8 (%s at byte %d of the page)", title, exc.reason, exc.start)
        return
    try:
        root = etree.fromstring(b"<pages>" + piece + b"</pages>", _parser())
    except etree.XMLSyntaxError as exc:
        counts.malformed_pages += 1
        title = _last_title(piece) or "?"
        if len(counts.malformed_titles) < 10:
            counts.malformed_titles.append(title)
            log.warning("skipping a malformed page %r: %s", title, exc.msg)
        return
    for elem in root:
        page = _page(elem)
        if page is None:
            counts.malformed_pages += 1
        else:
            yield page


def _page(elem: etree._Element) -> Page | None:
    title = pid = ns = redirect = None
    text = ""
    for child in elem:
        tag = child.tag
        if tag == "title":
            title = child.text
        elif tag == "id":
            pid = child.text
        elif tag == "ns":
            ns = child.text
        elif tag == "redirect":
            redirect = child.get("title")
        elif tag == "revision":
            t = child.find("text")
            if t is not None and t.text:
                text = t.text
    if title is None or pid is None or not pid.strip().isdigit():
        return None
    try:
        ns_i = int(ns) if ns is not None else 0
    except ValueError:
        return None
    return Page(int(pid), title, ns_i, redirect, text)


def read_dump(path: Path, allow_truncated: bool = False) -> tuple[SiteInfo, Iterator[Page]]:
    """The dump's site info and an iterator over all its pages (all namespaces; filter on ``Page.ns``), sequentially."""
    path = Path(path)
    site = read_siteinfo(path)
    kind = dump_kind(path)

    def pages() -> Iterator[Page]:
        counts = ReadCounts()
        rng = ByteRange(0, 0, path.stat().st_size)
        for fragment in iter_fragments(path, rng, kind, counts, allow_truncated):
            yield from parse_fragment(fragment, counts)

    return site, pages()
