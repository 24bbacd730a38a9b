"""GradCache: the gradient of a full-batch contrastive loss with the activation memory of a mini-batch.

References: Gao, Zhang, Han, Callan 2021, "Scaling Deep Contrastive Learning Batch Size under Memory Limited Setup"
(luyug/GradCache, GC-DPR); sentence-transformers' ``CachedMultipleNegativesRankingLoss``
(``losses/CachedMultipleNegativesRankingLoss.py``: ``RandContext``, ``_backward_hook``); methods.md §8.1, §D.5.

An in-batch contrastive loss L(e_1 … e_N) couples every row of the batch, so gradient accumulation over small
batches is *not* the same objective (fewer negatives, sentence-transformers issue #2916). But the encoder only enters
L through the embeddings, so by the chain rule

    ∂L/∂θ = Σ_i (∂L/∂e_i)ᵀ · ∂e_i/∂θ = ∂/∂θ Σ_i ⟨e_i(θ), g_i⟩   with g_i = ∂L/∂e_i held constant.

GradCache computes this in three passes:

1. embed every column in chunks of ``m`` texts under ``torch.no_grad()`` (no activations kept), snapshotting the RNG
   before each chunk (``RandContext``);
2. concatenate the chunks, make them leaves, evaluate the loss on the whole batch and back-propagate it to the
   embeddings only: this caches g_i (and fills the gradients of the loss's own parameters, e.g. an entity table);
3. re-embed each chunk *with* graph under its RNG snapshot and back-propagate the surrogate Σ_i ⟨e_i, g_i⟩; the
   parameter gradients accumulate chunk by chunk to exactly ∂L/∂θ.

The re-embedding must reproduce the first pass bit for bit, otherwise g_i is the gradient at *other* embeddings:
dropout draws its masks from the global RNG, so each chunk replays the CPU (and current CUDA device) RNG state it saw
in pass 1 (GC-DPR issue #12, pitfall §D.5.1). The cost is one extra forward pass (≈ 2× a plain step, as ST says). Two
caveats inherited from the method: modules whose forward has side effects (BatchNorm running statistics) see every
chunk twice, and the chunks of pass 3 see the same padding as pass 1 because both use the same texts per chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import TracebackType

import torch

Embed = Callable[[list[str]], torch.Tensor]
LossFn = Callable[[list[torch.Tensor]], torch.Tensor]


class RandContext:
    """Snapshot of the CPU RNG and (when CUDA is initialised) the current CUDA device's RNG, taken at construction.

    ``with ctx:`` forks the RNG (``torch.random.fork_rng``: the states outside the block are restored on exit) and
    sets the snapshot inside, so code run in the block draws the same random numbers — the same dropout masks — as
    code run right after the snapshot was taken. The block can be entered any number of times.
    """

    def __init__(self) -> None:
        self.cpu_state = torch.get_rng_state()
        self.cuda_device: int | None = None
        self.cuda_state: torch.Tensor | None = None
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            self.cuda_device = torch.cuda.current_device()
            self.cuda_state = torch.cuda.get_rng_state(self.cuda_device)
        self._forks: list = []

    def __enter__(self) -> RandContext:
        devices = [self.cuda_device] if self.cuda_device is not None else []
        fork = torch.random.fork_rng(devices=devices, device_type="cuda")
        fork.__enter__()
        self._forks.append(fork)
        torch.set_rng_state(self.cpu_state)
        if self.cuda_state is not None:
            torch.cuda.set_rng_state(self.cuda_state, self.cuda_device)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._forks.pop().__exit__(exc_type, exc, tb)


def _chunks(texts: Sequence[str], size: int) -> list[list[str]]:
    return [list(texts[start:start + size]) for start in range(0, len(texts), size)]


def embed_and_backward(embed: Embed, columns: Sequence[Sequence[str]], loss_fn: LossFn, *, mini_batch: int | None,
                       scale: float = 1.0) -> torch.Tensor:
    """Embed the text ``columns``, evaluate ``loss_fn`` on their embeddings and back-propagate ``scale · loss``.

    ``embed(texts)`` is the model's training forward (dropout active); ``loss_fn`` receives one embedding tensor per
    column (rows in input order) and returns a scalar. Gradients are *accumulated* into ``.grad`` (several objectives
    may call this in turn before one optimiser step). ``mini_batch=None`` embeds each column in one forward with
    graph; ``mini_batch=m`` runs GradCache (module docstring) with chunks of at most ``m`` texts, which gives the same
    loss and gradients up to float rounding for the same dropout masks. Returns the detached (unscaled) loss.
    """
    if not columns:
        raise ValueError("embed_and_backward: no text columns given")
    for i, column in enumerate(columns):
        if len(column) == 0:
            raise ValueError(f"embed_and_backward: column {i} is empty (every column needs at least one text)")
    if mini_batch is not None and mini_batch < 1:
        raise ValueError(f"embed_and_backward: mini_batch must be ≥ 1 (or None for no GradCache), got {mini_batch}")

    if mini_batch is None:
        loss = loss_fn([embed(list(column)) for column in columns])
        (scale * loss).backward()
        return loss.detach()

    # pass 1: embeddings without graph, one RNG snapshot per chunk
    chunks = [_chunks(column, mini_batch) for column in columns]
    contexts: list[list[RandContext]] = []
    cached: list[torch.Tensor] = []
    with torch.no_grad():
        for column_chunks in chunks:
            states, parts = [], []
            for chunk in column_chunks:
                states.append(RandContext())
                parts.append(embed(chunk))
            contexts.append(states)
            cached.append(torch.cat(parts).detach().requires_grad_())

    # pass 2: full-batch loss → ∂(scale·L)/∂e (and the loss's own parameter gradients)
    loss = loss_fn(cached)
    (scale * loss).backward()

    # pass 3: re-embed each chunk with graph under its RNG snapshot; back-propagate ⟨e, g⟩
    for column_chunks, states, reps in zip(chunks, contexts, cached, strict=True):
        grad = reps.grad
        if grad is None:  # the loss did not use this column
            continue
        start = 0
        for chunk, state in zip(column_chunks, states, strict=True):
            g = grad[start:start + len(chunk)]
            start += len(chunk)
            with state:
                emb = embed(chunk)
            (emb * g.to(emb.dtype)).sum().backward()
    return loss.detach()
