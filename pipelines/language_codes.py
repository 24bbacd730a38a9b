"""Language codes: validation against ICU's language registry (ISO 639-1/2/3 and BCP-47 tags such as ``zh-Hant`` or
FLORES-style ``eng_Latn``), so that a typo such as ``en-de`` or ``xx`` in a config or a file name fails with a message
instead of silently producing an empty language."""

from __future__ import annotations

from functools import cache

import icu


class UnknownLanguageError(ValueError):
    pass


@cache
def is_known_language(code: str) -> bool:
    """True when ICU knows the language subtag of ``code`` (``en``, ``eng``, ``pes``, ``zh-Hant``, ``eng_Latn``)."""
    loc = icu.Locale(code.replace("_", "-") if "_" in code else code)
    lang = loc.getLanguage()
    if not lang:
        return False
    return bool(loc.getISO3Language()) or loc.getDisplayLanguage(icu.Locale("en")) != lang


def check_language(code: str, where: str) -> str:
    """``code`` unchanged when it is a known language; otherwise raise naming ``where`` (a file or config key)."""
    if not isinstance(code, str) or not code or not is_known_language(code):
        raise UnknownLanguageError(f"{where}: unknown language code {code!r}; expected an ISO 639 code such as "
                                   "'en', 'deu' or a BCP-47 tag such as 'zh-Hant'")
    return code


def primary_subtag(tag: str) -> str:
    """``en-US`` / ``EN_us`` / ``en`` → ``en`` (TMX ``xml:lang`` values carry regions and vary in case)."""
    return tag.replace("_", "-").split("-")[0].lower()


@cache
def same_language(a: str, b: str) -> bool:
    """``zh-Hant`` ~ ``zh``, ``eng`` ~ ``en``, ``iw`` ~ ``he``: compare ISO 639-3 codes of the language subtags."""
    la, lb = (icu.Locale(x.replace("_", "-")) for x in (a, b))
    return (la.getISO3Language() or la.getLanguage()) == (lb.getISO3Language() or lb.getLanguage())


def wiki_lang(site: str) -> str:
    """A Wikipedia's language code from its site id or database name: ``enwiki`` → ``en``, ``zh_min_nanwiki`` →
    ``zh-min-nan``."""
    return site.removesuffix("wiki").replace("_", "-")
