"""The language-identification probe (mSimCSE Table 7): a logistic regression predicting a sentence's language from
its frozen embedding, trained on the ``train`` split of ``eval_langid`` (XNLI dev premises) and scored on ``test``
(XNLI test); lower accuracy = more language-agnostic embeddings. Variant ``msimcse``. Maths:
``models.evaluation.geometry.language_id_probe``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models.evaluation.task_registry import Task, Vectors, columns, evaluation_task, groups, metrics, one_thread, pick

if TYPE_CHECKING:
    from models.evaluation.results import Results

log = logging.getLogger("polysent.models.evaluation")


@dataclass(frozen=True)
class LangidSettings:
    """Language-identification probe (mSimCSE Table 7): logistic regression predicting the language of a sentence
    from its frozen embedding; lower accuracy = more language-agnostic embeddings."""

    seed: int = 0
    """seed of the logistic-regression probe"""


@evaluation_task(settings=LangidSettings, order=80, description=(
    "the language-identification probe (mSimCSE Table 7; ``eval_langid``)"))
class Langid(Task):
    """Reads ``eval_langid`` (``lang``, ``split``, ``text``)."""

    name = "langid"

    def __init__(self, settings: Any, tables: Mapping[str, Path]) -> None:
        super().__init__(settings, tables)
        self.cols = columns(tables.get("eval_langid"), "lang", "split", "text")
        self.groups = groups(self.cols, "split") if self.cols else {}

    def texts(self) -> Iterable[str]:
        for rows in self.groups.values():
            yield from pick(self.cols, rows, "text")

    def score(self, vec: Vectors, out: Results) -> None:
        from models.evaluation.geometry import language_id_probe

        with one_thread():
            self._probe(vec, out, language_id_probe)

    def _probe(self, vec: Vectors, out: Results, language_id_probe: Any) -> None:
        train, test = self.groups.get(("train",)), self.groups.get(("test",))
        if not train or not test:
            log.info("langid: eval_langid needs a train and a test split, skipped")
            return
        res = language_id_probe(vec(pick(self.cols, train, "text")), pick(self.cols, train, "lang"),
                                vec(pick(self.cols, test, "text")), pick(self.cols, test, "lang"),
                                seed=self.settings.seed)
        langs = sorted(set(pick(self.cols, test, "lang")))
        out.add("langid", "msimcse", "xnli", ",".join(langs), metrics(res, skip=("n", "n_languages")), int(res["n"]))
