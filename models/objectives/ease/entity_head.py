"""EASE's entity head: a trainable entity table (initialised from Wikipedia2Vec) and the map W into the sentence
space — ``W · E[id]``, the paper's learnable matrix W (default: a bias-free linear map), ``W · E[id] + b`` with
``bias``, or ``tanh(W · E[id] + b)`` as the code's ``EntityMLPLayer`` (``nonlinear=True``, ``bias=True``).

Part of the EASE objective (``models/objectives/ease/__init__.py``, which builds it in its component); a module of its
own because it derives from ``torch.nn.Module`` at definition time, and the objective modules must import without
loading torch (``models.lazy_torch``).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

__all__ = ["EntityHead"]


class EntityHead(nn.Module):
    """Entity table + transformation: id → W · E[id] (the paper's learnable matrix W), W · E[id] + b with ``bias``,
    or tanh(W · E[id] + b) with ``nonlinear`` and ``bias`` (the code's ``EntityMLPLayer``); row 0 is [PAD].

    Args:
        num_entities: number of real entities; ids 1..num_entities, id 0 is [PAD] (a zero row, no gradient).
        entity_dim: width of the entity table (768 for Wikipedia2Vec ``enwiki.fp16.768.vec``).
        hidden_size: width of the sentence embeddings the output is compared with.
        nonlinear: tanh after the linear map (the code's reading); False (default) is the paper's linear W.
        bias: a learnable bias b after W (``self.linear.bias``; the code's ``nn.Linear``); False: none, W · e is
            linear in e (the paper's matrix). None (default) follows ``nonlinear``: no bias for the paper's linear W,
            a bias for the code's Linear + tanh. The EASE objective always passes its ``entity_projection_bias``.
    """

    def __init__(self, num_entities: int, entity_dim: int, hidden_size: int, nonlinear: bool = False,
                 bias: bool | None = None) -> None:
        super().__init__()
        for value, name in ((num_entities, "num_entities"), (entity_dim, "entity_dim"), (hidden_size, "hidden_size")):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not isinstance(nonlinear, bool):
            raise ValueError(f"nonlinear must be a bool, got {nonlinear!r}")
        if bias is not None and not isinstance(bias, bool):
            raise ValueError(f"bias must be a bool or None, got {bias!r}")
        self.num_entities = num_entities
        self.nonlinear = nonlinear
        self.bias = nonlinear if bias is None else bias
        self.embedding = nn.Embedding(num_entities + 1, entity_dim, padding_idx=0)
        self.linear = nn.Linear(entity_dim, hidden_size, bias=self.bias)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """B×hidden_size transformed entity embeddings of ``ids`` ((B,) long, 0 = [PAD])."""
        if not isinstance(ids, torch.Tensor) or ids.dim() != 1:
            shape = tuple(ids.shape) if isinstance(ids, torch.Tensor) else type(ids).__name__
            raise ValueError(f"ids must be a 1-D integer tensor of shape (B,), got {shape}")
        if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
            raise ValueError(f"ids must be an integer (long) tensor of shape (B,), got dtype {ids.dtype}")
        out = self.linear(self.embedding(ids.long()))
        return torch.tanh(out) if self.nonlinear else out

    @classmethod
    def from_vectors(cls, vectors: np.ndarray, hidden_size: int, nonlinear: bool = False, seed: int = 0,
                     bias: bool | None = None, init_seed: int | None = None) -> EntityHead:
        """A head whose entity table starts from pre-trained vectors (Wikipedia2Vec), as EASE's ``main.py`` does.

        Args:
            vectors: n×entity_dim array; row k is entity id k+1; an all-NaN row marks an entity missing from
                Wikipedia2Vec, drawn from U(−0.05, 0.05) with ``torch.Generator().manual_seed(seed)``.
            hidden_size: output width.
            nonlinear: tanh after the linear map (the code); False (default) is the paper's linear W.
            seed: seed of the missing rows' draw.
            bias: a bias after W (the code's ``nn.Linear``); False: the paper's matrix; None (default) follows
                ``nonlinear`` (``EntityHead``).
            init_seed: the linear layer keeps PyTorch's default initialisation; with ``init_seed`` it is drawn from
                the global CPU generator seeded with it inside ``torch.random.fork_rng``, so building the head leaves
                the caller's random stream (dropout masks, batch order) as it was: a head with a bias and one without
                then train under the same masks, and W is the same draw in both. None: from the caller's stream.

        Returns:
            An ``EntityHead`` with ``num_entities = n`` (float32 parameters; row 0 zeros).
        """
        vectors = np.asarray(vectors)
        if vectors.ndim != 2 or vectors.shape[0] < 1 or vectors.shape[1] < 1:
            raise ValueError(f"vectors must be a 2-D array of shape n×entity_dim (n ≥ 1), got shape {vectors.shape}")
        if not np.issubdtype(vectors.dtype, np.floating):
            raise ValueError(f"vectors must be a floating-point array (NaN rows = missing), got dtype {vectors.dtype}")
        nan = np.isnan(vectors)
        missing = nan.all(axis=1)
        partial = nan.any(axis=1) & ~missing
        if partial.any():
            raise ValueError(f"vectors row {int(np.flatnonzero(partial)[0])} is partly NaN; a missing entity must be "
                             "an all-NaN row")
        n, dim = vectors.shape
        with torch.random.fork_rng(devices=[], enabled=init_seed is not None):
            if init_seed is not None:
                torch.manual_seed(init_seed)
            head = cls(n, dim, hidden_size, nonlinear, bias)
        table = torch.zeros(n + 1, dim, dtype=torch.float32)
        present = torch.from_numpy(~missing)
        table[1:][present] = torch.from_numpy(vectors[~missing].astype(np.float32))
        n_missing = int(missing.sum())
        if n_missing:
            gen = torch.Generator().manual_seed(seed)
            draw = torch.rand(n_missing, dim, generator=gen, dtype=torch.float32) * 0.1 - 0.05
            table[1:][torch.from_numpy(missing)] = draw
        with torch.no_grad():
            head.embedding.weight.copy_(table)
        return head
