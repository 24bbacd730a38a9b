"""The replicated Wikipedia dump of `bench/wikipedia_extract.py`: multistream layout, index, ids, titles, links."""

from __future__ import annotations

import bz2
import re
from pathlib import Path

import pytest
from lxml import etree

from bench.synthetic_wiki import normalize_title, read_meta, replicate_dump, rewrite_links

NS = "{http://www.mediawiki.org/xml/export-0.10/}"
LINK = re.compile(r"\[\[([^\[\]|\n]+)(?:\||\]\])")


def _source(shared_data: Path) -> Path:
    src = shared_data / "wikipedia" / "enwiki-sample.xml.bz2"
    if not src.exists():
        pytest.skip(f"{src} not available")
    return src


def _pages(xml: bytes) -> list[dict]:
    root = etree.fromstring(xml, parser=etree.XMLParser(huge_tree=True))
    out = []
    for p in root.iter(f"{NS}page"):
        red = p.find(f"{NS}redirect")
        out.append({"id": int(p.findtext(f"{NS}id")), "title": p.findtext(f"{NS}title"),
                    "redirect": red.get("title") if red is not None else None,
                    "text": p.findtext(f"{NS}revision/{NS}text") or ""})
    return out


def test_rewrite_links_keeps_surface_fragment_and_colon() -> None:
    titles = {"Anarchism": "Anarchism", "Ayn Rand": "Ayn Rand"}
    text = ("[[anarchism]]s, [[Ayn_Rand#Life|Rand]], [[:Anarchism]], [[Other]], "
            "[[File:X.jpg|thumb|about [[anarchism]]]]")
    assert rewrite_links(text, titles, 3) == (
        "[[Anarchism (3)|anarchism]]s, [[Ayn Rand (3)#Life|Rand]], [[:Anarchism (3)|Anarchism]], [[Other]], "
        "[[File:X.jpg|thumb|about [[Anarchism (3)|anarchism]]]]")
    assert rewrite_links("#REDIRECT [[ayn Rand]]", titles, 1, keep_surface=False) == "#REDIRECT [[Ayn Rand (1)]]"
    assert rewrite_links(text, titles, 0) == text


@pytest.mark.shared_data
def test_multistream_copies_index_and_links(shared_data: Path, tmp_path: Path) -> None:
    src = _source(shared_data)
    source_xml = bz2.decompress(src.read_bytes())
    source_pages = _pages(source_xml)

    dump, index = replicate_dump(src, tmp_path, 2, pages_per_stream=50)
    assert dump.name == "enwiki-x2-pages-articles-multistream.xml.bz2"
    assert index is not None and index.name == "enwiki-x2-pages-articles-multistream-index.txt.bz2"
    raw = dump.read_bytes()
    xml = bz2.decompress(raw)  # Python's bz2 reads the concatenated streams
    pages = _pages(xml)  # well-formed, or this raises
    _check_copies(source_xml, source_pages, xml, pages)
    meta = read_meta(dump)
    _check_streams(raw, xml, len(source_pages), meta)
    _check_index(raw, index, pages, meta)
    _check_links(source_pages, pages[len(source_pages):])

    # the single-stream output holds the same XML bytes; plain XML too
    single, no_index = replicate_dump(src, tmp_path / "single", 2, multistream=False)
    assert no_index is None and single.name == "enwiki-x2-pages-articles.xml.bz2"
    assert single.read_bytes().count(b"BZh9") == 1
    assert bz2.decompress(single.read_bytes()) == xml
    plain, _ = replicate_dump(src, tmp_path / "plain.xml", 2, multistream=False)
    assert plain.read_bytes() == xml

    # a rerun with the same arguments is a no-op (sidecar matches); other arguments regenerate
    mtime = dump.stat().st_mtime_ns
    assert replicate_dump(src, tmp_path, 2, pages_per_stream=50) == (dump, index)
    assert dump.stat().st_mtime_ns == mtime
    replicate_dump(src, plain, 1, multistream=False)
    assert read_meta(plain)["copies"] == 1 and plain.stat().st_size == len(source_xml)


