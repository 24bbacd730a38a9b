"""Semantic textual similarity (methods §7.4): Spearman and Pearson ×100 of the cosine per dataset and track/subset
of ``eval_sts``. Variants: ``canonical`` (every subset), ``senteval`` (STS12–16 as SentEval aggregates them: ``all``
= correlation over the concatenated subsets, ``mean``, ``wmean``), ``mteb`` (mteb's STS evaluator, cosine_spearman
and cosine_pearson). Maths: ``models.evaluation.sts``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from models.evaluation.task_registry import Task, Vectors, columns, evaluation_task, groups, metrics, pick

if TYPE_CHECKING:
    from models.evaluation.results import Results

SENTEVAL_DATASETS = ("sts12", "sts13", "sts14", "sts15", "sts16")  # aggregated as SentEval does


@dataclass(frozen=True)
class StsSettings:
    """STS (methods §7.4): Spearman and Pearson ×100 of cosine per track/subset; STS12–16 also SentEval's "all"
    (concatenated subsets), "mean" and "wmean"; ``mteb`` adds mteb's cosine_spearman in its [0, 1] scale."""

    datasets: tuple[str, ...] = ()
    """``dataset`` values of ``eval_sts`` scored (``sts17``, ``stsb``, ``stsb-multi-mt``, ``sick-r``, ``sts12`` …);
    empty: every one"""
    mteb: bool = True
    """add the ``mteb`` rows: mteb's cosine_spearman and cosine_pearson per subset (what the STS17, STS-B, SICK-R and
    stsb-multi-mt exports read)"""


@evaluation_task(settings=StsSettings, order=30, description=(
    "semantic textual similarity: Spearman and Pearson of the cosine per dataset and track (``eval_sts``)"))
class Sts(Task):
    """Reads ``eval_sts`` (``dataset``, ``subset``, ``lang1``, ``lang2``, ``s1``, ``s2``, ``score``); ``datasets``
    selects (empty = every one)."""

    name = "sts"

    def __init__(self, settings: Any, tables: Mapping[str, Path]) -> None:
        super().__init__(settings, tables)
        self.cols = columns(tables.get("eval_sts"), "dataset", "subset", "lang1", "lang2", "s1", "s2", "score")
        self.groups = groups(self.cols, "dataset", "subset") if self.cols else {}
        if settings.datasets:
            self.groups = {k: v for k, v in self.groups.items() if k[0] in settings.datasets}

    def texts(self) -> Iterable[str]:
        for rows in self.groups.values():
            yield from pick(self.cols, rows, "s1")
            yield from pick(self.cols, rows, "s2")

    def score(self, vec: Vectors, out: Results) -> None:
        from models.evaluation.sts import paired_cosine, senteval_aggregate, sts_correlations, sts_mteb

        senteval: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
        for (dataset, subset), rows in sorted(self.groups.items()):
            e1, e2 = vec(pick(self.cols, rows, "s1")), vec(pick(self.cols, rows, "s2"))
            gold = np.asarray(pick(self.cols, rows, "score"), dtype=np.float64)
            langs = f"{self.cols['lang1'][rows[0]]}-{self.cols['lang2'][rows[0]]}"
            out.add("sts", "canonical", f"{dataset}/{subset}", langs, metrics(sts_correlations(e1, e2, gold)),
                    len(rows))
            if self.settings.mteb:
                res = sts_mteb(e1, e2, gold)
                scores = {m: res[m] for m in ("cosine_spearman", "cosine_pearson")}  # ×100 (mteb_* keys: [0, 1])
                out.add("sts", "mteb", f"{dataset}/{subset}", langs, scores, len(rows))
            if dataset in SENTEVAL_DATASETS:
                senteval.setdefault(dataset, {})[subset] = (paired_cosine(e1, e2), gold)
        for dataset, per_subset in sorted(senteval.items()):
            agg = senteval_aggregate(per_subset)
            n = int(agg["n"])  # type: ignore[arg-type]
            for how in ("all", "mean", "wmean"):
                out.add("sts", "senteval", f"{dataset}/{how}", "en-en",
                        {"spearman": agg[f"spearman_{how}"], "pearson": agg[f"pearson_{how}"]}, n)  # type: ignore[dict-item]
