"""In-batch InfoNCE over translation pairs — the contrastive baseline (single positive).

Paper/code: the SimCSE family's ``cl_forward`` (Gao et al. 2021; mSimCSE, Wang et al. 2022) and
sentence-transformers' ``MultipleNegativesRankingLoss`` / ``MultipleNegativesSymmetricRankingLoss``.

With anchors z1 (B×d) and positives z2 (B×d), sim(u, v) = cos(u, v) / τ:

    L→ = −(1/B) Σ_i log( exp(sim(z1_i, z2_i)) / Σ_j exp(sim(z1_i, z2_j)) )

``symmetric=True`` adds the backward term L← (positives → anchors over the same B×B block) and returns
(L→ + L←) / 2, as MultipleNegativesSymmetricRankingLoss does. Defaults: τ = 0.05 (ST ``scale`` = 1/τ = 20),
symmetric. MPCL's multi-positive generalisation (K positives inside the log) reduces to this at K = 1.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def info_nce(z1: torch.Tensor, z2: torch.Tensor, temperature: float = 0.05, symmetric: bool = True) -> torch.Tensor:
    """Mean InfoNCE loss of B anchor/positive pairs; row i of ``z2`` is the positive of row i of ``z1``."""
    if z1.shape != z2.shape or z1.dim() != 2:
        raise ValueError(f"expected two B×d tensors of equal shape, got {tuple(z1.shape)} and {tuple(z2.shape)}")
    logits = F.normalize(z1, dim=-1) @ F.normalize(z2, dim=-1).T / temperature
    labels = torch.arange(z1.shape[0], device=z1.device)
    loss = F.cross_entropy(logits, labels)
    if symmetric:
        loss = (loss + F.cross_entropy(logits.T, labels)) / 2
    return loss
