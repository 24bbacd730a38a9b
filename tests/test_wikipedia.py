from __future__ import annotations

import bz2
import functools
from pathlib import Path

import polars as pl
import pytest
from conftest import SAMPLE
from wiki_chain import build_chain

from pipelines.wikidata import iter_entities
from pipelines.wikipedia.dump_reader import DumpFormatError, read_dump
from pipelines.wikipedia.entities import EntitySettings
from pipelines.wikipedia.sentences import sentence_spans, split_sentences
from pipelines.wikipedia.wikitext import infobox_type, normalize_title, parse_wikitext

DUMPS = {lang: SAMPLE / "wikipedia" / f"{lang}wiki-sample.xml.bz2" for lang in ("en", "de", "ru")}


def test_wikitext_keeps_links_and_drops_markup() -> None:
    text = (
        "{{Infobox settlement\n| name = Berlin\n| image = [[File:B.jpg|thumb|The [[Spree]]]]\n}}\n"
        "'''Berlin''' is the capital of [[Germany|German]]y and the [[berlin#History|largest city]] of the EU."
        "<ref>{{cite web|url=https://example.org}}</ref> It lies on the [[Spree]]s.<!-- note --> "
        "{{lang|de|Hallo}} there.\n\n== History ==\n[[Category:Capitals]][[de:Berlin]]Founded in 1237.\n"
        '{| class="wikitable"\n| a || b\n|}\n'
    )
    page = parse_wikitext(text)
    assert page.infoboxes == ["Infobox settlement"]
    first, second = page.paragraphs
    assert first.text == ("Berlin is the capital of Germany and the largest city of the EU. It lies on the Sprees. "
                          "Hallo there.")
    assert [(ln.target, ln.surface) for ln in first.links] == [
        ("Germany", "Germany"), ("Berlin", "largest city"), ("Spree", "Sprees")]
    assert all(first.text[ln.start:ln.end] == ln.surface for ln in first.links)
    assert second.text == "Founded in 1237." and second.links == []


def test_only_infobox_templates_are_types_and_case_variants_are_one() -> None:
    text = ("{{Infobox Country\n| name = Foo\n| capital = [[Bar]]\n}}\n{{infobox_country|name=Foo}}\n"
            "{{Multiple image\n| image1 = a.jpg\n| image2 = b.jpg\n}}\n{{Bar box\n| title = x\n| bars = y\n}}\n"
            "{{Weather box\n| location = Foo\n| Jan high C = 3\n}}\n{{Infobox spaceflight/IP\n| a = 1\n| b = 2\n}}\n"
            "{{Infobox\n| title = generic\n| data1 = x\n}}\n'''Foo''' is a country next to [[Bar]].")
    page = parse_wikitext(text)
    assert page.infoboxes == ["Infobox country", "Infobox spaceflight"]
    assert page.paragraphs[0].text == "Foo is a country next to Bar."


# (language, a template name as it occurs in that shared dump, the type it gives or None): real names, read off
# ``../shared/data/wikipedia/<lang>wiki-sample.xml.bz2``; the dump test below checks that each one is there
INFOBOX_CASES = [
    ("en", "Infobox country", "Infobox country"), ("en", "Infobox U.S. state", "Infobox u.s. state"),
    ("en", "Infobox spaceflight/IP", "Infobox spaceflight"), ("en", "Automatic taxobox", "Automatic taxobox"),
    ("en", "multiple image", None), ("en", "bar box", None), ("en", "Weather box", None), ("en", "Navboxes", None),
    ("en", "Historical populations", None), ("en", "Geographic location", None),
    ("ja", "基礎情報 都道府県", "基礎情報 都道府県"), ("ja", "基礎情報 国", "基礎情報 国"),
    ("ja", "Infobox 漫画家", "Infobox 漫画家"),
    ("ja", "Infobox Language", "Infobox language"), ("ja", "Infobox animanga/Header", "Infobox animanga"),
    ("ja", "Infobox animanga/Cast", "Infobox animanga"), ("ja", "bar box", None), ("ja", "Weather box", None),
    ("ja", "複数の問題", None), ("ja", "s-ttl", None),
    ("el", "Πληροφορίες Χώρας", "Πληροφορίες χώρας"), ("el", "Πληροφορίες_Χώρας", "Πληροφορίες χώρας"),
    ("el", "Πληροφορίες πολιτικού", "Πληροφορίες πολιτικού"),
    ("el", "Κουτί πληροφοριών εταιρίας", "Κουτί πληροφοριών εταιρίας"), ("el", "Weather box", None),
    ("el", "multiple image", None), ("el", "Απόσπασμα", None),
    ("uk", "Картка Країна", "Картка країна"), ("uk", "Картка країни", "Картка країни"),
    ("uk", "Infobox Country", "Infobox country"), ("uk", "Infobox Anatomy", "Infobox anatomy"),
    ("uk", "Вікіпосилання", None), ("uk", "Image label small", None), ("uk", "double image", None),
    ("vi", "Thông tin đơn vị hành chính Việt Nam", "Thông tin đơn vị hành chính việt nam"),
    ("vi", "Hộp thông tin quốc gia", "Hộp thông tin quốc gia"), ("vi", "Thông tin khu dân cư", "Thông tin khu dân cư"),
    ("vi", "Infobox country", "Infobox country"), ("vi", "Multiple image", None), ("vi", "multiple image", None),
    ("vi", "Weather box", None), ("vi", "Pull quote", None), ("vi", "Thanh chủ đề", None),
]


