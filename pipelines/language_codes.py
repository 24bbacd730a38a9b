"""Language codes: the codes a data set's own file and folder names carry, the codes a user types in a config, and
their display names.

Two kinds of code are told apart, because they fail in different ways:

- A code a *user* types (a config's ``languages``, ``tatoeba_languages``, pivots …) is checked against ICU's language
  registry (ISO 639-1/2/3 and BCP-47 tags such as ``zh-Hant`` or FLORES-style ``eng_Latn``) plus
  :data:`EXTRA_LANGUAGES`, so that a typo such as ``xx`` fails with a message naming the key instead of silently
  selecting nothing (:func:`check_language`).
- A code a *data set* carries in its file or folder names (``tatoeba.ber-eng.ber``, SIB-200's ``taq_Tfng/``, NTREX's
  ``newstest2019-ref.mey.txt``) is data: the publisher chose it, and a registry that lacks it (ICU does not know six of
  LASER's 112 Tatoeba codes — ``ber``, ``cbk``, ``max``, ``orv``, ``swg``, ``tzl`` — nor thirteen FLORES-200 ones)
  must not stop a run. It is accepted when it has the shape of a language tag and carried through unchanged
  (:func:`data_language`); only a name that is no language tag at all (``tatoeba.de u-eng.de u``) is an error.

:func:`language_name` gives the English display name for tables and reports: ICU's where ICU knows the language, the
small tables below for known codes it lacks, the raw code otherwise.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from functools import cache

import icu

log = logging.getLogger("polysent.pipelines.language_codes")

# Codes published evaluation sets use that ICU's registry lacks (names: ISO 639-3 / ISO 639-2 reference names, as the
# data sets' own language lists give them).
EXTRA_LANGUAGES: dict[str, str] = {
    # LASER Tatoeba v1 (facebookresearch/LASER data/tatoeba/v1)
    "ber": "Berber languages", "cbk": "Chavacano", "max": "North Moluccan Malay", "orv": "Old Russian",
    "swg": "Swabian", "tzl": "Talossan",
    # FLORES-200 / SIB-200 (facebookresearch/flores, dadelani/sib-200)
    "acm": "Mesopotamian Arabic", "acq": "Ta'izzi-Adeni Arabic", "ajp": "South Levantine Arabic",
    "apc": "North Levantine Arabic", "azb": "South Azerbaijani", "cjk": "Chokwe", "fuv": "Nigerian Fulfulde",
    "hne": "Chhattisgarhi", "kbp": "Kabiyè", "pbt": "Southern Pashto", "quy": "Ayacucho Quechua", "taq": "Tamasheq",
    # NTREX-128 (LANGUAGES.tsv)
    "mey": "Hassaniya Arabic",
}

# ISO 15924 names of the script subtags FLORES-200 uses, for an ICU build that lacks one (ICU answers with the bare
# subtag then).
EXTRA_SCRIPTS: dict[str, str] = {
    "Arab": "Arabic", "Armn": "Armenian", "Beng": "Bengali", "Cyrl": "Cyrillic", "Deva": "Devanagari",
    "Ethi": "Ethiopic", "Geor": "Georgian", "Grek": "Greek", "Gujr": "Gujarati", "Guru": "Gurmukhi",
    "Hang": "Hangul", "Hans": "Simplified Han", "Hant": "Traditional Han", "Hebr": "Hebrew", "Jpan": "Japanese",
    "Khmr": "Khmer", "Knda": "Kannada", "Laoo": "Lao", "Latn": "Latin", "Mlym": "Malayalam", "Mymr": "Myanmar",
    "Olck": "Ol Chiki", "Orya": "Odia", "Sinh": "Sinhala", "Taml": "Tamil", "Telu": "Telugu", "Tfng": "Tifinagh",
    "Thai": "Thai", "Tibt": "Tibetan", "Nkoo": "N'Ko",
}

# The shape of a language tag as data sets write it: a 2–3 letter ISO 639 language subtag, then subtags of 2–8 letters
# or digits joined by ``-`` (BCP-47: zh-Hant, zho-CN) or ``_`` (FLORES-200: eng_Latn).
_TAG = re.compile(r"[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*")
# FLORES-200's lang_Script exactly (hub copies hold one column per such code beside columns such as ``id``)
_FLORES = re.compile(r"[a-z]{3}_[A-Z][a-z]{3}")

_EN = icu.Locale("en")


class UnknownLanguageError(ValueError):
    pass


def _locale(code: str) -> icu.Locale:
    return icu.Locale(code.replace("_", "-"))


def _subtag(code: str) -> str:
    return code.replace("_", "-").split("-")[0].lower()


@cache
def _icu_knows(code: str) -> bool:
    loc = _locale(code)
    lang = loc.getLanguage()
    if not lang:
        return False
    return bool(loc.getISO3Language()) or loc.getDisplayLanguage(_EN) != lang


@cache
def is_known_language(code: str) -> bool:
    """True when ICU (or :data:`EXTRA_LANGUAGES`) knows the language subtag of ``code`` (``en``, ``eng``, ``pes``,
    ``zh-Hant``, ``eng_Latn``, ``ber``, ``taq_Tfng``)."""
    return _icu_knows(code) or _subtag(code) in EXTRA_LANGUAGES


def is_language_tag(code: object) -> bool:
    """True when ``code`` has the shape of a language tag (``ber``, ``zho-CN``, ``abc_Zzzz``), known or not."""
    return isinstance(code, str) and _TAG.fullmatch(code) is not None


def is_flores_code(code: object) -> bool:
    """True for a FLORES-200 ``lang_Script`` code (``eng_Latn``, ``taq_Tfng``), known to ICU or not."""
    return isinstance(code, str) and _FLORES.fullmatch(code) is not None


def check_language(code: str, where: str) -> str:
    """A code a user typed: ``code`` unchanged when it is a known language; otherwise raise naming ``where`` (the
    config key)."""
    if not isinstance(code, str) or not code or not is_known_language(code):
        raise UnknownLanguageError(f"{where}: unknown language code {code!r}; expected an ISO 639 code such as "
                                   "'en', 'deu' or a BCP-47 tag such as 'zh-Hant'")
    return code


def data_language(code: str, where: str) -> str:
    """A code a data set's own file or folder name carries: ``code`` unchanged when it has the shape of a language
    tag, whether or not ICU knows it (an unknown one is logged once, with the display name it will get); otherwise
    raise naming ``where`` (the file or folder)."""
    if not is_language_tag(code):
        raise UnknownLanguageError(f"{where}: {code!r} is not a language code; expected an ISO 639 code with optional "
                                   "script or region subtags, as in 'deu', 'swh', 'zho-CN' or 'eng_Latn'")
    if not _icu_knows(code):
        _log_unknown(code)
    return code


@cache
def _log_unknown(code: str) -> None:
    name = language_name(code)
    log.info("language code %r is not in ICU's registry; kept as the data set names it (%s)", code,
             name if name != code else "no display name known")


@cache
def _name(code: str) -> str:
    loc = _locale(code)
    lang = _subtag(code)
    if _icu_knows(code):
        language = loc.getDisplayLanguage(_EN)
    elif lang in EXTRA_LANGUAGES:
        language = EXTRA_LANGUAGES[lang]
    else:
        return code
    details = []
    if script := loc.getScript():
        shown = loc.getDisplayScript(_EN)
        details.append(EXTRA_SCRIPTS.get(script, shown) if shown in ("", script) else shown)
    if country := loc.getCountry():
        details.append(loc.getDisplayCountry(_EN) or country)
    return f"{language} ({', '.join(details)})" if details else language


def language_name(code: str, names: Mapping[str, str] | None = None) -> str:
    """English display name of ``code``: ``names[code]`` when the data set lists one (NTREX ``LANGUAGES.tsv``), else
    ICU's (``deu`` → German, ``eng_Latn`` → English (Latin)), else :data:`EXTRA_LANGUAGES` (``ber`` → Berber
    languages, ``taq_Tfng`` → Tamasheq (Tifinagh)), else the raw code (``abc_Zzzz``)."""
    if names and code in names:
        return names[code]
    if not is_language_tag(code):
        return code
    return _name(code)


# a subtag that continues the language before it rather than starting one: a script (``Latn``, ``Arab``) or a region
# (``GB``, ``CN``, ``419``), as BCP-47 writes them — title case and upper case
_CONTINUES = re.compile(r"[A-Z][a-z]{3}|[A-Z]{2}|[0-9]{3}")


def split_languages(value: str) -> list[str]:
    """The languages a language or language-pair value names: ``deu-eng`` → [deu, eng], ``aze-Latn`` → [aze-Latn],
    ``en-zho-CN`` → [en, zho-CN], ``deu_Latn-eng_Latn`` → [deu_Latn, eng_Latn]. A ``-``-joined part that is a script or
    region subtag belongs to the language before it (splitting on every ``-`` made ``zho-CN`` the languages ``zho``
    and ``cn``). Lower-case regions (``pt-br``) cannot be told from a second language and split."""
    out: list[str] = []
    for part in value.split("-"):
        if out and _CONTINUES.fullmatch(part):
            out[-1] += "-" + part
        elif part:
            out.append(part)
    return out


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
