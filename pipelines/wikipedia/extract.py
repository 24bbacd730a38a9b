"""Stage ``wiki_extract``: Wikipedia dumps → ``wiki_pages``, ``wiki_sentences``, ``wiki_links``.

Per dump: main-namespace pages are cleaned (``wikitext``), split into sentences with ICU (``sentences``) and every
hyperlink becomes a (sentence, entity) pair, as in EASE. Redirect pages are recorded; link targets are resolved through
redirect chains and mapped to Wikidata QIDs by sitelink when an entities artifact is given. Rows are buffered and
written in Parquet parts of bounded size, partitioned by language (``lang=xx/part-N.parquet``).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import polars as pl
from pydantic import BaseModel, ConfigDict, Field
from rich.progress import Progress

from pipelines.wikipedia.dump_reader import read_dump
from pipelines.wikipedia.sentences import sentence_spans
from pipelines.wikipedia.wikitext import LinkSpan, normalize_title, parse_wikitext
from warehouse.artifacts import StageResult

log = logging.getLogger("polysent.pipelines.wiki")
STAGE_VERSION = "2"  # 2: inline text templates keep their last positional parameter

PAGE_SCHEMA = {"page_id": pl.Int64, "title": pl.Utf8, "is_redirect": pl.Boolean, "redirect_to": pl.Utf8,
               "infoboxes": pl.List(pl.Utf8), "n_sentences": pl.Int32}
SENT_SCHEMA = {"page_id": pl.Int64, "sent_id": pl.Int32, "paragraph": pl.Int32, "text": pl.Utf8}
LINK_SCHEMA = {"page_id": pl.Int64, "sent_id": pl.Int32, "start": pl.Int32, "end": pl.Int32,
               "surface": pl.Utf8, "target": pl.Utf8}


class WikiSettings(BaseModel):
    """Sentence filters and output sizing for the Wikipedia extraction."""

    model_config = ConfigDict(extra="forbid")
    min_sentence_chars: int = Field(20, ge=1, description="shorter sentences are dropped (with their links)")
    max_sentence_chars: int = Field(1000, ge=10)
    max_redirect_hops: int = Field(5, ge=0)
    rows_per_part: int = Field(500_000, ge=1000, description="sentences buffered before a Parquet part is written")


class _LangWriter:
    def __init__(self, out: Path, lang: str, rows_per_part: int) -> None:
        self.out, self.lang, self.rows_per_part = out, lang, rows_per_part
        self.parts = 0
        self.sents: list[dict] = []
        self.links: list[dict] = []

    def flush(self, force: bool = False) -> None:
        if not self.sents or (not force and len(self.sents) < self.rows_per_part):
            return
        for table, rows, schema in (("wiki_sentences", self.sents, SENT_SCHEMA), ("wiki_links_raw", self.links,
                                                                                  LINK_SCHEMA)):
            d = self.out / table / f"lang={self.lang}"
            d.mkdir(parents=True, exist_ok=True)
            pl.DataFrame(rows, schema=schema).write_parquet(d / f"part-{self.parts:05d}.parquet")
        self.parts += 1
        self.sents, self.links = [], []


def extract_dump(dump: Path, lang: str, settings: WikiSettings, out: Path, progress: Progress | None = None) -> dict:
    """Write one dump's sentences and raw links under ``out``; return its pages frame and counts."""
    site, pages = read_dump(dump)
    if site.lang and site.lang != lang:
        log.warning("%s: siteinfo says language %r, configured as %r (using %r)", dump, site.lang, lang, lang)
    extra = {site.namespaces[k] for k in (6, 14) if k in site.namespaces}
    writer = _LangWriter(out, lang, settings.rows_per_part)
    page_rows: list[dict] = []
    counts = {"pages": 0, "redirects": 0, "skipped_other_namespace": 0, "sentences": 0, "links": 0,
              "dropped_sentences": 0}
    task = progress.add_task(f"wiki {lang}", total=None) if progress else None
    for page in pages:
        if page.ns != 0:
            counts["skipped_other_namespace"] += 1
            continue
        if page.redirect is not None:
            counts["redirects"] += 1
            page_rows.append({"page_id": page.page_id, "title": page.title, "is_redirect": True,
                              "redirect_to": page.redirect, "infoboxes": [], "n_sentences": 0})
            continue
        parsed = parse_wikitext(page.text, extra)
        sent_id = 0
        for p_idx, para in enumerate(parsed.paragraphs):
            links = sorted(para.links, key=lambda x: x.start)
            li = 0
            for s, e in merge_across_links(sentence_spans(para.text, lang), links):
                while li < len(links) and links[li].start < s:
                    li += 1
                in_sent = []
                while li < len(links) and links[li].start < e:
                    in_sent.append(links[li])
                    li += 1
                if not settings.min_sentence_chars <= e - s <= settings.max_sentence_chars:
                    counts["dropped_sentences"] += 1
                    continue
                writer.sents.append({"page_id": page.page_id, "sent_id": sent_id, "paragraph": p_idx,
                                     "text": para.text[s:e]})
                for ln in in_sent:
                    writer.links.append({"page_id": page.page_id, "sent_id": sent_id, "start": ln.start - s,
                                         "end": min(ln.end, e) - s, "surface": ln.surface, "target": ln.target})
                counts["links"] += len(in_sent)
                sent_id += 1
        counts["sentences"] += sent_id
        counts["pages"] += 1
        page_rows.append({"page_id": page.page_id, "title": page.title, "is_redirect": False, "redirect_to": None,
                          "infoboxes": parsed.infoboxes, "n_sentences": sent_id})
        writer.flush()
        if progress is not None and task is not None:
            progress.update(task, advance=1)
    writer.flush(force=True)
    pages_df = pl.DataFrame(page_rows, schema=PAGE_SCHEMA)
    d = out / "wiki_pages" / f"lang={lang}"
    d.mkdir(parents=True, exist_ok=True)
    pages_df.write_parquet(d / "part-00000.parquet")
    log.info("%s (%s): %d pages, %d redirects, %d sentences, %d links; skipped %d pages outside the main namespace,"
             " %d sentences outside the length limits", dump, lang, counts["pages"], counts["redirects"],
             counts["sentences"], counts["links"], counts["skipped_other_namespace"], counts["dropped_sentences"])
    return counts


