"""MediaWiki dump formats, byte-range sharding and bad input, on dumps rebuilt from the embedded sample in tmp_path.

Every format (plain XML, single-stream bz2/gz, Wikipedia-layout multistream bz2 with and without its index) must give
the same pages whatever the cut; sharded and multi-process runs must give the same tables as one process; truncated
and malformed input is reported (file, last complete page, counts), never a crash.
"""

from __future__ import annotations

import bz2
import functools
import gzip
import itertools
import json
import random
import re
from collections.abc import Iterator
from pathlib import Path
from xml.sax.saxutils import escape

import polars as pl
import pytest
from conftest import SAMPLE, tiny_config_dict, write_config
from lxml import etree
from polars.testing import assert_frame_equal
from wiki_chain import build_chain, split_dump_xml, write_dump

from flows.config import load_config
from flows.dag import build_dag
from pipelines.wikipedia import dump_reader, extract
from pipelines.wikipedia.dump_reader import (
    DumpFormatError,
    ReadCounts,
    TruncatedDumpError,
    dump_kind,
    iter_fragments,
    parse_fragment,
    plan_ranges,
    read_dump,
    read_index_offsets,
)
from pipelines.wikipedia.entities import EntitySettings
from pipelines.wikipedia.extract import WikiSettings, build_wiki_shard, extract_pairs, shard_ranges
from pipelines.wikipedia.resolve import build_wiki_language

NS = "{http://www.mediawiki.org/xml/export-0.10/}"
WIKIDATA = SAMPLE / "wikidata" / "entities.jsonl"
SMALL = 4096  # the smallest shard_bytes WikiSettings accepts; the sample's multistream dumps are ~30 KB


@functools.cache
def sample_xml(lang: str) -> bytes:
    return bz2.decompress((SAMPLE / "wikipedia" / f"{lang}wiki-sample.xml.bz2").read_bytes())


def reference_pages(xml: bytes) -> list[tuple[int, str, int, str | None, str]]:
    """(id, title, ns, redirect, text) of every page, in dump order, read by lxml from the whole document."""
    root = etree.fromstring(xml, etree.XMLParser(huge_tree=True))
    out = []
    for p in root.iter(f"{NS}page"):
        red = p.find(f"{NS}redirect")
        out.append((int(p.findtext(f"{NS}id")), p.findtext(f"{NS}title"), int(p.findtext(f"{NS}ns")),
                    red.get("title") if red is not None else None, p.findtext(f"{NS}revision/{NS}text") or ""))
    return out


def write_format(xml: bytes, folder: Path, fmt: str, name: str = "enwiki") -> tuple[Path, Path | None]:
    """``fmt``: xml | bz2 | gz | multistream (returns the index too)."""
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "gz":
        path = folder / f"{name}.xml.gz"
        path.write_bytes(gzip.compress(xml))
        return path, None
    if fmt == "multistream":
        path = folder / f"{name}-pages-articles-multistream.xml.bz2"
        return path, write_dump(xml, path, multistream=True)
    path = folder / (f"{name}.xml" if fmt == "xml" else f"{name}.xml.bz2")
    assert write_dump(xml, path, multistream=False) is None
    return path, None


def read_in_ranges(path: Path, target: int, index: Path | None = None) -> tuple[list[tuple], int, ReadCounts]:
    kind = dump_kind(path)
    counts = ReadCounts()
    ranges = plan_ranges(path, target, index=index)
    pages = [(p.page_id, p.title, p.ns, p.redirect, p.text)
             for rng in ranges for fragment in iter_fragments(path, rng, kind, counts)
             for p in parse_fragment(fragment, counts)]
    return pages, len(ranges), counts


def small_work_items(mp: pytest.MonkeyPatch) -> None:
    """Ranges of 1 KiB, reads of 4 KiB and fragments of 8 KiB (the floors of the settings are 4 KiB and 1 MiB): several
    work items per shard, so that the process pool really shares them out and single-stream fragments are fanned out."""
    original = dump_reader.plan_ranges

    def plan(path: Path, target: int, start: int = 0, end: int | None = None, index: Path | None = None) -> list:
        return original(path, 1024, start, end, index)

    mp.setattr(extract, "plan_ranges", plan)
    mp.setattr(dump_reader, "_FRAGMENT_BYTES", 8192)
    mp.setattr(dump_reader, "_READ", 4096)  # a single-stream fragment is the complete pages of a read or more


def stream_offsets(path: Path) -> list[int]:
    """Offsets of the bz2 stream headers of a file (found by scanning, independently of the reader)."""
    return [m.start() for m in re.finditer(rb"BZh[1-9]1AY&SY", path.read_bytes())]


# ---------------------------------------------------------------------------------------------------- 0. the helper


