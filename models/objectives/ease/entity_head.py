"""EASE's entity head: a trainable entity table (initialised from Wikipedia2Vec) and the map W into the sentence
space — ``W · E[id]``, the paper's learnable matrix W (default: a bias-free linear map), ``W · E[id] + b`` with
``bias``, or ``tanh(W · E[id] + b)`` as the code's ``EntityMLPLayer`` (``nonlinear=True``, ``bias=True``).

Part of the EASE objective (``models/objectives/ease/__init__.py``, which builds it in its component); a module of its
own because it derives from ``torch.nn.Module`` at definition time, and the objective modules must import without
loading torch (``models.lazy_torch``).

The head file (``save_heads`` / ``load_heads``): a training run writes its head as trained *and* as it started, with
the entity vocabulary, beside the exported model (``<run>/entity_head/<objective>.safetensors``), because the entity
term's witness needs both — sentence → entity retrieval through the trained head against the same retrieval through the
initial one (``models.evaluation.entity_retrieval``) — and the loss cannot be that witness: at the paper's τ_e = 10
it stays within 0.2 of ln N whatever is learnt (methods §4.2). ``head_movement`` is ‖W_trained − W_init‖_F /
‖W_init‖_F, the head's own movement.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = ["HEAD_DIR", "EntityHead", "SavedHeads", "head_movement", "load_heads", "save_heads"]

HEAD_DIR = "entity_head"  # a run's head files: <run>/entity_head/<objective name>.safetensors, beside <run>/model
HEAD_FILE_FORMAT = 1


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


def _relative_change(initial: torch.Tensor, trained: torch.Tensor) -> float:
    base = float(torch.linalg.vector_norm(initial.double()))
    moved = float(torch.linalg.vector_norm(trained.double() - initial.double()))
    return moved / base if base > 0 else (0.0 if moved == 0 else float("inf"))


def head_movement(initial: Mapping[str, torch.Tensor], trained: Mapping[str, torch.Tensor]) -> dict[str, float]:
    """How far training moved the head: ``w`` = ‖W_trained − W_init‖_F / ‖W_init‖_F (the paper's W, the linear
    map), ``table`` = the same over the entity table's real rows (row 0, [PAD], stays zero) and ``bias`` when the head
    has one (‖b_init‖ = 0 gives inf for any move). Under AdamW a tiny gradient still moves W by about lr per element
    and step (Adam normalises it), and weight decay alone scales W by Π(1 − lr·wd), which moves this ratio without
    changing a single cosine; the retrieval witness (``models.evaluation.entity_retrieval``) tells the two apart."""
    out = {"w": _relative_change(initial["linear.weight"], trained["linear.weight"]),
           "table": _relative_change(initial["embedding.weight"][1:], trained["embedding.weight"][1:])}
    if "linear.bias" in initial:
        out["bias"] = _relative_change(initial["linear.bias"], trained["linear.bias"])
    return out


@dataclass
class SavedHeads:
    """A head file read back: the head as it started and as trained (eval mode, CPU, frozen), its entity vocabulary
    (``entities[k-1]`` is id k) and what the run recorded (``meta``: objective settings, steps)."""

    initial: EntityHead
    trained: EntityHead
    entities: list[str]
    meta: dict[str, Any]

    def ids(self, names: Sequence[str]) -> np.ndarray:
        """The head ids of entity ``names`` (0 where the head has no row for one: no [PAD] is ever scored)."""
        row = {e: i + 1 for i, e in enumerate(self.entities)}
        return np.array([row.get(n, 0) for n in names], dtype=np.int64)


def _cpu_state(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", torch.float32).clone() for k, v in state.items()}


def save_heads(path: Path, head: EntityHead, initial: Mapping[str, torch.Tensor], entities: Sequence[str],
               meta: Mapping[str, Any]) -> dict[str, float]:
    """Write ``head`` (trained) and its ``initial`` state with the vocabulary to ``path``: a safetensors file (tensors
    ``initial.<key>`` and ``trained.<key>``, float32) whose one metadata entry ``polysent`` is sorted JSON (format,
    entity names, ``nonlinear``, ``bias``, ``meta``), so equal heads give equal bytes (an artifact's content hash).
    Returns ``head_movement``."""
    from safetensors.torch import save_file

    trained = _cpu_state(head.state_dict())
    start = _cpu_state(initial)
    if set(trained) != set(start):
        raise ValueError(f"initial head state has keys {sorted(start)}, the trained head {sorted(trained)}")
    if len(entities) != head.num_entities:
        raise ValueError(f"{len(entities)} entity names for a head of {head.num_entities} entities")
    info = {"format": HEAD_FILE_FORMAT, "entities": list(entities), "nonlinear": head.nonlinear, "bias": head.bias,
            "meta": dict(meta)}
    tensors = {f"{which}.{k}": v.contiguous() for which, state in (("initial", start), ("trained", trained))
               for k, v in state.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    save_file(tensors, str(tmp), metadata={"polysent": json.dumps(info, sort_keys=True)})
    tmp.replace(path)
    return head_movement(start, trained)


def load_heads(path: Path) -> SavedHeads:
    """Read a head file written by ``save_heads``; another file or format is refused by name."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        raw = (f.metadata() or {}).get("polysent")
        info = json.loads(raw) if raw else {}
        if info.get("format") != HEAD_FILE_FORMAT:
            raise ValueError(f"{path}: not an entity head file of format {HEAD_FILE_FORMAT}")
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open is not a mapping)
    heads = []
    for which in ("initial", "trained"):
        state = {k.split(".", 1)[1]: v for k, v in tensors.items() if k.startswith(f"{which}.")}
        n_rows, dim = state["embedding.weight"].shape
        head = EntityHead(n_rows - 1, dim, state["linear.weight"].shape[0], nonlinear=info["nonlinear"],
                          bias=info["bias"])
        head.load_state_dict(state)
        heads.append(head.requires_grad_(False).eval())
    return SavedHeads(heads[0], heads[1], list(info["entities"]), dict(info["meta"]))
