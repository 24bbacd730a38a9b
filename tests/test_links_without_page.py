"""A link whose target has no page in the dump is still an EASE pair when the target is a Wikidata entity.

EASE keeps a link to any entity of its vocabulary (its entities are link targets, mapped to English titles through
Wikidata sitelinks), whether or not the target's page is in the processed dump (docs methods §4.4). Here the link's
title is resolved through the ``<lang>wiki`` sitelink (after MediaWiki title normalisation and the dump's redirects),
counted in the ``entities`` stage and typed by the QID's P31; its hard negatives stay of that type and are never
linked on the same page nor the page's subject. A linked title with neither a page nor a sitelink stays out.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from conftest import REPO, SHARED_DATA
from wiki_chain import build_chain, pages_dump

from pipelines.wikidata import WikidataSettings
from pipelines.wikipedia.entities import EntitySettings
from pipelines.wikipedia.hard_negatives import HardNegativeSettings

CITY, COUNTRY = "Q515", "Q6256"
ITEMS = {  # QID: (enwiki sitelink, P31)
    "Q64": ("Berlin", CITY), "Q90": ("Paris", CITY), "Q220": ("Rome", CITY), "Q2807": ("Madrid", CITY),
    "Q183": ("Germany", COUNTRY), "Q142": ("France", COUNTRY),
}
# pages of the dump: Berlin, Paris, Germany and a redirect Roma → Rome; Rome, Madrid and France have no page, Atlantis
# has neither a page nor a sitelink
PAGES = [
    ("Berlin", 1, None, "Berlin is a large city that is often compared with [[Paris]] and with [[rome|the eternal "
                        "city]] by many travel writers."),
    ("Paris", 2, None, "Paris is a city whose museums are visited by people from [[Roma]] and from [[Madrid]] every "
                       "year, and by nobody from [[Atlantis]]."),
    ("Roma", 3, "Rome", None),
    ("Germany", 4, None, "Germany is a country in Europe whose capital is [[Berlin]] and whose western neighbour is "
                         "[[France]]."),
]



def _wikidata(path: Path) -> Path:
    def claim(qid: str, typ: str) -> dict:
        value = {"entity-type": "item", "numeric-id": int(typ[1:]), "id": typ}
        return {"mainsnak": {"snaktype": "value", "property": "P31", "datavalue": {
            "value": value, "type": "wikibase-entityid"}, "datatype": "wikibase-item"},
                "type": "statement", "id": f"{qid}$1", "rank": "normal"}

    lines = [json.dumps({"type": "item", "id": qid, "labels": {"en": {"language": "en", "value": title}},
                         "claims": {"P31": [claim(qid, typ)]},
                         "sitelinks": {"enwiki": {"site": "enwiki", "title": title, "badges": []}}})
             for qid, (title, typ) in ITEMS.items()]
    path.write_text("[\n" + ",\n".join(lines) + "\n]\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("no-page")
    dump = pages_dump(root / "enwiki.xml.bz2", PAGES)
    return build_chain({"en": dump}, root / "c", _wikidata(root / "wikidata.json"),
                       entities=EntitySettings(min_link_count=0, types="wikidata"),
                       hard_negatives=HardNegativeSettings(negatives_per_entity=10))


def test_a_link_to_an_entity_without_a_page_is_a_pair_with_its_type_based_hard_negative(
        chain: dict[str, Path]) -> None:
    hn = pl.read_parquet(chain["hn"] / "hard_negatives")
    rows = {(r["origin_entity"], r["entity"]): r for r in hn.iter_rows(named=True)}
    # Berlin's page links Paris (a page) and "rome" (no page; normalised to Rome, Q220 by its enwiki sitelink)
    rome = rows[("Q64", "Q220")]
    assert rome["surface"] == "the eternal city" and rome["type"] == CITY
    # its candidates: the other cities but the page's subject (Berlin) and what the page links (Paris)
    assert rome["candidates"] == ["Q2807"] and rome["negative"] == "Q2807"
    # Paris's candidates lose Rome, linked on the same page without a page of its own
    assert rows[("Q64", "Q90")]["candidates"] == ["Q2807"]
    # Paris's page: [[Roma]] is a redirect to the missing Rome, [[Madrid]] has no page; Atlantis has no entity
    assert rows[("Q90", "Q220")]["candidates"] == ["Q64"] and rows[("Q90", "Q2807")]["candidates"] == ["Q64"]
    assert rows[("Q90", "Q220")]["surface"] == "Roma"
    # Germany's page: Berlin (a page) has all three other cities; France (no page) has only Germany, the subject
    assert sorted(rows[("Q183", "Q64")]["candidates"]) == ["Q220", "Q2807", "Q90"]
    assert ("Q183", "Q142") not in rows
    assert len(rows) == hn.height == 5
    for r in hn.iter_rows(named=True):
        assert r["negative"] in r["candidates"] and r["text"][r["start"]:r["end"]] == r["surface"]
    drops = pl.read_parquet(chain["hn"] / "ease_drop_counts.parquet").filter(pl.col("stage") == "hard_negatives")
    drop = dict(drops.select("reason", "count").iter_rows())
    assert drop["link_target_missing"] == 1  # Atlantis: neither a page nor a sitelink
    assert drop["all_candidates_linked_on_page"] == 1  # France on Germany's page


def test_the_entities_stage_counts_links_to_titles_without_a_page(chain: dict[str, Path]) -> None:
    ents = {r["entity"]: r for r in pl.read_parquet(chain["entities"] / "entities.parquet").iter_rows(named=True)}
    rome = ents["Q220"]
    assert (rome["link_count"], rome["links_without_page"], rome["n_languages"]) == (2, 2, 0)
    assert rome["title"] == "Rome" and rome["qid"] == "Q220" and rome["in_vocab"]
    assert (ents["Q90"]["link_count"], ents["Q90"]["links_without_page"], ents["Q90"]["n_languages"]) == (1, 0, 1)
    assert ents["Q2807"]["link_count"] == ents["Q142"]["link_count"] == 1
    assert not any("Atlantis" in e for e in ents)  # no page, no QID: no entity, as before
    link_titles = pl.read_parquet(chain["entities"] / "entity_link_titles.parquet")
    assert sorted(link_titles.select("title", "entity").iter_rows()) == [
        ("France", "Q142"), ("Madrid", "Q2807"), ("Rome", "Q220")]
    types = pl.read_parquet(chain["entities"] / "entity_types.parquet")
    assert types.filter(pl.col("entity") == "Q220")["type"].to_list() == [CITY]  # the QID's P31, no page needed
    # wiki_extract: the titles without a page are kept as the page's targets, the redirect followed to Rome
    targets = pl.read_parquet(chain["lang-en"] / "wiki_page_targets")
    paris = targets.filter(pl.col("page_id") == 2)
    assert sorted(paris["target"]) == ["Atlantis", "Madrid", "Rome"] and paris["target_page_id"].is_null().all()
    links = pl.read_parquet(chain["lang-en"] / "wiki_links").filter(pl.col("target_raw") == "Roma")
    assert links.select("target", "via_redirect").rows() == [("Rome", True)]


def test_without_wikidata_a_link_to_a_missing_page_stays_out(tmp_path: Path) -> None:
    dirs = build_chain({"en": pages_dump(tmp_path / "enwiki.xml.bz2", PAGES)}, tmp_path / "c", None,
                       entities=EntitySettings(min_link_count=0))
    ents = pl.read_parquet(dirs["entities"] / "entities.parquet")
    assert sorted(ents["entity"]) == ["en:Berlin", "en:Germany", "en:Paris"]
    assert pl.read_parquet(dirs["entities"] / "entity_link_titles.parquet").height == 0


@pytest.mark.shared_data
def test_on_the_english_sample_links_to_qid_resolvable_targets_are_pairs(tmp_path: Path) -> None:
    """The EASE kit's inputs (the five real samples, the Wikidata fixture written for them, its settings): the English
    sample has pages for 106 articles and 22,216 links, 22,107 of them to pages it lacks. Its links to United States
    (Q30) and China (Q148) — no English page in the sample — are English pairs now (the page-only lookup gave 32
    English pairs of 5 entities); every pair's entity is its target's page or its target's enwiki sitelink."""
    dumps = {lang: SHARED_DATA / "wikipedia" / f"{lang}wiki-sample.xml.bz2" for lang in ("en", "ja", "el", "uk", "vi")}
    if not all(p.is_file() for p in dumps.values()):
        pytest.skip(f"the real Wikipedia samples are not available under {SHARED_DATA / 'wikipedia'} "
                    "(set POLYSENT_SHARED_DATA)")
    dirs = build_chain(dumps, tmp_path / "c", REPO / "tests" / "fixtures" / "wikidata" / "sample-pages.jsonl",
                       entities=EntitySettings(min_link_count=10, types="wikidata"),
                       hard_negatives=HardNegativeSettings(negatives_per_entity=10, max_pairs_per_language=50_000),
                       wikidata_settings=WikidataSettings(wikis=[f"{lang}wiki" for lang in dumps]))
    hn = pl.read_parquet(dirs["hn"] / "hard_negatives").filter(pl.col("lang") == "en")
    titles = pl.read_parquet(dirs["entities"] / "entity_titles.parquet").filter(pl.col("lang") == "en")
    assert titles.filter(pl.col("entity").is_in(["Q30", "Q148"])).is_empty()  # no English page in the sample
    per_entity = dict(hn.group_by("entity").len().iter_rows())
    assert per_entity.get("Q30", 0) > 0 and per_entity.get("Q148", 0) > 0
    assert hn.height > 100 and len(per_entity) > 10
    # each pair's entity is its link target's: its page, or the enwiki sitelink of a title the sample has no page for
    links = pl.read_parquet(dirs["lang-en"] / "wiki_links").select("page_id", "sent_id", "link_no", "target",
                                                                   "target_page_id")
    sitelinks = (pl.read_parquet(dirs["wikidata"] / "wikidata_sitelinks.parquet").filter(pl.col("lang") == "en")
                 .select(pl.col("title").alias("target"), pl.col("qid").alias("by_sitelink")))
    by_page = titles.select(pl.col("page_id").alias("target_page_id"), pl.col("entity").alias("by_page"))
    got = (hn.join(links, on=["page_id", "sent_id", "link_no"], how="left")
           .join(by_page, on="target_page_id", how="left").join(sitelinks, on="target", how="left"))
    assert got.select((pl.coalesce("by_page", "by_sitelink") == pl.col("entity")).all()).item()
    assert got["target_page_id"].null_count() > got.height // 2  # most pairs link a page the sample lacks
    # the negatives: of the positive's Wikidata type, never the page's subject nor the positive
    types = set(pl.read_parquet(dirs["entities"] / "entity_types.parquet").select("entity", "type").iter_rows())
    for entity, negative, cands, typ, origin in hn.select("entity", "negative", "candidates", "type",
                                                         "origin_entity").iter_rows():
        assert (entity, typ) in types and (negative, typ) in types and negative != origin and entity not in cands
    # nor linked anywhere on the page — by its page or by its sitelink title
    targets = (pl.read_parquet(dirs["lang-en"] / "wiki_page_targets")
               .join(by_page, on="target_page_id", how="left").join(sitelinks, on="target", how="left")
               .select("page_id", pl.coalesce("by_page", "by_sitelink").alias("negative")).drop_nulls())
    assert hn.join(targets, on=["page_id", "negative"], how="semi").is_empty()
    assert targets.join(hn.select("page_id"), on="page_id", how="semi")["negative"].is_in(
        ["Q30", "Q148"]).any()  # titles without a page are among a page's linked entities
