"""Stage ``wiki_extract`` (per language): join a dump's shards and resolve link targets through redirects.

Inputs are the shard artifacts of one dump (``wiki_shard``: ``wiki_pages_raw``, ``wiki_links_raw``, ``wiki_sentences``
and their drop counts). Redirect chains are followed to their final article (at most ``max_redirect_hops``; cycles
and longer chains stay unresolved and are counted), then every link gets the article it points to — or none, when
the target does not exist in the dump (counted, kept in ``wiki_links`` with a null ``target_page_id``). A link to a
redirect whose chain ends at a title the dump has no page for gets that final title as its ``target`` (and a null
``target_page_id``): the ``entities`` stage can still name its entity by the title's Wikidata sitelink.

Outputs: ``wiki_pages`` (articles and redirects, the final redirect target), ``wiki_links`` (resolved),
``wiki_page_targets`` (every title linked anywhere on a page, including from sentences the length filter dropped, with
its article's ``target_page_id`` — null when the dump has no page for it: the same-page exclusion of hard negatives
needs them all, a linked entity being known by its page or by its Wikidata sitelink) and ``wiki_drop_counts``. Joins
run lazily in polars' streaming engine over the shards' Parquet parts; the title maps (articles + redirects) are the
only in-memory tables.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from contract import StageResult
from pipelines.wikipedia.artifact_tables import scan_shards
from pipelines.wikipedia.wikitext import normalize_title

log = logging.getLogger("polysent.pipelines.wiki")
STAGE_VERSION = "3"  # 2: wiki_pages sorted by page id (byte-identical reruns); 3: wiki_page_targets keeps the titles
#   the dump has no page for (null target_page_id), and a link through a redirect to such a title gets the final title


def redirect_targets(pages: pl.DataFrame, max_hops: int) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, int]]:
    """Redirect chains followed up to ``max_hops``: ``title → final`` for every redirect whose chain ends at an article
    of the dump, and ``title → final`` for those whose chain ends at a title the dump has no page for (neither an
    article nor a redirect); cycles and longer chains are in neither."""
    redirects = pages.filter(pl.col("is_redirect")).select(
        "title", pl.col("redirect_to").map_elements(normalize_title, return_dtype=pl.Utf8).alias("to"))
    articles = pages.filter(~pl.col("is_redirect")).select("title")
    step = redirects.rename({"to": "final"})
    for _ in range(max_hops):
        nxt = step.join(redirects.rename({"title": "final", "to": "next"}), on="final", how="left")
        if nxt["next"].null_count() == nxt.height:
            break
        step = nxt.select("title", pl.coalesce("next", "final").alias("final"))
    step = step.with_columns(pl.col("final").is_in(articles["title"].implode()).alias("ok"),
                             pl.col("final").is_in(redirects["title"].implode()).alias("unfinished"))
    to_missing = step.filter(~pl.col("ok") & ~pl.col("unfinished") & (pl.col("final").str.len_chars() > 0))
    stats = {"redirects": redirects.height,
             "redirects_to_missing_or_cyclic": int((~step["ok"]).sum()),
             "redirects_to_missing_pages": to_missing.height}
    return step.filter("ok").select("title", "final"), to_missing.select("title", "final"), stats


def resolve_language(shards: Sequence[Path], lang: str, max_hops: int, out: Path) -> dict[str, int]:
    # every column but the link-target lists (the largest by far), which are streamed below
    pages_raw = scan_shards(shards, "wiki_pages_raw", lang).drop("link_targets").collect()
    dup = pages_raw.height - pages_raw["page_id"].n_unique()
    if dup:
        log.warning("%s: %d duplicate page ids across shards (kept the first)", lang, dup)
        pages_raw = pages_raw.unique("page_id", keep="first", maintain_order=True)
    redirects, to_missing, stats = redirect_targets(pages_raw, max_hops)
    articles = pages_raw.filter(~pl.col("is_redirect")).select("title", pl.col("page_id").alias("target_page_id"))
    # one map: any title (article or redirect) → (final title, article id; null for a redirect to a missing page)
    title_map = pl.concat([
        articles.select("title", pl.col("title").alias("resolved"), "target_page_id"),
        redirects.join(articles, left_on="final", right_on="title").select(
            "title", pl.col("final").alias("resolved"), "target_page_id"),
        to_missing.select("title", pl.col("final").alias("resolved"), pl.lit(None, pl.Int64).alias("target_page_id")),
    ])
    pages = pages_raw.join(redirects.rename({"final": "redirect_final"}), on="title", how="left").join(
        articles.rename({"title": "redirect_final", "target_page_id": "redirect_page_id"}), on="redirect_final",
        how="left").select(
        pl.lit(lang).alias("lang"), "page_id", "title", "is_redirect",
        pl.when(pl.col("is_redirect")).then(pl.col("redirect_final")).alias("redirect_to"), "redirect_page_id",
        "infoboxes", "n_sentences", "n_links").sort("page_id")  # joins do not keep row order
    _write(pages, out / "wiki_pages" / f"lang={lang}")

    links = (scan_shards(shards, "wiki_links_raw", lang)
             .join(title_map.lazy(), left_on="target", right_on="title", how="left")
             .select("page_id", "sent_id", "link_no", "start", "end", "surface",
                     pl.col("target").alias("target_raw"),
                     pl.coalesce("resolved", "target").alias("target"), "target_page_id",
                     (pl.col("resolved").is_not_null() & (pl.col("resolved") != pl.col("target"))).alias(
                         "via_redirect"))
             .sort("page_id", "sent_id", "link_no"))
    folder = out / "wiki_links" / f"lang={lang}"
    folder.mkdir(parents=True, exist_ok=True)
    links.sink_parquet(folder / "part-00000.parquet", compression="zstd")
    counts = pl.scan_parquet(folder / "part-00000.parquet").select(
        pl.len().alias("links"), pl.col("target_page_id").is_null().sum().alias("missing"),
        pl.col("via_redirect").sum().alias("via_redirect")).collect().row(0, named=True)

    # every linked title, with its article or none (a title linked but not in the dump may still be an entity)
    targets = (scan_shards(shards, "wiki_pages_raw", lang).filter(~pl.col("is_redirect"))
               .select("page_id", pl.col("link_targets").alias("target")).explode("target")
               .drop_nulls("target")
               .join(title_map.lazy(), left_on="target", right_on="title", how="left")
               .select("page_id", pl.coalesce("resolved", "target").alias("target"), "target_page_id")
               .unique(maintain_order=True).sort("page_id", "target_page_id", "target"))
    folder = out / "wiki_page_targets" / f"lang={lang}"
    folder.mkdir(parents=True, exist_ok=True)
    targets.sink_parquet(folder / "part-00000.parquet", compression="zstd")

    stats.update(links=int(counts["links"]), links_to_missing_pages=int(counts["missing"]),
                 links_via_redirect=int(counts["via_redirect"]),
                 articles=articles.height)
    return stats


def _write(df: pl.DataFrame, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    df.write_parquet(folder / "part-00000.parquet", compression="zstd")


def build_wiki_language(lang: str, shards: Sequence[Path], shard_counts: Sequence[dict], max_hops: int,
                        out: Path) -> StageResult:
    """Stage entry point: resolve one language from its shard artifacts; write the drop counts of all steps."""
    stats = resolve_language(shards, lang, max_hops, out)
    drops = [dict(r) for c in shard_counts for r in c.get("drop_rows", [])]
    drops += [{"lang": lang, "stage": "resolve", "reason": "links_to_missing_pages",
               "count": stats["links_to_missing_pages"]},
              {"lang": lang, "stage": "resolve", "reason": "redirects_to_missing_or_cyclic",
               "count": stats["redirects_to_missing_or_cyclic"]}]
    table = (pl.DataFrame(drops, schema={"lang": pl.Utf8, "stage": pl.Utf8, "reason": pl.Utf8, "count": pl.Int64})
             .group_by("lang", "stage", "reason", maintain_order=True).agg(pl.col("count").sum()))
    _write(table, out / "wiki_drop_counts" / f"lang={lang}")
    totals = {k: sum(int(c.get(k, 0)) for c in shard_counts) for k in ("pages", "redirects", "sentences", "links")}
    log.info("%s: %d articles, %d redirects, %d sentences, %d links (%d via redirects, %d to missing pages)", lang,
             totals["pages"], totals["redirects"], totals["sentences"], stats["links"], stats["links_via_redirect"],
             stats["links_to_missing_pages"])
    return StageResult(
        tables={"wiki_pages": "wiki_pages", "wiki_links": "wiki_links", "wiki_page_targets": "wiki_page_targets",
                "wiki_drop_counts": "wiki_drop_counts"},
        stats={**stats, **totals},
    )