@pytest.mark.parametrize(("lang", "name", "expected"), INFOBOX_CASES)
def test_infobox_type_of_real_template_names(lang: str, name: str, expected: str | None) -> None:
    assert infobox_type(name, lang) == expected


def test_infobox_prefixes_are_per_language_and_need_a_type() -> None:
    assert infobox_type("Картка країни", "en") is None  # the uk prefix means nothing on the English wiki
    assert infobox_type("Infobox", "en") is None and infobox_type("Πλαίσιο πληροφοριών", "el") is None
    assert infobox_type("Phương tiện thông tin ngoài", "vi") is None  # "thông tin" inside, not a prefix
    assert infobox_type("Collapsed infobox section begin", "vi") is None
    assert infobox_type("Template:Infobox country", "en") is None and infobox_type("#if", "en") is None
    assert infobox_type("  Infobox   former_Country ", "vi") == "Infobox former country"


@functools.cache
def _dump_text(folder: Path, lang: str) -> str:
    return bz2.decompress((folder / "wikipedia" / f"{lang}wiki-sample.xml.bz2").read_bytes()).decode("utf-8")


@pytest.mark.shared_data
def test_infobox_cases_are_real_names_of_the_shared_dumps(shared_data: Path) -> None:
    for lang, name, _ in INFOBOX_CASES:
        text = _dump_text(shared_data, lang)
        assert any(f"{{{{{name}{after}" in text for after in ("\n", "|", " ")), (lang, name)


def test_title_normalisation_matches_mediawiki() -> None:
    assert normalize_title("new_york#History") == "New york"  # only the first letter
    assert normalize_title("  ääkkönen  ") == "Ääkkönen"
    assert normalize_title(":Category:X") == "Category:X"


def test_icu_sentences_trim_whitespace_and_map_utf16_offsets() -> None:
    text = "Первое предложение. Второе! 😀 Третье предложение?  "
    spans = list(sentence_spans(text, "ru"))
    assert [text[s:e] for s, e in spans] == ["Первое предложение.", "Второе!", "😀 Третье предложение?"]
    assert split_sentences("Hello world. How are you?", "en") == ["Hello world.", "How are you?"]


def test_dump_reader_streams_pages_and_namespaces() -> None:
    site, pages = read_dump(DUMPS["de"])
    pages = list(pages)
    assert site.dbname == "dewiki" and site.lang == "de" and site.namespaces[14] == "Kategorie"
    main = [p for p in pages if p.ns == 0 and p.redirect is None]
    redirects = {p.title: p.redirect for p in pages if p.redirect}
    assert len(main) >= 30
    assert redirects["Bundesrepublik Deutschland"] == "Deutschland"
    assert any(p.ns != 0 for p in pages)


def test_dump_reader_error_names_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.xml.bz2"
    bad.write_bytes(bz2.compress(b"<html><body>not a dump</body></html>"))
    with pytest.raises(DumpFormatError, match=str(bad)):
        read_dump(bad)


