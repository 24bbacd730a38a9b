"""The parts the contrastive losses are built from, public and shared: input checks with messages that name the
argument and the expected shape, the cosine-similarity matrix, the same-meaning mask, the diagonal cross-entropy and
the masked InfoNCE core; and the count of in-batch duplicates (``DuplicateNegatives``), which the objectives with a
``duplicate_negatives: keep | mask`` setting log.

Used by ``models/objectives/contrastive.py`` (InfoNCE), ``simcse.py`` (one-way InfoNCE with hard negatives),
``ease.py`` (the entity term), ``mpcl.py`` (checks and cosines) and ``soft_label.py`` (checks). Not an objective: it
registers nothing. torch is taken lazily (``models.lazy_torch``), as in every module of this package.
"""

from __future__ import annotations

import logging
import math
import numbers
from typing import TYPE_CHECKING, Literal

import numpy as np

from models.lazy_torch import F, torch

if TYPE_CHECKING:
    from models.training.sampling import BatchPlan

__all__ = ["DuplicateNegatives", "DuplicateTally", "check_ids", "check_matrix", "check_pair", "check_temperature",
           "cosine", "diagonal_ce", "duplicate_counts", "masked_info_nce", "same_group_mask"]

DuplicateNegatives = Literal["keep", "mask"]
"""What an objective does with in-batch negatives that duplicate a row's positive (the same text, entity or meaning
id): ``keep`` them in the denominator (the papers' equations) or ``mask`` them out (−inf logits)."""


def check_matrix(x: torch.Tensor, name: str, rows: int | None = None, dim: int | None = None,
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


def check_pair(a: torch.Tensor, b: torch.Tensor, a_name: str, b_name: str) -> tuple[int, int]:
    """Raise ValueError unless ``a`` and ``b`` are floating B×d tensors of equal shape with B ≥ 1; return (B, d)."""
    for x, name in ((a, a_name), (b, b_name)):
        if not isinstance(x, torch.Tensor) or x.dim() != 2:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"{a_name} and {b_name} must be B×d tensors of equal shape, got {name} {shape}")
    if a.shape != b.shape:
        raise ValueError(f"{a_name} and {b_name} must be B×d tensors of equal shape, "
                         f"got {tuple(a.shape)} and {tuple(b.shape)}")
    check_matrix(a, a_name)
    check_matrix(b, b_name)
    if a.shape[0] == 0:
        raise ValueError(f"{a_name} must have at least one row (B ≥ 1), got shape {tuple(a.shape)}")
    return a.shape[0], a.shape[1]


def check_ids(x: torch.Tensor | None, name: str, n: int, rows_name: str = "B") -> torch.Tensor | None:
    """Raise ValueError unless ``x`` is None or a 1-D integer tensor of length ``n``."""
    if x is None:
        return None
    if not isinstance(x, torch.Tensor) or x.dim() != 1 or x.shape[0] != n:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{name} must be a 1-D integer tensor of shape ({rows_name},) = ({n},), got {shape}")
    if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
        raise ValueError(f"{name} must be an integer (long) tensor of shape ({rows_name},), got dtype {x.dtype}")
    return x


