"""A MediaWiki XML export replicated N times from a real dump: benchmark inputs of any size with real wikitext.

Copy 0 keeps every page byte for byte. Copy ``k >= 1`` gets new page (and revision) ids, ``original + k * (max + 1)``,
and new titles ``f"{title} ({k})"`` (a namespace prefix stays in front). Inside its wikitext every ``[[Target…`` link
whose target is a title of the source dump is rewritten to the copy's title (unpiped links get a pipe with the
original surface text, so the visible text of every copy is the same), and so is a redirect page's
``<redirect title="…">``: link resolution and redirects behave as in a real dump of that size. The ``<sha1>`` of a
changed text is recomputed (MediaWiki's base-36 SHA-1).

Output formats:

* ``multistream=True`` (default): Wikipedia's ``pages-articles-multistream.xml.bz2`` layout. The first bz2 stream holds
  ``<mediawiki …>`` and ``<siteinfo>``, then one stream per ``pages_per_stream`` pages, the last stream holds
  ``</mediawiki>``; plus the index ``…-multistream-index.txt.bz2`` with lines ``offset:page_id:title`` (the byte offset
  of the stream holding the page; titles unescaped). Streams are compressed in a process pool (level 9, as the dumps).
* ``multistream=False``: one bz2 stream (``.xml.bz2``), or plain XML when ``dest`` ends in ``.xml``.

The decompressed XML is the same in every format. ``dest`` is a folder (real-dump names are used:
``enwiki-x10-pages-articles-multistream.xml.bz2``, ``…-multistream-index.txt.bz2``,
``enwiki-x10-pages-articles.xml.bz2``) or a file name ending in ``.xml.bz2`` / ``.xml``. A JSON sidecar
(``<output>.json``: source sha256, copies, format, …) makes a rerun with the same arguments a no-op.
The source is held in memory (it is meant to be a sample).

    python -m bench.synthetic_wiki SRC DEST --copies 10 [--single-stream] [--pages-per-stream 100]
"""

from __future__ import annotations

import argparse
import bz2
import hashlib
import json
import multiprocessing
import os
import re
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from lxml import etree

from pipelines.wikipedia.wikitext import normalize_title  # MediaWiki title normalisation, one definition

GENERATOR_VERSION = 1
COMPRESSLEVEL = 9
_XML_NS = "http://www.w3.org/XML/1998/namespace"
_LINK = re.compile(r"\[\[([^\[\]|\n]+)(\||\]\])")
_SPACES = re.compile(r"[ _\t\u00a0]+")
_B36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def _esc(s: str) -> str:
    """Escape as MediaWiki's dumps do (``htmlspecialchars``: & < > and double quotes, in text and attributes)."""
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def mediawiki_sha1(text: str) -> str:
    """The ``<sha1>`` of a revision: SHA-1 of the UTF-8 text in base 36, zero-padded to 31 characters."""
    n = int.from_bytes(hashlib.sha1(text.encode("utf-8")).digest(), "big")
    out = []
    while n:
        n, r = divmod(n, 36)
        out.append(_B36[r])
    return "".join(reversed(out)).rjust(31, "0")


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------------------- reading


@dataclass
class _Page:
    elem: etree._Element
    page_id: int
    title: str
    redirect: str | None
    xml0: str  # copy 0: the page as it is


@dataclass
class _Source:
    header: str  # "<mediawiki …>\n  <siteinfo>…</siteinfo>\n"
    footer: str  # "</mediawiki>\n"
    pages: list[_Page]
    max_page_id: int
    max_rev_id: int
    titles: dict[str, str]  # normalised title → title, for every page of the source


class _Writer:
    """Serialises elements as MediaWiki's dump writer does: 2-space indentation kept from the source's whitespace,
    default namespace unprefixed, ``<empty />`` elements with a space, ``htmlspecialchars`` escaping."""

    def __init__(self, nsmap: dict[str | None, str]) -> None:
        self.default = nsmap.get(None, "")
        self.prefixes = {uri: p for p, uri in nsmap.items() if p is not None}
        self.prefixes[_XML_NS] = "xml"

    def qname(self, tag: str) -> str:
        if not tag.startswith("{"):
            return tag
        uri, local = tag[1:].split("}", 1)
        if uri == self.default:
            return local
        return f"{self.prefixes[uri]}:{local}"

    def open_tag(self, e: etree._Element, attrs: dict[str, str] | None = None, declare: bool = False) -> str:
        parts = [self.qname(e.tag)]
        if declare:
            for p, uri in e.nsmap.items():
                parts.append(f'xmlns="{_esc(uri)}"' if p is None else f'xmlns:{p}="{_esc(uri)}"')
        for k, v in (attrs if attrs is not None else e.attrib).items():
            parts.append(f'{self.qname(k)}="{_esc(v)}"')
        return "<" + " ".join(parts)

    def element(self, e: etree._Element, out: list[str], fix: Callable | None = None, path: tuple = ()) -> None:
        """Append ``e`` (without its tail) to ``out``; ``fix(path, elem, attrs, text) -> (attrs, text)`` may replace
        attributes and text of any element (``path``: local names from the page down)."""
        path = (*path, _local(e.tag))
        attrs, text = dict(e.attrib), e.text
        if fix is not None:
            attrs, text = fix(path, e, attrs, text)
        out.append(self.open_tag(e, attrs))
        if text is None and len(e) == 0:
            out.append(" />")
            return
        out.append(">")
        if text:
            out.append(_esc(text))
        for child in e:
            if not isinstance(child.tag, str):  # comments, processing instructions: not in dumps
                continue
            self.element(child, out, fix, path)
            if child.tail:
                out.append(_esc(child.tail))
        out.append(f"</{self.qname(e.tag)}>")


