"""Distillation to the frozen start: the start model as teacher keeps its own space where it is already good.

Paper: Reimers & Gurevych 2020, "Making Monolingual Sentence Embeddings Multilingual using Knowledge Distillation"
(EMNLP, arXiv 2004.09813), §2 "Training": a student M̂ learns from a frozen teacher M on parallel sentences (s_j, t_j)
by the mean squared error of the student's embedding of the source *and* of its translation to the teacher's
embedding of the source; sentence-transformers' ``MSELoss`` as ``examples/.../multilingual/make_multilingual.py``
uses it (methods §8.1). For a batch β of B translation pairs (s_j the source side, t_j its translation), with
d-dimensional embeddings::

    L = w_s · (1/(B·d)) Σ_j ‖M(s_j) − M̂(s_j)‖²  +  w_t · (1/(B·d)) Σ_j ‖M(s_j) − M̂(t_j)‖²

The paper writes (1/|β|) Σ_j [(M(s_j) − M̂(s_j))² + (M(s_j) − M̂(t_j))²] with the squared norm; the code's MSE also
averages over the d coordinates — the same loss up to the constant 1/d, which only rescales the learning rate.
``w_s`` = ``source_weight``, ``w_t`` = ``translation_weight`` (both 1 in the paper).

The teacher here is the start (``teacher: self``, the default): a frozen copy of the student taken before the first
step — the weights of ``encoder.pretrained``. The source term keeps each source sentence where the start put it (the
monolingual quality the start already has, which a contrastive fine-tune such as MPCL or soft labels moves away
from); the translation term pulls each translation onto its source's start embedding (cross-lingual alignment
inside the start's space, the paper's remedy). Any model id is accepted as ``teacher`` too (the paper's monolingual
English teacher); its dimension must then be the student's.

Which side is the source: the pair's language that comes first in ``priority`` (English, then the other pivots — as
soft labels choose the side their teacher reads); a pair of two unlisted languages keeps its first column.

``space``: ``normalized`` (default) compares L2-normalised embeddings — the space cosine similarity reads, and for a
start ending in sentence-transformers' ``Normalize`` (multilingual-e5, all-MiniLM) exactly what the model outputs, so
there it is the paper's loss; for unit vectors ‖u − v‖² = 2 − 2·cos(u, v), so the loss is (2/d)·(1 − mean cosine)
per term. ``raw``: the embeddings as the model outputs them (pooled, projected), the paper literally; a start
without ``Normalize`` then also keeps its norms.

``translation_target``: ``source`` (default, the paper): the translation regresses the teacher's embedding of its
source, M(s_j). ``self``: it regresses the teacher's embedding of itself, M(t_j) — each side kept where the start put
it and nothing pulled across languages: with the start as teacher, Learning without Forgetting (Li & Hoiem 2016,
"Learning without Forgetting", ECCV: the original model's outputs on the new task's inputs as targets) on both sides
of the bitext, a regulariser beside objectives that do the aligning (MPCL, soft labels)::

    L_self = w_s · (1/(B·d)) Σ_j ‖M(s_j) − M̂(s_j)‖²  +  w_t · (1/(B·d)) Σ_j ‖M(t_j) − M̂(t_j)‖²

Defaults: ``teacher: self``, w_s = w_t = 1, ``translation_target: source``, ``space: normalized``,
``data: bitext_pairs``, batch 32, the teacher's embeddings cached once for the texts the run's batches draw
(``teacher_cache``).

Relations:
    - ``soft_label`` with ``loss: mse`` regresses both sides onto its teacher's embedding of the priority side: this
      loss with w_s = w_t = 1 and ``space: raw``; this objective also offers the normalised space and weighs the two
      terms apart;
    - w_t = 0 is plain self-distillation on the sources (a "stay where you are" regulariser, an L2 pull towards the
      start's function rather than its weights); w_s = 0 is the translation term alone;
    - weight-space interpolation with the start (``training.interpolate_start``, ``models.training.interpolation``) is
      the other remedy for the same loss of monolingual quality; the two combine.

Settings: ``StartDistillObjective`` (kind ``start_distill``). Inputs: the ``data`` pair table; the teacher is a model
id (``models``/``with_models`` let the pipeline resolve it and hash its files). Shared loss parts: ``loss_parts``.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

import numpy as np

from models.lazy_torch import F, torch
from models.objective_registry import Citation, Objective, objective
from models.objectives.loss_parts import check_pair
from models.settings import AtLeastOne, NonNegative, PairData, pair_tables
from models.training.components import Component, StepBatch, gathered, pair_corpus

if TYPE_CHECKING:
    from models.encoder import SentenceEncoder
    from models.settings import TrainSettings

__all__ = ["StartDistillComponent", "StartDistillObjective", "start_distill_loss"]

Space = Literal["normalized", "raw"]


CITATION = Citation(
    'Reimers, Gurevych 2020, "Making Monolingual Sentence Embeddings Multilingual using Knowledge Distillation" '
    "(EMNLP) — here with the start model as the frozen teacher",
    "https://arxiv.org/abs/2004.09813")


@objective(tables=pair_tables, citation=CITATION)
@dataclass(frozen=True)
class StartDistillObjective(Objective):
    """Distillation to the frozen start (Reimers & Gurevych 2020; module docstring): the student's embeddings of a
    pair's source (weight ``source_weight``) and of its translation (``translation_weight``) regress the teacher's
    embedding of the source, by mean squared error.

    ``teacher``: ``self`` (a frozen copy of the student before training: the start model) or a model id of the same
    dimension; ``teacher_prefix`` replaces the teacher's default prompt when set. ``priority``: the source side is
    the pair's language listed first. ``space``: ``normalized`` (L2-normalised embeddings, default) or ``raw``.
    ``translation_target``: ``source`` (the paper: a translation regresses M(source)) or ``self`` (it regresses
    M(translation): Learning without Forgetting on both sides; module docstring).
    ``teacher_cache``: encode the teacher's texts of the whole run once before training. ``language_pair_batches``:
    one language pair per batch (the loss has no negatives, so mixed batches are the default)."""

    kind: Literal["start_distill"] = "start_distill"
    """``start_distill``: make-multilingual MSE distillation (Reimers & Gurevych 2020) with the start model as the
    frozen teacher"""
    data: PairData = "bitext_pairs"
    """the pair table: ``bitext_pairs``, ``xnli_single_pairs`` or ``xnli_groups`` (pairs of group members)"""
    weight: NonNegative = 1.0
    """this objective's loss is multiplied by it before the run sums its objectives' losses"""
    batch_size: AtLeastOne = 32
    """translation pairs per batch (the loss has no negatives: the size only sets the step's work)"""
    teacher: str = "self"
    """``self``: a frozen copy of the student before its first step, the start model; or any model id of the student's
    dimension (the paper's monolingual teacher)"""
    teacher_prefix: str = ""
    """text put before the teacher's inputs only; ``""``: the teacher's own default prompt"""
    source_weight: NonNegative = 1.0
    """w_s: weight of the source term, MSE(M̂(s), M(s)) (1, the paper)"""
    translation_weight: NonNegative = 1.0
    """w_t: weight of the translation term, MSE(M̂(t), M(s)) (1, the paper); 0: plain self-distillation on the
    sources"""
    space: Space = "normalized"
    """``normalized`` (default): L2-normalised embeddings, the space cosine reads (for a start ending in ``Normalize``,
    as multilingual-e5, the paper's loss exactly); ``raw``: the embeddings as the model outputs them, the paper
    literally"""
    priority: tuple[str, ...] = ("en", "es", "ru", "ja", "fr", "ko")
    """the source side of a pair is its language listed first here (a pair of two unlisted languages keeps its first
    column)"""
    language_pair_batches: bool = False
    """every batch holds pairs of one language pair; false (default): mixed, as the loss has no negatives"""
    teacher_cache: bool = True
    """embed once, before training, every text the run's batches hand the teacher; false: per batch"""
    translation_target: Literal["source", "self"] = "source"
    """what a translation regresses: ``source`` (default, the paper: M(s)) or ``self`` (M(t): each side kept where the
    start put it, Learning without Forgetting on both sides); enters a cache key only when set"""
    KEY_WHEN_SET: ClassVar[tuple[str, ...]] = ("translation_target",)

    def models(self) -> dict[str, str]:
        return {} if self.teacher == "self" else {"teacher": self.teacher}

    def with_models(self, resolve: Callable[[str, str], str]) -> StartDistillObjective:
        return self if self.teacher == "self" else dataclasses.replace(self, teacher=resolve("teacher", self.teacher))


class StartDistillComponent(Component, builds=StartDistillObjective):
    """Pairs of the ``data`` table; the frozen teacher embeds each batch's sources, the student both sides."""

    objective: StartDistillObjective

    def __init__(self, name: str, o: StartDistillObjective, tables: Mapping[str, Path], settings: TrainSettings,
                 stream: int, device: torch.device, student: SentenceEncoder) -> None:
        from models.encoder import SentenceEncoder
        from models.training.teacher import Teacher

        super().__init__(name, o, settings.seed, stream, device)
        if o.source_weight == 0 and o.translation_weight == 0:
            raise ValueError(f"objective {name}: source_weight and translation_weight are both 0, so the loss is "
                             "always 0; expected at least one of them > 0")
        _, self.pairs, self.plan = pair_corpus(name, o, tables, settings, stream)
        if o.teacher == "self":
            encoder = copy.deepcopy(student)  # before the first step: the start model's weights
            encoder.train_head = None
        else:
            encoder = SentenceEncoder.load(o.teacher, device)
        self.teacher = Teacher(encoder.to(device), prefix=o.teacher_prefix, name=f"objective {name} teacher",
                               normalize=o.space == "normalized")
        if self.teacher.dim != student.dim:
            raise ValueError(f"objective {name}: the student's embeddings regress the teacher's, but the teacher "
                             f"{o.teacher!r} has dimension {self.teacher.dim} and the student {student.dim}; "
                             "expected a teacher of the student's dimension (teacher: self always is)")
        rank = {lang: i for i, lang in enumerate(o.priority)}
        # the source side: the pair's language that comes first in ``priority`` (side a when neither is listed)
        self.b_source = np.array([rank.get(lb, len(rank)) < rank.get(la, len(rank))
                                  for la, lb in zip(self.pairs.a_lang, self.pairs.b_lang, strict=True)], dtype=bool)
        if o.teacher_cache:  # the sources the run's batches draw, not the whole corpus
            steps = settings.steps * settings.grad_accumulation
            drawn = np.unique(np.concatenate([self.plan.batch(s) for s in range(steps)]))
            own = o.translation_target == "self" and o.translation_weight > 0
            self.teacher.cache([self.source(int(i)) for i in drawn]
                               + ([self.translation(int(i)) for i in drawn] if own else []))

    def source(self, i: int) -> str:
        return self.pairs.b[i] if self.b_source[i] else self.pairs.a[i]

    def translation(self, i: int) -> str:
        return self.pairs.a[i] if self.b_source[i] else self.pairs.b[i]

    def batch(self, step: int) -> StepBatch:
        o, idx = self.objective, self.plan.batch(step)
        sources = [self.source(int(i)) for i in idx]
        translations = [self.translation(int(i)) for i in idx]
        target = self.teacher.embed(sources, self.device)
        own = (self.teacher.embed(translations, self.device)
               if o.translation_target == "self" and o.translation_weight > 0 else None)
        columns, kinds = [], []
        if o.source_weight > 0:
            columns.append(self.local(sources))
            kinds.append("source")
        if o.translation_weight > 0:
            columns.append(self.local(translations))
            kinds.append("translation")

        def loss_fn(embs: list[torch.Tensor]) -> torch.Tensor:
            got = dict(zip(kinds, gathered(embs), strict=True))
            return start_distill_loss(got.get("source"), got.get("translation"), target,
                                      source_weight=o.source_weight, translation_weight=o.translation_weight,
                                      space=o.space, teacher_translation=own)

        return StepBatch(columns, loss_fn, len(columns) * len(idx))


def start_distill_loss(student_source: torch.Tensor | None, student_translation: torch.Tensor | None,
                       teacher_source: torch.Tensor, *, source_weight: float = 1.0, translation_weight: float = 1.0,
                       space: Space = "normalized", teacher_translation: torch.Tensor | None = None) -> torch.Tensor:
    """w_s · MSE(M̂(s), M(s)) + w_t · MSE(M̂(t), M(s)), each MSE averaged over the B×d elements (module docstring);
    with ``teacher_translation`` the second term regresses it instead, w_t · MSE(M̂(t), M(t)) (``translation_target:
    self``).

    Args:
        student_source: B×d student embeddings of the sources (None when ``source_weight`` is 0).
        student_translation: B×d student embeddings of the translations (None when ``translation_weight`` is 0).
        teacher_source: B×d teacher embeddings of the sources, treated as constants.
        source_weight: w_s ≥ 0 (the paper: 1).
        translation_weight: w_t ≥ 0 (the paper: 1).
        space: ``"normalized"`` (every embedding L2-normalised first) or ``"raw"`` (as given).
        teacher_translation: B×d teacher embeddings of the translations, the translation term's target when given
            (``None``: ``teacher_source``, the paper).

    Returns:
        The scalar loss, in the student's dtype.
    """
    if space not in ("normalized", "raw"):
        raise ValueError(f"space must be 'normalized' or 'raw', got {space!r}")
    own = teacher_translation is not None
    terms = [(student_source, source_weight, "student_source", "source_weight", "teacher_source"),
             (student_translation, translation_weight, "student_translation", "translation_weight",
              "teacher_translation" if own else "teacher_source")]
    for x, w, name, w_name, _ in terms:
        if not (isinstance(w, (int, float)) and w >= 0):
            raise ValueError(f"{w_name} must be a number ≥ 0, got {w!r}")
        if w > 0 and x is None:
            raise ValueError(f"{name} is required when {w_name} > 0 (B×d student embeddings)")
    used = [(x, w, name, target) for x, w, name, _, target in terms if x is not None and w > 0]
    if not used:
        raise ValueError("source_weight and translation_weight are both 0 (or their embeddings missing): "
                         "nothing to regress")
    given = {"teacher_source": teacher_source, "teacher_translation": teacher_translation}
    like = used[0][0]
    targets: dict[str, torch.Tensor] = {}  # each teacher tensor checked, cast and normalised once
    for x, _, name, target in used:
        check_pair(x, given[target], name, target)
        if target not in targets:
            t = given[target].detach().to(device=like.device, dtype=like.dtype)
            targets[target] = F.normalize(t, dim=-1) if space == "normalized" else t
    total = like.new_zeros(())
    for x, w, _, target in used:
        z = F.normalize(x, dim=-1) if space == "normalized" else x
        total = total + w * F.mse_loss(z, targets[target])
    return total
