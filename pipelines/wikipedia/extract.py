"""Sentence–entity pair extraction from one Wikipedia dump, in byte ranges processed by parallel processes.

Per page of the main namespace: the wikitext is cleaned (``wikitext``), each paragraph is split into sentences with
ICU (``sentences``; a break inside a link span is dropped) and every hyperlink of a kept sentence becomes a row of
``wiki_links_raw`` — EASE's (sentence, entity) pair before redirects and entity keys are resolved (``resolve``).
Redirect pages are recorded in ``wiki_pages_raw``; other namespaces, empty pages, malformed pages, pages with invalid
UTF-8 (dropped, not repaired: see ``dump_reader``) and sentences outside the length limits are counted, never fatal.

Work is cut into byte ranges (``dump_reader.plan_ranges``): each worker process reads, decompresses and parses its
own range and writes its own Parquet parts, named by the range index, so the output does not depend on the number
of processes or on how a dump is sharded across DAG nodes. Single-stream bz2/gz dumps cannot be seeked: the parent
decompresses and hands fragments of whole pages to the workers (at most ``2 × processes`` in flight, so memory stays
bounded). Peak memory is one fragment (4 MiB of XML) plus one part's buffers per process.
"""

from __future__ import annotations

import itertools
import json
import logging
import multiprocessing as mp
import os
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from contract import StageResult
from pipelines.wikipedia.dump_reader import (
    ByteRange,
    DumpKind,
    ReadCounts,
    SiteInfo,
    dump_kind,
    iter_fragments,
    parse_fragment,
    plan_ranges,
    read_siteinfo,
)
from pipelines.wikipedia.sentences import sentence_spans
from pipelines.wikipedia.wikitext import LinkSpan, parse_wikitext
from pipelines.worker_lifetime import die_with

log = logging.getLogger("polysent.pipelines.wiki")
STAGE_VERSION = "5"  # 3: byte-range extraction, regex cleaner, link trails per language, drop counts;
# 5: pages with invalid UTF-8 dropped (were kept with U+FFFD); infoboxes only infobox templates, case-normalised

SENT_SCHEMA = pa.schema([("page_id", pa.int64()), ("sent_id", pa.int32()), ("paragraph", pa.int32()),
                         ("text", pa.string())])
LINK_SCHEMA = pa.schema([("page_id", pa.int64()), ("sent_id", pa.int32()), ("link_no", pa.int32()),
                         ("start", pa.int32()), ("end", pa.int32()), ("surface", pa.string()),
                         ("target", pa.string())])
PAGE_SCHEMA = pa.schema([("page_id", pa.int64()), ("title", pa.string()), ("is_redirect", pa.bool_()),
                         ("redirect_to", pa.string()), ("infoboxes", pa.list_(pa.string())),
                         ("n_sentences", pa.int32()), ("n_links", pa.int32()),
                         ("link_targets", pa.list_(pa.string()))])


class WikiSettings(BaseModel):
    """Sentence filters and execution of the Wikipedia extraction.

    ``processes``, ``range_bytes`` and ``shard_bytes`` change how the work is cut, never the rows: they are left out
    of cache keys.
    """

    model_config = ConfigDict(extra="forbid")
    min_sentence_chars: int = Field(20, ge=1)
    """shorter sentences are dropped (their links are counted)"""
    max_sentence_chars: int = Field(1000, ge=10)
    """longer sentences are dropped"""
    max_redirect_hops: int = Field(5, ge=0)
    """redirect chains longer than this stay unresolved"""
    suppress_abbreviations: bool = False
    """ICU's standard abbreviation suppressions (no break after 'Mr.'); off = polyglot's output"""
    allow_truncated: bool = False
    """a truncated dump keeps its complete pages and reports the cut instead of failing"""
    processes: int = Field(2, ge=1, exclude=True)
    """worker processes per shard"""
    range_bytes: int = Field(32 << 20, ge=1 << 12, exclude=True)
    """bytes of dump file (compressed for bz2) per work item"""
    shard_bytes: int = Field(4 << 30, ge=1 << 12, exclude=True)
    """bytes of dump file per DAG shard (a separate task, spreadable by Dask)"""