def _read_source(src: Path) -> tuple[_Source, _Writer]:
    opener = bz2.open if src.suffix == ".bz2" else open
    with opener(src, "rb") as fh:
        events = etree.iterparse(fh, events=("start", "end"), huge_tree=True, remove_comments=True)
        root = None
        writer: _Writer | None = None
        header = ""
        pages: list[_Page] = []
        max_rev = 0
        for event, e in events:
            if root is None:
                root = e
                if _local(root.tag) != "mediawiki":
                    raise ValueError(f"{src}: not a MediaWiki XML export (root <{_local(root.tag)}>)")
                writer = _Writer(dict(root.nsmap))
                continue
            if event != "end" or e.getparent() is not root:
                continue
            name = _local(e.tag)
            assert writer is not None
            if name == "siteinfo":
                out = [writer.open_tag(root, declare=True), ">", _esc(root.text or "")]
                writer.element(e, out)
                out.append("\n")
                header = "".join(out)
            elif name == "page":
                out = ["  "]
                writer.element(e, out)
                out.append("\n")
                fields = {_local(c.tag): c for c in e if isinstance(c.tag, str)}
                for rev in e:
                    if _local(rev.tag) == "revision":
                        ids = [c.text for c in rev if _local(c.tag) == "id"]
                        max_rev = max(max_rev, int(ids[0] or 0) if ids else 0)
                red = fields.get("redirect")
                pages.append(_Page(elem=e, page_id=int(fields["id"].text), title=fields["title"].text,
                                   redirect=red.get("title") if red is not None else None, xml0="".join(out)))
    if root is None or not header or not pages:
        raise ValueError(f"{src}: no <siteinfo> or no <page>: not a MediaWiki XML export")
    src_info = _Source(header=header, footer=f"</{writer.qname(root.tag)}>\n", pages=pages,
                       max_page_id=max(p.page_id for p in pages), max_rev_id=max_rev,
                       titles={normalize_title(p.title): p.title for p in pages})
    return src_info, writer


# ---------------------------------------------------------------------------------------------------------- copies


def copy_title(title: str, k: int) -> str:
    return title if k == 0 else f"{title} ({k})"


def rewrite_links(text: str, titles: dict[str, str], k: int, *, keep_surface: bool = True) -> str:
    """Point every ``[[Target…`` link whose target (normalised) is a key of ``titles`` (normalised → title) at copy
    ``k``'s title.

    The leading colon and the ``#fragment`` are kept; an unpiped link gets ``|surface`` so its visible text does not
    change (``keep_surface``; off for redirect pages, whose only link is the target)."""
    if k == 0:
        return text

    def sub(m: re.Match) -> str:
        raw, close = m.group(1), m.group(2)
        title = titles.get(normalize_title(raw))
        if title is None:
            return m.group(0)
        stripped = raw.strip()
        colon = ":" if stripped.startswith(":") else ""
        frag = "#" + raw.split("#", 1)[1] if "#" in raw else ""
        new = f"[[{colon}{copy_title(title, k)}{frag}"
        if close == "]]" and keep_surface:
            surface = stripped[1:].lstrip() if colon else stripped
            return f"{new}|{surface}]]"
        return new + close

    return _LINK.sub(sub, text)


