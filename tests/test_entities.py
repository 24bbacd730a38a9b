"""Entity keys by Wikidata sitelink (not label), the vocabulary threshold, and the three type sources."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from conftest import SAMPLE
from wiki_chain import build_chain

from pipelines.wikipedia.entities import EntitySettings

DUMPS = {lang: SAMPLE / "wikipedia" / f"{lang}wiki-sample.xml.bz2" for lang in ("en", "de")}


def _with_homonym(tmp_path: Path) -> Path:
    """The sample's Wikidata plus an item *labelled* "Berlin" whose enwiki sitelink is another page."""
    lines = (SAMPLE / "wikidata" / "entities.jsonl").read_text(encoding="utf-8").splitlines()
    homonym = {"type": "item", "id": "Q99999999", "labels": {"en": {"language": "en", "value": "Berlin"}},
               "claims": {}, "sitelinks": {"enwiki": {"site": "enwiki", "title": "Berlin (band)", "badges": []}}}
    assert lines[-1] == "]"
    # last in the file, so a "last label wins" map (EASE's dict assignment) would pick it
    lines[-2] = lines[-2] if lines[-2].endswith(",") else lines[-2] + ","
    lines.insert(len(lines) - 1, json.dumps(homonym))
    path = tmp_path / "wikidata.json"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_titles_map_to_qids_by_sitelink_not_by_label(tmp_path: Path) -> None:
    dirs = build_chain(DUMPS, tmp_path / "c", _with_homonym(tmp_path), entities=EntitySettings(min_link_count=2))
    titles = pl.read_parquet(dirs["entities"] / "entity_titles.parquet")
    berlin = titles.filter(pl.col("title").is_in(["Berlin"]))
    assert set(berlin["entity"]) == {"Q64"}  # EASE's label map would give the homonym (or whichever came last)
    # the same QID keys the page in both languages: one entity, counted over both
    ents = pl.read_parquet(dirs["entities"] / "entities.parquet")
    q64 = ents.filter(pl.col("entity") == "Q64").row(0, named=True)
    assert q64["n_languages"] == 2 and q64["title"] == "Berlin"
    per_lang = {}
    for lang in DUMPS:
        links = pl.read_parquet(dirs[f"lang-{lang}"] / "wiki_links")
        page = titles.filter((pl.col("lang") == lang) & (pl.col("entity") == "Q64"))["page_id"][0]
        per_lang[lang] = links.filter(pl.col("target_page_id") == page).height
    assert q64["link_count"] == sum(per_lang.values()) and all(per_lang.values())


def test_vocabulary_keeps_entities_linked_more_than_n_times(tmp_path: Path) -> None:
    dirs = build_chain(DUMPS, tmp_path / "c", SAMPLE / "wikidata" / "entities.jsonl",
                       entities=EntitySettings(min_link_count=10))
    ents = pl.read_parquet(dirs["entities"] / "entities.parquet")
    assert (ents["in_vocab"] == (ents["link_count"] > 10)).all()
    assert 0 < ents["in_vocab"].sum() < ents.height
    hn = pl.read_parquet(dirs["hn"] / "hard_negatives")
    vocab = set(ents.filter("in_vocab")["entity"])
    assert set(hn["entity"]) <= vocab and set(hn["negative"]) <= vocab
    assert set(hn.explode("candidates")["candidates"]) <= vocab


def test_without_wikidata_entities_are_language_keyed_and_typed_by_infobox(tmp_path: Path) -> None:
    dirs = build_chain(DUMPS, tmp_path / "c", None, entities=EntitySettings(min_link_count=1))
    ents = pl.read_parquet(dirs["entities"] / "entities.parquet")
    assert ents["qid"].is_null().all() and ents["entity"].str.contains(r"^(en|de):").all()
    types = pl.read_parquet(dirs["entities"] / "entity_types.parquet")
    assert set(types["source"]) == {"infobox"}
    berlin = types.filter(pl.col("entity") == "en:Berlin")["type"].to_list()
    assert berlin == ["infobox:en:Infobox settlement"]
    hn = pl.read_parquet(dirs["hn"] / "hard_negatives")
    assert hn.height > 50
    assert hn.filter(pl.col("entity") == "en:Berlin")["type"].unique().to_list() in ([], [
        "infobox:en:Infobox settlement"])


def test_type_source_none_gives_no_hard_negatives_and_wikidata_needs_a_dump(tmp_path: Path) -> None:
    dirs = build_chain({"en": DUMPS["en"]}, tmp_path / "c", SAMPLE / "wikidata" / "entities.jsonl",
                       entities=EntitySettings(min_link_count=1, types="none"))
    assert pl.read_parquet(dirs["hn"] / "hard_negatives").height == 0
    drops = pl.read_parquet(dirs["hn"] / "ease_drop_counts.parquet")
    assert drops.filter(pl.col("reason") == "positive_without_type_candidates")["count"].sum() > 100
    with pytest.raises(ValueError, match=r"sources\.wikipedia\.wikidata is not set"):
        EntitySettings(types="wikidata").type_source(has_wikidata=False)
