"""ICU sentence segmentation: polyglot's sentences on real paragraphs of every sample language, plus edge cases.

polyglot (a dev extra) is only the reference; tests that need it or ``../shared/data`` skip with the reason.
"""

from __future__ import annotations

import logging
import random
import warnings
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from types import ModuleType

import icu
import pytest

from pipelines.wikipedia.dump_reader import read_dump
from pipelines.wikipedia.sentences import _breaker, sentence_spans, split_sentences
from pipelines.wikipedia.wikitext import parse_wikitext

SAMPLE_LANGS = ("en", "ja", "el", "uk", "vi")
MIN_PARAGRAPHS = 1000


@pytest.fixture(scope="module")
def polyglot_text() -> Iterator[ModuleType]:
    with warnings.catch_warnings():  # its sources have invalid escapes ("\w"), warned about when compiled
        warnings.simplefilter("ignore")
        text = pytest.importorskip("polyglot.text", reason="polyglot not installed (pip install -e '.[dev]')")
    # polyglot runs cld2 on every text, even with a language hint, and logs when the guess is unreliable
    logger = logging.getLogger("polyglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield text
    logger.setLevel(level)


def polyglot_sentences(polyglot_text: ModuleType, text: str, lang: str) -> list[str]:
    return [str(s) for s in polyglot_text.Text(text, hint_language_code=lang).sentences]


def utf16_to_str(text: str) -> list[int]:
    """``m[u]`` = the ``str`` index of UTF-16 offset ``u`` (the slow, obvious way)."""
    m = []
    for i, c in enumerate(text):
        m.extend([i, i] if ord(c) > 0xFFFF else [i])
    m.append(len(text))
    return m


def sample_paragraphs(dump: Path, lang: str, minimum: int = MIN_PARAGRAPHS) -> list[str]:
    """Paragraphs of the dump's first main-namespace articles, in dump order, until ``minimum`` (or all of them)."""
    site, pages = read_dump(dump)
    drop = {site.namespaces[k] for k in (6, 14) if k in site.namespaces}  # as extract_dump does
    paragraphs: list[str] = []
    for page in pages:
        if page.ns != 0 or page.redirect is not None:
            continue
        paragraphs.extend(p.text for p in parse_wikitext(page.text, drop, lang=lang).paragraphs)
        if len(paragraphs) >= minimum:
            break
    return paragraphs


# ---------------------------------------------------------------- polyglot on real paragraphs


@pytest.mark.shared_data
@pytest.mark.parametrize("lang", SAMPLE_LANGS)
def test_same_sentences_as_polyglot_on_real_paragraphs(
    lang: str, shared_data: Path, polyglot_text: ModuleType
) -> None:
    dump = shared_data / "wikipedia" / f"{lang}wiki-sample.xml.bz2"
    if not dump.exists():
        pytest.skip(f"{dump} not available")
    paragraphs = sample_paragraphs(dump, lang)
    assert len(paragraphs) >= MIN_PARAGRAPHS
    n_sentences = n_astral = 0
    for p in paragraphs:
        ours = split_sentences(p, lang)
        theirs = polyglot_text.Text(p, hint_language_code=lang).sentences
        n_sentences += len(theirs)
        # polyglot's own boundaries (UTF-16 offsets kept on each Sentence), converted to str indices and stripped
        to_str = utf16_to_str(p)
        assert ours == [p[to_str[s.start]:to_str[s.end]].strip() for s in theirs], p
        if p.isascii() or max(p) <= "\uffff":
            assert ours == [str(s) for s in theirs], p
        else:  # polyglot slices str with UTF-16 offsets: its strings are wrong after an astral character
            n_astral += 1
        assert [p[s:e] for s, e in sentence_spans(p, lang)] == ours
    assert n_sentences >= len(paragraphs)
    assert n_astral <= len(paragraphs) // 100  # nearly all compared string for string


def test_polyglot_uses_root_rules_whatever_the_language(polyglot_text: ModuleType) -> None:
    from polyglot.tokenize import SentenceTokenizer

    root = icu.BreakIterator.createSentenceInstance(icu.Locale.getRoot()).getRules()
    for lang in (*SAMPLE_LANGS, "de", "ru"):
        assert SentenceTokenizer(locale=lang).breaker.getRules() == root
    # so Greek ";" does not end a sentence in polyglot, although ICU's Greek rules say it does
    text = "Τι κάνεις; Καλά είμαι. Εσύ;"
    assert polyglot_sentences(polyglot_text, text, "el") == split_sentences(text, "el") == [
        "Τι κάνεις; Καλά είμαι.", "Εσύ;"]


def test_polyglot_mis_slices_after_astral_characters(polyglot_text: ModuleType) -> None:
    text = "😀 Hello there. How are you? Fine."
    assert split_sentences(text, "en") == ["😀 Hello there.", "How are you?", "Fine."]
    # polyglot applies ICU's UTF-16 offsets to the str: shifted by one character per astral character
    assert polyglot_sentences(polyglot_text, text, "en") == ["😀 Hello there. H", "ow are you? F", "ine."]


@pytest.mark.parametrize(("text", "lang"), [
    ("Hello world. How are you? I'm fine!", "en"),
    ("Mr. Smith went to Washington. He left. Dr. Who came at 3 p.m. today.", "en"),
    ("東京は日本の首都である。人口は約1400万人。「はい。」と言った。", "ja"),
    ("Η Αθήνα είναι η πρωτεύουσα. Τι κάνεις; Καλά!", "el"),
    ("Київ — столиця України. Населення близько 3 млн. Чому?", "uk"),
    ("Hà Nội là thủ đô. Dân số khoảng 8 triệu người.", "vi"),
    ("Line one.\n\n   \nLine two.  \u3000", "en"),
])
def test_same_as_polyglot_on_handmade_text(text: str, lang: str, polyglot_text: ModuleType) -> None:
    assert split_sentences(text, lang) == polyglot_sentences(polyglot_text, text, lang)


# ---------------------------------------------------------------- behaviour without polyglot or data


def test_utf16_offsets_with_astral_characters() -> None:
    text = "😀 Hello there. 𠮷野家 is rare CJK (U+20BB7)! 𝐁old 𝐀. End 😀😀."
    spans = list(sentence_spans(text, "en"))
    assert [text[s:e] for s, e in spans] == [
        "😀 Hello there.", "𠮷野家 is rare CJK (U+20BB7)!", "𝐁old 𝐀.", "End 😀😀."]
    ja = "𠮷野家に行った。𩸽を食べた。🍣も。"
    assert split_sentences(ja, "ja") == ["𠮷野家に行った。", "𩸽を食べた。", "🍣も。"]
    assert list(sentence_spans(ja, "ja")) == [(0, 8), (8, 14), (14, 17)]


def test_offsets_match_a_per_character_map_on_random_text() -> None:
    rng = random.Random(0)
    alphabet = [*"abc xyz", ". ", "! ", "? ", "。", "\n", "  ", "😀", "𠀀", "𝐀", "é", "Ω", "\u3000", "\ud800"]
    root = icu.BreakIterator.createSentenceInstance(icu.Locale.getRoot())
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60)))
        root.setText(text)
        to_str = utf16_to_str(text)
        bounds = [0, *(to_str[b] for b in root)]
        expected = [text[s:e].strip() for s, e in pairwise(bounds)]
        assert split_sentences(text, "en") == [x for x in expected if x], repr(text)
        assert [text[s:e] for s, e in sentence_spans(text, "en")] == [x for x in expected if x], repr(text)