def _page_xml(page: _Page, k: int, src: _Source, writer: _Writer) -> str:
    if k == 0:
        return page.xml0
    id_off = k * (src.max_page_id + 1)
    rev_off = k * (src.max_rev_id + 1)
    keep_surface = page.redirect is None
    # the rewritten text of every revision, keyed by its <revision> element (a <sha1> may come before or after <text>)
    texts: dict[etree._Element, str] = {}
    for rev in page.elem:
        if _local(rev.tag) == "revision":
            for t in rev:
                if _local(t.tag) == "text" and t.text:
                    new = rewrite_links(t.text, src.titles, k, keep_surface=keep_surface)
                    if new != t.text:
                        texts[rev] = new

    def fix(path: tuple, e: etree._Element, attrs: dict, text: str | None) -> tuple[dict, str | None]:
        if path == ("page", "title"):
            return attrs, copy_title(text or "", k)
        if path == ("page", "id"):
            return attrs, str(int(text or 0) + id_off)
        if path in (("page", "revision", "id"), ("page", "revision", "parentid")):
            return attrs, str(int(text or 0) + rev_off)
        if path == ("page", "redirect") and "title" in attrs:
            target = src.titles.get(normalize_title(attrs["title"]))
            if target is not None:
                attrs = {**attrs, "title": copy_title(target, k)}
            return attrs, text
        if path == ("page", "revision", "text") and e.getparent() in texts:
            new = texts[e.getparent()]
            if "bytes" in attrs:
                attrs = {**attrs, "bytes": str(len(new.encode("utf-8")))}
            return attrs, new
        if path == ("page", "revision", "sha1") and e.getparent() in texts:
            return attrs, mediawiki_sha1(texts[e.getparent()])
        return attrs, text

    out = ["  "]
    writer.element(page.elem, out, fix)
    out.append("\n")
    return "".join(out)


def iter_pages(src: _Source, writer: _Writer, copies: int) -> Iterator[tuple[int, str, str]]:
    """(page_id, title, page XML with indentation and newline) for every page of every copy, in dump order."""
    for k in range(copies):
        off = k * (src.max_page_id + 1)
        for p in src.pages:
            yield p.page_id + off, copy_title(p.title, k), _page_xml(p, k, src, writer)


# ---------------------------------------------------------------------------------------------------------- writing


def _compress(data: bytes) -> bytes:
    return bz2.compress(data, COMPRESSLEVEL)


def output_paths(src: Path, dest: Path, copies: int, multistream: bool) -> tuple[Path, Path | None]:
    """Where ``replicate_dump`` writes: real-dump names inside a folder, or ``dest`` itself when it names a file."""
    dest = Path(dest)
    if dest.name.endswith((".xml.bz2", ".xml")):
        if multistream:
            if not dest.name.endswith(".xml.bz2"):
                raise ValueError(f"{dest}: a multistream dump is a .xml.bz2 file (use multistream=False for .xml)")
            return dest, dest.with_name(dest.name[: -len(".xml.bz2")] + "-index.txt.bz2")
        return dest, None
    if dest.suffix:
        raise ValueError(f"{dest}: give a folder or a file name ending in .xml.bz2 or .xml")
    db = re.split(r"[-.]", Path(src).name, maxsplit=1)[0] or "wiki"
    if multistream:
        stem = f"{db}-x{copies}-pages-articles-multistream"
        return dest / f"{stem}.xml.bz2", dest / f"{stem}-index.txt.bz2"
    return dest / f"{db}-x{copies}-pages-articles.xml.bz2", None


def sidecar_path(main: Path) -> Path:
    return main.with_name(main.name + ".json")


def read_meta(main: Path) -> dict:
    """The sidecar of a generated dump: source sha256, copies, format, pages, redirects, xml_bytes, streams …"""
    return json.loads(sidecar_path(main).read_text())


def replicate_dump(src: Path, dest: Path, copies: int, *, multistream: bool = True,
                   pages_per_stream: int = 100, processes: int | None = None) -> tuple[Path, Path | None]:
    """Write ``src`` (a MediaWiki XML export, ``.xml`` or ``.xml.bz2``) replicated ``copies`` times; return the dump
    and its multistream index (``None`` for single-stream or plain XML). Skips the work when the outputs exist and
    their sidecar matches."""
    from warehouse.atomic import atomic_path, write_text_atomic

    if copies < 1:
        raise ValueError("copies must be >= 1")
    if pages_per_stream < 1:
        raise ValueError("pages_per_stream must be >= 1")
    src = Path(src)
    main, index = output_paths(src, dest, copies, multistream)
    fmt = "multistream" if multistream else ("bz2" if main.name.endswith(".bz2") else "xml")
    key = {"generator_version": GENERATOR_VERSION, "source_sha256": file_sha256(src), "copies": copies,
           "format": fmt, "pages_per_stream": pages_per_stream if multistream else None}
    side = sidecar_path(main)
    if main.exists() and (index is None or index.exists()) and side.exists():
        try:
            old = json.loads(side.read_text())
        except (OSError, ValueError):
            old = {}
        if all(old.get(k) == v for k, v in key.items()):
            return main, index

    t0 = time.perf_counter()
    source, writer = _read_source(src)
    n_redirects = sum(p.redirect is not None for p in source.pages)
    stats = {"pages": 0, "xml_bytes": 0, "streams": 0}
    main.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(main) as tmp_main:
        if multistream:
            assert index is not None
            with atomic_path(index) as tmp_index:
                _write_multistream(source, writer, copies, pages_per_stream, tmp_main, tmp_index, stats, processes)
        else:
            _write_single(source, writer, copies, tmp_main, fmt == "bz2", stats)
    meta = {**key, "source": str(src.resolve()), "pages": stats["pages"], "redirects": n_redirects * copies,
            "xml_bytes": stats["xml_bytes"], "streams": stats["streams"] or None,
            "bytes": main.stat().st_size, "seconds": round(time.perf_counter() - t0, 3)}
    write_text_atomic(side, json.dumps(meta, indent=1) + "\n")
    return main, index


