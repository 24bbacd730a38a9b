"""Stage ``entities``: the cross-language entity vocabulary, its keys, link counts and types.

Entity identity (EASE, seed paper §3.1; docs methods §4.4):

* With a Wikidata dump, an article is the Wikidata item whose **sitelink** for the article's wiki has the article's
  title — never a match on the English label, the homonym bug of the public EASE code (``build_title_to_rdf_type.py``
  maps ``label_en → QID``, so "Paris" the city and every other "Paris" collide). The entity key is the QID, shared by
  every language that has a page for it.
* Without Wikidata (or for articles no item links to) the key is ``<lang>:<title>``.

The vocabulary keeps entities linked **more than** ``min_link_count`` times, counted over all configured languages
(EASE: Wikipedia2Vec's link count ``> 10``). Types come from Wikidata's P31 ("instance of"), or — configurable, and the
fallback without a Wikidata dump — from the names of the page's infobox templates (``infobox:<lang>:<name>``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from contract import StageResult
from pipelines.wikipedia.artifact_tables import scan_table

log = logging.getLogger("polysent.pipelines.entities")
STAGE_VERSION = "1"


class EntitySettings(BaseModel):
    """Entity vocabulary and type source."""

    model_config = ConfigDict(extra="forbid")
    min_link_count: int = Field(10, ge=0, description="the vocabulary keeps entities linked more than this many times")
    types: Literal["auto", "wikidata", "infobox", "none"] = Field(
        "auto", description="entity types: Wikidata P31, the page's infobox templates, or none; auto = wikidata when "
                            "a Wikidata dump is configured, else infobox")

    def type_source(self, has_wikidata: bool) -> str:
        if self.types == "auto":
            return "wikidata" if has_wikidata else "infobox"
        if self.types == "wikidata" and not has_wikidata:
            raise ValueError("corpora.entities.types is 'wikidata' but sources.wikipedia.wikidata is not set")
        return self.types


def build_entity_tables(settings: EntitySettings, languages: Mapping[str, Path], wikidata: Path | None,
                        out: Path) -> StageResult:
    """``languages`` maps a language to its ``wiki_extract`` artifact; ``wikidata`` is the ``wikidata`` artifact."""
    source = settings.type_source(wikidata is not None)
    articles = pl.concat([
        scan_table(path / "wiki_pages").filter(~pl.col("is_redirect"))
        .select(pl.lit(lang).alias("lang"), "page_id", "title", "infoboxes").collect()
        for lang, path in sorted(languages.items())
    ])
    if wikidata is not None:
        sitelinks = pl.read_parquet(wikidata / "wikidata_sitelinks.parquet").select("lang", "title", "qid")
        sitelinks = sitelinks.unique(["lang", "title"], keep="first", maintain_order=True)
        titles = articles.join(sitelinks, on=["lang", "title"], how="left")
    else:
        titles = articles.with_columns(pl.lit(None, pl.Utf8).alias("qid"))
    titles = titles.with_columns(
        pl.coalesce("qid", pl.col("lang") + pl.lit(":") + pl.col("title")).alias("entity"))

    counts = pl.concat([
        scan_table(path / "wiki_links").filter(pl.col("target_page_id").is_not_null())
        .group_by("target_page_id").agg(pl.len().alias("links"))
        .select(pl.lit(lang).alias("lang"), pl.col("target_page_id").alias("page_id"), "links").collect()
        for lang, path in sorted(languages.items())
    ])
    per_entity = (titles.join(counts, on=["lang", "page_id"], how="left")
                  .with_columns(pl.col("links").fill_null(0))
                  .sort("lang")
                  .group_by("entity", maintain_order=True)
                  .agg(pl.col("qid").first(),
                       pl.col("title").filter(pl.col("lang") == "en").first().alias("title_en"),
                       pl.col("title").first().alias("title_first"),
                       pl.col("links").sum().alias("link_count"),
                       pl.col("lang").n_unique().alias("n_languages")))
    entities = per_entity.select(
        "entity", "qid", pl.coalesce("title_en", "title_first").alias("title"),
        pl.col("link_count").cast(pl.Int64), pl.col("n_languages").cast(pl.Int32),
        (pl.col("link_count") > settings.min_link_count).alias("in_vocab"),
    ).sort("link_count", "entity", descending=[True, False])

    if source == "wikidata":
        assert wikidata is not None
        wd_types = pl.read_parquet(wikidata / "wikidata_types.parquet")
        types = (entities.filter(pl.col("qid").is_not_null()).select("entity", "qid")
                 .join(wd_types, left_on="qid", right_on="qid", how="inner")
                 .select("entity", pl.col("type_qid").alias("type"), "type_label",
                         pl.lit("wikidata").alias("source")))
    elif source == "infobox":
        types = (titles.select("entity", "lang", "infoboxes").explode("infoboxes").drop_nulls("infoboxes")
                 .select("entity", (pl.lit("infobox:") + pl.col("lang") + pl.lit(":") + pl.col("infoboxes"))
                         .alias("type"), pl.col("infoboxes").alias("type_label"), pl.lit("infobox").alias("source")))
    else:
        types = pl.DataFrame(schema={"entity": pl.Utf8, "type": pl.Utf8, "type_label": pl.Utf8, "source": pl.Utf8})
    types = types.unique(["entity", "type"], keep="first").sort("entity", "type")

    entities.write_parquet(out / "entities.parquet", compression="zstd")
    titles.select("lang", "title", "page_id", "entity", "qid").sort("lang", "page_id").write_parquet(
        out / "entity_titles.parquet", compression="zstd")
    types.write_parquet(out / "entity_types.parquet", compression="zstd")
    vocab = int(entities["in_vocab"].sum())
    typed_vocab = types.join(entities.filter("in_vocab").select("entity"), on="entity")["entity"].n_unique()
    stats = {"entities": entities.height, "vocabulary": vocab, "vocabulary_with_type": int(typed_vocab),
             "articles": titles.height, "articles_with_qid": int(titles["qid"].is_not_null().sum()),
             "type_source": source, "types": int(types["type"].n_unique())}
    log.info("entities: %d (vocabulary %d with > %d links; %d typed from %s); %d of %d articles mapped to a QID",
             entities.height, vocab, settings.min_link_count, typed_vocab, source, stats["articles_with_qid"],
             titles.height)
    return StageResult(
        tables={"entities": "entities.parquet", "entity_titles": "entity_titles.parquet",
                "entity_types": "entity_types.parquet"},
        stats=stats,
    )
