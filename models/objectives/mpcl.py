"""MPCL: contrastive loss with multiple multilingual positives per anchor (translation groups).

Paper: Zhao, Wu, Cai, Tsuruoka, "Leveraging Multilingual Positive Instances in Contrastive Learning" (Eq. 1, Eq. 2,
§3.3); no public code exists (methods §2). A batch holds N sentences; the members of one
translation group share a ``groups`` id. With s_ij = cos(h_i, c_j) over the candidates c = [E; hard negatives]
(N × (N+H)), for each anchor row i:

    C_i = { j ≠ i : candidate_mask[i, j] } ∪ { hard-negative columns k : hard_negative_mask[i, k] }
          (the diagonal is never a candidate; every hard negative is a candidate of every row by default)
    P_i = { j ≠ i : groups[j] = groups[i] }                                   (must lie in C_i; never a hard negative)

Min–max scaling (paper §3.3: "min-max scaling to rescale the similarity scores within a range of [−1/τ, 1/τ]"). The
one sentence does not fix the reading, so each reading is a ``scaling`` value (methods §2.3)::

    s̃_ij = ( 2 · (s_ij − lo) / (hi − lo + ε) − 1 ) / τ

    "none"             lo, hi = −1, 1: the cosine's own range mapped onto [−1/τ, 1/τ], i.e. s̃ = s/τ (+ a constant that
                       cancels in the softmax) — plain InfoNCE / Eq. 1–2 at temperature τ; the default (below)
    "row"              lo, hi = min, max of anchor row i over its candidates C_i, rescaled into [−1/τ, 1/τ];
                       gradients flow through min and max
    "row_detached"     the same min–max rescaling of row i into [−1/τ, 1/τ], with min and max treated as constants
                       (no gradient through them: a per-row temperature τ·(hi − lo + ε)/2 on s, up to a constant)
    "matrix"           lo, hi = min, max over every anchor row's candidates (the whole batch); gradients flow
    "matrix_detached"  the same, detached

``minmax_self``: the self-similarity s_ii = 1 joins the min/max range (so hi = 1), the "self-similarity in" reading.

Why the default is ``"none"`` at τ 0.05: it is the reading that trains as the paper reports, measured where MPCL's
loss acts — the question ``experiments/mpcl_random_init/`` (claim, protocol and rule in its ``README.md``; results
only in its ``RESULTS.md``, generated from the ledger): a small encoder from random init learning alignment from XNLI's
translation groups, where the loss stays above 0.1 nats to the end. Its decision — ``row_detached`` at τ 0.05 and
``none`` at τ 0.02 against the incumbent ``none`` at τ 0.05 on the decision sets over three seeds, a candidate
replacing the incumbent only when a paired test shows it ahead, and none that loses more than 0.5 points of topic
classification — kept ``none`` at τ 0.05: ``row_detached`` aligned far less (decision Tatoeba +28 against +46 over the
random start) and lost topics; τ 0.02 was not ahead. The defaults here follow that page
(``tests/test_mpcl_hard_negative_groups.py`` reads it). ``experiments/mpcl_scaling/``, which once chose
``"row_detached"``, trained 60 steps from multilingual-e5-small, an already-aligned start where the loss is ≤ 0.01 from
about step 25: its decision was withdrawn (issue 51). What the readings cost, in theory: with ``"row"`` each
row's loss is invariant to any affine change of its own similarities, so the loss cannot see embeddings contracting,
and the gradient through min rewards pulling a row's *least* similar candidate toward the anchor
(``tests/test_mpcl_fidelity.py`` pins both). The detached readings keep the loss a softmax cross-entropy (every
negative is pushed away) but hide a uniform contraction from the loss value; ``"row_detached"`` is, up to a constant,
a per-row temperature τ·(hi − lo + ε)/2, so it is partly a sharper temperature. ``"none"`` is plain Eq. 1–2 at
temperature τ and cannot reward the collapse.

``positives="inside"`` (paper Eq. 2, the default; K positives summed inside the log, positives also in the
denominator)::

    l_i = − log Σ_{k∈P_i} exp(s̃_ik) + log Σ_{c∈C_i} exp(s̃_ic)

``positives="outside"`` (SupCon, Khosla et al. 2020, L_out)::

    l_i = − (1/|P_i|) Σ_{k∈P_i} ( s̃_ik − log Σ_{c∈C_i} exp(s̃_ic) )

L = mean of l_i over the anchor rows (``anchors``, default every row; an anchor row with no positive is an error).
Both forms are computed with logsumexp over −inf-masked rows (numerically stable in float32).

Defaults: τ = 0.05, inside, ``scaling="none"`` (see above), ε = 1e-6, every row an anchor, every other
in-batch row a candidate, no hard negatives.

Hard negatives (``MpclObjective.hard_negatives``; paper §3.6, methods §2.1: all 15 languages, "the contradiction
hypothesis of the premise" as hard negative, its language drawn at random). Only premises have a contradiction — about
a quarter of XNLI's unique sentences — and the paper does not say what happens to the other groups, so it is a setting,
``hard_negative_groups``:
    "with_contradiction" (default, this module's behaviour so far): only groups with a contradiction are drawn; the
        others are dropped for the whole run (kept and dropped groups and texts are logged when the objective is
        built). The paper is silent on the groups without one (methods §2.1 names only "the contradiction hypothesis
        of the premise"), so the earlier behaviour stays the default.
    "all": every group is drawn; a group with a contradiction adds its hard-negative column, one without adds none
        and contributes its positives and in-batch negatives only. A batch's hard negatives stay candidates of every
        row, except for the rows of a group that is itself some drawn premise's contradiction (its translation would
        be its own negative): ``hard_negative_mask`` removes it from those rows (logged per batch with its count).
        One process only: the number of hard negatives varies from batch to batch.

Relations:
    - K = 1 (groups of size 2): inside = outside = Eq. 1 (single-positive CL); without min–max scaling and with every
      row an anchor it is NT-Xent (SimCLR) over the 2G views;
    - the "cross-side" candidate mask (i's candidates are the other side's rows only) with groups of size 2 and no
      scaling equals ``info_nce(symmetric=True)`` (sentence-transformers' MultipleNegativesSymmetricRankingLoss);
    - the paper's hard-negative variant passes XNLI contradictions as ``hard_negatives`` (in every denominator but
      the rows ``hard_negative_mask`` excludes, never positives); the warm-up phase uses the single-positive loss
      (``info_nce`` / this loss with K = 1).

Settings (``MpclObjective``, kind ``mpcl``): its docstring. Inputs: ``xnli_groups`` (translation groups, with their
contradiction groups for ``hard_negatives``); a batch embeds one column of every drawn member (and a column of hard
negatives). Shared loss parts: ``loss_parts``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

import numpy as np

from models.lazy_torch import torch
from models.objective_registry import Citation, Need, Objective, objective
from models.objectives.loss_parts import check_ids, check_matrix, check_temperature, cosine
from models.settings import AtLeastOne, NonNegative, NonNegativeInt, Positive, Range
from models.training import corpus_tables as ct
from models.training.components import Component, StepBatch, gathered
from models.training.sampling import BatchPlan, step_rng

if TYPE_CHECKING:
    from models.encoder import SentenceEncoder
    from models.settings import TrainSettings

__all__ = ["MPCL_SCALINGS", "HardNegativeGroups", "MpclComponent", "MpclObjective", "Scaling", "hard_negative_eligible",
           "mpcl_loss"]

log = logging.getLogger("polysent.models.objectives.mpcl")

Scaling = Literal["none", "row", "row_detached", "matrix", "matrix_detached"]
MPCL_SCALINGS: tuple[str, ...] = get_args(Scaling)
HardNegativeGroups = Literal["with_contradiction", "all"]


def _needs(o: Any) -> list[Need]:
    return [("xnli_groups", "lang", tuple(o.languages))]  # rows in the objective's languages


CITATION = Citation(
    'Zhao, Wu, Cai, Tsuruoka 2024, "Leveraging Multilingual Positive Instances in Contrastive Learning to'
    ' Improve Sentence Embedding" (EACL)',
    "https://arxiv.org/abs/2309.08929")


@objective(tables=("xnli_groups",), needs=_needs, citation=CITATION)
@dataclass(frozen=True)
class MpclObjective(Objective):
    """MPCL (methods §2): ``batch_size`` translation groups per batch, ``group_members`` members of each drawn from
    ``languages`` (all the group has when empty) — the paper's anchor sees K = 5 positives even with 15 languages, so
    the default draws 6 (``None``: every member); positives summed inside the log (``inside``, paper Eq. 2) or
    SupCon's ``outside``; ``scaling``: the reading of the paper's min–max scaling into [−1/τ, 1/τ] — ``none`` (s/τ),
    ``row`` (each anchor row's min and max, gradients through them), ``row_detached`` (the same with min and max
    constants), ``matrix`` / ``matrix_detached`` (one range for the batch); the default ``none``,
    ``experiments/mpcl_random_init/RESULTS.md`` (module docstring); ``minmax_self``: the self-similarity joins the
    min–max range.
    ``split_pairs``: the paper's "+Single" baseline through the same loss and scaling — each group's drawn members
    become disjoint pairs, each its own group (K = 1), the same sentences per step (an odd member is dropped at random);
    the other pairs of a row's own group are no candidates of it, so both conditions see the same in-batch negatives.
    The first ``single_positive_steps`` steps draw two members per group (single-positive Eq. 1 warm-up).
    ``anchors``: every sentence, or one random member per group. ``hard_negatives``: a group with a contradiction
    (an XNLI premise) brings a member of its contradiction-hypothesis group in a random language as hard negative
    (paper §3.6). ``hard_negative_groups`` (with ``hard_negatives`` only): ``with_contradiction`` (default; the paper
    is silent, this keeps the earlier behaviour) draws only the groups with a contradiction — about a quarter of the
    unique sentences; the rest are dropped — or ``all`` draws every group, those without a contradiction with no
    hard-negative column. Building the objective logs how many groups (unique sentences) and texts are kept and
    dropped. ``all`` needs one process (a batch's hard-negative count varies)."""

    kind: Literal["mpcl"] = "mpcl"
    """``mpcl``: contrastive learning with multiple multilingual positives per anchor (Zhao et al. 2024, Eq. 2)"""
    data: Literal["xnli_groups"] = "xnli_groups"
    """the XNLI translation groups (a premise or hypothesis and its translations)"""
    weight: NonNegative = 1.0
    """this objective's loss is multiplied by it before the run sums its objectives' losses"""
    batch_size: AtLeastOne = 32
    """translation groups per batch; each contributes ``group_members`` sentences"""
    languages: tuple[str, ...] = ()
    """the languages members are drawn from; empty: every language a group has"""
    group_members: Annotated[int, Range(ge=2)] | None = 6
    """members drawn per group (anchor + K positives): 6, so the paper's anchor sees K = 5 positives even with 15
    languages; null: every member"""
    split_pairs: bool = False
    """the paper's "+Single" baseline through the same loss and scaling: each group's drawn members become disjoint
    pairs (K = 1), the same sentences per step (an odd member is dropped at random), the other pairs of a row's own
    group neither positives nor negatives"""
    temperature: Positive = 0.05
    """τ: the scaled similarities span [−1/τ, 1/τ]"""
    positives: Literal["inside", "outside"] = "inside"
    """``inside`` (paper Eq. 2, default): the K positives summed inside the log; ``outside``: SupCon's average of
    log-probabilities (Khosla et al. 2020)"""
    scaling: Scaling = "none"
    """the reading of the paper's min–max scaling into [−1/τ, 1/τ], which its one sentence does not fix: ``none``
    (default: the cosine's range, s/τ, plain Eq. 1–2, as experiments/mpcl_random_init decided), ``row`` (each anchor
    row's min and max, gradients through them), ``row_detached`` (the same with min and max constants), ``matrix`` /
    ``matrix_detached`` (one range for the batch); docs/training.md"""
    minmax_self: bool = False
    """the anchor's self-similarity (1) joins the min–max range, so its max is 1 (unused with ``scaling: none``)"""
    anchors: Literal["all", "one_per_group"] = "all"
    """``all``: every sentence is an anchor; ``one_per_group``: one random member of each group"""
    single_positive_steps: NonNegativeInt = 0
    """the first this many updates draw two members per group (the single-positive Eq. 1 warm-up); 0: none"""
    hard_negatives: bool = False
    """a group with a contradiction (an XNLI premise) brings one member of its contradiction hypothesis's group, in a
    random language, as a hard negative in every row's denominator (paper §3.6)"""
    hard_negative_groups: HardNegativeGroups = "with_contradiction"
    """with ``hard_negatives``, the groups drawn: ``with_contradiction`` (default; the paper is silent, this keeps the
    earlier behaviour) only those with a contradiction, about a quarter of the unique sentences; ``all``: every group,
    those without one with no hard-negative column (one process only); kept and dropped counts are logged"""


class MpclComponent(Component, builds=MpclObjective):
    """MPCL (``mpcl_loss``) on XNLI translation groups; with ``split_pairs`` the paper's "+Single" baseline
    through the same loss, scaling and sentences per step."""

    objective: MpclObjective

    def __init__(self, name: str, o: MpclObjective, tables: Mapping[str, Path], settings: TrainSettings,
                 stream: int, device: torch.device, student: SentenceEncoder | None = None) -> None:
        super().__init__(name, o, settings.seed, stream, device)
        if o.group_members is not None and o.group_members < 2:
            raise ValueError(f"objective {name}: group_members must be ≥ 2 (an anchor and a positive) or null for "
                             f"every member, got {o.group_members}")
        self.groups = ct.load_groups(tables["xnli_groups"], o.languages)
        # the groups a batch draws from: with hard negatives, by hard_negative_groups (counts logged)
        self.eligible = np.arange(len(self.groups))
        if o.hard_negatives:
            if o.hard_negative_groups == "all" and self.world > 1:
                raise ValueError(f"objective {name}: hard_negative_groups: all gives each batch as many hard negatives "
                                 "as it draws groups with a contradiction, which cannot be split evenly over "
                                 f"{self.world} processes; use hard_negative_groups: with_contradiction or one process")
            self.eligible = hard_negative_eligible(name, self.groups, o.hard_negative_groups)
        members = [self.groups.members[g] for g in self.eligible]
        lengths = np.array([max(len(t) for _, t in m) for m in members], dtype=np.int64)
        self.plan = BatchPlan(len(self.eligible), o.batch_size, settings.seed + stream,
                              lengths=lengths if settings.length_bucketing else None,
                              what=f"objective {name} (xnli_groups)")
        drawn = {min(len(m), o.group_members or len(m)) for m in members}
        if self.world > 1 and len(drawn) > 1:
            raise ValueError(f"objective {name}: distributed MPCL needs groups of one size, found sizes {sorted(drawn)}"
                             " (set languages: to ones every group has, or group_members)")

    def batch(self, step: int) -> StepBatch:
        o = self.objective
        idx = self.eligible[self.plan.batch(step)]
        rng = step_rng(self.seed, self.stream, step)
        # "+Single" cuts its pairs with a generator of its own, so ``rng`` draws exactly what MPCL's draws: the same
        # members of every group (and the same hard negatives) at every step, whatever the pairing consumed
        pair_rng = step_rng(self.seed, self.stream, step, "pairs")
        warmup = step < o.single_positive_steps
        texts, group, anchor, negs, origin, neg_source = [], [], [], [], [], []
        for n, g in enumerate(idx):
            members = self.groups.members[g]
            size = 2 if warmup else min(len(members), o.group_members or len(members))
            pick = sorted(rng.choice(len(members), size=size, replace=False)) if size < len(members) \
                else range(len(members))
            chosen = [members[k][1] for k in pick]
            whole_first = int(rng.integers(len(chosen)))  # MPCL's anchor of the group (one_per_group)
            if o.split_pairs and not warmup:  # "+Single": disjoint random pairs of the drawn members, K = 1 each
                order = pair_rng.permutation(len(chosen))[: len(chosen) // 2 * 2]
                parts = [[chosen[order[k]], chosen[order[k + 1]]] for k in range(0, len(order), 2)]
                firsts = [int(pair_rng.integers(2)) for _ in parts]
            else:
                parts, firsts = [chosen], [whole_first]
            for part, first in zip(parts, firsts, strict=True):
                gid = group[-1] + 1 if group else 0
                texts += part
                group += [gid] * len(part)
                origin += [n] * len(part)
                anchor += [o.anchors == "all" or k == first for k in range(len(part))]
            if o.hard_negatives and self.groups.negative[g] >= 0:  # its contradiction hypothesis, random language
                pool = self.groups.members[self.groups.negative[g]]
                negs.append(pool[int(rng.integers(len(pool)))][1])
                neg_source.append(int(self.groups.negative[g]))
        groups_t, anchors_t = self.ids(group), torch.tensor(anchor, device=self.device)
        hard_mask = self._own_contradictions(step, idx[origin], neg_source)
        columns = [self.local(texts)] + ([self.local(negs)] if negs else [])
        candidates = None
        if o.split_pairs and not warmup:
            # the other pairs cut from a row's own group are translations of it: neither positives nor negatives
            # (the paper's "+Single" corpus would put them in other batches), so both conditions see the same
            # in-batch negatives and differ only in K
            src = self.ids(origin)
            candidates = (src[:, None] != src[None, :]) | (groups_t[:, None] == groups_t[None, :])

        def loss_fn(embs: list[torch.Tensor]) -> torch.Tensor:
            z = gathered(embs)
            return mpcl_loss(z[0], groups_t, o.temperature, positives=o.positives, scaling=o.scaling,
                             minmax_self=o.minmax_self, anchors=anchors_t,
                             hard_negatives=z[1] if len(z) > 1 else None, candidate_mask=candidates,
                             hard_negative_mask=hard_mask)

        return StepBatch(columns, loss_fn, len(texts) + len(negs))

    def _own_contradictions(self, step: int, row_groups: np.ndarray, neg_groups: list[int]) -> torch.Tensor | None:
        """N×H: False where hard negative k is a translation of row i (row i's group is the contradiction group
        the negative was drawn from); None when no drawn group is another's contradiction (the usual case)."""
        if not neg_groups:
            return None
        keep = row_groups[:, None] != np.asarray(neg_groups, dtype=np.int64)[None, :]
        if keep.all():
            return None
        log.info("objective %s step %d: %d hard negative(s) are translations of rows drawn in this batch (a drawn "
                 "group is another's contradiction); masked from those %d row(s)", self.name, step,
                 int((~keep).any(axis=0).sum()), int((~keep).any(axis=1).sum()))
        return torch.as_tensor(keep, device=self.device)


def hard_negative_eligible(name: str, groups: ct.Groups, which: HardNegativeGroups) -> np.ndarray:
    """The groups a hard-negative MPCL batch draws (``MpclObjective.hard_negative_groups``), with a log line of how
    many groups (unique sentences) and texts that keeps and drops."""
    has = groups.negative >= 0
    if not has.any():
        raise ValueError(f"objective {name}: hard_negatives is set but xnli_groups has no negative_group_id")
    sizes = np.array([len(m) for m in groups.members], dtype=np.int64)
    n, with_c = len(groups), int(has.sum())
    texts, texts_c = int(sizes.sum()), int(sizes[has].sum())
    if which == "with_contradiction":
        log.info("objective %s: hard_negative_groups=with_contradiction: %d of %d groups (unique sentences) have a "
                 "contradiction and are drawn (%d of %d texts); %d groups (%d texts) without one are dropped", name,
                 with_c, n, texts_c, texts, n - with_c, texts - texts_c)
        return np.flatnonzero(has)
    if which != "all":
        raise ValueError(f"objective {name}: hard_negative_groups must be 'with_contradiction' or 'all', got {which!r}")
    log.info("objective %s: hard_negative_groups=all: all %d groups (unique sentences, %d texts) are drawn, none "
             "dropped; %d have a contradiction and bring a hard negative, %d (%d texts) train without one", name, n,
             texts, with_c, n - with_c, texts - texts_c)
    return np.arange(n)


def mpcl_loss(embeddings: torch.Tensor, groups: torch.Tensor, temperature: float = 0.05,
              positives: Literal["inside", "outside"] = "inside", scaling: Scaling = "none",
              minmax_self: bool = False, anchors: torch.Tensor | None = None,
              hard_negatives: torch.Tensor | None = None, candidate_mask: torch.Tensor | None = None,
              eps: float = 1e-6, hard_negative_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Multi-positive contrastive loss over a batch of translation groups, in the order of the module docstring's
    equations: the arguments checked (``_check_arguments``), the positive and candidate masks of the anchor rows
    (``_anchor_masks``), the similarities min–max scaled by the chosen reading (``_scaled``), then either positive
    form.

    Args:
        embeddings: N×d sentence embeddings (normalised inside).
        groups: (N,) integer group ids; the other members of a row's group are its positives. Ids must be unique across
            devices when embeddings are all-gathered.
        temperature: τ > 0 (default 0.05).
        positives: ``"inside"`` (paper Eq. 2, Σ inside the log) or ``"outside"`` (SupCon average of log-probabilities).
        scaling: the reading of the paper's min–max scaling into [−1/τ, 1/τ] (module docstring): ``"none"``,
            ``"none"`` (default), ``"row"``, ``"row_detached"``, ``"matrix"`` or ``"matrix_detached"``.
        minmax_self: include the self-similarity (1) in the min–max range (unused with ``"none"``).
        anchors: optional (N,) bool, the rows that contribute a loss term (default all rows).
        hard_negatives: optional H×d embeddings, candidates of every anchor (unless ``hard_negative_mask``), never
            positives.
        candidate_mask: optional N×N bool; True at (i, j) allows j in row i's denominator (default all j ≠ i; the
            diagonal is always excluded). Every positive of an anchor row must be a candidate.
        eps: ε ≥ 0 added to the min–max range (guards rows whose candidates are all equally similar).
        hard_negative_mask: optional N×H bool, True at (i, k) keeps hard negative k in row i's denominator (default
            all True); only with ``hard_negatives``.

    Returns:
        The scalar loss (mean over the anchor rows).

    Raises:
        ValueError: on a wrong shape or dtype, an unknown ``positives``, no anchor row, an anchor row with no positive,
            or a positive excluded by ``candidate_mask``.
    """
    _check_arguments(embeddings, groups, temperature, positives, scaling, anchors, hard_negatives, candidate_mask, eps,
                     hard_negative_mask)
    rows, pos, cand = _anchor_masks(embeddings, groups, anchors, hard_negatives, candidate_mask, hard_negative_mask)
    targets = embeddings if hard_negatives is None else torch.cat([embeddings, hard_negatives], dim=0)
    s = cosine(embeddings[rows], targets)  # A×(N+H)
    scaled = _scaled(s, cand, rows, temperature, scaling, minmax_self, eps)
    neg_inf = float("-inf")
    log_denominator = torch.logsumexp(scaled.masked_fill(~cand, neg_inf), dim=1)
    if positives == "inside":
        log_numerator = torch.logsumexp(scaled.masked_fill(~pos, neg_inf), dim=1)
        losses = log_denominator - log_numerator
    else:
        mean_positive = torch.where(pos, scaled, torch.zeros_like(scaled)).sum(dim=1) / pos.sum(dim=1)
        losses = log_denominator - mean_positive
    return losses.mean()


def _check_arguments(embeddings: torch.Tensor, groups: torch.Tensor, temperature: float, positives: str,
                     scaling: str, anchors: torch.Tensor | None, hard_negatives: torch.Tensor | None,
                     candidate_mask: torch.Tensor | None, eps: float, hard_negative_mask: torch.Tensor | None) -> None:
    """``mpcl_loss``'s arguments checked: ``ValueError`` naming the first wrong one (shape, dtype or value)."""
    check_matrix(embeddings, "embeddings", rows_name="N")
    n, d = embeddings.shape
    if n < 2:
        raise ValueError(f"embeddings must have N ≥ 2 rows (N×d), got shape {tuple(embeddings.shape)}")
    if groups is None:
        raise ValueError(f"groups must be a 1-D integer tensor of shape (N,) = ({n},), got None")
    check_ids(groups, "groups", n, rows_name="N")
    check_temperature(temperature)
    if positives not in ("inside", "outside"):
        raise ValueError(f"positives must be 'inside' or 'outside', got {positives!r}")
    if scaling not in MPCL_SCALINGS:
        raise ValueError(f"scaling must be one of {list(MPCL_SCALINGS)}, got {scaling!r}")
    if not (eps >= 0):
        raise ValueError(f"eps must be ≥ 0, got {eps!r}")
    if anchors is not None and (not isinstance(anchors, torch.Tensor) or anchors.shape != (n,)
                                or anchors.dtype != torch.bool):
        got = (tuple(anchors.shape), anchors.dtype) if isinstance(anchors, torch.Tensor) else type(anchors).__name__
        raise ValueError(f"anchors must be a bool tensor of shape (N,) = ({n},), got {got}")
    if hard_negatives is not None:
        check_matrix(hard_negatives, "hard_negatives", dim=d, rows_name="H")
    if hard_negative_mask is not None:
        hn_rows = None if hard_negatives is None else hard_negatives.shape[0]
        if hn_rows is None or not isinstance(hard_negative_mask, torch.Tensor) \
                or hard_negative_mask.shape != (n, hn_rows) or hard_negative_mask.dtype != torch.bool:
            got = ((tuple(hard_negative_mask.shape), hard_negative_mask.dtype)
                   if isinstance(hard_negative_mask, torch.Tensor) else type(hard_negative_mask).__name__)
            raise ValueError(f"hard_negative_mask must be a bool tensor of shape N×H = {n}×{hn_rows} (with "
                             f"hard_negatives), got {got}")
    if candidate_mask is not None and (not isinstance(candidate_mask, torch.Tensor)
                                       or candidate_mask.shape != (n, n) or candidate_mask.dtype != torch.bool):
        got = ((tuple(candidate_mask.shape), candidate_mask.dtype) if isinstance(candidate_mask, torch.Tensor)
               else type(candidate_mask).__name__)
        raise ValueError(f"candidate_mask must be a bool tensor of shape N×N = {n}×{n}, got {got}")


def _anchor_masks(embeddings: torch.Tensor, groups: torch.Tensor, anchors: torch.Tensor | None,
                  hard_negatives: torch.Tensor | None, candidate_mask: torch.Tensor | None,
                  hard_negative_mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The anchor rows (A indices) and their positive and candidate masks, A×(N+H): positives are the other members
    of a row's group (never a hard negative), candidates every other row (or ``candidate_mask``'s) and the hard
    negatives (or ``hard_negative_mask``'s). ``ValueError`` for no anchor row, an anchor row without a positive, or a
    positive that is no candidate."""
    n = embeddings.shape[0]
    device = embeddings.device
    h = 0 if hard_negatives is None else hard_negatives.shape[0]
    eye = torch.eye(n, dtype=torch.bool, device=device)
    g = groups.to(device)
    pos = (g[:, None] == g[None, :]) & ~eye  # N×N
    cand = ~eye if candidate_mask is None else candidate_mask.to(device) & ~eye
    rows = torch.arange(n, device=device) if anchors is None else anchors.to(device).nonzero().flatten()
    if rows.numel() == 0:
        raise ValueError("anchors selects no row; at least one anchor row is needed")
    pos, cand = pos[rows], cand[rows]  # A×N
    # one host sync for both checks
    no_positive = ~pos.any(dim=1)
    excluded = pos & ~cand
    if bool(no_positive.any() | excluded.any()):
        bad = rows[no_positive].tolist()
        if bad:
            raise ValueError(f"anchor row {bad[0]} has no positive: no other row shares groups[{bad[0]}] = "
                             f"{int(g[bad[0]])} (anchor rows without a positive: {bad[:10]})")
        a_idx, j_idx = excluded.nonzero()[0].tolist()
        raise ValueError(f"candidate_mask excludes positive column {j_idx} of anchor row {int(rows[a_idx])}; "
                         "positives must be candidates")
    if h:
        ones = torch.ones(len(rows), h, dtype=torch.bool, device=device)
        hard = ones if hard_negative_mask is None else hard_negative_mask.to(device)[rows]
        cand = torch.cat([cand, hard], dim=1)
        pos = torch.cat([pos, torch.zeros_like(ones)], dim=1)  # A×(N+H)
    return rows, pos, cand


def _scaled(s: torch.Tensor, cand: torch.Tensor, rows: torch.Tensor, temperature: float, scaling: str,
            minmax_self: bool, eps: float) -> torch.Tensor:
    """The A×(N+H) similarities ``s`` min–max scaled into [−1/τ, 1/τ] by ``scaling``'s reading (module docstring),
    over each row's candidates ``cand`` (and its own column with ``minmax_self``)."""
    if scaling == "none":
        return s / temperature
    inside = cand
    if minmax_self:  # the anchor's own column (s_ii = 1) joins the range
        inside = cand.clone()
        inside[torch.arange(len(rows), device=rows.device), rows] = True
    dims = (1,) if scaling.startswith("row") else (0, 1)
    lo = s.masked_fill(~inside, float("inf")).amin(dim=dims, keepdim=True)
    hi = s.masked_fill(~inside, float("-inf")).amax(dim=dims, keepdim=True)
    if scaling.endswith("_detached"):
        lo, hi = lo.detach(), hi.detach()
    return (2 * (s - lo) / (hi - lo + eps) - 1) / temperature