def _write_single(src: _Source, writer: _Writer, copies: int, path: Path, compress: bool, stats: dict) -> None:
    comp = bz2.BZ2Compressor(COMPRESSLEVEL) if compress else None
    with open(path, "wb") as fh:
        buf: list[str] = [src.header]
        size = 0

        def flush() -> None:
            nonlocal buf, size
            data = "".join(buf).encode("utf-8")
            stats["xml_bytes"] += len(data)
            fh.write(comp.compress(data) if comp is not None else data)
            buf, size = [], 0

        for _, _, xml in iter_pages(src, writer, copies):
            buf.append(xml)
            size += len(xml)
            stats["pages"] += 1
            if size >= 1 << 22:
                flush()
        buf.append(src.footer)
        flush()
        if comp is not None:
            fh.write(comp.flush())


def _stream_payloads(src: _Source, writer: _Writer, copies: int, per_stream: int
                     ) -> Iterator[tuple[bytes, list[tuple[int, str]]]]:
    yield src.header.encode("utf-8"), []
    batch: list[str] = []
    entries: list[tuple[int, str]] = []
    for page_id, title, xml in iter_pages(src, writer, copies):
        batch.append(xml)
        entries.append((page_id, title))
        if len(batch) == per_stream:
            yield "".join(batch).encode("utf-8"), entries
            batch, entries = [], []
    if batch:
        yield "".join(batch).encode("utf-8"), entries
    yield src.footer.encode("utf-8"), []


def _write_multistream(src: _Source, writer: _Writer, copies: int, per_stream: int, path: Path, index_path: Path,
                       stats: dict, processes: int | None) -> None:
    n_streams = 2 + -(-len(src.pages) * copies // per_stream)
    procs = min(processes or os.cpu_count() or 1, 8, n_streams)
    lines: list[str] = []
    with open(path, "wb") as fh:

        def emit(blob: bytes, entries: list[tuple[int, str]], raw_len: int) -> None:
            offset = fh.tell()
            fh.write(blob)
            stats["streams"] += 1
            stats["xml_bytes"] += raw_len
            stats["pages"] += len(entries)
            lines.extend(f"{offset}:{pid}:{title}\n" for pid, title in entries)

        payloads = _stream_payloads(src, writer, copies, per_stream)
        if procs <= 1:
            for data, entries in payloads:
                emit(_compress(data), entries, len(data))
        else:
            # a sliding window keeps memory bounded (Pool.imap would consume the whole generator ahead)
            with multiprocessing.Pool(procs) as pool:
                window: deque = deque()
                for data, entries in payloads:
                    window.append((pool.apply_async(_compress, (data,)), entries, len(data)))
                    if len(window) >= 3 * procs:
                        res, ent, n = window.popleft()
                        emit(res.get(), ent, n)
                while window:
                    res, ent, n = window.popleft()
                    emit(res.get(), ent, n)
    index_path.write_bytes(bz2.compress("".join(lines).encode("utf-8"), COMPRESSLEVEL))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", type=Path, help="a MediaWiki XML export (.xml or .xml.bz2)")
    ap.add_argument("dest", type=Path, help="a folder (real-dump names) or a .xml.bz2 / .xml file name")
    ap.add_argument("--copies", type=int, default=10)
    ap.add_argument("--single-stream", action="store_true", help="one bz2 stream (or plain XML for DEST *.xml)")
    ap.add_argument("--pages-per-stream", type=int, default=100)
    ap.add_argument("--processes", type=int, default=None, help="compression processes (default: all cores, max 8)")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    main_path, index = replicate_dump(a.src, a.dest, a.copies, multistream=not a.single_stream,
                                      pages_per_stream=a.pages_per_stream, processes=a.processes)
    meta = read_meta(main_path)
    print(f"{main_path} ({meta['pages']:,} pages, {meta['xml_bytes'] / 1e6:.1f} MB XML, "
          f"{main_path.stat().st_size / 1e6:.1f} MB on disk) in {time.perf_counter() - t0:.1f} s")
    if index is not None:
        print(index)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
