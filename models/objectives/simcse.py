"""SimCSE / mSimCSE contrastive loss: one-way InfoNCE with optional hard negatives (B × 2B logits).

Papers/code: Gao, Yao, Chen 2021, "SimCSE: Simple Contrastive Learning of Sentence Embeddings"
(``princeton-nlp/SimCSE`` ``simcse/models.py cl_forward``); Wang, Wu, Neubig 2022, "English Contrastive Learning Can
Learn Universal Cross-lingual Sentence Embeddings" (mSimCSE, ``yaushian/mSimCSE`` ``simcse/models.py``), methods §1.3,
§6.1. With sim(u, v) = cos(u, v) / τ, anchors z1, positives z2 and hard negatives z3 (all B×d)::

    logits_i = [ sim(z1_i, z2_j) ]_{j=1..B}  ‖  [ sim(z1_i, z3_j) + w · 1[i = j] ]_{j=1..B}      (B × 2B)
    L = −(1/B) Σ_i log( exp(logits_ii) / Σ_c exp(logits_ic) )          (CE with labels arange(B))

One-directional (anchors → candidates; no symmetric term). Every row's hard negative is in every denominator; the own
hard negative's exp-term is multiplied by e^w (``hard_negative_weight``; 0 in SimCSE and mSimCSE, 1 in EASE).

mSimCSE's four training strategies use this one loss and differ only in the data that fills z1, z2, z3:

    - unsupervised: one (English Wikipedia) sentence fed twice; z1, z2 are its two dropout views, no z3;
    - English NLI: (sent0, sent1 = entailment hypothesis, hard_neg = contradiction hypothesis) → z1, z2, z3;
    - cross-lingual NLI: the same triplets with each sentence's language drawn at random (XNLI-MT; up to 15 rows of
      one meaning, hence ``groups`` to keep same-meaning rows out of each other's denominators — an option, not in
      the code);
    - parallel (supervised): translation pairs (src, tgt) → z1, z2, no z3.

Defaults: τ = 0.05, w = 0, one-directional, no group mask (SimCSE/mSimCSE code).

Relations:
    - exactly ``info_nce(z1, z2, τ, symmetric=False, hard_negatives=z3, hard_negative_weight=w, groups=groups)``;
      sentence-transformers' MultipleNegativesRankingLoss(scale = 1/τ) with (anchor, positive, negative) triplets is the
      same loss at w = 0;
    - ``ease_loss`` = this loss on two dropout views + λ · the entity loss;
    - ``mpcl_loss`` replaces the single positive by the K other members of a translation group.
"""

from __future__ import annotations

import torch

from models.objectives.info_nce import _info_nce

__all__ = ["simcse_loss"]


def simcse_loss(z1: torch.Tensor, z2: torch.Tensor, z3: torch.Tensor | None = None, temperature: float = 0.05,
                hard_negative_weight: float = 0.0, groups: torch.Tensor | None = None) -> torch.Tensor:
    """SimCSE loss of B anchors ``z1`` against positives ``z2`` and optional hard negatives ``z3``.

    Args:
        z1: B×d anchor embeddings (first view / sent0).
        z2: B×d positive embeddings (second dropout view / entailment / translation).
        z3: optional H×d hard negatives (SimCSE: H = B, row i is z1_i's own hard negative).
        temperature: τ > 0 (default 0.05).
        hard_negative_weight: w, added to logit (i, B+i) after the division by τ (needs H = B when w ≠ 0).
        groups: optional (B,) integer ids; same-id rows are not each other's in-batch negatives.

    Returns:
        The scalar loss (mean over the B anchors).
    """
    return _info_nce(z1, z2, temperature, False, z3, hard_negative_weight, groups, names=("z1", "z2", "z3", "groups"))
