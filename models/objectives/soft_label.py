"""Soft-label contrastive distillation from a frozen monolingual teacher (IMASCL).

Paper/code: arXiv 2405.16155 and ``YAI12xLinq-B/IMASCL`` (``AMETrainer._compute_loss_from_type``, loss_type "CS";
methods §3, §13). A batch holds B translation pairs (x_i, y_i); the student embeds both sides, the teacher one or both.

Targets (``soft_label_targets``, no gradient — the teacher is frozen). With Â, B̂ the L2-normalised teacher embeddings of
the two sides (the teacher's dimension may differ from the student's)::

    "priority":  S_T = Â Âᵀ               (Â = the side in the higher-priority language, e.g. English; the caller
                                            picks it per pair, as the code's ``--embed_direction input``)
    "average":   S_T = (Â Âᵀ + B̂ B̂ᵀ) / 2  (``--embed_direction both``)
    W = row-softmax(S_T / τ)  (``w_func="softmax"``, the paper and ``train.sh``)   or   W = S_T  (``"raw"``)

Student loss (``soft_label_loss``). With S = Ê_a Ê_bᵀ (student cosine) and the soft cross-entropy::

    L_rows(S, W) = −(1/B) Σ_i Σ_j W_ij log softmax_j(S_ij / τ)
    L_cross = L_rows(S, W) + L_rows(Sᵀ, Wᵀ)           (paper Eq. 6; the two directions are summed, as in the code)
    L_mono  = L_rows(S_aa, W) + L_rows(S_aaᵀ, Wᵀ) + L_rows(S_bb, W) + L_rows(S_bbᵀ, Wᵀ)     (S_aa = Ê_a Ê_aᵀ, …)
    tms=False:  L = L_cross
    tms=True:   L = λ · L_cross + L_mono                (TMS, "train mono space"; paper Eq. 8, λ = ``cross_weight``)

Defaults: τ = 0.1 for targets and student (paper §13, ``train.sh``), "priority", softmax targets, no TMS, λ = 0.1.

Paper vs code (methods §3.3, §D.0, §D.3):
    - λ: the paper weights the cross-lingual term by λ = 0.1 (Eq. 8); the public code adds the TMS terms with weight 1
      and has no λ — ``cross_weight=1.0`` reproduces the code. ``cross_weight`` is unused when ``tms=False``.
    - No teacher (``--embed_model None``): the code uses W = I *through the softmax*, i.e. W = softmax(I/τ), which is
      not one-hot (≈ 0.9988 on the diagonal for B = 28, τ = 0.1). Pass ``soft_label_targets(torch.eye(B))`` to
      reproduce that quirk, or ``torch.eye(B)`` itself as ``targets`` for hard labels.
    - The code prepends ``"query: "`` (the E5 query prefix) to the *teacher's* inputs only; the student sees the raw
      sentence. That belongs to the caller's encoding step, not to this loss.
    - The code's margin (P = softmax((S − margin·[S_T > 0.95]) / τ), 0.95 = ``positive_threshold``) is 0 in every
      default, hence inert; it is not offered here.
    - ``targets`` are treated as constants (detached) in ``soft_label_loss``.

Relations:
    - with hard (one-hot) targets, ``soft_label_loss(tms=False)`` = L→ + L← = 2 · ``info_nce(a, b, τ, symmetric=True)``;
      an identity teacher (one-hot teacher rows) with a target temperature → 0 gives such targets;
    - sentence-transformers' ``DistillKLDivLoss`` is the closest library loss (KL instead of soft CE, which differs by
      the targets' entropy, a constant).
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F

from models.objectives.info_nce import _check_matrix, _check_pair, _check_temperature

__all__ = ["soft_label_loss", "soft_label_targets"]


def soft_label_targets(teacher_a: torch.Tensor, teacher_b: torch.Tensor | None = None, temperature: float = 0.1,
                       mode: Literal["priority", "average"] = "priority",
                       w_func: Literal["softmax", "raw"] = "softmax") -> torch.Tensor:
    """B×B soft targets W from a frozen teacher's embeddings (computed without gradient).

    Args:
        teacher_a: B×d_t teacher embeddings of the priority side (normalised inside).
        teacher_b: B×d_t teacher embeddings of the other side; required by ``mode="average"``, ignored by
            ``"priority"``.
        temperature: τ > 0 of the target softmax (default 0.1; unused by ``w_func="raw"``).
        mode: ``"priority"`` (S_T = Â Âᵀ) or ``"average"`` (S_T = (Â Âᵀ + B̂ B̂ᵀ) / 2).
        w_func: ``"softmax"`` (W = row-softmax(S_T / τ)) or ``"raw"`` (W = S_T).

    Returns:
        W, a detached B×B tensor in the teacher's dtype and device.
    """
    _check_matrix(teacher_a, "teacher_a", dim_name="d_t")
    b = teacher_a.shape[0]
    if b == 0:
        raise ValueError(f"teacher_a must have at least one row (B×d_t), got shape {tuple(teacher_a.shape)}")
    if mode not in ("priority", "average"):
        raise ValueError(f"mode must be 'priority' or 'average', got {mode!r}")
    if w_func not in ("softmax", "raw"):
        raise ValueError(f"w_func must be 'softmax' or 'raw', got {w_func!r}")
    _check_temperature(temperature)
    if mode == "average":
        if teacher_b is None:
            raise ValueError(f"teacher_b (B×d_t = {b}×…) is required with mode='average'")
        _check_matrix(teacher_b, "teacher_b", rows=b, dim_name="d_t")
    with torch.no_grad():
        a = F.normalize(teacher_a.detach(), dim=-1)
        s_t = a @ a.T
        if mode == "average":
            bn = F.normalize(teacher_b.detach().to(device=a.device, dtype=a.dtype), dim=-1)
            s_t = (s_t + bn @ bn.T) / 2
        w = torch.softmax(s_t / temperature, dim=1) if w_func == "softmax" else s_t
    return w.detach()


def _soft_rows(s: torch.Tensor, w: torch.Tensor, temperature: float) -> torch.Tensor:
    """L_rows(S, W) = −(1/B) Σ_i Σ_j W_ij log softmax_j(S_ij / τ)."""
    return -(w * torch.log_softmax(s / temperature, dim=1)).sum(dim=1).mean()


def _soft_both(s: torch.Tensor, w: torch.Tensor, temperature: float) -> torch.Tensor:
    return _soft_rows(s, w, temperature) + _soft_rows(s.T, w.T, temperature)


def soft_label_loss(student_a: torch.Tensor, student_b: torch.Tensor, targets: torch.Tensor, temperature: float = 0.1,
                    tms: bool = False, cross_weight: float = 0.1) -> torch.Tensor:
    """Soft-target contrastive loss of B student translation pairs (IMASCL loss_type "CS").

    Args:
        student_a: B×d student embeddings of side a (normalised inside).
        student_b: B×d student embeddings of side b, same shape.
        targets: B×B soft targets W (``soft_label_targets``), treated as constants.
        temperature: τ > 0 of the student softmax (default 0.1).
        tms: add the monolingual-space terms L_mono and weight the cross term by ``cross_weight`` (paper Eq. 8).
        cross_weight: λ on L_cross when ``tms`` (paper 0.1; 1.0 reproduces the public code).

    Returns:
        The scalar loss: L_cross, or λ · L_cross + L_mono with ``tms``.
    """
    b, _ = _check_pair(student_a, student_b, "student_a", "student_b")
    _check_matrix(targets, "targets", rows=b, dim=b, dim_name="B")
    _check_temperature(temperature)
    w = targets.detach().to(device=student_a.device, dtype=student_a.dtype)
    a = F.normalize(student_a, dim=-1)
    bn = F.normalize(student_b, dim=-1)
    cross = _soft_both(a @ bn.T, w, temperature)
    if not tms:
        return cross
    mono = _soft_both(a @ a.T, w, temperature) + _soft_both(bn @ bn.T, w, temperature)
    return cross_weight * cross + mono
