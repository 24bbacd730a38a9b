"""EASE: entity-aware contrastive learning of sentence embeddings (SimCSE term + sentence–entity term).

Paper/code: Nishikawa, Ri, Yamada, Tsuruoka, Echizen, "EASE: Entity-Aware Contrastive Learning of Sentence Embedding"
(NAACL 2022); ``studio-ousia/ease`` ``ease/ease_models.py cl_forward``, ``main.py``, ``conf/config.yaml`` (methods §4).
Each sentence is encoded twice (two dropout views z1, z2); its hyperlinked Wikipedia entity is the positive and one
entity of the same Wikidata type (not linked from the sentence's page) its hard negative. With the entity head
e_j = tanh(W · E[title_j]), n_j = tanh(W · E[hn_j]) (``EntityHead``)::

    L_s = CE( [cos(z1_i, z2_j) / τ_s]_{i,j}, arange(B) )                                          (SimCSE term)
    logits_i = [ cos(z1_i, e_j) / τ_e ]_{j=1..B}  ‖  [ cos(z1_i, n_j) / τ_e + w_hn · 1[i = j] ]_{j=1..B}
    L_e = CE( logits, arange(B) )                                                                 (entity term)
    L = L_s + λ · L_e

Only z1 is contrasted with entities (z2 appears only in L_s); both terms are one-directional (the code's
``use_equal_loss`` and ``use_entity_to_sentence_loss`` are off by default).

Defaults (code, ``conf/config.yaml`` and ``train_*_ease.sh``): τ_s = 0.05, τ_e = 10 (multilingual; 100 monolingual),
w_hn = 1.0, λ = 0.01.

Paper vs code (methods §4.2, §D.0, §D.1) — this module follows the code, which produced the released models:
    - τ_e *divides* the cosine (``Similarity.forward`` returns cos / temp): with 10 / 100 the entity logits live in
      ±0.1 / ±0.01, a nearly flat softmax; the paper states the same values as "temperature".
    - the paper's "learnable linear W" is ``EntityMLPLayer`` = Linear + tanh in the code
      (``EntityHead(nonlinear=True)``; ``nonlinear=False`` gives the paper's linear map);
    - hard negatives: besides being in the denominator, the own hard negative's logit gets +w_hn = +1.0 (its exp-term
      × e), and the other B−1 sentences' hard negatives are in every denominator;
    - the paper's batch size 128/256 is 8 sentences × gradient accumulation 16/32: the contrast set is 8;
    - type hard negatives: one random P31 type per entity, ≤ 10 sampled, minus the entities linked from the sentence's
      page; one hard negative per sentence drawn once at load time;
    - the entity table is trainable, initialised from Wikipedia2Vec (768-d), missing entities ~ U(−0.05, 0.05), row 0
      [PAD] = zeros (``EntityHead.from_vectors``); entity embeddings are not all-gathered in the code (single GPU).
    - ``groups`` / ``entity_groups`` are options not in the code: one sentence with k links yields k examples, and one
      entity can be the positive of several batch rows, which the code counts as negatives of each other.

Relations:
    - ``ease_loss`` with ``entity_weight = 0`` is ``simcse_loss``;
    - ``ease_entity_loss`` is ``info_nce(symmetric=False)`` with entities as positives, entity hard negatives, τ = τ_e
      and w = w_hn.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from models.objectives.info_nce import _check_matrix, _check_temperature, _info_nce
from models.objectives.simcse import simcse_loss

__all__ = ["EntityHead", "ease_entity_loss", "ease_loss"]


class EntityHead(nn.Module):
    """Entity table + transformation: id → tanh(W · E[id] + b) (the code's ``EntityMLPLayer``; row 0 is [PAD]).

    Args:
        num_entities: number of real entities; ids 1..num_entities, id 0 is [PAD] (a zero row, no gradient).
        entity_dim: width of the entity table (768 for Wikipedia2Vec ``enwiki.fp16.768.vec``).
        hidden_size: width of the sentence embeddings the output is compared with.
        nonlinear: tanh after the linear map (the code); False gives the paper's linear W.
    """

    def __init__(self, num_entities: int, entity_dim: int, hidden_size: int, nonlinear: bool = True) -> None:
        super().__init__()
        for value, name in ((num_entities, "num_entities"), (entity_dim, "entity_dim"), (hidden_size, "hidden_size")):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.num_entities = num_entities
        self.nonlinear = nonlinear
        self.embedding = nn.Embedding(num_entities + 1, entity_dim, padding_idx=0)
        self.linear = nn.Linear(entity_dim, hidden_size)

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
    def from_vectors(cls, vectors: np.ndarray, hidden_size: int, nonlinear: bool = True, seed: int = 0) -> EntityHead:
        """A head whose entity table starts from pre-trained vectors (Wikipedia2Vec), as EASE's ``main.py`` does.

        Args:
            vectors: n×entity_dim array; row k is entity id k+1; an all-NaN row marks an entity missing from
                Wikipedia2Vec, drawn from U(−0.05, 0.05) with ``torch.Generator().manual_seed(seed)``.
            hidden_size: output width.
            nonlinear: tanh after the linear map.
            seed: seed of the missing rows' draw (the linear layer keeps PyTorch's default initialisation).

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
        head = cls(n, dim, hidden_size, nonlinear)
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


