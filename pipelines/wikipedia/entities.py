"""Stage ``entities``: the cross-language entity vocabulary, its keys, link counts and types.

Entity identity (EASE, seed paper §3.1; docs methods §4.4):

* With a Wikidata dump, an article is the Wikidata item whose **sitelink** for the article's wiki has the article's
  title — never a match on the English label, the homonym bug of the public EASE code (``build_title_to_rdf_type.py``
  maps ``label_en → QID``, so "Paris" the city and every other "Paris" collide). The entity key is the QID, shared by
  every language that has a page for it.
* Without Wikidata (or for articles no item links to) the key is ``<lang>:<title>``.
* A **linked title the dump has no page for** is the Wikidata item whose sitelink for the link's wiki has that title
  (``entity_link_titles``; link targets are normalised titles — first letter upper-case, underscores as spaces,
  redirects of the dump followed — and so are the sitelink titles here). EASE's entities are link targets, not pages:
  Wikipedia2Vec counts every linked title, and EASE keeps a link whose target has an English counterpart whether or
  not that page was processed (docs methods §4.4). A partial dump lacks most linked pages (the English sample: 22,107
  of its 22,216 links), so a page-only key drops most links. Such an entity may have no page in any configured dump
  (``n_languages`` 0). A linked title without a page and without a sitelink has no entity, as before — unless
  ``unlinked_titles: title``.
* **``unlinked_titles: title``** (EASE's monolingual setting, which needs no Wikidata): every other linked title the
  dump has no page for — no sitelink, or no Wikidata dump at all — is the entity ``<lang>:<title>`` (the same key a
  page of that title would have), keyed by its normalised title, counted like the others and written to
  ``entity_link_titles`` with a null ``qid``; ``entity_vectors`` looks it up in Wikipedia2Vec by that title, which
  knows link targets by title. The English sample without Wikidata: its vocabulary (> 10 links) was the 2 linked
  entities whose page is in the sample (Angola, Aristotle), of the 15 link targets linked more than 10 times.

The vocabulary keeps entities linked **more than** ``min_link_count`` times, counted over all configured languages
(EASE: Wikipedia2Vec's link count ``> 10``) — links to its page and links to its sitelink title where the dump has no
page (``links_without_page``). Types come from Wikidata's P31 ("instance of"), or — configurable, and the
fallback without a Wikidata dump — from the names of the page's infobox templates (``infobox:<lang>:<name>``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar, Literal

import polars as pl
from pydantic import ConfigDict, Field

from contract import StageResult
from pipelines.key_defaults import KeyWhenSet
from pipelines.wikipedia.artifact_tables import scan_table

log = logging.getLogger("polysent.pipelines.entities")
STAGE_VERSION = "2"  # 2: a linked title without a page in the dump is the entity of its Wikidata sitelink
#   (entity_link_titles), its links counted; entities gain links_without_page, n_languages counts page languages


class EntitySettings(KeyWhenSet):
    """Entity vocabulary and type source."""

    model_config = ConfigDict(extra="forbid")
    min_link_count: int = Field(10, ge=0)
    """the vocabulary keeps entities linked more than this many times"""
    types: Literal["auto", "wikidata", "infobox", "none"] = "auto"
    """entity types: Wikidata P31, the page's infobox templates, or none; auto = wikidata when a Wikidata dump is
    configured, else infobox"""
    unlinked_titles: Literal["drop", "title"] = "drop"
    """a linked title the dump has no page for and no Wikidata sitelink names (every such title without a Wikidata
    dump): ``drop`` (default) gives it no entity; ``title`` makes it the entity ``<lang>:<title>``, keyed by its
    normalised title, counted for the vocabulary and looked up in Wikipedia2Vec by that title (EASE's entities are
    link targets; its monolingual English setting needs no Wikidata). Enters a cache key only when set"""
    # added after configs were written: out of the dump (and cache keys) while at its default
    KEY_WHEN_SET: ClassVar[tuple[str, ...]] = ("unlinked_titles",)

    def type_source(self, has_wikidata: bool) -> str:
        if self.types == "auto":
            return "wikidata" if has_wikidata else "infobox"
        if self.types == "wikidata" and not has_wikidata:
            raise ValueError("corpora.entities.types is 'wikidata' but sources.wikipedia.wikidata is not set")
        return self.types


def normalised_titles(title: pl.Expr) -> pl.Expr:
    """MediaWiki's title form, as link targets are written (``wikitext.normalize_title``): underscores → spaces,
    first letter upper-case. Wikidata's sitelink titles are in this form already; this makes the join certain."""
    t = title.str.replace_all("_", " ", literal=True)
    return t.str.slice(0, 1).str.to_uppercase() + t.str.slice(1)


