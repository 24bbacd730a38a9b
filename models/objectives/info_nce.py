"""In-batch InfoNCE over translation pairs — the contrastive baseline (single positive).

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
      τ_e = 10 or 100 (a *divisor*, EASE's code semantics) and w = 1.
    - ``mpcl_loss`` generalises it to K positives per anchor; at K = 1 without min–max scaling, and with the
      "cross-side" candidate mask, it equals ``info_nce(symmetric=True)``.
    - ``soft_label_loss`` with one-hot targets equals 2 · ``info_nce(symmetric=True)`` (IMASCL sums both directions).

The private helpers below (shape checks, cosine matrix, masked cross-entropy) are shared by the sibling modules.
"""

from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F

__all__ = ["info_nce"]


def _check_matrix(x: torch.Tensor, name: str, rows: int | None = None, dim: int | None = None,
                  rows_name: str = "B", dim_name: str = "d") -> None:
    """Raise ValueError unless ``x`` is a 2-D floating tensor (optionally with the given rows / columns)."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of shape {rows_name}×{dim_name}, got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"{name} must be a 2-D tensor of shape {rows_name}×{dim_name}, got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if rows is not None and x.shape[0] != rows:
        raise ValueError(f"{name} must have {rows_name} = {rows} rows ({rows_name}×{dim_name}), "
                         f"got shape {tuple(x.shape)}")
    if dim is not None and x.shape[1] != dim:
        raise ValueError(f"{name} must have {dim_name} = {dim} columns ({rows_name}×{dim_name}), "
                         f"got shape {tuple(x.shape)}")


def _check_pair(a: torch.Tensor, b: torch.Tensor, a_name: str, b_name: str) -> tuple[int, int]:
    """Raise ValueError unless ``a`` and ``b`` are floating B×d tensors of equal shape with B ≥ 1; return (B, d)."""
    for x, name in ((a, a_name), (b, b_name)):
        if not isinstance(x, torch.Tensor) or x.dim() != 2:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"{a_name} and {b_name} must be B×d tensors of equal shape, got {name} {shape}")
    if a.shape != b.shape:
        raise ValueError(f"{a_name} and {b_name} must be B×d tensors of equal shape, "
                         f"got {tuple(a.shape)} and {tuple(b.shape)}")
    _check_matrix(a, a_name)
    _check_matrix(b, b_name)
    if a.shape[0] == 0:
        raise ValueError(f"{a_name} must have at least one row (B ≥ 1), got shape {tuple(a.shape)}")
    return a.shape[0], a.shape[1]


def _check_ids(x: torch.Tensor | None, name: str, n: int, rows_name: str = "B") -> torch.Tensor | None:
    """Raise ValueError unless ``x`` is None or a 1-D integer tensor of length ``n``."""
    if x is None:
        return None
    if not isinstance(x, torch.Tensor) or x.dim() != 1 or x.shape[0] != n:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{name} must be a 1-D integer tensor of shape ({rows_name},) = ({n},), got {shape}")
    if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
        raise ValueError(f"{name} must be an integer (long) tensor of shape ({rows_name},), got dtype {x.dtype}")
    return x


def _check_temperature(temperature: float, name: str = "temperature") -> None:
    if not (isinstance(temperature, numbers.Real) and math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {temperature!r}")


def _cosine(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Cosine-similarity matrix of the rows of ``x`` (n×d) and ``y`` (m×d): n×m."""
    return F.normalize(x, dim=-1) @ F.normalize(y, dim=-1).T


def _same_group_mask(groups: torch.Tensor, device: torch.device) -> torch.Tensor:
    """B×B bool: True at (i, j), j ≠ i, when rows i and j share a group id."""
    g = groups.to(device)
    same = g[:, None] == g[None, :]
    return same & ~torch.eye(len(g), dtype=torch.bool, device=device)


def _diagonal_ce(logits: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of a B×C logit matrix (C ≥ B) whose target for row i is column i (−inf entries allowed)."""
    return (torch.logsumexp(logits, dim=1) - logits.diagonal()).mean()


def _info_nce(anchors: torch.Tensor, positives: torch.Tensor, temperature: float, symmetric: bool,
              hard_negatives: torch.Tensor | None, hard_negative_weight: float, groups: torch.Tensor | None,
              names: tuple[str, str, str, str]) -> torch.Tensor:
    """``info_nce`` with the argument names used in error messages (so wrappers report their own names)."""
    a_name, p_name, n_name, g_name = names
    b, d = _check_pair(anchors, positives, a_name, p_name)
    _check_temperature(temperature)
    _check_ids(groups, g_name, b)
    if hard_negatives is not None:
        _check_matrix(hard_negatives, n_name, dim=d, rows_name="H")
        if hard_negative_weight != 0 and hard_negatives.shape[0] != b:
            raise ValueError(f"{n_name} must be B×d = {b}×{d} (one per anchor) when hard_negative_weight ≠ 0, "
                             f"got shape {tuple(hard_negatives.shape)}")

    device = anchors.device
    pos_block = _cosine(anchors, positives) / temperature  # B×B
    if groups is not None:
        pos_block = pos_block.masked_fill(_same_group_mask(groups, device), float("-inf"))
    logits = pos_block
    if hard_negatives is not None:
        neg_block = _cosine(anchors, hard_negatives) / temperature  # B×H
        if hard_negative_weight != 0:
            eye = torch.eye(b, dtype=neg_block.dtype, device=device)
            neg_block = neg_block + hard_negative_weight * eye
        logits = torch.cat([pos_block, neg_block], dim=1)
    loss = _diagonal_ce(logits)
    if symmetric:
        loss = (loss + _diagonal_ce(pos_block.T)) / 2
    return loss


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
    return _info_nce(anchors, positives, temperature, symmetric, hard_negatives, hard_negative_weight, groups,
                     names=("anchors", "positives", "hard_negatives", "groups"))
