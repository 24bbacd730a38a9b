"""Classification probes on frozen embeddings (methods §7.6) per dataset of ``eval_classification``. Variants:
``mteb`` (mteb's protocol, in each language: ``n_experiments`` logistic-regression fits on ``samples_per_label``
training rows per label, undersampled with ``seed``; ``None`` = the whole training split) and ``zero_shot`` (the probe
trained on ``source_language`` and tested on every language: MLDoc/MTOP-style cross-lingual transfer). Maths:
``models.evaluation.classification``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from models.evaluation.task_registry import Task, Vectors, columns, evaluation_task, groups, metrics, one_thread, pick
from models.settings import AtLeastOne

if TYPE_CHECKING:
    from models.evaluation.results import Results

log = logging.getLogger("polysent.models.evaluation")


@dataclass(frozen=True)
class ClassificationSettings:
    """Logistic-regression probes on frozen embeddings (mteb's protocol: ``n_experiments`` undersampled fits of
    ``samples_per_label`` per label; ``None`` = the whole training split) and zero-shot cross-lingual transfer from
    ``source_language`` (MLDoc/MTOP style)."""

    n_experiments: AtLeastOne = 10
    """logistic-regression fits, each on its own undersample of the training split; their scores are
    averaged (mteb: 10)"""
    samples_per_label: AtLeastOne | None = 8
    """training rows per label of each fit (mteb: 8); null: the whole training split in one fit"""
    seed: int = 42
    """seed of the undersampling and of the fits (mteb: 42)"""
    source_language: str = "en"
    """``zero_shot`` rows: the language whose training split trains the probe scored on every language"""
    train_split: str = "train"
    """the split the probes are trained on"""
    test_split: str = "test"
    """the split the probes are scored on"""


@evaluation_task(settings=ClassificationSettings, order=50, description=(
    "logistic-regression probes on frozen embeddings, in-language and zero-shot (``eval_classification``)"))
class Classification(Task):
    """Reads ``eval_classification`` (``dataset``, ``lang``, ``split``, ``text``, ``label``)."""

    name = "classification"

    def __init__(self, settings: Any, tables: Mapping[str, Path]) -> None:
        super().__init__(settings, tables)
        self.cols = columns(tables.get("eval_classification"), "dataset", "lang", "split", "text", "label")
        self.groups = groups(self.cols, "dataset", "lang", "split") if self.cols else {}

    def texts(self) -> Iterable[str]:
        for rows in self.groups.values():
            yield from pick(self.cols, rows, "text")

    def _split(self, vec: Vectors, dataset: str, lang: str, name: str) -> tuple[np.ndarray, list] | None:
        rows = self.groups.get((dataset, lang, name))
        return None if not rows else (vec(pick(self.cols, rows, "text")), pick(self.cols, rows, "label"))

    def score(self, vec: Vectors, out: Results) -> None:
        with one_thread():
            for dataset in sorted({d for d, _, _ in self.groups}):
                self._score_dataset(vec, out, dataset)

    def _score_dataset(self, vec: Vectors, out: Results, dataset: str) -> None:
        from models.evaluation.classification import logreg_probe, zero_shot_transfer

        s = self.settings
        kw = {"n_experiments": s.n_experiments, "samples_per_label": s.samples_per_label, "seed": s.seed}
        langs = sorted({lang for d, lang, _ in self.groups if d == dataset})
        tests = {lang: t for lang in langs if (t := self._split(vec, dataset, lang, s.test_split)) is not None}
        for lang in langs:
            train, test = self._split(vec, dataset, lang, s.train_split), tests.get(lang)
            if train is not None and test is not None:
                res = logreg_probe(*train, *test, **kw)
                out.add("classification", "mteb", f"{dataset}/{lang}", lang, metrics(res), len(test[1]))
        source = self._split(vec, dataset, s.source_language, s.train_split)
        if source is None:
            log.info("classification %s: no %s/%s split, zero-shot transfer skipped", dataset, s.source_language,
                     s.train_split)
            return
        # a probe cannot transfer to a language whose labels it never saw (MewsC-16's categories are each
        # language's own names): such languages are skipped, not scored at 0
        known = set(source[1])
        foreign = sorted(lang for lang, (_, labels) in tests.items() if not known & set(labels))
        if foreign:
            log.info("classification %s: %s share no label with %s/%s, zero-shot transfer skipped for them",
                     dataset, ", ".join(foreign), s.source_language, s.train_split)
        tests = {lang: t for lang, t in tests.items() if lang not in foreign}
        if not tests:
            return
        for lang, res in sorted(zero_shot_transfer(*source, tests, **kw).items()):
            out.add("classification", "zero_shot", f"{dataset}/{lang}", f"{s.source_language}-{lang}", metrics(res),
                    len(tests[lang][1]))