def test_whitespace_only_pieces_dropped_and_spans_trimmed() -> None:
    text = "  Hello.\n\n   \nWorld.  \u3000\t"
    root = icu.BreakIterator.createSentenceInstance(icu.Locale.getRoot())
    root.setText(text)
    bounds = [0, *root]
    pieces = [text[s:e] for s, e in pairwise(bounds)]
    assert any(p.strip() == "" for p in pieces)  # ICU yields whitespace-only pieces ("\n", "   \n")
    assert split_sentences(text, "en") == ["Hello.", "World."]
    spans = list(sentence_spans(text, "en"))
    assert spans == [(2, 8), (14, 20)]
    assert all(text[s:e] == text[s:e].strip() for s, e in spans)
    assert split_sentences("", "en") == [] and split_sentences(" \n\u3000 ", "ja") == []


def test_japanese_full_stop_splits() -> None:
    assert split_sentences("今日は晴れです。明日は雨でしょう。傘を持って行きますか？はい！", "ja") == [
        "今日は晴れです。", "明日は雨でしょう。", "傘を持って行きますか？", "はい！"]


def test_greek_semicolon_question_mark() -> None:
    text = "Τι κάνεις; Καλά είμαι."
    # polyglot's (root) rules: ";" is not a sentence terminator, in Greek either — nor with suppressions on
    assert split_sentences(text, "el") == ["Τι κάνεις; Καλά είμαι."]
    assert split_sentences(text, "el", suppress_abbreviations=True) == ["Τι κάνεις; Καλά είμαι."]
    # ICU's own Greek rules would split there (and at every ";" used as a semicolon: "1960–1962; 1963–1964")
    el = icu.BreakIterator.createSentenceInstance(icu.Locale("el"))
    el.setText(text)
    assert list(el) == [11, len(text)]


