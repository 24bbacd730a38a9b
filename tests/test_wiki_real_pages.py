"""Text and links of real pages of the shared Wikipedia samples, checked by hand against their wikitext.

Each expectation below was read off the page's raw wikitext (``bzcat …-sample.xml.bz2``), not copied from another
tool's output: what a reader of the rendered article sees as running text, and where each link goes.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from pipelines.wikipedia.dump_reader import read_dump
from pipelines.wikipedia.sentences import split_sentences
from pipelines.wikipedia.wikitext import ParsedPage, parse_wikitext

pytestmark = pytest.mark.shared_data


@cache
def _pages(folder: Path, lang: str) -> dict[str, str]:
    _, pages = read_dump(folder / "wikipedia" / f"{lang}wiki-sample.xml.bz2")
    return {p.title: p.text for p in pages if p.ns == 0 and p.redirect is None}


def page(shared: Path, lang: str, title: str) -> ParsedPage:
    return parse_wikitext(_pages(shared, lang)[title], lang=lang)


def links(parsed: ParsedPage, paragraph: int = 0) -> list[tuple[str, str]]:
    para = parsed.paragraphs[paragraph]
    assert all(para.text[ln.start:ln.end] == ln.surface for ln in para.links)
    return [(ln.surface, ln.target) for ln in para.links]


def test_en_anarchism(shared_data: Path) -> None:
    p = page(shared_data, "en", "Anarchism")
    first = split_sentences(p.paragraphs[0].text, "en")[0]
    # '''Anarchism''' is a [[political philosophy]] that advocates [[self-governance|self-governed]] societies …
    # <ref>…</ref> — bold marks and references gone
    assert first == ("Anarchism is a political philosophy that advocates self-governed societies based on voluntary "
                     "institutions.")
    assert links(p)[:4] == [("political philosophy", "Political philosophy"), ("self-governed", "Self-governance"),
                            ("stateless societies", "Stateless society"), ("hierarchical", "Hierarchy")]
    # [[wikt:anarchism|anarchism]] is a sister-project link: text kept, no entity
    third = links(p, 2)
    assert ("anarchism", "Wikt:anarchism") not in third and "The term anarchism is a compound word" in \
        p.paragraphs[2].text


def test_en_alabama(shared_data: Path) -> None:
    p = page(shared_data, "en", "Alabama")
    # {{IPAc-en|…}} pronunciation template and its parentheses removed; infobox recorded
    assert split_sentences(p.paragraphs[0].text, "en")[0] == (
        "Alabama is a state located in the southeastern region of the United States.")
    assert "Infobox u.s. state" in p.infoboxes  # case-folded: "Infobox U.S. state" and its case variants are one type
    got = links(p)
    assert ("Georgia", "Georgia (U.S. state)") in got  # piped link: surface and target differ
    assert ("southeastern region", "Southern United States") in got
    assert got[:3] == [("state", "U.S. state"), ("southeastern region", "Southern United States"),
                       ("United States", "United States")]


def test_uk_billion_keeps_inline_language_templates(shared_data: Path) -> None:
    p = page(shared_data, "uk", "Мільярд")
    # '''Мільярд''' ({{lang-en|billion}}, {{lang-fr|milliard}})&nbsp;— [[число]], назва величини <math>…</math>.
    assert p.paragraphs[0].text.startswith("Мільярд (billion, milliard)\u00a0— число, назва величини")
    assert "10^" not in p.paragraphs[0].text
    assert links(p) == [("число", "Число"), ("мільйон", "Мільйон"), ("крапка", "Крапка"),
                        ("тисяча", "1000 (число)")]


def test_vi_tieng_viet(shared_data: Path) -> None:
    p = page(shared_data, "vi", "Tiếng Việt")
    s = split_sentences(p.paragraphs[0].text, "vi")
    # <ref name="Tên khác">{{chú thích sách |…[[Hippocrene Books]]…}}</ref>: links inside references are not text
    assert s[:2] == ["Tiếng Việt, cũng gọi là tiếng Việt Nam hay Việt ngữ là ngôn ngữ của người Việt và là ngôn ngữ "
                     "chính thức tại Việt Nam.",
                     "Đây là tiếng mẹ đẻ của khoảng 85% dân cư Việt Nam cùng với hơn 4 triệu người Việt kiều."]
    got = links(p)
    assert got[:5] == [("ngôn ngữ", "Ngôn ngữ"), ("người Việt", "Người Việt"),
                       ("ngôn ngữ chính thức", "Ngôn ngữ chính thức"), ("Việt Nam", "Việt Nam"),
                       ("tiếng mẹ đẻ", "Ngôn ngữ đầu tiên")]
    assert all(t != "Hippocrene Books" for _, t in got)


def test_el_occitan_greek_link_trail_and_infobox(shared_data: Path) -> None:
    p = page(shared_data, "el", "Οξιτανική γλώσσα")
    assert p.infoboxes[0] == "Πληροφορίες γλώσσας"
    got = links(p)
    # [[Ευρώπη]]ς: Greek letters continue the link (MediaWiki's Greek link trail)
    assert ("Ευρώπης", "Ευρώπη") in got and ("Άλπεων", "Άλπεις") in got
    assert split_sentences(p.paragraphs[0].text, "el")[1].startswith(
        "Παραδοσιακά εντοπίζεται στην ιστορική περιοχή της Οξιτανίας")


def test_ja_ampersand_has_no_link_trail(shared_data: Path) -> None:
    p = page(shared_data, "ja", "アンパサンド")
    # アンパサンド（&, ampersand）は、並立助詞「…と…」を意味する[[記号]]である。 — Japanese has no link trail
    first = split_sentences(p.paragraphs[0].text, "ja")[0]
    assert first == "アンパサンド（&, ampersand）は、並立助詞「…と…」を意味する記号である。"
    assert links(p)[:2] == [("記号", "記号"), ("ラテン語", "ラテン語")]
    # [[:en:Vocative case|O]]: an interlanguage link keeps its text and is not an entity
    assert all(not t.lower().startswith("en:") for _, t in links(p, 1))