def merge_across_links(spans: Iterable[tuple[int, int]], links: list[LinkSpan]) -> Iterator[tuple[int, int]]:
    """Join consecutive sentences when a break falls strictly inside a link span.

    ICU breaks after abbreviations such as "St." — inside ``[[St. Petersburg]]`` that would cut the surface of a link
    in two and pair a half-name with the entity. A link span is atomic, so such breaks are dropped.
    """
    pending: tuple[int, int] | None = None
    for s, e in spans:
        if pending is not None:
            s = pending[0]
            pending = None
        if any(ln.start < e < ln.end for ln in links):
            pending = (s, e)
            continue
        yield s, e
    if pending is not None:
        yield pending


def resolve_links(out: Path, langs: list[str], sitelinks: Path | None, max_hops: int) -> dict[str, int]:
    """Resolve raw link targets through redirects and to QIDs; write ``wiki_links`` per language."""
    stats = {"links_with_qid": 0, "links_without_qid": 0}
    qids = pl.read_parquet(sitelinks) if sitelinks else None
    for lang in langs:
        pages = pl.read_parquet(out / "wiki_pages" / f"lang={lang}")
        redirects = pages.filter(pl.col("is_redirect")).select(
            pl.col("title"), pl.col("redirect_to").map_elements(normalize_title, return_dtype=pl.Utf8))
        raw = pl.read_parquet(out / "wiki_links_raw" / f"lang={lang}")
        resolved = raw.with_columns(pl.col("target").alias("target_resolved"))
        for _ in range(max_hops):
            resolved = resolved.join(redirects, left_on="target_resolved", right_on="title", how="left").with_columns(
                pl.coalesce("redirect_to", "target_resolved").alias("target_resolved")).drop("redirect_to")
        articles = pages.filter(~pl.col("is_redirect")).select(
            pl.col("title"), pl.col("page_id").alias("target_page_id"))
        resolved = resolved.join(articles, left_on="target_resolved", right_on="title", how="left")
        if qids is not None:
            q = qids.filter(pl.col("lang") == lang).select("title", "qid")
            resolved = resolved.join(q, left_on="target_resolved", right_on="title", how="left")
        else:
            resolved = resolved.with_columns(pl.lit(None, pl.Utf8).alias("qid"))
        resolved = resolved.with_columns(
            pl.coalesce("qid", pl.lit(f"{lang}:") + pl.col("target_resolved")).alias("entity"))
        d = out / "wiki_links" / f"lang={lang}"
        d.mkdir(parents=True, exist_ok=True)
        resolved.sort("page_id", "sent_id", "start").write_parquet(d / "part-00000.parquet")
        n_q = resolved["qid"].is_not_null().sum()
        stats["links_with_qid"] += int(n_q)
        stats["links_without_qid"] += len(resolved) - int(n_q)
    return stats


def build_wiki(settings: WikiSettings, dumps: Mapping[str, Path], out: Path,
               entities: Path | None = None) -> StageResult:
    """Stage entry point. ``dumps`` maps a language code to its dump file; ``entities`` is a wikidata artifact."""
    stats: dict[str, dict] = {}
    with Progress(transient=True) as progress:
        for lang, dump in sorted(dumps.items()):
            stats[lang] = extract_dump(Path(dump), lang, settings, out, progress)
    sitelinks = entities / "entity_sitelinks.parquet" if entities else None
    link_stats = resolve_links(out, sorted(dumps), sitelinks, settings.max_redirect_hops)
    shutil.rmtree(out / "wiki_links_raw")
    return StageResult(
        tables={"wiki_pages": "wiki_pages", "wiki_sentences": "wiki_sentences", "wiki_links": "wiki_links"},
        stats={"per_language": stats, **link_stats},
    )
