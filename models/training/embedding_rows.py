"""The student's word-embedding table trained by rows: AdamW work proportional to the rows that can move, not to the
vocabulary (``training.embedding_updates``).

multilingual-e5-small's table is 250,037 × 384 = 96 M of its 117 M weights; a batch of 96 sentences reads a few
hundred to a few thousand of its rows. Trained the usual way, every step writes a dense 96 M-float gradient (zeroed,
then scattered into), clips over it, and runs AdamW over all 96 M entries — on 2 CPU cores about a third of a step.
Here the trainer's forward reads the table through ``EmbeddingRows.lookup``: each forward takes the rows its ids
name as a small leaf tensor (``weight[unique ids]``), so backward fills a ``rows × d`` gradient, and ``step`` applies
AdamW to the table's rows itself. Two readings (``embedding_updates``):

``dense`` (the default; the maths of dense AdamW, unchanged). A row that no step has read yet has zero gradient, so
    dense AdamW keeps its moments at exactly 0 and moves it by ``lr · 0 / (0 + ε) = 0``: only rows read at least once
    can move, and those keep moving on their momentum when later batches skip them (m ← β₁m, v ← β₂v, a step of
    ``lr · m̂ / (√v̂ + ε)``). This reading keeps the moments of every row read so far (slots appended in first-read
    order) and runs the same fused AdamW kernel over exactly those rows each step, with the global step count in the
    bias corrections: the same update as dense AdamW to float rounding (``tests/test_embedding_rows.py`` compares
    the tables after several steps). Its cost grows with the rows read so far (a 300-step multilingual-e5 run on
    six XNLI languages reaches tens of thousands), not with the vocabulary.
``lazy`` (TensorFlow Addons' ``LazyAdam``, PyTorch's ``SparseAdam`` semantics). Only the rows the step read update
    their moments and move; a skipped row keeps its moments frozen until it is read again (no momentum drift, no decay
    of v). Bias corrections use the global step count, as both libraries do. This changes the maths — how a rarely
    read row moves — so it is a reading to measure, not a refactor (``experiments/me5_recipes``' ``lazy`` rows).

The embedding table gets no weight decay in either reading (``_param_groups``: the BERT recipe), which is what makes
the dense reading exact; a table with decay is refused. Gradient clipping sees the table's rows: ``clip`` folds their
norm into the total exactly as ``clip_grad_norm_`` over a dense gradient would (its zero rows add nothing).

Only the student's own forward through the trainer (``Run.embed``) reads the table this way; an objective that reads
the student's table itself (VMSST's decoders with ``decoder_embeddings: shared``) keeps the plain dense path for the
whole run (``Component.reads_student_table``). Distributed runs keep it too.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

import torch
from torch import nn

log = logging.getLogger("polysent.training.embedding_rows")

EmbeddingUpdates = Literal["dense", "lazy"]


class EmbeddingRows:
    """Row-wise lookups into ``table`` and its AdamW step (module docstring). ``betas``/``eps`` as the run's AdamW."""

    def __init__(self, table: nn.Embedding, reading: EmbeddingUpdates, *, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, capacity: int = 4096) -> None:
        if reading not in ("dense", "lazy"):
            raise ValueError(f"embedding_updates must be 'dense' or 'lazy', got {reading!r}")
        self.table = table
        self.weight: nn.Parameter = table.weight
        self.reading = reading
        self.betas, self.eps = betas, eps
        vocab, dim = self.weight.shape
        device = self.weight.device
        self.slot_of_row = torch.full((vocab,), -1, dtype=torch.long, device=device)
        self.rows = torch.empty(0, dtype=torch.long, device=device)  # table rows in slot order (read so far)
        self.exp_avg = torch.zeros(capacity, dim, dtype=self.weight.dtype, device=self.weight.device)
        self.exp_avg_sq = torch.zeros_like(self.exp_avg)
        self.steps = 0
        self._leaves: list[tuple[torch.Tensor, torch.Tensor]] = []

    # -- the forward side ---------------------------------------------------------------------------------------------
    def lookup(self, ids: torch.Tensor) -> torch.Tensor:
        """``table(ids)``; with gradients enabled, through a leaf of the rows ``ids`` name, whose gradient ``collect``
        reads after backward (the table's own ``.grad`` stays ``None``)."""
        if not torch.is_grad_enabled():
            return nn.functional.embedding(ids, self.weight)
        unique, inverse = torch.unique(ids, return_inverse=True)
        leaf = self.weight.detach().index_select(0, unique).requires_grad_()
        self._leaves.append((unique, leaf))
        return nn.functional.embedding(inverse, leaf)

    def collect(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(rows, summed gradient) of every lookup since the last call, one entry per row (``None``: no gradient
        reached the table); forgets the lookups."""
        parts = [(u, leaf.grad) for u, leaf in self._leaves if leaf.grad is not None]
        self._leaves = []
        if not parts:
            return None
        if len(parts) == 1:
            return parts[0][0], parts[0][1]
        rows, inverse = torch.unique(torch.cat([u for u, _ in parts]), return_inverse=True)
        grad = torch.zeros(len(rows), self.weight.shape[1], dtype=parts[0][1].dtype, device=parts[0][1].device)
        grad.index_add_(0, inverse, torch.cat([g for _, g in parts]))
        return rows, grad

    def discard(self) -> None:
        """Forget the lookups of a step that will not be applied."""
        self._leaves = []

    # -- the optimiser side -------------------------------------------------------------------------------------------
    def _slots(self, rows: torch.Tensor) -> torch.Tensor:
        """Slots of ``rows`` (sorted, unique), giving new rows the next free slots (zero moments)."""
        slots = self.slot_of_row[rows]
        new = rows[slots < 0]
        if len(new):
            start, end = len(self.rows), len(self.rows) + len(new)
            if end > len(self.exp_avg):
                grow = max(end, 2 * len(self.exp_avg))
                for name in ("exp_avg", "exp_avg_sq"):
                    old = getattr(self, name)
                    bigger = torch.zeros(grow, old.shape[1], dtype=old.dtype, device=old.device)
                    bigger[: len(old)] = old
                    setattr(self, name, bigger)
            self.slot_of_row[new] = torch.arange(start, end, device=rows.device)
            self.rows = torch.cat([self.rows, new])
            slots = self.slot_of_row[rows]
        return slots

    @torch.no_grad()
    def step(self, lr: float, update: tuple[torch.Tensor, torch.Tensor] | None) -> None:
        """One AdamW step of the table at learning rate ``lr`` with this step's (rows, gradient) — already clipped —
        or ``None`` when no row was read (the dense reading still moves the rows read before)."""
        self.steps += 1
        beta1, beta2 = self.betas
        # the kernels count this step themselves; a fused kernel reads the count on the weights' device, as
        # torch.optim.AdamW keeps it
        step_t = torch.tensor(float(self.steps - 1), dtype=torch.float32, device=self.weight.device)
        if update is not None:
            slots = self._slots(update[0])
        if self.reading == "lazy":
            if update is None:
                return
            rows, grad = update
            params = self.weight.detach().index_select(0, rows)
            m, v = self.exp_avg.index_select(0, slots), self.exp_avg_sq.index_select(0, slots)
            _adamw([params], [grad], [m], [v], step_t, lr, beta1, beta2, self.eps)
            self.exp_avg.index_copy_(0, slots, m)
            self.exp_avg_sq.index_copy_(0, slots, v)
            self.weight.index_copy_(0, rows, params)
            return
        n = len(self.rows)
        if n == 0:
            return
        grad = torch.zeros(n, self.weight.shape[1], dtype=self.weight.dtype, device=self.weight.device)
        if update is not None:
            grad.index_copy_(0, slots, update[1].to(grad.dtype))
        params = self.weight.detach().index_select(0, self.rows)
        m, v = self.exp_avg[:n], self.exp_avg_sq[:n]  # views: updated in place
        _adamw([params], [grad], [m], [v], step_t, lr, beta1, beta2, self.eps)
        self.weight.index_copy_(0, self.rows, params)

    @property
    def rows_read(self) -> int:
        """Rows of the table read at least once so far (the dense reading's working set)."""
        return len(self.rows)

    def state_dict(self) -> dict[str, Any]:
        n = len(self.rows)
        return {"reading": self.reading, "steps": self.steps, "rows": self.rows.clone(),
                "exp_avg": self.exp_avg[:n].clone(), "exp_avg_sq": self.exp_avg_sq[:n].clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["reading"] != self.reading:
            raise ValueError(f"embedding rows: the checkpoint was written with embedding_updates "
                             f"{state['reading']!r}, this run uses {self.reading!r}")
        rows = state["rows"].to(device=self.weight.device, dtype=torch.long)
        self.steps = int(state["steps"])
        self.rows = rows.clone()
        self.slot_of_row.fill_(-1)
        self.slot_of_row[rows] = torch.arange(len(rows), device=rows.device)
        dim = self.weight.shape[1]
        self.exp_avg = torch.zeros(max(len(rows), 1), dim, dtype=self.weight.dtype, device=self.weight.device)
        self.exp_avg_sq = torch.zeros_like(self.exp_avg)
        self.exp_avg[: len(rows)] = state["exp_avg"]
        self.exp_avg_sq[: len(rows)] = state["exp_avg_sq"]


def _adamw(params: list[torch.Tensor], grads: list[torch.Tensor], exp_avgs: list[torch.Tensor],
           exp_avg_sqs: list[torch.Tensor], step: torch.Tensor, lr: float, beta1: float, beta2: float,
           eps: float) -> None:
    """torch's own AdamW update (no weight decay, no amsgrad) in place, through the fused kernel where the device has
    one (the trainer's optimiser uses the same), else the single-tensor loop; ``step`` is the count before this step
    (the kernels add one)."""
    from torch.optim.adamw import adamw

    steps = [step.clone() for _ in params]
    fused = params[0].device.type in ("cpu", "cuda")
    adamw(params, grads, exp_avgs, exp_avg_sqs, [], steps, foreach=False, fused=fused, amsgrad=False,
          beta1=beta1, beta2=beta2, lr=lr, weight_decay=0.0, eps=eps, maximize=False)