@dataclass
class ExtractCounts:
    pages: int = 0
    redirects: int = 0
    other_namespace: int = 0
    unknown_namespace: int = 0
    empty_pages: int = 0
    pages_without_links: int = 0
    malformed_pages: int = 0
    invalid_utf8_pages: int = 0
    sentences: int = 0
    links: int = 0
    sentences_too_short: int = 0
    sentences_too_long: int = 0
    links_in_dropped_sentences: int = 0
    xml_bytes: int = 0
    truncated: bool = False
    last_complete_page: str | None = None
    malformed_titles: list[str] = field(default_factory=list)
    invalid_utf8_titles: list[str] = field(default_factory=list)

    def add(self, other: ExtractCounts) -> None:
        for k, v in asdict(other).items():
            if isinstance(v, bool):
                setattr(self, k, getattr(self, k) or v)
            elif isinstance(v, int):
                setattr(self, k, getattr(self, k) + v)
        self.malformed_titles.extend(other.malformed_titles[: max(0, 10 - len(self.malformed_titles))])
        self.invalid_utf8_titles.extend(other.invalid_utf8_titles[: max(0, 10 - len(self.invalid_utf8_titles))])
        self.last_complete_page = other.last_complete_page or self.last_complete_page

    def drop_rows(self, lang: str) -> list[dict]:
        reasons = ("other_namespace", "unknown_namespace", "empty_pages", "pages_without_links", "malformed_pages",
                   "invalid_utf8_pages", "sentences_too_short", "sentences_too_long", "links_in_dropped_sentences")
        return [{"lang": lang, "stage": "extract", "reason": r, "count": getattr(self, r)} for r in reasons]


@dataclass(frozen=True)
class _Context:
    lang: str
    settings: dict
    drop_prefixes: frozenset[str]
    other_namespaces: frozenset[str]
    known_namespaces: frozenset[int]
    out: str


def _context(site: SiteInfo, lang: str, settings: WikiSettings, out: Path) -> _Context:
    drop = frozenset(site.namespaces[k].lower() for k in (6, 14, -2) if site.namespaces.get(k))
    other = frozenset(v.lower() for k, v in site.namespaces.items() if k not in (0, 6, 14, -2) and v)
    return _Context(lang, settings.model_dump(), drop, other, frozenset(site.namespaces), str(out))


class _Parts:
    """Column buffers of one work item, written as row groups of one Parquet file per table
    (``<table>/lang=<xx>/part-<item>.parquet``): a worker holds at most ``ROWS`` sentences, whatever the range size."""

    ROWS = 20_000

    def __init__(self, ctx: _Context, name: str) -> None:
        self.ctx, self.name = ctx, name
        self.sent: dict[str, list] = {k: [] for k in SENT_SCHEMA.names}
        self.link: dict[str, list] = {k: [] for k in LINK_SCHEMA.names}
        self.page: dict[str, list] = {k: [] for k in PAGE_SCHEMA.names}
        self.writers: dict[str, pq.ParquetWriter] = {}

    def maybe_flush(self) -> None:
        if len(self.sent["page_id"]) >= self.ROWS:
            self.flush()

    def flush(self) -> None:
        if not self.page["page_id"] and self.writers:
            return
        for table, cols, schema in (("wiki_sentences", self.sent, SENT_SCHEMA),
                                    ("wiki_links_raw", self.link, LINK_SCHEMA),
                                    ("wiki_pages_raw", self.page, PAGE_SCHEMA)):
            writer = self.writers.get(table)
            if writer is None:
                folder = Path(self.ctx.out) / table / f"lang={self.ctx.lang}"
                folder.mkdir(parents=True, exist_ok=True)
                writer = self.writers[table] = pq.ParquetWriter(folder / f"part-{self.name}.parquet", schema,
                                                                compression="zstd")
            writer.write_table(pa.Table.from_pydict(cols, schema=schema))
            for v in cols.values():
                v.clear()

    def close(self) -> None:
        self.flush()
        for writer in self.writers.values():
            writer.close()


