"""Streaming reader of MediaWiki XML export dumps (``pages-articles``), plain XML or bz2/gz compressed.

Pages are yielded one by one with lxml ``iterparse`` and cleared after use, so memory stays bounded whatever the dump
size. The export namespace (``export-0.10``, ``0.11`` …) is read from the root element, not assumed.
"""

from __future__ import annotations

import bz2
import gzip
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from lxml import etree


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


class DumpFormatError(ValueError):
    """A dump that is not a MediaWiki XML export (message names the file and the line)."""


def open_dump(path: Path) -> IO[bytes]:
    path = Path(path)
    if path.suffix == ".bz2":
        return bz2.open(path, "rb")
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return open(path, "rb")


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def read_dump(path: Path) -> tuple[SiteInfo, Iterator[Page]]:
    """Return the dump's site info and an iterator over its pages (all namespaces; filter on ``Page.ns``)."""
    path = Path(path)
    fh = open_dump(path)
    events = etree.iterparse(fh, events=("start", "end"), huge_tree=True, recover=False)
    ns_uri = ""
    siteinfo: SiteInfo | None = None
    try:
        for event, elem in events:
            if event == "start" and _local(elem.tag) == "mediawiki":
                ns_uri = "" if "}" not in elem.tag else elem.tag[1:].split("}")[0]
                continue
            if event == "end" and _local(elem.tag) == "siteinfo":
                siteinfo = _siteinfo(elem, ns_uri)
                elem.clear()
                break
            if event == "start" and _local(elem.tag) == "page":
                break
    except etree.XMLSyntaxError as exc:
        fh.close()
        raise DumpFormatError(f"{path}: not a MediaWiki XML dump (line {exc.lineno}: {exc.msg})") from exc
    if siteinfo is None:
        fh.close()
        raise DumpFormatError(f"{path}: no <siteinfo> before the first <page>; expected a MediaWiki XML export")
    return siteinfo, _pages(path, fh, events, ns_uri)


def _siteinfo(elem: etree._Element, ns: str) -> SiteInfo:
    q = (lambda t: f"{{{ns}}}{t}") if ns else (lambda t: t)
    dbname = elem.findtext(q("dbname")) or ""
    base = elem.findtext(q("base")) or ""
    lang = dbname[:-4] if dbname.endswith("wiki") else base.split("//")[-1].split(".")[0]
    namespaces = {}
    nss = elem.find(q("namespaces"))
    if nss is not None:
        for n in nss:
            namespaces[int(n.get("key"))] = n.text or ""
    return SiteInfo(dbname=dbname, lang=lang, namespaces=namespaces)


def _pages(path: Path, fh: IO[bytes], events: etree.iterparse, ns: str) -> Iterator[Page]:
    q = (lambda t: f"{{{ns}}}{t}") if ns else (lambda t: t)
    t_page, t_title, t_ns, t_id, t_redirect = q("page"), q("title"), q("ns"), q("id"), q("redirect")
    t_rev, t_text = q("revision"), q("text")
    try:
        for event, elem in events:
            if event != "end" or elem.tag != t_page:
                continue
            title = elem.findtext(t_title)
            pid = elem.findtext(t_id)
            if title is None or pid is None:
                raise DumpFormatError(f"{path}: <page> near line {elem.sourceline} lacks <title> or <id>")
            red = elem.find(t_redirect)
            rev = elem.find(t_rev)
            text = (rev.findtext(t_text) if rev is not None else None) or ""
            yield Page(
                page_id=int(pid),
                title=title,
                ns=int(elem.findtext(t_ns) or 0),
                redirect=red.get("title") if red is not None else None,
                text=text,
            )
            elem.clear()
            while elem.getprevious() is not None:
                del elem.getparent()[0]
    except etree.XMLSyntaxError as exc:
        raise DumpFormatError(f"{path}: broken XML at line {exc.lineno}: {exc.msg}") from exc
    finally:
        fh.close()
