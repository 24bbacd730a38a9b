"""Bitext retrieval evaluation (docs methods §7.1–§7.3, §7.8, §9): where each protocol lives.

* :mod:`models.evaluation.knn` — exact cosine k-NN in bounded memory (ties → lowest index);
* :mod:`models.evaluation.bitext` — Tatoeba accuracy (both directions, XTREME en→xx) and mteb BitextMining metrics;
* :mod:`models.evaluation.margin` — LASER margin scoring (ratio / distance / absolute);
* :mod:`models.evaluation.bucc` — LASER BUCC mining, threshold search, oracle / held-out F1, mteb's BUCC;
* :mod:`models.evaluation.xsim` — LASER xSIM error rate and its N-way matrix.

This module only re-exports the common entry points (``retrieval_accuracy`` keeps the old fraction-valued API).
"""

from __future__ import annotations

from models.evaluation.bitext import (
    aggregate,
    bitext_mining_mteb,
    retrieval_accuracy,
    tatoeba_accuracy,
    tatoeba_xtreme,
)
from models.evaluation.bucc import Candidate, bucc_f1, bucc_mteb, evaluate_bucc, mine, optimize_threshold
from models.evaluation.knn import cosine_topk
from models.evaluation.margin import margin_scores
from models.evaluation.xsim import xsim, xsim_matrix

__all__ = [
    "Candidate",
    "aggregate",
    "bitext_mining_mteb",
    "bucc_f1",
    "bucc_mteb",
    "cosine_topk",
    "evaluate_bucc",
    "margin_scores",
    "mine",
    "optimize_threshold",
    "retrieval_accuracy",
    "tatoeba_accuracy",
    "tatoeba_xtreme",
    "xsim",
    "xsim_matrix",
]