def test_wikidata_reader_accepts_dump_shape_and_reports_bad_line(tmp_path: Path) -> None:
    ents = list(iter_entities(SAMPLE / "wikidata" / "entities.jsonl"))
    assert {e["id"] for e in ents} >= {"Q64", "Q183", "Q515"}
    bad = tmp_path / "w.json"
    bad.write_text('[\n{"id": "Q1"},\n{broken\n]\n')
    with pytest.raises(ValueError, match=rf"{bad}:3: not a JSON entity"):
        list(iter_entities(bad))


@pytest.fixture(scope="module")
def wiki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder with each table of the sample chain as a hive-partitioned Parquet dataset."""
    out = tmp_path_factory.mktemp("wiki")
    dirs = build_chain(DUMPS, out / "chain", SAMPLE / "wikidata" / "entities.jsonl",
                       entities=EntitySettings(min_link_count=2))
    langs = {d.name.split("-")[1]: d for d in dirs.values() if d.name.startswith("lang-")}
    sents = pl.concat([pl.read_parquet(d / "wiki_sentences").with_columns(pl.lit(d.name.split("-")[1]).alias("lang"))
                       for k, d in dirs.items() if k.startswith("shard-")])
    sents.write_parquet(out / "wiki_sentences.parquet")
    titles = pl.read_parquet(dirs["entities"] / "entity_titles.parquet").select(
        "lang", pl.col("page_id").alias("target_page_id"), "entity", "qid")
    links = pl.concat([pl.read_parquet(d / "wiki_links").with_columns(pl.lit(lang).alias("lang"))
                       for lang, d in langs.items()]).join(titles, on=["lang", "target_page_id"], how="left")
    links.write_parquet(out / "wiki_links.parquet")
    pl.concat([pl.read_parquet(d / "wiki_pages") for d in langs.values()]).write_parquet(out / "wiki_pages.parquet")
    return out


def test_extraction_resolves_redirects_and_shares_entities_across_languages(wiki: Path) -> None:
    links = pl.read_parquet(wiki / "wiki_links.parquet")
    via_redirect = links.filter((pl.col("lang") == "ru") & (pl.col("target_raw") == "ФРГ"))
    assert via_redirect.height >= 1
    assert set(via_redirect["target"]) == {"Германия"} and set(via_redirect["qid"]) == {"Q183"}
    assert via_redirect["via_redirect"].all()
    # the same QID is linked from all three languages
    per_lang = links.filter(pl.col("qid") == "Q183").group_by("lang").len()
    assert set(per_lang["lang"]) == {"en", "de", "ru"}
    # links to pages the dump does not have are kept, without a page or an entity
    missing = links.filter(pl.col("target_page_id").is_null())
    assert missing.height > 0 and missing["entity"].is_null().all()


def test_every_link_points_into_its_sentence(wiki: Path) -> None:
    sents = pl.read_parquet(wiki / "wiki_sentences.parquet")
    links = pl.read_parquet(wiki / "wiki_links.parquet")
    joined = links.join(sents, on=["lang", "page_id", "sent_id"])
    assert joined.height == links.height
    assert joined.select((pl.col("text").str.slice(pl.col("start"), pl.col("end") - pl.col("start"))
                          == pl.col("surface")).all()).item()
    pages = pl.read_parquet(wiki / "wiki_pages.parquet")
    assert pages.filter(~pl.col("is_redirect")).group_by("lang").len()["len"].min() >= 30
    ru_infobox = pages.filter((pl.col("lang") == "ru") & (pl.col("title") == "Берлин"))["infoboxes"][0].to_list()
    assert ru_infobox == ["Город"]


def test_no_sentence_break_inside_a_link() -> None:
    from pipelines.wikipedia.extract import merge_across_links
    from pipelines.wikipedia.wikitext import parse_wikitext

    para = parse_wikitext("He moved to [[Saint Petersburg|St. Petersburg]] in 1830. Then he wrote.").paragraphs[0]
    spans = list(merge_across_links(sentence_spans(para.text, "en"), para.links))
    assert [para.text[s:e] for s, e in spans] == ["He moved to St. Petersburg in 1830.", "Then he wrote."]
