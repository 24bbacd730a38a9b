"""What every ``sources.eval`` entry and the ``corpora.eval_sets`` settings share: a pydantic base that refuses
unknown keys, and the check of a list of language codes a user typed.

Each reader module defines its own source entry on this base (``sts.StsSource``,
``classification.ClassificationSource`` …), beside the functions that read it; ``settings`` gathers them into
:class:`~pipelines.eval_sets.settings.EvalSources`. This module imports no reader, so no import runs in a circle.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from pipelines.language_codes import check_language


class StrictConfig(BaseModel):
    """A configuration entry: an unknown key is an error, not silently ignored."""

    model_config = ConfigDict(extra="forbid")


def checked_languages(codes: list[str], key: str) -> list[str]:
    """``codes`` unchanged when each is a known language; otherwise raise naming the config ``key``."""
    for code in codes:
        check_language(code, key)
    return codes
