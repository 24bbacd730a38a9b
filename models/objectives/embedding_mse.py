"""Embedding-regression distillation: sentence-transformers' ``MSELoss`` as ``make_multilingual.py`` uses it.

Reimers & Gurevych 2020, "Making Monolingual Sentence Embeddings Multilingual using Knowledge Distillation"
(methods §8.1). For a batch of translation pairs (s_i, t_i) whose source side the teacher embeds as T_i:

    L = mean over all elements of ( [S(s); S(t)] − [T; T] )²

i.e. ``nn.MSELoss`` between the student embeddings of both sides (stacked) and the teacher embedding repeated. Unlike
the soft-label objective (``soft_label.py``), which matches similarity *distributions* and works with any teacher
dimension, this regresses the teacher's vectors, so student and teacher dimensions must be equal. Raw (not
normalised) vectors, as in sentence-transformers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from models.objectives.info_nce import _check_pair


def embedding_mse(student_a: torch.Tensor, student_b: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Mean squared error of both sides' student embeddings (B×d each) against the teacher's B×d embeddings."""
    _check_pair(student_a, student_b, "student_a", "student_b")
    if teacher.shape != student_a.shape:
        raise ValueError(f"teacher must be {tuple(student_a.shape)} (B×d like the student), got {tuple(teacher.shape)}")
    return F.mse_loss(torch.cat([student_a, student_b]), torch.cat([teacher, teacher]).to(student_a.dtype))
