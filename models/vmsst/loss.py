"""VMSST's objective: translation terms + λ·ELBO (Wieting, Clark, Cohen, Neubig, Berg-Kirkpatrick, "Beyond Contrastive
Learning: A Variational Generative Model for Multilingual Retrieval", ACL 2023; methods §5.2, §5.5, §13).

For a translation pair (x_i, x_j) in languages (l_i, l_j), with the semantic posterior read from one side s of the
pair (alternating within the batch in the paper) and each language posterior from its own sentence:

    L = −log p(x_i | μ_sem(x_j)) − log p(x_j | μ_sem(x_i))                               (translation terms)
        + λ · [ −log p(x_i | z_{l_i}, z_sem) − log p(x_j | z_{l_j}, z_sem)               (reconstruction)
                + β(t) · (KL(q(z_sem|x_s)) + KL(q(z_{l_i}|x_i)) + KL(q(z_{l_j}|x_j))) ]  (KL to N(0, I))

    KL(N(μ, σ²) ‖ N(0, I)) = −½ Σ_d (1 + log σ²_d − μ²_d − σ²_d),   β(t) = min(1, t / x0)

The translation terms read the mean of the other side's semantic posterior alone: in the paper's single shared decoder
with the language variable at its prior mean 0 (``VmsstObjective.translation_decoder: shared``), or from a decoder of
μ_sem only (``separate``).
Token NLLs are un-smoothed cross-entropies summed over a sentence's tokens (BGT ``bgt_loss.py``, ``sentence_avg``); the
loss is averaged over pairs. Defaults (§13): λ = 0.025 from a pretrained encoder, 0.1 from random init; the paper
anneals over x0 = 1,000,000 updates (so β ends at 0.1 after its 100k steps). BITRANSLATION is the translation terms
alone from μ_sem (λ = 0, no language variables). VMSST-CONTRASTIVE (paper §6.3) is the contrastive loss plus the VMSST
loss weighted by λ_vc: L = InfoNCE(μ_sem(x_i), μ_sem(x_j)) + λ_vc·L (``VmsstObjective.vmsst_weight``, 0.0005
pretrained / 0.001 random init; ``models.objectives.vmsst``).

Free bits (BGT ``--kl-threshold``, optional): each dimension's KL of each sentence is clamped from below at
``free_bits / k`` before summing, so no gradient pushes a dimension under that floor.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F


def kl_annealing(step: int, anneal_steps: int) -> float:
    """β(t) = min(1, t / x0) for update t (0-based); x0 ≤ 0 switches annealing off (β = 1)."""
    if step < 0:
        raise ValueError(f"kl_annealing: step must be ≥ 0, got {step}")
    return 1.0 if anneal_steps <= 0 else min(1.0, step / anneal_steps)


def gaussian_kl(mu: torch.Tensor, logvar: torch.Tensor, free_bits: float = 0.0) -> torch.Tensor:
    """Per-row KL(N(μ, diag σ²) ‖ N(0, I)) in float32, shape (B,); ``free_bits`` > 0 clamps each dimension's term at
    ``free_bits / k`` (k = the latent size)."""
    if mu.shape != logvar.shape or mu.dim() != 2:
        raise ValueError(f"gaussian_kl: mu and logvar must be B×k matrices of one shape, got {tuple(mu.shape)} and "
                         f"{tuple(logvar.shape)}")
    if free_bits < 0:
        raise ValueError(f"gaussian_kl: free_bits must be ≥ 0, got {free_bits}")
    mu, logvar = mu.float(), logvar.float()
    per_dim = -0.5 * (1.0 + logvar - mu.pow(2) - logvar.exp())
    if free_bits > 0:
        per_dim = per_dim.clamp(min=free_bits / mu.shape[1])
    return per_dim.sum(1)


def sequence_nll(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-row negative log-likelihood, summed over the target tokens where ``mask`` is 1 (B×T×V logits, B×T ids).

    The cross-entropy runs in float32 (autocast would upcast it anyway: bf16 log-softmax over a large vocabulary
    loses the small probabilities), or float64 for float64 logits (tests compare against float64 references), so
    backward keeps one fp32 B×T×V log-softmax per call; the decoder's ``checkpointing`` recomputes it instead of
    keeping it."""
    if logits.shape[:2] != targets.shape or targets.shape != mask.shape:
        raise ValueError(f"sequence_nll: logits {tuple(logits.shape)}, targets {tuple(targets.shape)} and mask "
                         f"{tuple(mask.shape)} do not line up (B×T×V, B×T, B×T)")
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    nll = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none").view_as(targets)
    return (nll * mask.to(nll.dtype)).sum(1)


def vmsst_loss(translation_nll: torch.Tensor, reconstruction_nll: torch.Tensor | None = None,
               kl: torch.Tensor | None = None, *, elbo_weight: float = 0.1, beta: float = 1.0) -> torch.Tensor:
    """Per-pair loss (B,): ``translation_nll`` + λ·(``reconstruction_nll`` + β·``kl``).

    Args:
        translation_nll: (B,) NLL of both translation terms of each pair, summed.
        reconstruction_nll: (B,) NLL of reconstructing both sentences from their language variable and z_sem; None
            for BITRANSLATION (then ``kl`` must be None too).
        kl: (B,) KL of the three variables, summed (``gaussian_kl``).
        elbo_weight: λ (0.025 pretrained init, 0.1 random init in the paper).
        beta: the annealing weight β(t) (``kl_annealing``).
    """
    if (reconstruction_nll is None) != (kl is None):
        raise ValueError("vmsst_loss: give both reconstruction_nll and kl (VMSST) or neither (BITRANSLATION)")
    if reconstruction_nll is None:
        return translation_nll
    if not translation_nll.shape == reconstruction_nll.shape == kl.shape:
        raise ValueError(f"vmsst_loss: per-pair terms of different shapes {tuple(translation_nll.shape)}, "
                         f"{tuple(reconstruction_nll.shape)}, {tuple(kl.shape)}")
    return translation_nll + elbo_weight * (reconstruction_nll + beta * kl)