def _process_fragment(fragment: bytes, ctx: _Context, parts: _Parts, counts: ExtractCounts,
                      rc: ReadCounts) -> None:
    s = ctx.settings
    lo, hi = s["min_sentence_chars"], s["max_sentence_chars"]
    lang = ctx.lang
    suppress = s["suppress_abbreviations"]
    counts.xml_bytes += len(fragment)
    sent, link, page_cols = parts.sent, parts.link, parts.page
    for page in parse_fragment(fragment, rc):
        if page.ns != 0:
            if page.ns in ctx.known_namespaces:
                counts.other_namespace += 1
            else:
                counts.unknown_namespace += 1
            continue
        if page.redirect is not None:
            counts.redirects += 1
            _page_row(page_cols, page.page_id, page.title, True, page.redirect, [], 0, 0, [])
            continue
        if not page.text.strip():
            counts.empty_pages += 1
            continue
        parsed = parse_wikitext(page.text, ctx.drop_prefixes, lang, ctx.other_namespaces)
        sent_id = 0
        n_links = 0
        targets: dict[str, None] = {}
        pid = page.page_id
        for p_idx, para in enumerate(parsed.paragraphs):
            links = para.links
            for ln in links:
                targets[ln.target] = None
            li = 0
            for a, b in merge_across_links(sentence_spans(para.text, lang, suppress_abbreviations=suppress), links):
                while li < len(links) and links[li].start < a:
                    li += 1
                first = li
                while li < len(links) and links[li].start < b:
                    li += 1
                if not lo <= b - a <= hi:
                    if b - a < lo:
                        counts.sentences_too_short += 1
                    else:
                        counts.sentences_too_long += 1
                    counts.links_in_dropped_sentences += li - first
                    continue
                sent["page_id"].append(pid)
                sent["sent_id"].append(sent_id)
                sent["paragraph"].append(p_idx)
                sent["text"].append(para.text[a:b])
                for k in range(first, li):
                    ln = links[k]
                    link["page_id"].append(pid)
                    link["sent_id"].append(sent_id)
                    link["link_no"].append(k - first)
                    link["start"].append(ln.start - a)
                    link["end"].append(min(ln.end, b) - a)
                    link["surface"].append(ln.surface)
                    link["target"].append(ln.target)
                n_links += li - first
                sent_id += 1
        counts.pages += 1
        counts.sentences += sent_id
        counts.links += n_links
        if not targets:
            counts.pages_without_links += 1
        _page_row(page_cols, pid, page.title, False, None, parsed.infoboxes, sent_id, n_links, list(targets))
        parts.maybe_flush()


def _page_row(cols: dict[str, list], pid: int, title: str, is_redirect: bool, redirect_to: str | None,
              infoboxes: list[str], n_sent: int, n_links: int, targets: list[str]) -> None:
    cols["page_id"].append(pid)
    cols["title"].append(title)
    cols["is_redirect"].append(is_redirect)
    cols["redirect_to"].append(redirect_to)
    cols["infoboxes"].append(infoboxes)
    cols["n_sentences"].append(n_sent)
    cols["n_links"].append(n_links)
    cols["link_targets"].append(targets)


def merge_across_links(spans: Iterable[tuple[int, int]], links: list[LinkSpan]) -> Iterator[tuple[int, int]]:
    """Join consecutive sentences when a break falls strictly inside a link span.

    ICU breaks after abbreviations such as "St." — inside ``[[St. Petersburg]]`` that would cut the surface of a link
    in two and pair a half-name with the entity. A link span is atomic, so such breaks are dropped. Links are sorted
    and disjoint, so one pointer walks them alongside the breaks.
    """
    if not links:
        yield from spans
        return
    j, n = 0, len(links)
    pending: int | None = None
    e = 0
    for s, e in spans:
        if pending is not None:
            s = pending
            pending = None
        while j < n and links[j].end <= e:
            j += 1
        if j < n and links[j].start < e:
            pending = s
            continue
        yield s, e
    if pending is not None:
        yield pending, e


# ---------------------------------------------------------------------------------------------------- workers