def _check_copies(source_xml: bytes, source_pages: list[dict], xml: bytes, pages: list[dict]) -> None:
    """2× the pages, unique ids and titles; copy 0 is the source as it is, copy 1 its pages with new ids and titles."""
    n = len(source_pages)
    assert len(pages) == 2 * n
    assert len({p["id"] for p in pages}) == 2 * n
    assert len({p["title"] for p in pages}) == 2 * n
    assert pages[:n] == source_pages
    assert xml.startswith(source_xml[: source_xml.index(b"  <page>")])  # <mediawiki …> and <siteinfo> kept
    step = max(p["id"] for p in source_pages) + 1
    for orig, copy in zip(source_pages, pages[n:], strict=True):
        assert copy["id"] == orig["id"] + step
        assert copy["title"] == f"{orig['title']} (1)"


def _check_streams(raw: bytes, xml: bytes, n: int, meta: dict) -> None:
    """Stream layout: a header stream, ceil(2n / 50) page streams, a footer stream."""
    assert meta["streams"] == 2 + -(-2 * n // 50)
    assert meta["pages"] == 2 * n and meta["xml_bytes"] == len(xml)
    first = bz2.BZ2Decompressor()
    head = first.decompress(raw)
    assert head.startswith(b"<mediawiki ") and head.rstrip().endswith(b"</siteinfo>") and b"<page>" not in head


def _check_index(raw: bytes, index: Path, pages: list[dict], meta: dict) -> None:
    """Every index offset is a stream start whose content holds that page's ``<id>`` and ``<title>``."""
    lines = bz2.decompress(index.read_bytes()).decode("utf-8").splitlines()
    assert len(lines) == len(pages)
    by_id = {p["id"]: p for p in pages}
    streams: dict[int, bytes] = {}
    for line in lines:
        offset, page_id, title = line.split(":", 2)
        offset, page_id = int(offset), int(page_id)
        assert by_id[page_id]["title"] == title  # unescaped, as in the real index
        if offset not in streams:
            assert raw[offset: offset + 4] == b"BZh9"
            d = bz2.BZ2Decompressor()
            streams[offset] = d.decompress(raw[offset:])
            assert d.eof
        chunk = streams[offset]
        assert f"<id>{page_id}</id>".encode() in chunk
        assert f"<title>{_xml_escape(title)}</title>".encode() in chunk
    assert len(streams) == meta["streams"] - 2
    assert raw.endswith(bz2.compress(b"</mediawiki>\n", 9))


def _check_links(source_pages: list[dict], copy1: list[dict]) -> None:
    """Links and redirects in copy 1 point to copy-1 titles; none still points to a copy-0 page."""
    titles0 = {normalize_title(p["title"]) for p in source_pages}
    titles1 = {p["title"] for p in copy1}
    rewritten = 0
    for p in copy1:
        for target in LINK.findall(p["text"]):
            norm = normalize_title(target)
            assert norm not in titles0, f"{p['title']}: link [[{target}]] still points to copy 0"
            if norm.endswith(" (1)") and norm[:-4] in titles0:
                assert norm in titles1
                rewritten += 1
        if p["redirect"] is not None:
            assert normalize_title(p["redirect"]) not in titles0
    assert rewritten > 100
    redirects1 = [p["redirect"] for p in copy1 if p["redirect"] and p["redirect"] in titles1]
    assert redirects1  # some redirects of the sample point inside it


@pytest.mark.shared_data
def test_one_copy_is_the_source_byte_for_byte(shared_data: Path, tmp_path: Path) -> None:
    src = _source(shared_data)
    out, _ = replicate_dump(src, tmp_path / "x1.xml", 1, multistream=False)
    assert out.read_bytes() == bz2.decompress(src.read_bytes())


def _xml_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
