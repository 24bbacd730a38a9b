"""Sentence segmentation with ICU's BreakIterator — polyglot's splitter, without polyglot's overhead.

polyglot's ``Text(p, hint_language_code=lang).sentences`` is an ICU sentence BreakIterator for the language's locale
with whitespace-only pieces dropped; calling PyICU directly gives identical sentences at ~10× the speed (measured in
the docs). Link spans are mapped onto the sentence that contains their start.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

import icu


@lru_cache(maxsize=64)
def _breaker(lang: str) -> icu.BreakIterator:
    return icu.BreakIterator.createSentenceInstance(icu.Locale(lang))


def sentence_spans(text: str, lang: str) -> Iterator[tuple[int, int]]:
    """Yield ``(start, end)`` character offsets of the non-blank sentences of ``text``, whitespace trimmed.

    ICU works in UTF-16 code units; offsets are converted back to Python string indices (astral characters such as
    emoji or rare CJK count twice in UTF-16).
    """
    bi = _breaker(lang)
    bi.setText(text)
    # map UTF-16 offsets → str offsets
    if text.isascii() or all(ord(c) < 0x10000 for c in text):
        to_str = None
    else:
        to_str = []
        for i, c in enumerate(text):
            to_str.append(i)
            if ord(c) >= 0x10000:
                to_str.append(i)
        to_str.append(len(text))
    prev = 0
    for b in bi:
        s, e = (prev, b) if to_str is None else (to_str[prev], to_str[b])
        prev = b
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            yield s, e


def split_sentences(text: str, lang: str) -> list[str]:
    return [text[s:e] for s, e in sentence_spans(text, lang)]
