"""The shared normalisation: NFKC fast path equals plain NFKC everywhere; the scalar and series forms agree."""

from __future__ import annotations

import random
import re
import unicodedata

import polars as pl

from pipelines.text_normalise import _SEPARATORS, nfkc_series, nfkc_unstable_class, normalise, normalise_series


def test_characters_outside_the_class_are_nfkc_stable_in_context() -> None:
    rust = nfkc_unstable_class()  # Rust regex syntax \x{HHHH} → Python's \UHHHHHHHH
    cls = re.compile(re.sub(r"\\x\{([0-9A-F]+)\}", lambda m: f"\\U{int(m[1], 16):08x}", rust))
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        if cls.match(ch) is None:
            for s in ("a" + ch + "b", "\u1100" + ch, ch + "a"):
                assert unicodedata.normalize("NFKC", s) == s, f"U+{cp:04X} changes under NFKC in {s!r}"


def test_fast_path_equals_plain_nfkc_on_mixed_scripts() -> None:
    rnd = random.Random(0)
    pieces = ["Straße", "Ｈｅｌｌｏ", "ﬁne", "e\u0301", "\u1100\u1161\u11a8", "한국어", "Ω", "x²", "…", "ｶﾀｶﾅ", "١٢٣",
              "naïve", "А̀", "日本語。", "\u00a0", "Å", "ǆ", "ℌ", "㎏", "plain ascii text"]
    texts = ["".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 6))) for _ in range(30_000)]
    got = nfkc_series(pl.Series(texts))
    assert got.to_list() == [unicodedata.normalize("NFKC", t) for t in texts]


def test_normalise_examples_and_forms_agree() -> None:
    assert normalise("Hello,  WORLD!") == normalise("hello world") == "hello world"
    assert normalise("１２３ Ａｂｃ。") == "123 abc"
    assert normalise("GROSSMUTTER") == normalise("Großmutter")
    texts = ["Straße — «Haus»", "ＡＢＣ", "a\tb\u00a0c", "", "...", "ﬁ"] * 5000
    assert normalise_series(pl.Series(texts)).to_list() == [normalise(t) for t in texts[:6]] * 5000


def test_one_pass_separators_equal_two_passes() -> None:
    rnd = random.Random(1)
    alphabet = ["a", "b", "é", " ", "  ", "\t", "\u00a0", ",", "!", "—", "«", "»", "_", "$", "…", "\n", "x1"]
    texts = ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 14))) for _ in range(20_000)]
    s = pl.Series(texts)
    two = s.str.replace_all(r"[\p{P}\p{S}_]+", " ").str.replace_all(r"\s\s+|[^\S ]", " ")
    assert s.str.replace_all(_SEPARATORS, " ").to_list() == two.to_list()
