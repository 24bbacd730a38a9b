"""Clustering (methods §7.5) per dataset and language of ``eval_clustering``. Variants: ``ease`` (EASE's protocol:
k-means on the raw embeddings, ``n_init`` seeded runs, Hungarian-matched accuracy, on every document) and ``mteb``
(mteb's bootstrapped MiniBatchKMeans V-measure — each language scored as mteb scores a single-language task, a fresh
``Random(seed)`` — on every document, or on mteb's own 4 % document sample with ``mteb_document_sample``). Maths:
``models.evaluation.clustering``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models.evaluation.task_registry import Task, Vectors, columns, evaluation_task, groups, one_thread, pick
from models.settings import AtLeastOne

if TYPE_CHECKING:
    from models.evaluation.results import Results


@dataclass(frozen=True)
class ClusteringSettings:
    """Clustering (methods §7.5): k-means (``n_init`` runs, seeded) with Hungarian-matched accuracy as EASE, and
    mteb's bootstrapped MiniBatchKMeans V-measure (on all documents, or mteb's own document sample with
    ``mteb_document_sample``)."""

    languages: tuple[str, ...] = ()
    """languages of ``eval_clustering`` scored; empty: every one"""
    n_init: AtLeastOne = 10
    """``ease`` rows: k-means runs from different seeded starts, the one of least inertia kept"""
    seed: int = 42
    """seed of k-means and of mteb's V-measure bootstrap (mteb's is 42; another seed is not exported)"""
    v_measure: bool = True
    """add the ``mteb`` rows: mteb's bootstrapped MiniBatchKMeans V-measure"""
    mteb_document_sample: bool = False
    """V-measure on mteb's own 4 % document sample instead of every document (such rows are not
    exported: JMTEB's MewsC16JaClustering scores every document)"""


@evaluation_task(settings=ClusteringSettings, order=40, description=(
    "k-means clustering: EASE's Hungarian accuracy and mteb's V-measure (``eval_clustering``)"))
class Clustering(Task):
    """Reads ``eval_clustering`` (``dataset``, ``lang``, ``text``, ``label``); ``languages`` selects."""

    name = "clustering"

    def __init__(self, settings: Any, tables: Mapping[str, Path]) -> None:
        super().__init__(settings, tables)
        self.cols = columns(tables.get("eval_clustering"), "dataset", "lang", "text", "label")
        self.groups = groups(self.cols, "dataset", "lang") if self.cols else {}
        if settings.languages:
            self.groups = {k: v for k, v in self.groups.items() if k[1] in settings.languages}

    def texts(self) -> Iterable[str]:
        for rows in self.groups.values():
            yield from pick(self.cols, rows, "text")

    def score(self, vec: Vectors, out: Results) -> None:
        with one_thread():
            for (dataset, lang), rows in sorted(self.groups.items()):
                self._score_one(vec, out, dataset, lang, rows)

    def _score_one(self, vec: Vectors, out: Results, dataset: str, lang: str, rows: list[int]) -> None:
        """EASE's protocol on every document; mteb's V-measure on all of them too (each language as mteb scores a
        single-language task: a fresh ``Random(seed)``), or on mteb's own 4 % document sample."""
        from models.evaluation.clustering import kmeans_hungarian_accuracy, select_documents_to_embed, v_measure_mteb

        s = self.settings
        emb, labels = vec(pick(self.cols, rows, "text")), pick(self.cols, rows, "label")
        res = kmeans_hungarian_accuracy(emb, labels, n_init=s.n_init, seed=s.seed)
        out.add("clustering", "ease", f"{dataset}/{lang}", lang, {"hungarian_accuracy": res["accuracy"]}, len(rows))
        if s.v_measure:
            if s.mteb_document_sample:
                keep = select_documents_to_embed(len(rows), seed=s.seed)
                emb, labels = emb[keep], [labels[i] for i in keep]
            res = v_measure_mteb(emb, labels, seed=s.seed)
            out.add("clustering", "mteb", f"{dataset}/{lang}", lang,
                    {m: res[m] for m in ("v_measure", "v_measure_std", "ami")}, len(labels))
