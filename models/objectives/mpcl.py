"""MPCL: contrastive loss with multiple multilingual positives per anchor (translation groups).

Paper: Zhao, Wu, Cai, Tsuruoka, "Leveraging Multilingual Positive Instances in Contrastive Learning" (Eq. 1, Eq. 2,
§3.3); no public code exists (methods §2). A batch holds N sentences; the members of one
translation group share a ``groups`` id. With s_ij = cos(h_i, c_j) over the candidates c = [E; hard negatives]
(N × (N+H)), for each anchor row i:

    C_i = { j ≠ i : candidate_mask[i, j] } ∪ { all hard-negative columns }    (the diagonal is never a candidate)
    P_i = { j ≠ i : groups[j] = groups[i] }                                   (must lie in C_i; never a hard negative)

Min–max scaling (paper §3.3: "min-max scaling to rescale the similarity scores within a range of [−1/τ, 1/τ]"). The
one sentence does not fix the reading, so each reading is a ``scaling`` value (methods §2.3)::

    s̃_ij = ( 2 · (s_ij − lo) / (hi − lo + ε) − 1 ) / τ

    "none"             lo, hi = −1, 1: the cosine's own range mapped onto [−1/τ, 1/τ], i.e. s̃ = s/τ (+ a constant that
                       cancels in the softmax) — plain InfoNCE / Eq. 1–2 at temperature τ
    "row"              lo, hi = min, max of anchor row i over its candidates C_i; gradients flow through them
    "row_detached"     the same, min and max constants in the backward pass (a per-row temperature τ·(hi − lo)/2)
    "matrix"           lo, hi = min, max over every anchor row's candidates (the whole batch); gradients flow
    "matrix_detached"  the same, detached

``minmax_self``: the self-similarity s_ii = 1 joins the min/max range (so hi = 1), the "self-similarity in" reading.

Why the default is ``"none"``: with ``"row"`` each row's loss is invariant to any affine change of its own
similarities, so the loss cannot see embeddings contracting, and the gradient through min rewards pulling a row's
*least* similar candidate toward the anchor (``tests/test_mpcl_fidelity.py`` pins both); from all-MiniLM-L6-v2 it cost
4.8 Tatoeba points against the unscaled loss, mostly xx→en (``bench/train_quality.py``). Measured from
multilingual-e5-small (``bench/replications.py mpcl --scale 10``, H200, seeds 13 14 15; Tatoeba trained / never
trained / BUCC zh-en F1 / STS17, start 94.73 / 86.96 / 87.45 / 61.96): ``"none"`` multiple positives 96.22 / 90.33 /
95.64 / 66.18 vs "+Single" through the same loss 96.38 / 90.27 / 95.11 / 65.39 — ahead where the paper says (BUCC,
STS), Tatoeba tied or behind; ``"row"`` (one seed) 96.57 / 90.88 / 96.54 / 66.79 (no collapse from this stronger
start). The detached readings keep the loss a softmax cross-entropy (every negative is pushed away) but still hide a
uniform contraction from the loss value; ``"none"`` trains as the paper reports and cannot reward the collapse, so it
is the default (README "Replications" has every measured reading and seed).

``positives="inside"`` (paper Eq. 2, the default; K positives summed inside the log, positives also in the
denominator)::

    l_i = − log Σ_{k∈P_i} exp(s̃_ik) + log Σ_{c∈C_i} exp(s̃_ic)

``positives="outside"`` (SupCon, Khosla et al. 2020, L_out)::

    l_i = − (1/|P_i|) Σ_{k∈P_i} ( s̃_ik − log Σ_{c∈C_i} exp(s̃_ic) )

L = mean of l_i over the anchor rows (``anchors``, default every row; an anchor row with no positive is an error).
Both forms are computed with logsumexp over −inf-masked rows (numerically stable in float32).

Defaults: τ = 0.05, inside, ``scaling="none"`` (see above), ε = 1e-6, every row an anchor, every other in-batch row a
candidate, no hard negatives.

Relations:
    - K = 1 (groups of size 2): inside = outside = Eq. 1 (single-positive CL); without min–max scaling and with every
      row an anchor it is NT-Xent (SimCLR) over the 2G views;
    - the "cross-side" candidate mask (i's candidates are the other side's rows only) with groups of size 2 and no
      scaling equals ``info_nce(symmetric=True)`` (sentence-transformers' MultipleNegativesSymmetricRankingLoss);
    - the paper's hard-negative variant passes XNLI contradictions as ``hard_negatives`` (in every denominator, never
      positives); the warm-up phase uses the single-positive loss (``info_nce`` / this loss with K = 1).
"""

from __future__ import annotations

from typing import Literal, get_args

import torch

from models.objectives.info_nce import _check_ids, _check_matrix, _check_temperature, _cosine

__all__ = ["MPCL_SCALINGS", "Scaling", "mpcl_loss"]

Scaling = Literal["none", "row", "row_detached", "matrix", "matrix_detached"]
MPCL_SCALINGS: tuple[str, ...] = get_args(Scaling)