def _run_range(path: str, kind: DumpKind, rng: ByteRange, ctx: _Context) -> tuple[ExtractCounts, ReadCounts]:
    counts, rc = ExtractCounts(), ReadCounts()
    parts = _Parts(ctx, f"{rng.index:015d}")
    for fragment in iter_fragments(Path(path), rng, kind, rc, ctx.settings["allow_truncated"]):
        _process_fragment(fragment, ctx, parts, counts, rc)
    parts.close()
    return counts, rc


def _run_fragment(fragment: bytes, index: int, ctx: _Context) -> tuple[ExtractCounts, ReadCounts]:
    counts, rc = ExtractCounts(), ReadCounts()
    parts = _Parts(ctx, f"{index:015d}")
    _process_fragment(fragment, ctx, parts, counts, rc)
    parts.close()
    return counts, rc


def _pool(processes: int) -> ProcessPoolExecutor:
    """Workers by ``fork`` (cheap) unless this process runs other threads (Prefect's task runner, a Dask worker):
    forking a threaded process can deadlock on a lock held by another thread, so then ``forkserver``. Each worker
    dies with this process (``worker_lifetime.die_with``): a ``kill -9`` of the run leaves no worker blocked on its
    task pipe, nor, under ``forkserver``, the server that the workers keep alive."""
    methods = mp.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        method = "fork"
    else:
        method = "forkserver" if "forkserver" in methods else "spawn"
    log.debug("extraction pool: %d worker processes by %s", processes, method)
    return ProcessPoolExecutor(processes, mp_context=mp.get_context(method), initializer=die_with,
                               initargs=(os.getpid(),))