def read_sitelinks(wikidata: Path) -> pl.DataFrame:
    """``lang``, ``title``, ``qid`` of the ``wikidata`` artifact: one QID per (language, normalised title)."""
    path = wikidata / "wikidata_sitelinks.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"entities: the wikidata_sitelinks table is missing: {path}")
    have = pl.read_parquet_schema(path)
    missing = [c for c in ("lang", "title", "qid") if c not in have]
    if missing:
        raise ValueError(f"entities: {path} (wikidata_sitelinks) has no column(s) {missing}; it has {sorted(have)}")
    return (pl.read_parquet(path, columns=["lang", "title", "qid"])
            .with_columns(normalised_titles(pl.col("title")).alias("title"))
            .unique(["lang", "title"], keep="first", maintain_order=True))


def titles_without_page(languages: Mapping[str, Path]) -> pl.DataFrame:
    """``lang``, ``title``: the titles linked anywhere in a language's dump (``wiki_page_targets``) that have no page
    there."""
    return pl.concat([
        scan_table(path / "wiki_page_targets").filter(pl.col("target_page_id").is_null())
        .select(pl.lit(lang).alias("lang"), pl.col("target").alias("title")).unique().collect()
        for lang, path in sorted(languages.items())
    ])


def linked_titles_without_page(languages: Mapping[str, Path], sitelinks: pl.DataFrame) -> pl.DataFrame:
    """``lang``, ``title``, ``entity``, ``qid``: the titles linked anywhere in a language's dump (``wiki_page_targets``)
    that have no page there but a sitelink to that language's Wikipedia; the entity is the sitelink's QID."""
    return (titles_without_page(languages).join(sitelinks, on=["lang", "title"], how="inner")
            .select("lang", "title", pl.col("qid").alias("entity"), "qid").sort("lang", "title"))


def unlinked_title_entities(languages: Mapping[str, Path], link_titles: pl.DataFrame) -> pl.DataFrame:
    """``lang``, ``title``, ``entity``, ``qid``: the titles linked anywhere in a language's dump that have no page
    there and are not in ``link_titles`` (no sitelink names them), each the entity ``<lang>:<title>`` without a QID
    (``unlinked_titles: title``). Empty titles are no entity."""
    return (titles_without_page(languages).filter(pl.col("title").str.len_chars() > 0)
            .join(link_titles.select("lang", "title"), on=["lang", "title"], how="anti")
            .select("lang", "title", (pl.col("lang") + pl.lit(":") + pl.col("title")).alias("entity"),
                    pl.lit(None, pl.Utf8).alias("qid"))
            .sort("lang", "title"))


def link_counts(languages: Mapping[str, Path], titles: pl.DataFrame, link_titles: pl.DataFrame) -> pl.DataFrame:
    """``entity``, ``lang``, ``has_page``, ``links``: the links of ``wiki_links`` per entity and language — to the
    entity's page (``titles``, by page id) or, where the dump has no page, to its sitelink title (``link_titles``)."""
    frames = []
    for lang, path in sorted(languages.items()):
        links = scan_table(path / "wiki_links").select("target", "target_page_id")
        to_page = (links.filter(pl.col("target_page_id").is_not_null()).group_by("target_page_id").agg(pl.len())
                   .collect().join(titles.filter(pl.col("lang") == lang)
                                   .select(pl.col("page_id").alias("target_page_id"), "entity"), on="target_page_id"))
        to_title = (links.filter(pl.col("target_page_id").is_null()).group_by("target").agg(pl.len())
                    .collect().join(link_titles.filter(pl.col("lang") == lang)
                                    .select(pl.col("title").alias("target"), "entity"), on="target"))
        frames += [to_page.select("entity", pl.lit(lang).alias("lang"), pl.lit(True).alias("has_page"),
                                  pl.col("len").cast(pl.Int64).alias("links")),
                   to_title.select("entity", pl.lit(lang).alias("lang"), pl.lit(False).alias("has_page"),
                                   pl.col("len").cast(pl.Int64).alias("links"))]
    schema = {"entity": pl.Utf8, "lang": pl.Utf8, "has_page": pl.Boolean, "links": pl.Int64}
    return (pl.concat([pl.DataFrame(schema=schema), *frames])
            .group_by("entity", "lang", "has_page", maintain_order=True).agg(pl.col("links").sum()))


