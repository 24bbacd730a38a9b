"""Pair classification / paraphrase detection (PAWS-X and any 0/1-labelled pair set; mteb's PairClassification):
mteb's scores of the pair similarities with their oracle thresholds — cosine accuracy and F1 with their thresholds,
precision, recall, average precision, and the ``max_*`` over mteb's five similarity scores (``max_ap``: mteb's PAWS-X
main score) — per dataset, split and language of ``eval_pair_classification``, and their mean over the languages of a
dataset and split (``{dataset}/{split}/mean``). Variant ``mteb``. Maths: ``models.evaluation.pair_classification``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from models.evaluation.task_registry import Task, Vectors, columns, evaluation_task, groups, pick

if TYPE_CHECKING:
    from models.evaluation.results import Results

log = logging.getLogger("polysent.models.evaluation")


@dataclass(frozen=True)
class PairClassificationSettings:
    """Pair classification / paraphrase detection (PAWS-X; mteb's PairClassification): mteb's scores of the pair
    similarities with their oracle thresholds (max accuracy, max F1 with precision and recall, average precision; main
    score ``max_ap``), per dataset, split and language, and their mean over the languages of a dataset and split.
    ``datasets`` / ``splits`` select (empty = every one in ``eval_pair_classification``)."""

    datasets: tuple[str, ...] = ()
    """``dataset`` values of ``eval_pair_classification`` scored (``pawsx`` …); empty: every one"""
    splits: tuple[str, ...] = ()
    """splits scored (``dev``, ``test``, ``train``); empty: every one"""


@evaluation_task(settings=PairClassificationSettings, order=90, description=(
    "pair classification / paraphrase detection, mteb's scores (``eval_pair_classification``)"))
class PairClassification(Task):
    """Paraphrase detection (PAWS-X and other 0/1-labelled pair sets): mteb's PairClassification scores."""

    name = "pair_classification"
    METRICS = ("cosine_accuracy", "cosine_accuracy_threshold", "cosine_f1", "cosine_f1_threshold", "cosine_precision",
               "cosine_recall", "cosine_ap", "max_accuracy", "max_f1", "max_precision", "max_recall", "max_ap")

    def __init__(self, settings: Any, tables: Mapping[str, Path]) -> None:
        super().__init__(settings, tables)
        self.cols = columns(tables.get("eval_pair_classification"), "dataset", "lang", "split", "s1", "s2", "label")
        self.groups = groups(self.cols, "dataset", "split", "lang") if self.cols else {}
        if settings.datasets:
            self.groups = {k: v for k, v in self.groups.items() if k[0] in settings.datasets}
        if settings.splits:
            self.groups = {k: v for k, v in self.groups.items() if k[1] in settings.splits}

    def texts(self) -> Iterable[str]:
        for rows in self.groups.values():
            yield from pick(self.cols, rows, "s1")
            yield from pick(self.cols, rows, "s2")

    def score(self, vec: Vectors, out: Results) -> None:
        from models.evaluation.pair_classification import pair_classification_mteb

        per_set: dict[tuple[str, str], list[dict[str, float]]] = {}
        for (dataset, split, lang), rows in sorted(self.groups.items()):
            labels = pick(self.cols, rows, "label")
            if len(set(labels)) < 2:
                log.info("pair_classification %s/%s/%s: only one class among %d pairs, skipped (no threshold to "
                         "search)", dataset, split, lang, len(rows))
                continue
            res = pair_classification_mteb(vec(pick(self.cols, rows, "s1")), vec(pick(self.cols, rows, "s2")),
                                           labels)
            scores = {m: res[m] for m in self.METRICS}
            out.add("pair_classification", "mteb", f"{dataset}/{split}/{lang}", lang, scores, len(rows))
            per_set.setdefault((dataset, split), []).append(scores)
        for (dataset, split), results in sorted(per_set.items()):
            if len(results) > 1:
                mean = {m: float(np.mean([r[m] for r in results])) for m in self.METRICS if "threshold" not in m}
                out.add("pair_classification", "mteb", f"{dataset}/{split}/mean", f"{len(results)} languages", mean,
                        len(results))