def test_abbreviation_suppression() -> None:
    text = "Mr. Smith went to Washington. He left."
    assert split_sentences(text, "en") == ["Mr.", "Smith went to Washington.", "He left."]
    assert split_sentences(text, "en", suppress_abbreviations=True) == ["Mr. Smith went to Washington.", "He left."]
    assert list(sentence_spans(text, "en", suppress_abbreviations=True)) == [(0, 29), (30, 38)]
    # ICU 77's English list has "Mrs.", "Prof.", "U.S." … but not "Dr."
    assert split_sentences("He met Dr. Smith. Mrs. Jones came. Prof. X left.", "en", suppress_abbreviations=True) == [
        "He met Dr.", "Smith.", "Mrs. Jones came.", "Prof. X left."]
    de = "Dr. Müller kam heute. Er ging."
    assert split_sentences(de, "de") == ["Dr.", "Müller kam heute.", "Er ging."]
    assert split_sentences(de, "de", suppress_abbreviations=True) == ["Dr. Müller kam heute.", "Er ging."]
    # ICU matches an exception as a suffix of the word before the break: "app." ends in "pp.", German "kam." in "am."
    assert split_sentences("I use the app. It works.", "en", suppress_abbreviations=True) == [
        "I use the app. It works."]
    assert split_sentences("Er kam. Er ging.", "de", suppress_abbreviations=True) == ["Er kam. Er ging."]
    # languages without an ICU list are unchanged
    for lang, t in [("uk", "Див. розділ 2. Далі."), ("vi", "TS. Nam đến. Ông ấy đi."), ("ja", "Mr. 田中。次。")]:
        assert split_sentences(t, lang, suppress_abbreviations=True) == split_sentences(t, lang)


def test_iterators_cached_per_language_and_suppression() -> None:
    assert _breaker("en", True) is _breaker("en", True)
    assert _breaker("en", True) is not _breaker("en", False)
    assert _breaker("en", False) is _breaker("ja", False) is _breaker("el", False)  # root, as polyglot


def test_interleaved_generators_do_not_share_state() -> None:
    a, b = "One. Two. Three.", "一。二。三。"
    pairs = list(zip(sentence_spans(a, "en"), sentence_spans(b, "ja"), strict=True))
    assert [a[s:e] for (s, e), _ in pairs] == ["One.", "Two.", "Three."]
    assert [b[s:e] for _, (s, e) in pairs] == ["一。", "二。", "三。"]


def test_threads_splitting_at_once_get_the_sequential_result() -> None:
    """Two shard nodes run in Prefect's thread pool split text at the same time: no shared ICU iterator."""
    import sys
    from concurrent.futures import ThreadPoolExecutor

    texts = [" ".join(f"Sentence {i}.{j} is here. And a second one follows? Yes!" for j in range(i % 7 + 1))
             for i in range(3000)]
    expected = [split_sentences(t, "en") for t in texts]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: a shared iterator would be caught
    try:
        with ThreadPoolExecutor(4) as pool:
            got = list(pool.map(lambda t: split_sentences(t, "en"), texts))
    finally:
        sys.setswitchinterval(interval)
    assert got == expected