def entity_rows(settings: EntitySettings, titles: pl.DataFrame, link_titles: pl.DataFrame,
                counts: pl.DataFrame) -> pl.DataFrame:
    """One row per entity (a page in some language, or a linked title keyed by its sitelink), its link count over
    all languages and whether it is in the vocabulary. The title is the English one (page or sitelink), else a page's
    title in the first language, else a linked title's."""
    rows = pl.concat([
        titles.select("entity", "qid", "lang", "title", pl.lit(True).alias("has_page")),
        link_titles.select("entity", "qid", "lang", "title", pl.lit(False).alias("has_page")),
    ]).join(counts, on=["entity", "lang", "has_page"], how="left").with_columns(pl.col("links").fill_null(0))
    per_entity = (rows.sort("has_page", "lang", descending=[True, False])
                  .group_by("entity", maintain_order=True)
                  .agg(pl.col("qid").first(),
                       pl.col("title").filter(pl.col("lang") == "en").first().alias("title_en"),
                       pl.col("title").first().alias("title_first"),
                       pl.col("links").sum().alias("link_count"),
                       pl.col("links").filter(~pl.col("has_page")).sum().alias("links_without_page"),
                       pl.col("lang").filter(pl.col("has_page")).n_unique().alias("n_languages")))
    return per_entity.select(
        "entity", "qid", pl.coalesce("title_en", "title_first").alias("title"),
        pl.col("link_count").cast(pl.Int64), pl.col("n_languages").cast(pl.Int32),
        (pl.col("link_count") > settings.min_link_count).alias("in_vocab"),
        pl.col("links_without_page").cast(pl.Int64),
    ).sort("link_count", "entity", descending=[True, False])


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
        sitelinks = read_sitelinks(wikidata)
        titles = articles.join(sitelinks, on=["lang", "title"], how="left")
        link_titles = linked_titles_without_page(languages, sitelinks)
    else:
        titles = articles.with_columns(pl.lit(None, pl.Utf8).alias("qid"))
        link_titles = pl.DataFrame(schema={"lang": pl.Utf8, "title": pl.Utf8, "entity": pl.Utf8, "qid": pl.Utf8})
    by_title = 0
    if settings.unlinked_titles == "title":
        unlinked = unlinked_title_entities(languages, link_titles)
        by_title = unlinked.height
        link_titles = pl.concat([link_titles, unlinked]).sort("lang", "title")
    titles = titles.with_columns(
        pl.coalesce("qid", pl.col("lang") + pl.lit(":") + pl.col("title")).alias("entity"))
    counts = link_counts(languages, titles, link_titles)
    entities = entity_rows(settings, titles, link_titles, counts)
    types = _types(source, entities, titles, wikidata)

    entities.write_parquet(out / "entities.parquet", compression="zstd")
    titles.select("lang", "title", "page_id", "entity", "qid").sort("lang", "page_id").write_parquet(
        out / "entity_titles.parquet", compression="zstd")
    link_titles.write_parquet(out / "entity_link_titles.parquet", compression="zstd")
    types.write_parquet(out / "entity_types.parquet", compression="zstd")
    vocab = int(entities["in_vocab"].sum())
    typed_vocab = types.join(entities.filter("in_vocab").select("entity"), on="entity")["entity"].n_unique()
    without_page = entities.filter(pl.col("n_languages") == 0)
    stats = {"entities": entities.height, "vocabulary": vocab, "vocabulary_with_type": int(typed_vocab),
             "articles": titles.height, "articles_with_qid": int(titles["qid"].is_not_null().sum()),
             "linked_titles_without_page": link_titles.height,
             "links_without_page": int(counts.filter(~pl.col("has_page"))["links"].sum()),
             "entities_without_page": without_page.height,
             "vocabulary_without_page": int(without_page["in_vocab"].sum()),
             "type_source": source, "types": int(types["type"].n_unique())}
    if settings.unlinked_titles == "title":  # only then: a default run's stats stay as they were
        keyed = entities.join(link_titles.filter(pl.col("qid").is_null()).select("entity").unique(), on="entity")
        stats.update(linked_titles_keyed_by_title=by_title,
                     links_keyed_by_title=int(keyed["link_count"].sum()),
                     vocabulary_keyed_by_title=int(keyed["in_vocab"].sum()))
    log.info("entities: %d (vocabulary %d with > %d links; %d typed from %s); %d of %d articles mapped to a QID; "
             "%d links to %d titles without a page counted by their Wikidata sitelink or title (%d entities have no "
             "page, %d of them in the vocabulary)", entities.height, vocab, settings.min_link_count, typed_vocab,
             source, stats["articles_with_qid"], titles.height, stats["links_without_page"], link_titles.height,
             without_page.height, stats["vocabulary_without_page"])
    if settings.unlinked_titles == "title":
        log.info("entities: unlinked_titles: title — %d linked titles without a page or sitelink are entities "
                 "<lang>:<title> (%d links; %d of them in the vocabulary)", by_title, stats["links_keyed_by_title"],
                 stats["vocabulary_keyed_by_title"])
    return StageResult(
        tables={"entities": "entities.parquet", "entity_titles": "entity_titles.parquet",
                "entity_link_titles": "entity_link_titles.parquet", "entity_types": "entity_types.parquet"},
        stats=stats,
    )


def _types(source: str, entities: pl.DataFrame, titles: pl.DataFrame, wikidata: Path | None) -> pl.DataFrame:
    """``entity``, ``type``, ``type_label``, ``source``: Wikidata P31 of every entity with a QID (a page or not),
    the page's infobox templates, or nothing."""
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
    return types.unique(["entity", "type"], keep="first").sort("entity", "type")
