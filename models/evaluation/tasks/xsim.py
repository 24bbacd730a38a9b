"""xSIM (LASER ``source/xsim.py``, methods §7.8): the margin-based error rate of retrieving each sentence's
translation, per language pair of every N-way parallel set of ``eval_parallel`` (NTREX-128, FLORES), and its mean
over the pairs. ``pairs``: ``to_english`` (xx → ``pivot``, as FLORES xSIM) or ``nway`` (every ordered pair). Variant
``laser`` (ratio margin, k = 4; ``compare_text``: a retrieved sentence with the gold one's text counts as right).
Maths: ``models.evaluation.xsim``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from models.evaluation.task_registry import Task, Vectors, columns, evaluation_task, groups, pick, torch_device
from models.settings import AtLeastOne

if TYPE_CHECKING:
    from models.evaluation.results import Results

log = logging.getLogger("polysent.models.evaluation")


@dataclass(frozen=True)
class XsimSettings:
    """xSIM (LASER ``source/xsim.py``, methods §7.8): margin-based error rate per language pair on N-way parallel
    sets. ``pairs``: ``to_english`` (xx→eng, as FLORES xSIM) or ``nway`` (every ordered pair)."""

    k: AtLeastOne = 4
    """nearest neighbours the margin compares a candidate with (LASER: 4)"""
    margin: Literal["ratio", "distance", "absolute"] = "ratio"
    """score of a candidate: ``ratio`` (LASER's xSIM), ``distance`` or ``absolute`` (plain cosine)"""
    compare_text: bool = True
    """a retrieved sentence with the same text as the gold translation counts as right (LASER's text
    comparison: a sentence the set holds twice is no error)"""
    pairs: Literal["to_english", "nway"] = "to_english"
    """``to_english``: each language retrieves in ``pivot`` (FLORES xSIM); ``nway``: every ordered pair of languages"""
    pivot: str = "eng"
    """``to_english``: the language every other one retrieves in (its code in ``eval_parallel``)"""


@evaluation_task(settings=XsimSettings, order=60, description=(
    "xSIM: margin-retrieval error rate per language pair of the N-way sets (``eval_parallel``)"))
class Xsim(Task):
    """Reads ``eval_parallel`` (``dataset``, ``lang``, ``idx``, ``text``; row ``idx`` of every language is the same
    sentence)."""

    name = "xsim"

    def __init__(self, settings: Any, tables: Mapping[str, Path]) -> None:
        super().__init__(settings, tables)
        self.cols = columns(tables.get("eval_parallel"), "dataset", "lang", "idx", "text")
        self.groups = groups(self.cols, "dataset", "lang") if self.cols else {}

    def texts(self) -> Iterable[str]:
        for rows in self.groups.values():
            yield from pick(self.cols, rows, "text")

    def side(self, vec: Vectors, dataset: str, lang: str) -> tuple[np.ndarray, list[str]]:
        """One language of a set in ``idx`` order: its embeddings and its texts."""
        rows = sorted(self.groups[(dataset, lang)], key=lambda i: self.cols["idx"][i])
        texts = pick(self.cols, rows, "text")
        return vec(texts), texts

    def score(self, vec: Vectors, out: Results) -> None:
        from models.evaluation.xsim import xsim

        s = self.settings
        device = torch_device()
        for dataset in sorted({d for d, _ in self.groups}):
            langs = sorted(lang for d, lang in self.groups if d == dataset)
            if s.pairs == "to_english":
                if s.pivot not in langs:
                    log.info("xsim %s: pivot %s not in the set, skipped", dataset, s.pivot)
                    continue
                pairs = [(lang, s.pivot) for lang in langs if lang != s.pivot]
            else:
                pairs = [(a, b) for a in langs for b in langs if a != b]
            sides = {lang: self.side(vec, dataset, lang) for lang in langs}
            errors = []
            for a, b in pairs:
                res = xsim(sides[a][0], sides[b][0], margin=s.margin, k=s.k,
                           tgt_texts=sides[b][1] if s.compare_text else None, device=device)
                errors.append(res["error_rate"])
                out.add("xsim", "laser", f"{dataset}/{a}-{b}", f"{a}-{b}", {"error_rate": res["error_rate"]},
                        int(res["n"]))
            if errors:
                out.add("xsim", "laser", f"{dataset}/mean", f"{len(pairs)} pairs",
                        {"error_rate": float(np.mean(errors))}, len(pairs))
