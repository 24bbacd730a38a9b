"""The contrastive baseline: in-batch InfoNCE over translation pairs (single positive) — settings, batches, loss.

Paper/code: the SimCSE family's ``cl_forward`` (Gao et al. 2021, "SimCSE: Simple Contrastive Learning of Sentence
Embeddings"; mSimCSE, Wang et al. 2022) and sentence-transformers' ``MultipleNegativesRankingLoss`` /
``MultipleNegativesSymmetricRankingLoss`` (methods §1.3, §8.1).

With anchors a (B×d), positives p (B×d), optional hard negatives n (H×d) and sim(u, v) = cos(u, v) / τ, the logits of
anchor i are one row of a B × (B+H) matrix::

    ℓ_ij     = sim(a_i, p_j)                        j = 1..B   (−inf where j ≠ i and groups[i] == groups[j])
    ℓ_i,B+j  = sim(a_i, n_j) + w · 1[i = j]         j = 1..H   (never masked)

    L→ = −(1/B) Σ_i log( exp(ℓ_ii) / Σ_c exp(ℓ_ic) )

The own hard negative (column B+i) gets the additive logit ``w`` after the division by τ, i.e. its exp-term is
multiplied by e^w — SimCSE's ``weights`` / ``hard_negative_weight`` (H must equal B when w ≠ 0). Every row's hard
negatives are in every anchor's denominator, as in SimCSE and MultipleNegativesRankingLoss.

``groups`` (B,) marks rows of the same meaning (a translation group, duplicated sentences): their in-batch positive
columns are removed from each other's denominators, so a same-meaning sentence is never a negative.

``symmetric=True`` adds the backward term L← (positives → anchors over the B×B positive block only, hard negatives
ignored in that direction, the group mask applied there too) and returns (L→ + L←) / 2, as
MultipleNegativesSymmetricRankingLoss does.

Defaults: τ = 0.05 (sentence-transformers ``scale`` = 1/τ = 20), symmetric, no hard negatives, w = 0.

Relations:
    - ``simcse_loss`` is ``info_nce(symmetric=False)`` with hard negatives (SimCSE / mSimCSE, B × 2B logits).
    - ``ease_entity_loss`` is the same one-way computation with entity embeddings as positives/negatives and
      τ_e = 10 or 100 (a *divisor*, EASE's code semantics) and w = ``hard_negative_weight`` (0: the paper; 1: its code).
    - ``mpcl_loss`` generalises it to K positives per anchor; at K = 1 without min–max scaling, and with the
      "cross-side" candidate mask, it equals ``info_nce(symmetric=True)``.
    - ``soft_label_loss`` with one-hot targets equals 2 · ``info_nce(symmetric=True)`` (IMASCL sums both directions).

Settings (``ContrastiveObjective``, kind ``contrastive``, the default kind): ``data`` the pair table (bitext, XNLI
single pairs, or two members of each XNLI group), ``temperature`` τ, ``symmetric``, ``hard_negatives`` /
``hard_negative_weight`` (XNLI contradictions, additive logit w), ``language_pair_batches``. Inputs: the ``data``
table; a batch embeds two columns (a, b) and, with hard negatives, a third. Shared loss parts: ``loss_parts``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from models.lazy_torch import torch
from models.objective_registry import Citation, Objective, objective
from models.objectives.loss_parts import masked_info_nce
from models.settings import AtLeastOne, NonNegative, PairData, Positive, pair_tables
from models.training.components import (
    Component,
    StepBatch,
    gathered,
    groups_with_contradiction,
    pair_corpus,
    text_lengths,
)
from models.training.sampling import BatchPlan, step_rng

if TYPE_CHECKING:
    from models.encoder import SentenceEncoder
    from models.settings import TrainSettings

__all__ = ["ContrastiveComponent", "ContrastiveObjective", "info_nce"]


CITATION = Citation(
    'Gao, Yao, Chen 2021, "SimCSE: Simple Contrastive Learning of Sentence Embeddings" (EMNLP) — the '
    "in-batch InfoNCE of its supervised form, on translation pairs",
    "https://arxiv.org/abs/2104.08821")


@objective(tables=pair_tables, citation=CITATION)
@dataclass(frozen=True)
class ContrastiveObjective(Objective):
    """In-batch InfoNCE on translation pairs (methods §1.3, §8.1): the contrastive baseline, and MPCL's "+Single"
    with ``data: xnli_single_pairs``. ``xnli_groups`` as pair data draws two members of a group per row.
    ``hard_negatives`` adds the contradiction group's member in the positive's language (xnli data only) with the
    additive logit ``hard_negative_weight``. ``language_pair_batches``: one language pair per batch."""

    kind: Literal["contrastive"] = "contrastive"
    """``contrastive``: in-batch InfoNCE on translation pairs, the kind of an entry that names none"""
    data: PairData = "bitext_pairs"
    """the pair table: ``bitext_pairs``, ``xnli_single_pairs`` (MPCL's "+Single" baseline) or ``xnli_groups`` (two
    random members of each drawn group form a pair)"""
    weight: NonNegative = 1.0
    """this objective's loss is multiplied by it before the run sums its objectives' losses"""
    batch_size: AtLeastOne = 32
    """pairs per batch (B): each pair's positive is its translation, the other B − 1 pairs' translations are its
    negatives (a pair of the same meaning is masked, never a negative)"""
    temperature: Positive = 0.05
    """τ: logits are cos / τ (0.05: sentence-transformers' scale 20)"""
    symmetric: bool = True
    """add the positives → anchors direction and average the two (sentence-transformers'
    MultipleNegativesSymmetricRankingLoss); false: anchors → positives only (MultipleNegativesRankingLoss)"""
    hard_negatives: bool = False
    """add the XNLI contradiction hypothesis of each group, in the positive's language when it has one, as a hard
    negative in every anchor's denominator; needs ``data: xnli_groups`` and draws only groups with a contradiction"""
    hard_negative_weight: float = 0.0
    """w, added to the logit of a row's own hard negative after the division by τ (its exp-term × e^w; SimCSE's
    ``hard_negative_weight``); 0: a plain negative"""
    language_pair_batches: bool = False
    """every batch holds pairs of one language pair (IMASCL's single-language-pair batches); false: pairs of every
    language pair mixed"""


class ContrastiveComponent(Component, builds=ContrastiveObjective):
    """Contrastive InfoNCE (+ optional XNLI hard negatives) on pairs, or on two members of each XNLI group."""

    objective: ContrastiveObjective

    def __init__(self, name: str, o: ContrastiveObjective, tables: Mapping[str, Path], settings: TrainSettings,
                 stream: int, device: torch.device, student: SentenceEncoder | None = None) -> None:
        super().__init__(name, o, settings.seed, stream, device)
        if o.hard_negatives and o.data != "xnli_groups":
            raise ValueError(f"objective {name}: hard_negatives needs data: xnli_groups (its contradiction groups)")
        self.groups, self.pairs, self.plan = pair_corpus(name, o, tables, settings, stream)
        self.eligible: np.ndarray | None = None
        if o.hard_negatives:  # only groups with a contradiction (XNLI premises): the hard negative is always one
            assert self.groups is not None
            self.eligible = groups_with_contradiction(name, self.groups)
            lengths = text_lengths(self.pairs.a, self.pairs.b)[self.eligible]
            self.plan = BatchPlan(len(self.eligible), o.batch_size, settings.seed + stream,
                                  lengths=lengths if settings.length_bucketing else None,
                                  what=f"objective {name} ({o.data} with a contradiction)")

    def batch(self, step: int) -> StepBatch:
        o, idx = self.objective, self.plan.batch(step)
        if self.eligible is not None:
            idx = self.eligible[idx]
        a, b, negs = [], [], []
        if self.groups is not None:
            rng = step_rng(self.seed, self.stream, step)
            for g in idx:
                members = self.groups.members[g]
                i, j = rng.choice(len(members), size=2, replace=False)
                a.append(members[i][1])
                b.append(members[j][1])
                if o.hard_negatives:  # the contradiction hypothesis, in b's language when it has one
                    pool = self.groups.members[self.groups.negative[g]]
                    same = [t for lang, t in pool if lang == members[j][0]]
                    negs.append(same[0] if same else pool[int(rng.integers(len(pool)))][1])
        else:
            a, b = [self.pairs.a[i] for i in idx], [self.pairs.b[i] for i in idx]
        meaning = self.ids(self.pairs.meaning[idx])
        columns = [self.local(a), self.local(b)] + ([self.local(negs)] if negs else [])

        def loss_fn(embs: list[torch.Tensor]) -> torch.Tensor:
            z = gathered(embs)
            return info_nce(z[0], z[1], o.temperature, o.symmetric, hard_negatives=z[2] if len(z) > 2 else None,
                            hard_negative_weight=o.hard_negative_weight, groups=meaning)

        return StepBatch(columns, loss_fn, len(a) + len(b) + len(negs))


def info_nce(anchors: torch.Tensor, positives: torch.Tensor, temperature: float = 0.05, symmetric: bool = True,
             hard_negatives: torch.Tensor | None = None, hard_negative_weight: float = 0.0,
             groups: torch.Tensor | None = None) -> torch.Tensor:
    """Mean InfoNCE loss of B anchor/positive pairs; row i of ``positives`` is the positive of row i of ``anchors``.

    Args:
        anchors: B×d anchor embeddings (any floating dtype and device; normalised inside).
        positives: B×d positive embeddings, same shape as ``anchors``.
        temperature: τ > 0; logits are cos / τ (default 0.05, i.e. scale 20).
        symmetric: add the positives → anchors term over the B×B block and average the two directions.
        hard_negatives: optional H×d embeddings, in every anchor's denominator (forward direction only).
        hard_negative_weight: w, added to logit (i, B+i) after the division by τ; needs H = B when w ≠ 0 and is inert
            without hard negatives.
        groups: optional (B,) integer ids; j ≠ i with the same id is removed from row i's (and column i's)
            denominator.

    Returns:
        The scalar loss (mean over anchors; the two directions averaged when ``symmetric``).
    """
    return masked_info_nce(anchors, positives, temperature, symmetric, hard_negatives, hard_negative_weight, groups,
                     names=("anchors", "positives", "hard_negatives", "groups"))