def check_temperature(temperature: float, name: str = "temperature") -> None:
    if not (isinstance(temperature, numbers.Real) and math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {temperature!r}")


def cosine(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Cosine-similarity matrix of the rows of ``x`` (n×d) and ``y`` (m×d): n×m."""
    return F.normalize(x, dim=-1) @ F.normalize(y, dim=-1).T


def same_group_mask(groups: torch.Tensor, device: torch.device) -> torch.Tensor:
    """B×B bool: True at (i, j), j ≠ i, when rows i and j share a group id."""
    g = groups.to(device)
    same = g[:, None] == g[None, :]
    return same & ~torch.eye(len(g), dtype=torch.bool, device=device)


def diagonal_ce(logits: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of a B×C logit matrix (C ≥ B) whose target for row i is column i (−inf entries allowed)."""
    return (torch.logsumexp(logits, dim=1) - logits.diagonal()).mean()


def masked_info_nce(anchors: torch.Tensor, positives: torch.Tensor, temperature: float, symmetric: bool,
                    hard_negatives: torch.Tensor | None, hard_negative_weight: float, groups: torch.Tensor | None,
                    names: tuple[str, str, str, str]) -> torch.Tensor:
    """The InfoNCE of ``models.objectives.contrastive.info_nce`` (its docstring has the equation), with the argument
    names its errors use (``names``: anchors, positives, hard negatives, groups), so each wrapper — InfoNCE, SimCSE,
    EASE's entity term — reports its own names."""
    a_name, p_name, n_name, g_name = names
    b, d = check_pair(anchors, positives, a_name, p_name)
    check_temperature(temperature)
    check_ids(groups, g_name, b)
    if hard_negatives is not None:
        check_matrix(hard_negatives, n_name, dim=d, rows_name="H")
        if hard_negative_weight != 0 and hard_negatives.shape[0] != b:
            raise ValueError(f"{n_name} must be B×d = {b}×{d} (one per anchor) when hard_negative_weight ≠ 0, "
                             f"got shape {tuple(hard_negatives.shape)}")

    device = anchors.device
    pos_block = cosine(anchors, positives) / temperature  # B×B
    if groups is not None:
        pos_block = pos_block.masked_fill(same_group_mask(groups, device), float("-inf"))
    logits = pos_block
    if hard_negatives is not None:
        neg_block = cosine(anchors, hard_negatives) / temperature  # B×H
        if hard_negative_weight != 0:
            eye = torch.eye(b, dtype=neg_block.dtype, device=device)
            neg_block = neg_block + hard_negative_weight * eye
        logits = torch.cat([pos_block, neg_block], dim=1)
    loss = diagonal_ce(logits)
    if symmetric:
        loss = (loss + diagonal_ce(pos_block.T)) / 2
    return loss


# ---------------------------------------------------------------------------------------------- in-batch duplicates
def duplicate_counts(ids: np.ndarray) -> tuple[int, int]:
    """(columns, rows) of one batch's ids: columns = the ordered pairs (i, j), j ≠ i, with ids[i] == ids[j] — the
    in-batch negatives a same-id mask drops —, rows = the rows that have at least one such column."""
    _, counts = np.unique(np.asarray(ids), return_counts=True)
    dup = counts[counts > 1]
    return int((dup * (dup - 1)).sum()), int(dup.sum())


def _run_counts(plan: BatchPlan, ids: np.ndarray, batches: int) -> tuple[int, int, int]:
    """(columns, rows, batches with any) summed over batches 0 … ``batches``−1 of ``plan``, one epoch at a time."""
    columns = rows = hit = 0
    width = int(ids.max()) + 1
    for first in range(0, batches, plan.per_epoch):
        n = min(plan.per_epoch, batches - first)
        block = ids[np.stack([plan.batch(first + i) for i in range(n)])]  # n × B ids of the epoch's batches
        cells, counts = np.unique(np.arange(n, dtype=np.int64)[:, None] * width + block, return_counts=True)
        dup = counts > 1
        columns += int((counts[dup] * (counts[dup] - 1)).sum())
        rows += int(counts[dup].sum())
        hit += len(np.unique(cells[dup] // width))
    return columns, rows, hit


class DuplicateTally:
    """The in-batch duplicates of one loss term (``what``: e.g. "same-text", "same-entity", "same-meaning") under an
    objective's ``duplicate_negatives`` setting: one info line at build time with the counts summed over the run's
    batches (``batches`` = steps × grad_accumulation; exact, batches are a pure function of seed and step), and one
    debug line per batch (``batch``). Counts come from the ids on the host: no device synchronisation."""

    def __init__(self, log: logging.Logger, objective: str, term: str, what: str, mode: DuplicateNegatives,
                 ids: np.ndarray, plan: BatchPlan, batches: int) -> None:
        self.log, self.objective, self.term, self.what, self.mode = log, objective, term, what, mode
        self.ids = np.asarray(ids, dtype=np.int64)
        self.verb = "masked from the denominators" if mode == "mask" else "kept as negatives"
        columns, rows, hit = _run_counts(plan, self.ids, batches)
        self.run_columns, self.run_rows, self.run_batches = columns, rows, hit
        log.info("objective %s: duplicate_negatives %s: over the run's %d batches of %d, %d %s columns in %d rows "
                 "(%d batches) %s (%s)", objective, mode, batches, plan.batch_size, columns, what, rows, hit,
                 self.verb, term)

    def batch(self, idx: np.ndarray, step: int) -> None:
        """Log batch ``step``'s counts (rows ``idx`` of the corpus) at debug level."""
        if self.log.isEnabledFor(logging.DEBUG):
            columns, rows = duplicate_counts(self.ids[idx])
            self.log.debug("objective %s batch %d: %d %s columns in %d rows %s (%s)", self.objective, step, columns,
                           self.what, rows, self.verb, self.term)