def test_write_dump_multistream_layout_and_index(tmp_path: Path) -> None:
    xml = sample_xml("ru")
    path, index = write_format(xml, tmp_path, "multistream", "ruwiki")
    assert index is not None and index.name == "ruwiki-pages-articles-multistream-index.txt.bz2"
    offsets = stream_offsets(path)
    pages = reference_pages(xml)
    assert len(offsets) == 2 + -(-len(pages) // 5)  # siteinfo, pages in fives, </mediawiki>
    with bz2.open(path) as fh:  # concatenated streams decompress to the original document
        assert fh.read() == xml
    first = bz2.BZ2Decompressor().decompress(path.read_bytes())
    assert first.rstrip().endswith(b"</siteinfo>") and b"<page>" not in first
    lines = bz2.decompress(index.read_bytes()).decode("utf-8").splitlines()
    assert [(int(off), int(pid), title) for off, pid, title in (ln.split(":", 2) for ln in lines)] == [
        (offsets[1 + i // 5], pid, title) for i, (pid, title, *_) in enumerate(pages)]
    assert read_index_offsets(index) == offsets[1:-1]
    assert dump_kind(path) == "bz2-multistream"
    assert dump_kind(write_format(xml, tmp_path, "bz2", "ruwiki")[0]) == "bz2"
    assert dump_kind(write_format(xml, tmp_path, "xml", "ruwiki")[0]) == "xml"


# ---------------------------------------------------------------------------------------------------- 1. formats


@pytest.mark.parametrize("lang", ["en", "ru"])
@pytest.mark.parametrize("fmt", ["xml", "bz2", "gz", "multistream", "multistream+index"])
def test_every_format_and_cut_reads_the_same_pages(tmp_path: Path, lang: str, fmt: str) -> None:
    xml = sample_xml(lang)
    expected = reference_pages(xml)
    assert len(expected) > 50 and any(p[3] for p in expected)  # articles and redirects
    path, index = write_format(xml, tmp_path, fmt.split("+")[0], f"{lang}wiki")
    if not fmt.endswith("+index"):
        index = None
    size = path.stat().st_size
    site, pages = read_dump(path)
    assert site.lang == lang and site.namespaces[14]
    assert [(p.page_id, p.title, p.ns, p.redirect, p.text) for p in pages] == expected
    # 13 bytes: ranges start and end inside tags, multi-byte characters, pages and bz2 streams
    for target in (13, 101, 1500, SMALL, size):
        pages, n_ranges, counts = read_in_ranges(path, target, index)
        assert pages == expected, (fmt, target)
        assert counts == ReadCounts()
        if fmt in ("bz2", "gz"):
            assert n_ranges == 1  # not seekable
        elif target < size // 4:
            assert n_ranges > 4, (fmt, target)


@pytest.mark.parametrize("fmt", ["bz2", "gz"])
def test_single_stream_buffering_never_reports_a_false_cut(tmp_path: Path, fmt: str) -> None:
    """Whatever the read and fragment sizes — including a flush by the read that holds ``</mediawiki>``, which leaves
    only the closing tag in the buffer — a whole single-stream dump reads whole and is not called truncated."""
    xml = sample_xml("ru")
    expected = reference_pages(xml)
    path, _ = write_format(xml, tmp_path, fmt, "ruwiki")
    for read, fragment in itertools.product((1 << 20, 4096, 333), (1, 8192, 4 << 20)):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(dump_reader, "_READ", read)
            mp.setattr(dump_reader, "_FRAGMENT_BYTES", fragment)
            pages, _, counts = read_in_ranges(path, SMALL)
        assert pages == expected and counts == ReadCounts(), (read, fragment)


def test_ranges_of_a_part_of_the_file_own_exactly_their_pages(tmp_path: Path) -> None:
    """Shard boundaries (``plan_ranges(start, end)``) partition the pages: every page once, in order."""
    xml = sample_xml("de")
    expected = reference_pages(xml)
    for fmt in ("xml", "multistream"):
        path, index = write_format(xml, tmp_path / fmt, fmt, "dewiki")
        kind = dump_kind(path)
        size = path.stat().st_size
        for shard in (977, SMALL):
            for idx in (None, index) if index else (None,):
                got = []
                for a in range(0, size, shard):
                    counts = ReadCounts()
                    for rng in plan_ranges(path, 300, a, min(a + shard, size), idx):
                        assert a <= rng.start < rng.end <= min(a + shard, size)
                        got += [p.page_id for f in iter_fragments(path, rng, kind, counts)
                                for p in parse_fragment(f, counts)]
                assert got == [p[0] for p in expected], (fmt, shard, idx)


@pytest.mark.parametrize("fmt", ["xml", "multistream"])
def test_a_range_owns_the_pages_or_streams_that_start_inside_it(tmp_path: Path, fmt: str) -> None:
    """Boundaries exactly on, one byte before and one byte after a ``<page>`` tag or a bz2 stream header."""
    xml = sample_xml("en")
    ids = [p[0] for p in reference_pages(xml)]
    path, _ = write_format(xml, tmp_path, fmt)
    kind = dump_kind(path)
    size = path.stat().st_size
    if fmt == "xml":
        starts = [m.start() for m in re.finditer(rb"<page>", xml)]
        owned = [[i] for i in ids]
    else:
        starts = stream_offsets(path)[1:-1]
        owned = [ids[k:k + 5] for k in range(0, len(ids), 5)]

    def read(a: int, b: int) -> list[int]:
        counts = ReadCounts()
        return [p.page_id for f in iter_fragments(path, dump_reader.ByteRange(a, a, b), kind, counts)
                for p in parse_fragment(f, counts)]

    bounds = [*starts, size]
    for k, (a, b) in enumerate(itertools.pairwise(bounds)):
        assert read(a, b) == owned[k], (a, b)
        assert read(a - 1, b - 1) == owned[k]  # starts 1 byte before: the same; ends 1 byte before b: not b's
        assert read(a + 1, b + 1) == (owned[k + 1] if k + 1 < len(owned) else [])
        assert read(a, a + 1) == owned[k] and read(a - 1, a) == []


@pytest.mark.parametrize("fmt", ["xml", "multistream"])
def test_tags_and_stream_headers_split_across_reads(tmp_path: Path, fmt: str) -> None:
    """Reads of 7 bytes: every ``<page>`` tag and 10-byte stream signature straddles a read boundary somewhere."""
    xml = sample_xml("de")
    expected = reference_pages(xml)
    path, _ = write_format(xml, tmp_path, fmt, "dewiki")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dump_reader, "_READ", 7)
        for target in (333, SMALL):
            assert read_in_ranges(path, target)[0] == expected, target


# ---------------------------------------------------------------------------------------------------- 2. sharding


def _tables(dirs: dict[str, Path]) -> dict[str, pl.DataFrame]:
    """Every table of a ``build_chain`` run, rows in a canonical order (parts and shards concatenated)."""
    def read(folders: list[Path], table: str) -> pl.DataFrame:
        frames = []
        for d in folders:
            for part in sorted((d / table).glob("lang=*/*.parquet")):
                frames.append(pl.read_parquet(part).with_columns(pl.lit(part.parent.name[5:]).alias("lang")))
        return pl.concat(frames, how="vertical_relaxed")

    shards = [d for k, d in dirs.items() if k.startswith("shard-")]
    langs = [d for k, d in dirs.items() if k.startswith("lang-")]
    out = {t: read(shards, t) for t in ("wiki_sentences", "wiki_links_raw", "wiki_pages_raw")}
    out.update({t: read(langs, t) for t in ("wiki_pages", "wiki_links", "wiki_page_targets", "wiki_drop_counts")})
    out["hard_negatives"] = read([dirs["hn"]], "hard_negatives")
    for name in ("ease_drop_counts", "entity_negative_candidates"):
        out[name] = pl.read_parquet(dirs["hn"] / f"{name}.parquet")
    for f in sorted(dirs["entities"].glob("*.parquet")):
        out[f"entities/{f.stem}"] = pl.read_parquet(f)

    def canonical(df: pl.DataFrame) -> pl.DataFrame:
        df = df.select(sorted(df.columns))
        flat = [c for c, t in df.schema.items() if not t.is_nested()]
        keys = [pl.col(c).cast(pl.List(pl.Utf8)).list.join("\x1f").alias(f"__{c}")
                for c, t in df.schema.items() if t.is_nested()]
        return df.with_columns(keys).sort(flat + [k.meta.output_name() for k in keys]).drop(
            [k.meta.output_name() for k in keys])

    return {k: canonical(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def chains(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, Path], dict[str, list[dict]]]]:
    """The en+de sample through the whole chain in several layouts: ``variant → (dirs, shard counts per lang)``."""
    tmp = tmp_path_factory.mktemp("chains")
    dumps: dict[str, dict[str, Path]] = {}
    for fmt in ("multistream", "xml", "bz2"):
        dumps[fmt] = {lang: write_format(sample_xml(lang), tmp / "dumps" / fmt, fmt, f"{lang}wiki")[0]
                      for lang in ("en", "de")}
    variants = {
        "multistream/shards/p2": ("multistream", WikiSettings(shard_bytes=SMALL, processes=2), True),
        "multistream/one/p1": ("multistream", WikiSettings(processes=1), False),
        "multistream/one/p2": ("multistream", WikiSettings(processes=2), True),
        "xml/shards/p2": ("xml", WikiSettings(shard_bytes=SMALL, processes=2), True),
        "xml/one/p1": ("xml", WikiSettings(processes=1), False),
        "bz2/one/p2": ("bz2", WikiSettings(processes=2), True),
        "bz2/one/p1": ("bz2", WikiSettings(processes=1), False),
    }
    out = {}
    for name, (fmt, settings, small_items) in variants.items():
        with pytest.MonkeyPatch.context() as mp:
            if small_items:
                small_work_items(mp)
            dirs = build_chain(dumps[fmt], tmp / name.replace("/", "-"), WIKIDATA, wiki=settings,
                               entities=EntitySettings(min_link_count=2))
        counts = {lang: [json.loads((d / "shard_counts.json").read_text()) for k, d in sorted(dirs.items())
                         if k.startswith(f"shard-{lang}-")] for lang in ("en", "de")}
        out[name] = (dirs, counts)
    return out


@pytest.mark.slow  # seven whole chains (~40 s): make test-slow
def test_chain_layouts_are_what_they_claim(chains) -> None:
    """The comparison below is only meaningful if shards, ranges and processes really differ."""
    for name, (dirs, counts) in chains.items():
        fmt, layout, procs = name.split("/")
        for lang, shards in counts.items():
            assert all(c["kind"] == {"multistream": "bz2-multistream"}.get(fmt, fmt) for c in shards)
            if layout == "shards":
                assert len(shards) >= 4, (name, lang)
            else:
                assert len(shards) == 1
            if procs == "p2" and fmt != "bz2":  # one part file per work item (the artifact holds no timings or
                # process counts: those are in the manifest's stats, so reruns are byte-identical)
                parts = [p for k, d in dirs.items() if k.startswith(f"shard-{lang}-")
                         for p in (d / "wiki_sentences").glob("lang=*/*.parquet")]
                assert len(parts) >= 2 * len(shards) + 4, (name, lang)
            if procs == "p2" and fmt == "bz2":  # fragments fanned out to the pool, one part each
                parts = list((dirs[f"shard-{lang}-0"] / "wiki_sentences").glob("lang=*/*.parquet"))
                assert len(parts) >= 4, (name, lang)
            assert sum(c["pages"] for c in shards) >= 30 and sum(c["redirects"] for c in shards) >= 10
            assert not any(c["truncated"] or c["malformed_pages"] for c in shards)


@pytest.mark.slow  # seven whole chains (~40 s): make test-slow
def test_sharded_and_parallel_runs_equal_one_process(chains) -> None:
    reference = _tables(chains["multistream/one/p1"][0])
    for table, df in reference.items():
        # entity_link_titles: the embedded sample's Wikidata has sitelinks only for pages the sample has
        # (tests/test_links_without_page.py covers titles without a page)
        if table not in ("ease_drop_counts", "wiki_drop_counts", "entities/entity_link_titles"):
            assert df.height > 0, table  # an empty table would compare equal without testing anything
    assert reference["hard_negatives"].height >= 20
    for name, (dirs, _counts) in chains.items():
        tables = _tables(dirs)
        assert tables.keys() == reference.keys()
        for table, df in reference.items():
            try:
                assert_frame_equal(tables[table], df)
            except AssertionError as exc:
                raise AssertionError(f"{name}: {table} differs from one process, one shard") from exc


@pytest.mark.slow  # seven whole chains (~40 s): make test-slow
def test_shard_counts_add_up_to_the_single_run(chains) -> None:
    keys = ("pages", "redirects", "other_namespace", "empty_pages", "pages_without_links", "sentences", "links",
            "sentences_too_short", "sentences_too_long", "links_in_dropped_sentences")
    _, one = chains["multistream/one/p1"]
    for name, (_dirs, counts) in chains.items():
        for lang in ("en", "de"):
            assert {k: sum(c[k] for c in counts[lang]) for k in keys} == {k: one[lang][0][k] for k in keys}, name


def test_multistream_index_gives_the_same_shards(tmp_path: Path) -> None:
    """With the index, ranges cut on listed stream offsets; each shard's rows are those of the scan for headers."""
    path, index = write_format(sample_xml("de"), tmp_path, "multistream", "dewiki")
    settings = WikiSettings(shard_bytes=SMALL, processes=2)
    ranges = shard_ranges(path, SMALL)
    assert len(ranges) >= 4
    for i, rng in enumerate(ranges):
        with_index, without = tmp_path / f"i{i}", tmp_path / f"n{i}"
        with pytest.MonkeyPatch.context() as mp:
            small_work_items(mp)
            build_wiki_shard(settings, path, "de", rng, index, with_index)
            build_wiki_shard(settings, path, "de", rng, None, without)
        for table in ("wiki_sentences", "wiki_links_raw", "wiki_pages_raw"):
            a = pl.read_parquet(with_index / table / "lang=de")
            b = pl.read_parquet(without / table / "lang=de")
            assert_frame_equal(a, b)


# ---------------------------------------------------------------------------------------------------- 3. the DAG


def _wiki_dag(tmp_path: Path, dump: Path, **wiki) -> dict:
    cfg = tiny_config_dict(tmp_path / "data")
    cfg["training"] = {}
    cfg["sources"]["wikipedia"]["dumps"] = {"en": str(dump)}
    cfg["corpora"]["wiki"].update(wiki)
    path = write_config(tmp_path / f"cfg-{len(list(tmp_path.glob('cfg-*')))}.yaml", cfg)
    return build_dag(load_config(path))


def test_dag_shards_a_multistream_dump_and_keys_ignore_processes(tmp_path: Path) -> None:
    dump, index = write_format(sample_xml("en"), tmp_path / "dumps", "multistream", "enwiki")
    base = _wiki_dag(tmp_path, dump, shard_bytes=SMALL, processes=1)
    shards = sorted(n for n in base if n.startswith("wiki_shard.en."))
    assert len(shards) >= 4
    assert [base[n].config["range"] for n in shards] == [list(r) for r in shard_ranges(dump, SMALL)]
    assert base[shards[0]].config["range"][0] == 0 and base[shards[-1]].config["range"][1] == dump.stat().st_size
    assert all(base[n].config["kind"] == "bz2-multistream" for n in shards)
    assert set(base["wiki_extract.en"].deps.values()) == set(shards)
    assert set(shards) <= set(base["hard_negatives"].deps.values())
    assert index in base[shards[0]].files.values()  # the sibling index is found and hashed

    def configs(nodes: dict) -> dict:
        return {n: (node.stage, node.version, node.config, node.files, node.deps) for n, node in nodes.items()}

    more = _wiki_dag(tmp_path, dump, shard_bytes=SMALL, processes=7, range_bytes=1 << 14)
    assert configs(more) == configs(base)
    stricter = _wiki_dag(tmp_path, dump, shard_bytes=SMALL, processes=1, min_sentence_chars=25)
    assert stricter.keys() == base.keys()
    changed = {n for n in base if stricter[n].config != base[n].config}
    assert changed >= {*shards, "wiki_extract.en"}
    assert not changed & {"entities", "hard_negatives", "wikidata"}  # those change through their inputs' hashes


# ---------------------------------------------------------------------------------------------------- 4. truncation


def _grown_xml(copies: int) -> bytes:
    """The en sample with its pages repeated under new titles and ids: > 100 KB, so that bz2 -1 makes several blocks
    (a cut single-stream file can only give back the blocks before the cut)."""
    head, pages, tail = split_dump_xml(sample_xml("en"))
    out = []
    for k in range(copies):
        for p in pages:
            if k:
                p = re.sub(rb"<title>(.*?)</title>", lambda m, k=k: b"<title>%s %d</title>" % (m.group(1), k), p)
                p = re.sub(rb"<id>(\d+)</id>", lambda m, k=k: b"<id>%d</id>" % (int(m.group(1)) + k * 10**6), p)
            out.append(p)
    return head + b"".join(out) + tail


def _page_ends(xml: bytes) -> list[int]:
    return [m.end() for m in re.finditer(rb"</page>", xml)]


def _cut_dump(tmp_path: Path, fmt: str) -> tuple[Path, int]:
    """A cut dump and how many of its pages (in dump order) are complete before the cut, computed independently."""
    if fmt == "multistream":
        xml = sample_xml("en")
        path, index = write_format(xml, tmp_path, "multistream")
        offsets = read_index_offsets(index)
        data = path.read_bytes()
        path.write_bytes(data[:(offsets[3] + offsets[4]) // 2])  # inside the 4th stream of pages
        return path, 3 * 5  # bz2 gives back whole streams: the 3 streams of 5 pages before the cut
    if fmt == "bz2":
        xml = _grown_xml(3)
        path = tmp_path / "enwiki.xml.bz2"
        data = bz2.compress(xml, 1)
        path.write_bytes(data[:len(data) // 2])
        done = len(bz2.BZ2Decompressor().decompress(data[:len(data) // 2]))  # the blocks before the cut
        return path, sum(1 for e in _page_ends(xml) if e <= done)
    xml = sample_xml("en")
    path = tmp_path / "enwiki.xml"
    page = list(re.finditer(rb"<page>", xml))[20]
    path.write_bytes(xml[:page.start() + 300])  # inside the 21st page
    return path, 20


@pytest.mark.parametrize("fmt", ["multistream", "bz2", "xml"])
def test_truncated_dump_names_file_and_last_complete_page(tmp_path: Path, fmt: str) -> None:
    path, n_complete = _cut_dump(tmp_path, fmt)
    full = reference_pages(_grown_xml(3) if fmt == "bz2" else sample_xml("en"))
    assert 5 <= n_complete < len(full) - 5
    last_title = full[n_complete - 1][1]
    with pytest.raises(TruncatedDumpError) as err:
        extract_pairs(path, "en", tmp_path / "strict", processes=2)
    assert str(path) in str(err.value) and repr(last_title) in str(err.value)

    for processes in (1, 2):
        out = tmp_path / f"lenient-{processes}"
        counts = extract_pairs(path, "en", out, processes=processes, settings=WikiSettings(allow_truncated=True))
        assert counts["truncated"] is True and counts["last_complete_page"] == last_title
        kept = pl.read_parquet(out / "wiki_pages_raw" / "lang=en")
        before = full[:n_complete]
        assert kept["page_id"].to_list() == [p[0] for p in before if p[2] == 0 and (p[3] or p[4].strip())]
        assert set(kept.filter("is_redirect")["title"]) == {p[1] for p in before if p[3]}
        assert counts["pages"] + counts["redirects"] == kept.height


def test_single_stream_cut_in_the_first_block_is_a_truncation_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "enwiki.xml.bz2"
    data = bz2.compress(sample_xml("en"))  # one bz2 block: nothing can be given back
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(TruncatedDumpError, match=re.escape(str(path))):
        extract_pairs(path, "en", tmp_path / "o", processes=1)


@pytest.mark.parametrize(("fmt", "how"), [("multistream", "shard"), ("multistream", "ranges"), ("xml", "shard")])
def test_truncated_range_names_the_last_complete_page_of_the_dump(tmp_path: Path, fmt: str, how: str) -> None:
    path, n_complete = _cut_dump(tmp_path, fmt)
    last_title = reference_pages(sample_xml("en"))[n_complete - 1][1]
    data = path.read_bytes()
    with pytest.raises(TruncatedDumpError) as err:
        if how == "shard":  # a DAG shard that starts where the cut stream / page starts
            start = stream_offsets(path)[-1] if fmt == "multistream" else data.rfind(b"<page>")
            build_wiki_shard(WikiSettings(processes=1), path, "en", (start, len(data)), None, tmp_path / "s")
        else:  # the whole file in the parallel ranges of extract_pairs
            extract_pairs(path, "en", tmp_path / "r", processes=2, settings=WikiSettings(range_bytes=SMALL))
    assert repr(last_title) in str(err.value)


# ---------------------------------------------------------------------------------------------------- 5. bad pages


def _page(title: str, pid: int, text: str | None, ns: int = 0) -> bytes:
    body = (f'<text bytes="{len(text)}" xml:space="preserve">{escape(text)}</text>' if text is not None
            else '<text bytes="0" xml:space="preserve" />')
    return (f"  <page>\n    <title>{escape(title)}</title>\n    <ns>{ns}</ns>\n    <id>{pid}</id>\n    <revision>\n"
            f"      <id>{pid + 7}</id>\n      <model>wikitext</model>\n      <format>text/x-wiki</format>\n"
            f"      {body}\n    </revision>\n  </page>\n").encode()


LONG = "This sentence is long enough to be kept by the length filter of the extraction"
BAD_PAGES = {
    # a stray '<' in the page's markup (not in its text): lxml cannot parse this page
    "Broken page": _page("Broken page", 9001, f"{LONG} and links [[Berlin]].").replace(
        b"<ns>0</ns>", b"<ns>0</ns>\n    < oops"),
    "Unclosed title": _page("Unclosed title", 9002, f"{LONG} and links [[Paris]].").replace(b"</title>", b""),
    "Invalid bytes": _page("Invalid bytes", 9003, f"{LONG}, has BAD bytes and links [[Berlin]].").replace(
        b"BAD", b"\xff\xfe"),
    "Strange:Thing": _page("Strange:Thing", 9004, f"{LONG} and links [[Berlin]].", ns=999),
    "Talk:Berlin": _page("Talk:Berlin", 9005, f"{LONG} and links [[Berlin]].", ns=1),
    "Empty page": _page("Empty page", 9006, None),
    "Blank page": _page("Blank page", 9007, "  \n\n "),
    "Plain page": _page("Plain page", 9008, f"{LONG}. It has no link at all, in any of its sentences."),
    "Dangling page": _page("Dangling page", 9009, f"{LONG} and links [[No Such Article Anywhere|nowhere]]."),
    # markup-looking wikitext is escaped in <text>: a normal page
    "Escaped page": _page("Escaped page", 9010, f"{LONG}: a < b, <ref>note</ref> & [[Berlin]] <page> </page>."),
}


def _dirty_and_clean(n_base: int = 14) -> tuple[bytes, bytes]:
    head, pages, tail = split_dump_xml(sample_xml("en"))
    base = pages[:n_base]
    bad = list(BAD_PAGES.values())
    dirty = head + b"".join(base[:5] + bad[:5] + base[5:10] + bad[5:] + base[10:]) + tail
    return dirty, head + b"".join(base) + tail


def _extract_sharded(dump: Path, out: Path, settings: WikiSettings, index: Path | None = None) -> tuple[dict, dict]:
    """``wiki_shard`` per shard then ``wiki_extract``: the summed shard counts and the resolve stats."""
    dirs, counts = [], []
    for i, rng in enumerate(shard_ranges(dump, settings.shard_bytes)):
        d = out / f"shard-{i}"
        d.mkdir(parents=True)
        build_wiki_shard(settings, dump, "en", rng, index, d)
        dirs.append(d)
        counts.append(json.loads((d / "shard_counts.json").read_text()))
    lang = out / "lang"
    lang.mkdir()
    stats = build_wiki_language("en", dirs, counts, settings.max_redirect_hops, lang).stats
    total: dict = {"malformed_titles": [t for c in counts for t in c["malformed_titles"]], "shards": len(dirs),
                   "invalid_utf8_titles": [t for c in counts for t in c["invalid_utf8_titles"]]}
    for k, v in counts[0].items():
        if isinstance(v, int) and not isinstance(v, bool):
            total[k] = sum(c[k] for c in counts)
    return total, stats


def _frames(out: Path) -> dict[str, pl.DataFrame]:
    shard = [str(p) for p in sorted(out.glob("shard-*/"))]
    return {"sentences": pl.concat([pl.read_parquet(f"{s}/wiki_sentences/lang=en") for s in shard]),
            "pages_raw": pl.concat([pl.read_parquet(f"{s}/wiki_pages_raw/lang=en") for s in shard]),
            "links": pl.read_parquet(out / "lang" / "wiki_links" / "lang=en"),
            "drops": pl.read_parquet(out / "lang" / "wiki_drop_counts" / "lang=en")}


@pytest.mark.parametrize("fmt", ["xml", "multistream"])
def test_bad_pages_are_counted_never_fatal(tmp_path: Path, fmt: str) -> None:
    dirty_xml, clean_xml = _dirty_and_clean()
    settings = WikiSettings(shard_bytes=SMALL, processes=2)
    dirty, dirty_index = write_format(dirty_xml, tmp_path / "dirty", fmt)
    clean, clean_index = write_format(clean_xml, tmp_path / "clean", fmt)
    with pytest.MonkeyPatch.context() as mp:
        small_work_items(mp)  # counts of many ranges, merged across processes and shards
        d, d_stats = _extract_sharded(dirty, tmp_path / "d", settings, dirty_index)
        c, c_stats = _extract_sharded(clean, tmp_path / "c", settings, clean_index)
    assert d["shards"] >= 3 and c["malformed_pages"] == c["invalid_utf8_pages"] == c["unknown_namespace"] == 0

    delta = {k: d[k] - c[k] for k in ("pages", "redirects", "malformed_pages", "invalid_utf8_pages",
                                      "unknown_namespace", "other_namespace", "empty_pages", "pages_without_links")}
    assert delta == {"pages": 3,  # plain, dangling, escaped (the page with invalid bytes is dropped)
                     "redirects": 0, "malformed_pages": 2, "invalid_utf8_pages": 1, "unknown_namespace": 1,
                     "other_namespace": 1, "empty_pages": 2, "pages_without_links": 1}
    assert "Broken page" in d["malformed_titles"] and len(d["malformed_titles"]) == 2
    assert d["invalid_utf8_titles"] == ["Invalid bytes"]
    assert d_stats["links_to_missing_pages"] == c_stats["links_to_missing_pages"] + 1

    df, cf = _frames(tmp_path / "d"), _frames(tmp_path / "c")
    # every good page survives with the same rows
    clean_ids = cf["pages_raw"]["page_id"]
    assert_frame_equal(df["pages_raw"].filter(pl.col("page_id").is_in(clean_ids.implode())), cf["pages_raw"])
    assert_frame_equal(df["sentences"].filter(pl.col("page_id").is_in(clean_ids.implode())), cf["sentences"])
    assert set(df["pages_raw"]["page_id"]) - set(clean_ids) == {9008, 9009, 9010}
    # invalid UTF-8: the page dropped whole, no replacement character anywhere
    assert df["sentences"].filter(pl.col("page_id") == 9003).is_empty()
    assert not df["sentences"]["text"].str.contains("\ufffd", literal=True).any()
    escaped = " ".join(df["sentences"].filter(pl.col("page_id") == 9010)["text"])
    assert "a < b" in escaped
    # a link to a page the dump does not have: kept, without a target page, and counted
    dangling = df["links"].filter(pl.col("page_id") == 9009)
    assert dangling.select("surface", "target_raw").rows() == [("nowhere", "No Such Article Anywhere")]
    assert dangling["target_page_id"].is_null().all()
    drops = {(r["stage"], r["reason"]): r["count"] for r in df["drops"].iter_rows(named=True)}
    assert drops[("resolve", "links_to_missing_pages")] == d_stats["links_to_missing_pages"]
    for reason in ("malformed_pages", "invalid_utf8_pages", "unknown_namespace", "empty_pages", "pages_without_links"):
        assert drops[("extract", reason)] == d[reason], reason


def test_parse_fragment_counts_each_kind_of_bad_page() -> None:
    counts = ReadCounts()
    fragment = b"".join(BAD_PAGES.values())
    pages = {p.title: p for p in parse_fragment(fragment, counts)}
    assert set(pages) == set(BAD_PAGES) - {"Broken page", "Unclosed title", "Invalid bytes"}
    assert counts.malformed_pages == 2 and counts.invalid_utf8_pages == 1
    assert "Broken page" in counts.malformed_titles and counts.invalid_utf8_titles == ["Invalid bytes"]
    assert pages["Strange:Thing"].ns == 999
    assert pages["Empty page"].text == "" and "<page>" in pages["Escaped page"].text


@pytest.mark.parametrize("where", ["text", "title", "redirect"])
def test_a_page_with_invalid_utf8_is_dropped_counted_and_logged(tmp_path: Path, where: str,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    """Invalid bytes anywhere in a page (text, title, a redirect page) drop that page whole: no U+FFFD reaches a
    sentence, a title or a link; its neighbours are untouched; ``wiki_drop_counts`` and the log say so."""
    head, _, tail = split_dump_xml(sample_xml("en"))
    good = [_page("Good one", 8001, f"{LONG} and links [[Berlin]]."),
            _page("Good two", 8003, f"{LONG} and links [[Paris|the capital]].")]
    bad = {"text": _page("Damaged", 8002, f"{LONG}, BAD in the text, and links [[Berlin]]."),
           "title": _page("Damaged BAD title", 8002, f"{LONG} and links [[Berlin]]."),
           "redirect": _page("Damaged", 8002, "#REDIRECT [[BAD Berlin]]").replace(
               b"<revision>", b'<redirect title="BAD Berlin" />\n    <revision>')}[where]
    bad = bad.replace(b"BAD", b"caf\xc3(\xe9")  # a broken two-byte sequence and a stray Latin-1 byte
    path = tmp_path / "enwiki.xml"
    path.write_bytes(head + good[0] + bad + good[1] + tail)
    with caplog.at_level("WARNING", logger="polysent.pipelines.wiki"):
        counts = build_wiki_shard(WikiSettings(processes=1), path, "en", (0, path.stat().st_size), None,
                                  tmp_path / "s").stats
    shard = json.loads((tmp_path / "s" / "shard_counts.json").read_text())
    assert shard["invalid_utf8_pages"] == 1 and shard["malformed_pages"] == 0 and counts["pages"] == 2
    assert len(shard["invalid_utf8_titles"]) == 1 and "Damaged" in shard["invalid_utf8_titles"][0]
    pages = pl.read_parquet(tmp_path / "s" / "wiki_pages_raw")
    sentences = pl.read_parquet(tmp_path / "s" / "wiki_sentences")
    links = pl.read_parquet(tmp_path / "s" / "wiki_links_raw")
    assert pages["page_id"].to_list() == [8001, 8003] and pages["is_redirect"].not_().all()
    assert sorted(set(sentences["page_id"])) == [8001, 8003] and sorted(set(links["page_id"])) == [8001, 8003]
    for frame, col in ((pages, "title"), (sentences, "text"), (links, "surface"), (links, "target")):
        assert not frame[col].str.contains("\ufffd", literal=True).any(), col
    drop = {r["reason"]: r["count"] for r in shard["drop_rows"]}
    assert drop["invalid_utf8_pages"] == 1
    assert any("invalid UTF-8" in r.getMessage() and "Damaged" in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------------------------------------------- 6. not a dump


def _not_dumps(tmp_path: Path) -> Iterator[Path]:
    rnd = random.Random(7)
    cases = {
        "page.xml.bz2": bz2.compress(b"<!DOCTYPE html><html><body><p>not a dump</p></body></html>\n"),
        "page.xml.gz": gzip.compress(b"<html><body>not a dump either</body></html>"),
        "random.xml.bz2": rnd.randbytes(5000),
        "corrupt.xml.bz2": b"BZh9" + rnd.randbytes(5000),  # a bz2 header, then garbage
        "notes.xml": b"just some text, no XML at all\n" * 10,
        "other.xml": b'<?xml version="1.0"?><rss><channel><title>feed</title></channel></rss>',
    }
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        yield path


def test_a_file_that_is_not_a_dump_is_a_format_error_naming_it(tmp_path: Path) -> None:
    for path in _not_dumps(tmp_path):
        with pytest.raises(DumpFormatError, match=re.escape(str(path))):
            extract_pairs(path, "en", tmp_path / f"out-{path.name}", processes=1)
        with pytest.raises(DumpFormatError, match=re.escape(str(path))):
            read_dump(path)
