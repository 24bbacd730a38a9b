"""Data-parallel training with ``torch.distributed`` and gathered in-batch negatives, without a DDP wrapper.

References: the SimCSE family's ``cl_forward`` (princeton-nlp/SimCSE ``simcse/models.py``, EASE, mSimCSE:
``dist.all_gather`` of z1/z2 and "replace the own rank's slot by the local tensor" so gradients flow through the
local shard), sentence-transformers' ``gather_across_devices`` (``all_gather_with_grad``); methods.md §1.3, §8.1.

Scheme. Every rank holds the same global batch (batches are a pure function of (seed, step)), embeds its contiguous
``shard`` of every column and ``gather`` s the shards, so every rank evaluates the *same* full-batch loss L. On rank r
the gathered tensor is [stop_grad(e_0) … e_r … stop_grad(e_{W−1})], so rank r's backward gives the part of ∂L/∂θ that
flows through its own embeddings, ∂L/∂e_r · ∂e_r/∂θ. Summed over ranks this is the chain rule over all rows:

    Σ_r ∂L/∂e_r · ∂e_r/∂θ = ∂L/∂θ   (the single-process gradient of the whole batch)

so ``all_reduce_gradients`` SUMs (no division by the world size, unlike DDP's average, which would scale the step by
1/W as SimCSE's DDP runs do). Parameters applied to the local rows *before* the gather (the encoder, EASE's entity
table applied to the local entity ids) follow the same rule. Parameters applied *after* the gather, to the full batch
(a projection of the gathered embeddings, a learned temperature), get the whole ∂L/∂w on every rank; summing would
multiply their gradient by W, so pass them as ``replicated=`` to have them averaged instead.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from typing import TypeVar

import torch
import torch.distributed as dist
from torch import nn

log = logging.getLogger("polysent.models.distributed")
T = TypeVar("T")


def is_distributed() -> bool:
    """Whether a default process group is initialised."""
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    """This process's rank (0 when not distributed)."""
    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    """Number of processes (1 when not distributed)."""
    return dist.get_world_size() if is_distributed() else 1


def shard(items: Sequence[T], rank: int, world: int) -> list[T]:
    """The ``rank``-th of ``world`` contiguous, equal parts of ``items`` (concatenating the shards in rank order gives
    ``items`` back, which is the order ``gather`` restores)."""
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"shard: rank {rank} is not in 0..{world - 1} (world size {world})")
    if len(items) % world:
        raise ValueError(f"shard: a global batch of {len(items)} items cannot be split into {world} equal shards "
                         f"({len(items)} % {world} = {len(items) % world}); use a batch size divisible by {world}")
    size = len(items) // world
    return list(items[rank * size:(rank + 1) * size])


def gather(t: torch.Tensor) -> torch.Tensor:
    """All-gather equal-shaped tensors along dim 0 in rank order; the own rank's slot is ``t`` itself, so gradients
    flow through the local shard only (the others are constants). Identity when not distributed. Any dtype the
    backend supports (float embeddings, long group ids)."""
    if not is_distributed() or world_size() == 1:
        return t
    parts = [torch.empty_like(t) for _ in range(world_size())]
    dist.all_gather(parts, t.detach().contiguous())
    parts[rank()] = t
    return torch.cat(parts, dim=0)


def _collective_device() -> torch.device:
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _sum_flat(grads: list[torch.Tensor]) -> None:
    """SUM-all-reduce ``grads`` in place: one flattened buffer (hence one collective) per (dtype, device)."""
    buckets: dict[tuple[torch.dtype, torch.device], list[torch.Tensor]] = {}
    for g in grads:
        buckets.setdefault((g.dtype, g.device), []).append(g)
    for bucket in buckets.values():
        flat = torch.cat([g.reshape(-1) for g in bucket])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        offset = 0
        for g in bucket:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()


def all_reduce_gradients(parameters: Iterable[nn.Parameter], replicated: Iterable[nn.Parameter] = ()) -> None:
    """SUM the gradients of ``parameters`` over all ranks (no-op when not distributed).

    Every rank computes the same full-batch loss from gathered embeddings and each rank's backward gives the
    gradient through its own shard, so the SUM over ranks is exactly the single-process gradient of the whole batch
    (no DDP wrapper needed; no division by the world size). ``replicated`` parameters — used only after ``gather``,
    on the full batch, so every rank already holds the whole gradient — are averaged instead (summing would multiply
    their gradient by the world size); they may also appear in ``parameters``.

    All ranks must pass the same parameters in the same order. A parameter whose ``.grad`` is None on this rank but
    set on another gets a zero gradient here (one small extra collective), so the ranks never disagree on what to
    reduce; parameters without a gradient anywhere stay None. Sparse gradients are made dense.
    """
    if not is_distributed() or world_size() == 1:
        return
    averaged = {id(p) for p in replicated}
    params = list(dict.fromkeys([*parameters, *(p for p in replicated)]))
    has_grad = torch.tensor([p.grad is not None for p in params], dtype=torch.int32, device=_collective_device())
    dist.all_reduce(has_grad, op=dist.ReduceOp.MAX)
    for p, flag in zip(params, has_grad.tolist(), strict=True):
        if flag and p.grad is None:
            p.grad = torch.zeros_like(p)
        elif p.grad is not None and p.grad.is_sparse:
            p.grad = p.grad.to_dense()
    _sum_flat([p.grad for p in params if p.grad is not None and id(p) not in averaged])
    mean = [p.grad for p in params if p.grad is not None and id(p) in averaged]
    _sum_flat(mean)
    for g in mean:
        g.div_(world_size())


def init_process_group_from_env(backend: str | None = None) -> bool:
    """Initialise the default process group from torchrun's environment (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
    ``MASTER_PORT``; ``LOCAL_RANK`` picks the CUDA device) when ``WORLD_SIZE`` > 1. Backend: ``nccl`` when CUDA is
    available, else ``gloo``. Returns whether the process is now distributed (True if it already was)."""
    if is_distributed():
        return True
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return False
    missing = [k for k in ("RANK", "MASTER_ADDR", "MASTER_PORT") if not os.environ.get(k)]
    if missing:
        raise ValueError(f"WORLD_SIZE={world} but the environment lacks {', '.join(missing)}; start the run with "
                         "torchrun (or set RANK, MASTER_ADDR and MASTER_PORT)")
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend=backend, init_method="env://", rank=int(os.environ["RANK"]), world_size=world)
    log.info("process group initialised: rank %d of %d, backend %s", rank(), world_size(), backend)
    return True