def extract_pairs(dump: Path, lang: str, out: Path, *, processes: int = 2, index: Path | None = None,
                  settings: WikiSettings | None = None, byte_range: tuple[int, int] | None = None,
                  site: SiteInfo | None = None) -> dict:
    """Extract sentences, raw links and pages of ``dump`` (only pages owned by ``byte_range`` when given) into
    ``out/{wiki_sentences,wiki_links_raw,wiki_pages_raw}/lang=<lang>/``. Returns counts (``ExtractCounts`` as a dict
    plus seconds and ranges)."""
    t0 = time.perf_counter()
    dump = Path(dump)
    settings = settings or WikiSettings()
    site = site or read_siteinfo(dump)
    if site.lang and site.lang != lang:
        log.warning("%s: siteinfo says language %r, configured as %r (using %r)", dump, site.lang, lang, lang)
    kind = dump_kind(dump)
    start, end = byte_range or (0, dump.stat().st_size)
    processes = max(1, min(processes, os.cpu_count() or 1))
    # at least 4 work items per process (load balance), at most range_bytes each
    target = min(settings.range_bytes, max(1 << 20, (end - start) // (4 * processes)))
    ranges = plan_ranges(dump, target, start, end, index)
    ctx = _context(site, lang, settings, out)
    counts, rc = ExtractCounts(), ReadCounts()
    if not ranges:
        pass
    elif kind in ("bz2", "gz"):
        _fan_out_fragments(dump, kind, ctx, settings, processes, counts, rc)
    elif processes == 1 or len(ranges) == 1:
        for rng in ranges:
            c, r = _run_range(str(dump), kind, rng, ctx)
            counts.add(c)
            rc.merge(r)
    else:
        with _pool(processes) as pool:
            for c, r in pool.map(_run_range, [str(dump)] * len(ranges), [kind] * len(ranges), ranges,
                                 [ctx] * len(ranges)):
                counts.add(c)
                rc.merge(r)
    counts.malformed_pages += rc.malformed_pages
    counts.invalid_utf8_pages += rc.invalid_utf8_pages
    counts.malformed_titles = rc.malformed_titles[:10]
    counts.invalid_utf8_titles = rc.invalid_utf8_titles[:10]
    counts.truncated = rc.truncated
    counts.last_complete_page = rc.last_complete_page
    result = asdict(counts)
    result.update(seconds=time.perf_counter() - t0, ranges=len(ranges), kind=kind, processes=processes)
    log.info("%s (%s, %s, %d ranges, %d processes): %d pages, %d redirects, %d sentences, %d links in %.1f s; "
             "skipped %d pages outside the main namespace (%d unknown), %d empty, %d malformed, %d with invalid "
             "UTF-8, %d sentences outside the length limits", dump.name, lang, kind, len(ranges), processes,
             counts.pages, counts.redirects, counts.sentences, counts.links, result["seconds"],
             counts.other_namespace + counts.unknown_namespace, counts.unknown_namespace, counts.empty_pages,
             counts.malformed_pages, counts.invalid_utf8_pages, counts.sentences_too_short + counts.sentences_too_long)
    if counts.malformed_titles:
        log.warning("%s: %d malformed pages skipped, first: %s", dump.name, counts.malformed_pages,
                    ", ".join(counts.malformed_titles[:5]))
    if counts.invalid_utf8_pages:
        log.warning("%s: %d pages with invalid UTF-8 dropped (not repaired: U+FFFD would enter their sentences), "
                    "first: %s", dump.name, counts.invalid_utf8_pages, ", ".join(counts.invalid_utf8_titles[:5]))
    return result


def _fan_out_fragments(dump: Path, kind: DumpKind, ctx: _Context, settings: WikiSettings, processes: int,
                       counts: ExtractCounts, rc: ReadCounts) -> None:
    fragments = iter_fragments(dump, ByteRange(0, 0, dump.stat().st_size), kind, rc, settings.allow_truncated)
    first = next(fragments, None)
    second = next(fragments, None) if first is not None else None
    fragments = itertools.chain([f for f in (first, second) if f is not None], fragments)
    if processes == 1 or second is None:  # one fragment (a small dump): no pool to start
        for i, fragment in enumerate(fragments):
            c, r = _run_fragment(fragment, i, ctx)
            counts.add(c)
            rc.merge(r)
        return
    with _pool(processes) as pool:
        pending: set[Future] = set()
        for i, fragment in enumerate(fragments):
            if len(pending) >= 2 * processes:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    c, r = f.result()
                    counts.add(c)
                    rc.merge(r)
            pending.add(pool.submit(_run_fragment, fragment, i, ctx))
        for f in pending:
            c, r = f.result()
            counts.add(c)
            rc.merge(r)


def shard_ranges(dump: Path, shard_bytes: int, kind: DumpKind | None = None) -> list[tuple[int, int]]:
    """Byte ranges of the DAG's shards of one dump: one per ``shard_bytes`` for seekable dumps (plain XML,
    multistream bz2), the whole file for single-stream bz2/gz. ``kind`` saves detecting it again."""
    size = Path(dump).stat().st_size
    if (kind or dump_kind(Path(dump))) in ("bz2", "gz") or size <= shard_bytes:
        return [(0, size)]
    return [(a, min(a + shard_bytes, size)) for a in range(0, size, shard_bytes)]


def build_wiki_shard(settings: WikiSettings, dump: Path, lang: str, byte_range: tuple[int, int],
                     index: Path | None, out: Path) -> StageResult:
    """Stage ``wiki_shard``: the pages of one byte range of a dump (see ``extract_pairs``)."""
    counts = extract_pairs(dump, lang, out, processes=settings.processes, index=index, settings=settings,
                           byte_range=byte_range)
    drop_rows = ExtractCounts(**{k: v for k, v in counts.items() if k in ExtractCounts.__dataclass_fields__}
                              ).drop_rows(lang)
    counts["drop_rows"] = drop_rows
    for table in ("wiki_sentences", "wiki_links_raw", "wiki_pages_raw"):
        (out / table / f"lang={lang}").mkdir(parents=True, exist_ok=True)
    # what ran how long, and with how many processes, is in the manifest's stats: the artifact holds only what
    # the input determines, so reruns are byte-identical
    stable = {k: v for k, v in counts.items() if k not in ("seconds", "processes", "ranges")}
    (out / "shard_counts.json").write_text(json.dumps(stable, indent=1, sort_keys=True, default=str),
                                           encoding="utf-8")
    return StageResult(tables={"wiki_sentences": "wiki_sentences"}, stats={
        k: counts[k] for k in ("pages", "redirects", "sentences", "links", "xml_bytes", "malformed_pages",
                               "truncated", "last_complete_page", "seconds")})