def mpcl_loss(embeddings: torch.Tensor, groups: torch.Tensor, temperature: float = 0.05,
              positives: Literal["inside", "outside"] = "inside", scaling: Scaling = "none",
              minmax_self: bool = False, anchors: torch.Tensor | None = None,
              hard_negatives: torch.Tensor | None = None, candidate_mask: torch.Tensor | None = None,
              eps: float = 1e-6) -> torch.Tensor:
    """Multi-positive contrastive loss over a batch of translation groups.

    Args:
        embeddings: N×d sentence embeddings (normalised inside).
        groups: (N,) integer group ids; the other members of a row's group are its positives. Ids must be unique across
            devices when embeddings are all-gathered.
        temperature: τ > 0 (default 0.05).
        positives: ``"inside"`` (paper Eq. 2, Σ inside the log) or ``"outside"`` (SupCon average of log-probabilities).
        scaling: the reading of the paper's min–max scaling into [−1/τ, 1/τ] (module docstring): ``"none"``,
            ``"row"``, ``"row_detached"``, ``"matrix"`` or ``"matrix_detached"``.
        minmax_self: include the self-similarity (1) in the min–max range (unused with ``"none"``).
        anchors: optional (N,) bool, the rows that contribute a loss term (default all rows).
        hard_negatives: optional H×d embeddings, candidates of every anchor, never positives.
        candidate_mask: optional N×N bool; True at (i, j) allows j in row i's denominator (default all j ≠ i; the
            diagonal is always excluded). Every positive of an anchor row must be a candidate.
        eps: ε ≥ 0 added to the min–max range (guards rows whose candidates are all equally similar).

    Returns:
        The scalar loss (mean over the anchor rows).

    Raises:
        ValueError: on a wrong shape or dtype, an unknown ``positives``, no anchor row, an anchor row with no positive,
            or a positive excluded by ``candidate_mask``.
    """
    _check_matrix(embeddings, "embeddings", rows_name="N")
    n, d = embeddings.shape
    if n < 2:
        raise ValueError(f"embeddings must have N ≥ 2 rows (N×d), got shape {tuple(embeddings.shape)}")
    if groups is None:
        raise ValueError(f"groups must be a 1-D integer tensor of shape (N,) = ({n},), got None")
    _check_ids(groups, "groups", n, rows_name="N")
    _check_temperature(temperature)
    if positives not in ("inside", "outside"):
        raise ValueError(f"positives must be 'inside' or 'outside', got {positives!r}")
    if scaling not in MPCL_SCALINGS:
        raise ValueError(f"scaling must be one of {list(MPCL_SCALINGS)}, got {scaling!r}")
    if not (eps >= 0):
        raise ValueError(f"eps must be ≥ 0, got {eps!r}")
    device = embeddings.device
    if anchors is not None and (not isinstance(anchors, torch.Tensor) or anchors.shape != (n,)
                                or anchors.dtype != torch.bool):
        got = (tuple(anchors.shape), anchors.dtype) if isinstance(anchors, torch.Tensor) else type(anchors).__name__
        raise ValueError(f"anchors must be a bool tensor of shape (N,) = ({n},), got {got}")
    if hard_negatives is not None:
        _check_matrix(hard_negatives, "hard_negatives", dim=d, rows_name="H")
    if candidate_mask is not None and (not isinstance(candidate_mask, torch.Tensor)
                                       or candidate_mask.shape != (n, n) or candidate_mask.dtype != torch.bool):
        got = ((tuple(candidate_mask.shape), candidate_mask.dtype) if isinstance(candidate_mask, torch.Tensor)
               else type(candidate_mask).__name__)
        raise ValueError(f"candidate_mask must be a bool tensor of shape N×N = {n}×{n}, got {got}")

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
        cand = torch.cat([cand, ones], dim=1)
        pos = torch.cat([pos, torch.zeros_like(ones)], dim=1)  # A×(N+H)

    targets = embeddings if hard_negatives is None else torch.cat([embeddings, hard_negatives], dim=0)
    s = _cosine(embeddings[rows], targets)  # A×(N+H)
    if scaling == "none":
        scaled = s / temperature
    else:
        inside = cand
        if minmax_self:  # the anchor's own column (s_ii = 1) joins the range
            inside = cand.clone()
            inside[torch.arange(len(rows), device=device), rows] = True
        dims = (1,) if scaling.startswith("row") else (0, 1)
        lo = s.masked_fill(~inside, float("inf")).amin(dim=dims, keepdim=True)
        hi = s.masked_fill(~inside, float("-inf")).amax(dim=dims, keepdim=True)
        if scaling.endswith("_detached"):
            lo, hi = lo.detach(), hi.detach()
        scaled = (2 * (s - lo) / (hi - lo + eps) - 1) / temperature
    neg_inf = float("-inf")
    log_denominator = torch.logsumexp(scaled.masked_fill(~cand, neg_inf), dim=1)
    if positives == "inside":
        log_numerator = torch.logsumexp(scaled.masked_fill(~pos, neg_inf), dim=1)
        losses = log_denominator - log_numerator
    else:
        mean_positive = torch.where(pos, scaled, torch.zeros_like(scaled)).sum(dim=1) / pos.sum(dim=1)
        losses = log_denominator - mean_positive
    return losses.mean()
