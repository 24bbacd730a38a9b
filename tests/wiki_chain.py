"""Runs the EASE corpus stages in order without Prefect or the DAG (what ``flows/stages/wiki.py`` wires), for tests."""

from __future__ import annotations

import bz2
import html
import json
import re
from collections.abc import Mapping
from pathlib import Path

from pipelines.wikidata import WikidataSettings, build_entities
from pipelines.wikipedia.entities import EntitySettings, build_entity_tables
from pipelines.wikipedia.extract import WikiSettings, build_wiki_shard, shard_ranges
from pipelines.wikipedia.hard_negatives import HardNegativeSettings, build_hard_negatives
from pipelines.wikipedia.resolve import build_wiki_language


def build_chain(dumps: Mapping[str, Path], out: Path, wikidata: Path | None = None,
                wiki: WikiSettings | None = None, entities: EntitySettings | None = None,
                hard_negatives: HardNegativeSettings | None = None,
                wikidata_settings: WikidataSettings | None = None) -> dict[str, Path]:
    """Artifacts as folders under ``out``: ``shard-<lang>-<i>``, ``lang-<lang>``, ``wikidata``, ``entities``, ``hn``."""
    wiki = wiki or WikiSettings()
    dirs: dict[str, Path] = {}
    wd_dir = None
    if wikidata is not None:
        wd_dir = out / "wikidata"
        wd_dir.mkdir(parents=True)
        build_entities(wikidata_settings or WikidataSettings(wikis=[f"{lang}wiki" for lang in dumps]), wikidata,
                       wd_dir)
        dirs["wikidata"] = wd_dir
    langs: dict[str, Path] = {}
    shards: dict[str, list[Path]] = {}
    for lang, dump in sorted(dumps.items()):
        shards[lang] = []
        for i, rng in enumerate(shard_ranges(dump, wiki.shard_bytes)):
            d = out / f"shard-{lang}-{i}"
            d.mkdir(parents=True)
            build_wiki_shard(wiki, dump, lang, rng, None, d)
            shards[lang].append(d)
            dirs[d.name] = d
        d = out / f"lang-{lang}"
        d.mkdir()
        counts = [json.loads((s / "shard_counts.json").read_text()) for s in shards[lang]]
        build_wiki_language(lang, shards[lang], counts, wiki.max_redirect_hops, d)
        langs[lang] = dirs[d.name] = d
    ent = out / "entities"
    ent.mkdir()
    build_entity_tables(entities or EntitySettings(), langs, wd_dir, ent)
    hn = out / "hn"
    hn.mkdir()
    build_hard_negatives(hard_negatives or HardNegativeSettings(), ent, langs, shards, hn)
    dirs.update(entities=ent, hn=hn)
    return dirs


_PAGE_RE = re.compile(rb"[ \t]*<page>.*?</page>[ \t]*\n?", re.S)
_TITLE_RE = re.compile(rb"<title>([^<]*)")  # also the title of a page whose </title> is missing
_ID_RE = re.compile(rb"<id>(\d+)</id>")


def split_dump_xml(xml: bytes) -> tuple[bytes, list[bytes], bytes]:
    """``(head up to the first <page>, [each <page>…</page> with its line], tail after the last page)``."""
    pages = list(_PAGE_RE.finditer(xml))
    if not pages:
        return xml, [], b""
    head, tail = xml[:pages[0].start()], xml[pages[-1].end():]
    if b"</mediawiki>" not in tail:
        raise ValueError("the XML has no </mediawiki> after its last page")
    return head, [m.group(0) for m in pages], tail


def write_dump(xml: bytes, path: Path, *, multistream: bool, pages_per_stream: int = 5) -> Path | None:
    """Write ``xml`` (a whole MediaWiki export) as plain XML (``path`` ends in ``.xml``), single-stream bz2 or
    Wikipedia-layout multistream bz2 (``.xml.bz2``).

    Multistream: the first bz2 stream holds ``<mediawiki…><siteinfo>…</siteinfo>``, then one stream per
    ``pages_per_stream`` pages, and a last stream with ``</mediawiki>``; the index ``…-index.txt.bz2`` next to the dump
    (``offset:page_id:title`` per page, as Wikipedia publishes it) is written too and its path returned.
    """
    path = Path(path)
    if path.suffix == ".xml":
        if multistream:
            raise ValueError("a multistream dump must be .xml.bz2")
        path.write_bytes(xml)
        return None
    if not path.name.endswith(".xml.bz2"):
        raise ValueError(f"{path}: expected a .xml or .xml.bz2 name")
    if not multistream:
        path.write_bytes(bz2.compress(xml))
        return None
    head, pages, tail = split_dump_xml(xml)
    index_lines: list[bytes] = []
    with open(path, "wb") as fh:
        fh.write(bz2.compress(head))
        for i in range(0, len(pages), pages_per_stream):
            offset = fh.tell()
            group = pages[i:i + pages_per_stream]
            for page in group:
                title = html.unescape(_TITLE_RE.search(page).group(1).decode("utf-8", "replace")).strip()
                index_lines.append(b"%d:%s:%s\n" % (offset, _ID_RE.search(page).group(1), title.encode("utf-8")))
            fh.write(bz2.compress(b"".join(group)))
        fh.write(bz2.compress(tail))
    index = path.with_name(path.name.replace(".xml.bz2", "-index.txt.bz2"))
    index.write_bytes(bz2.compress(b"".join(index_lines)))
    return index


def pages_dump(path: Path, pages: list[tuple[str, int, str | None, str | None]]) -> Path:
    """An English Wikipedia export of ``(title, page id, redirect target or None, wikitext or None)`` rows, written
    single-stream bz2 to ``path`` (a ``.xml.bz2`` name): redirects as MediaWiki writes them, namespaces 0 and 14."""
    out = []
    for title, pid, redirect, text in pages:
        body = (f'<redirect title="{html.escape(redirect)}" />\n    <revision><id>{pid + 7}</id><model>wikitext</model>'
                f'<format>text/x-wiki</format><text xml:space="preserve">#REDIRECT [[{html.escape(redirect)}]]</text>'
                f"</revision>" if redirect else
                f"<revision><id>{pid + 7}</id><model>wikitext</model><format>text/x-wiki</format>"
                f'<text xml:space="preserve">{html.escape(text or "")}</text></revision>')
        out.append(f"  <page>\n    <title>{html.escape(title)}</title>\n    <ns>0</ns>\n    <id>{pid}</id>\n    "
                   f"{body}\n  </page>\n")
    xml = ('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" xml:lang="en">\n'
           "  <siteinfo><sitename>Wikipedia</sitename><dbname>enwiki</dbname><namespaces>"
           '<namespace key="0" case="first-letter" /><namespace key="14" case="first-letter">Category</namespace>'
           "</namespaces></siteinfo>\n" + "".join(out) + "</mediawiki>\n")
    write_dump(xml.encode("utf-8"), path, multistream=False)
    return path