def ease_entity_loss(sentences: torch.Tensor, entities: torch.Tensor, negatives: torch.Tensor | None = None,
                     temperature: float = 10.0, hard_negative_weight: float = 1.0,
                     entity_groups: torch.Tensor | None = None) -> torch.Tensor:
    """EASE's sentence → entity contrastive term L_e (one-directional, τ_e divides).

    Args:
        sentences: B×d sentence embeddings (EASE: the first dropout view z1).
        entities: B×d transformed positive entities (``EntityHead`` output); row i is sentence i's positive.
        negatives: optional H×d transformed hard-negative entities (EASE: H = B, row i is sentence i's own).
        temperature: τ_e > 0, the divisor of the cosine (10 multilingual, 100 monolingual).
        hard_negative_weight: w_hn added to logit (i, B+i) (default 1.0; needs H = B when ≠ 0, inert without
            ``negatives``).
        entity_groups: optional (B,) integer entity ids; column j ≠ i of the positive block is dropped from row i's
            denominator when entity_groups[j] == entity_groups[i] (a duplicated entity is not a negative).

    Returns:
        The scalar loss (mean over the B sentences).
    """
    return _info_nce(sentences, entities, temperature, False, negatives, hard_negative_weight, entity_groups,
                     names=("sentences", "entities", "negatives", "entity_groups"))


def ease_loss(z1: torch.Tensor, z2: torch.Tensor, entities: torch.Tensor, negatives: torch.Tensor | None = None,
              simcse_temperature: float = 0.05, entity_temperature: float = 10.0, hard_negative_weight: float = 1.0,
              entity_weight: float = 0.01, groups: torch.Tensor | None = None,
              entity_groups: torch.Tensor | None = None) -> torch.Tensor:
    """EASE's total loss L = simcse_loss(z1, z2) + λ · ease_entity_loss(z1, entities, negatives).

    Args:
        z1: B×d first dropout view (contrasted with z2 and with the entities).
        z2: B×d second dropout view (SimCSE term only).
        entities: B×d transformed positive entities.
        negatives: optional B×d transformed hard-negative entities.
        simcse_temperature: τ_s of the SimCSE term (0.05).
        entity_temperature: τ_e, divisor of the entity cosine (10 multilingual, 100 monolingual).
        hard_negative_weight: w_hn on the own hard negative's logit (1.0).
        entity_weight: λ (0.01).
        groups: optional (B,) ids of same-meaning sentences for the SimCSE term.
        entity_groups: optional (B,) entity ids for the entity term.

    Returns:
        The scalar loss.
    """
    _check_matrix(z1, "z1")
    _check_temperature(entity_temperature, "entity_temperature")
    _check_temperature(simcse_temperature, "simcse_temperature")
    sentence_term = simcse_loss(z1, z2, temperature=simcse_temperature, groups=groups)
    entity_term = ease_entity_loss(z1, entities, negatives, temperature=entity_temperature,
                                   hard_negative_weight=hard_negative_weight, entity_groups=entity_groups)
    return sentence_term + entity_weight * entity_term
