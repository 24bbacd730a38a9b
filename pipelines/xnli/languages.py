"""The XNLI languages a corpus setting names — a list, or a preset of the MPCL paper — checked in one place for every
setting that names them (``corpora.xnli_groups.languages``, ``corpora.nli_triples.languages``)."""

from __future__ import annotations

from typing import Any

from pydantic import field_validator

from pipelines.language_codes import check_language
from pipelines.xnli.sources import XNLI_LANGUAGES

LANGUAGE_PRESETS: dict[str, list[str]] = {
    "mpcl": ["en", "de", "fr", "es", "ru", "zh"],  # MPCL main setting
    "all": list(XNLI_LANGUAGES),  # MPCL hard-negative variant
    "unseen": ["bg", "el", "vi", "sw"],
    "unseen_plus": ["bg", "el", "vi", "sw", "hi", "th"],
    "seen": ["en", "de", "fr", "es", "ar", "tr"],
}


def resolve_languages(v: list[str] | str, where: str) -> list[str]:
    """A language list or preset name → the validated XNLI language list."""
    if isinstance(v, str):
        if v not in LANGUAGE_PRESETS:
            raise ValueError(f"unknown language preset {v!r}; expected a list or one of {list(LANGUAGE_PRESETS)}")
        v = list(LANGUAGE_PRESETS[v])
    if len(v) < 2:
        raise ValueError("a group needs at least 2 languages")
    for lang in v:
        check_language(lang, where)
        if lang not in XNLI_LANGUAGES:
            raise ValueError(f"{lang!r} is not an XNLI language; XNLI has {', '.join(XNLI_LANGUAGES)}")
    if len(set(v)) != len(v):
        raise ValueError(f"languages repeat: {v}")
    return v


def xnli_languages_validator(where: str, field: str = "languages") -> Any:
    """The pydantic validator of a settings model's ``field`` (a list of XNLI languages or a preset name, resolved to
    the list by :func:`resolve_languages`); ``where`` is the config key its errors name. Assign it in the class body:
    ``_languages = xnli_languages_validator("corpora.xnli_groups.languages")``."""

    def resolve(cls: type, v: list[str] | str) -> list[str]:
        return resolve_languages(v, where)

    return field_validator(field)(classmethod(resolve))
