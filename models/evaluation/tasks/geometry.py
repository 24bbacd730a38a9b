"""Alignment and uniformity (Wang & Isola 2020; EASE §7.2; methods §7.7) on translation pairs: per language pair,
the alignment of the pairs and the uniformity of the union of both sides (``max_points`` caps it, seeded), read from
Tatoeba (``source: tatoeba``: ``eval_tatoeba``, xx ↔ English) or the N-way sets (``source: parallel``:
``eval_parallel``, every language ↔ ``eng``). Variant ``wang_isola``; lower is better on both. Maths:
``models.evaluation.geometry``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np

from models.evaluation.task_registry import Task, Vectors, columns, evaluation_task, groups, pick
from models.settings import Range

if TYPE_CHECKING:
    from models.evaluation.results import Results


@dataclass(frozen=True)
class GeometrySettings:
    """Alignment and uniformity (Wang & Isola 2020; EASE §7.2) on translation pairs (Tatoeba, N-way sets), per
    language pair; uniformity over the union of both sides (``max_points`` caps it, seeded)."""

    source: Literal["tatoeba", "parallel"] = "tatoeba"
    """the translation pairs: ``tatoeba`` (``eval_tatoeba``, each language with English) or ``parallel``
    (``eval_parallel``, each language with ``eng``)"""
    max_points: Annotated[int, Range(ge=2)] = 20000
    """uniformity over at most this many embeddings of a pair's two sides (a seeded sample: its cost is
    quadratic)"""
    seed: int = 0
    """seed of that sample"""


@evaluation_task(settings=GeometrySettings, order=70, description=(
    "alignment and uniformity of translation pairs (``eval_tatoeba`` or ``eval_parallel``)"))
class Geometry(Task):
    """Translation pairs from ``eval_tatoeba`` or ``eval_parallel`` (the sets of the Tatoeba and xSIM tasks)."""

    name = "geometry"

    def __init__(self, settings: Any, tables: Mapping[str, Path]) -> None:
        super().__init__(settings, tables)
        self.pairs: dict[str, tuple[list[str], list[str]]] = {}
        if settings.source == "tatoeba":
            cols = columns(tables.get("eval_tatoeba"), "lang", "text", "eng")
            for (lang,), rows in sorted((groups(cols, "lang") if cols else {}).items()):
                self.pairs[f"{lang}-eng"] = (pick(cols, rows, "text"), pick(cols, rows, "eng"))
        else:
            cols = columns(tables.get("eval_parallel"), "dataset", "lang", "idx", "text")
            by_lang = groups(cols, "dataset", "lang") if cols else {}
            for (dataset, lang), rows in sorted(by_lang.items()):
                pivot = by_lang.get((dataset, "eng"))
                if lang == "eng" or pivot is None:
                    continue
                rows = sorted(rows, key=lambda i: cols["idx"][i])
                piv = sorted(pivot, key=lambda i: cols["idx"][i])
                self.pairs[f"{dataset}/{lang}-eng"] = (pick(cols, rows, "text"), pick(cols, piv, "text"))

    def texts(self) -> Iterable[str]:
        for a, b in self.pairs.values():
            yield from a
            yield from b

    def score(self, vec: Vectors, out: Results) -> None:
        from models.evaluation.geometry import alignment, uniformity

        s = self.settings
        for name, (a, b) in sorted(self.pairs.items()):
            x, y = vec(a), vec(b)
            both = np.concatenate([x, y])
            scores = {"alignment": alignment(x, y),
                      "uniformity": uniformity(both, max_points=s.max_points, seed=s.seed)}
            out.add("geometry", "wang_isola", name, name.rsplit("/", 1)[-1], scores, len(a))
