"""Tatoeba bitext retrieval (methods §7.1): accuracy xx→en, en→xx and their mean (cosine, argmax, ties → lowest index,
the file's pair count as denominator), per language of ``eval_tatoeba`` and over the ``subsets`` of languages
(``xnli14``: mSimCSE's first table; ``xtreme36``; ``all``: every evaluated language). Variants: ``canonical`` (per
language and per subset), ``xtreme`` (en→xx, as XTREME reports it), ``mteb`` (mteb's BitextMining, xx→en weighted F1
and accuracy). Maths: ``models.evaluation.bitext``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from models.evaluation.task_registry import Task, Vectors, columns, evaluation_task, groups, metrics, pick

if TYPE_CHECKING:
    from models.evaluation.results import Results

log = logging.getLogger("polysent.models.evaluation")


@dataclass(frozen=True)
class TatoebaSettings:
    """Tatoeba (methods §7.1): accuracy xx→en, en→xx and their mean (cosine, argmax, ties → lowest index, the file's
    pair count as denominator), per language and over the ``subsets``; ``mteb`` adds mteb's xx→en weighted-F1 variant
    and ``xtreme`` labels the en→xx accuracy as XTREME reports it."""

    languages: tuple[str, ...] = ()
    """languages scored (codes as in ``eval_tatoeba``, e.g. ``deu``; each must be in the table); empty: every language
    of the table"""
    subsets: tuple[Literal["xnli14", "xtreme36", "all"], ...] = ("xnli14", "xtreme36", "all")
    """language subsets averaged into ``canonical`` aggregate rows: ``xnli14`` (mSimCSE's 14 XNLI languages),
    ``xtreme36`` (XTREME's 36), ``all`` (every language scored); a subset with a language not scored is skipped"""
    xtreme: bool = True
    """add the ``xtreme`` rows: en→xx accuracy per language, as XTREME reports it"""
    mteb: bool = True
    """add the ``mteb`` rows: mteb's BitextMining scores (xx→en F1, accuracy, precision, recall), the ones
    ``polysent export-results`` writes as mteb's Tatoeba"""


@evaluation_task(settings=TatoebaSettings, order=10, description=(
    "Tatoeba bitext retrieval: accuracy both ways per language and over language subsets "
    "(``eval_tatoeba``)"))
class Tatoeba(Task):
    """Reads ``eval_tatoeba`` (``lang``, ``text``, ``eng``); ``languages`` selects (each must be in the table)."""

    name = "tatoeba"

    def __init__(self, settings: Any, tables: Mapping[str, Path]) -> None:
        super().__init__(settings, tables)
        self.cols = columns(tables.get("eval_tatoeba"), "lang", "text", "eng")
        self.by_lang = groups(self.cols, "lang") if self.cols else {}
        if settings.languages:
            missing = sorted(set(settings.languages) - {k[0] for k in self.by_lang})
            if missing:
                raise ValueError(f"evaluation.tatoeba.languages: {missing} not in eval_tatoeba "
                                 f"(has {sorted(k[0] for k in self.by_lang)})")
            self.by_lang = {k: v for k, v in self.by_lang.items() if k[0] in settings.languages}

    def texts(self) -> Iterable[str]:
        for rows in self.by_lang.values():
            yield from pick(self.cols, rows, "text")
            yield from pick(self.cols, rows, "eng")

    def score(self, vec: Vectors, out: Results) -> None:
        from models.evaluation.bitext import TATOEBA_XNLI14, TATOEBA_XTREME36, bitext_mining_mteb, tatoeba_accuracy

        per_lang: dict[str, dict[str, float]] = {}
        for (lang,), rows in sorted(self.by_lang.items()):
            src, eng = vec(pick(self.cols, rows, "text")), vec(pick(self.cols, rows, "eng"))
            res = tatoeba_accuracy(src, eng)
            per_lang[lang] = metrics(res)
            out.add("tatoeba", "canonical", lang, f"{lang}-eng", per_lang[lang], len(rows))
            if self.settings.xtreme:
                out.add("tatoeba", "xtreme", lang, f"eng-{lang}", {"accuracy": res["accuracy_en_xx"]}, len(rows))
            if self.settings.mteb:
                out.add("tatoeba", "mteb", lang, f"{lang}-eng", metrics(bitext_mining_mteb(src, eng)), len(rows))
        subsets = {"xnli14": TATOEBA_XNLI14, "xtreme36": TATOEBA_XTREME36, "all": tuple(sorted(per_lang))}
        for name in self.settings.subsets:
            langs = subsets[name]
            missing = [lang for lang in langs if lang not in per_lang]
            if missing or not langs:
                log.info("tatoeba: subset %s skipped, %d of its languages are not evaluated (%s)", name,
                         len(missing), ", ".join(missing[:6]) + ("…" if len(missing) > 6 else ""))
                continue
            mean = {m: float(np.mean([per_lang[lang][m] for lang in langs])) for m in per_lang[langs[0]]}
            out.add("tatoeba", "canonical", name, f"{len(langs)} languages", mean, len(langs))
