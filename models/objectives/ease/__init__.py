"""EASE: entity-aware contrastive learning of sentence embeddings (SimCSE term + sentence–entity term).

Paper/code: Nishikawa, Ri, Yamada, Tsuruoka, Echizen, "EASE: Entity-Aware Contrastive Learning of Sentence Embedding"
(NAACL 2022); ``studio-ousia/ease`` ``ease/ease_models.py cl_forward``, ``main.py``, ``conf/config.yaml`` (methods §4).
Each sentence is encoded twice (two dropout views z1, z2); its hyperlinked Wikipedia entity is the positive and one
entity of the same Wikidata type (not linked from the sentence's page) its hard negative. With the entity head
e_j = W · E[title_j], n_j = W · E[hn_j] (``EntityHead``; W · E[·] + b with ``entity_projection_bias``,
tanh(W · E[·] + b) with ``nonlinear`` too) and B = N sentences::

    L_s = CE( [cos(z1_i, z2_j) / τ_s]_{i,j}, arange(B) )                                          (SimCSE term)
    logits_i = [ cos(z1_i, e_j) / τ_e ]_{j=1..B}  ‖  [ cos(z1_i, n_j) / τ_e + w_hn · 1[i = j] ]_{j=1..B}
    L_e = CE( logits, arange(B) )                                                                 (entity term)
    L = μ · L_s + λ · L_e        (μ = ``simcse_weight``, 1 in the paper; 0: the entity term alone, a diagnostic)

Only z1 is contrasted with entities (z2 appears only in L_s); both terms are one-directional (the code's
``use_equal_loss`` and ``use_entity_to_sentence_loss`` are off by default).

Paper vs code (methods §4.2, §4.3, §D.0, §D.1) — the defaults follow the paper's text (Eq. 1–2 over "a minibatch of
N pairs", Table 9 for EASE-mBERT): N = 256 sentences in one contrast set (``batch_size``; GradCache,
``TrainSettings.grad_cache``, fits it in any memory), τ_s = 0.05, τ_e = 10 (multilingual; 100 monolingual), λ = 0.01,
w_hn = 0 (the hard negative only in the denominator), W a learnable matrix (the paper: "W is a learnable matrix";
e = W · E[·], a bias-free linear map: W · (a·E) = a · W · E, W · 0 = 0), every other in-batch row a negative
(duplicates kept). The public code's readings (``ease/ease_models.py``, ``conf/config.yaml``, ``train_*_ease.sh``),
which produced the released models, are settings:

    - ``hard_negative_weight: 1.0``: the own hard negative's logit gets +1.0 (its exp-term × e); the paper's Eq. 2 has
      no such term (default 0.0). The other B−1 sentences' hard negatives are in every denominator in both readings;
    - ``nonlinear: true``: W is followed by tanh as in ``EntityMLPLayer`` = Linear + tanh (``EntityHead(nonlinear=
      True)``); the paper's W is a learnable matrix (default false: no activation);
    - ``entity_projection_bias: true``: e = W · E[·] + b, the code's ``nn.Linear`` (bias on) and polysent's earlier
      head; the paper's Eq. 2 compares the sentence with W · e, a matrix alone (default false: ``nn.Linear(...,
      bias=False)``). The code's head is ``nonlinear: true`` with ``entity_projection_bias: true``;
    - ``batch_size: 8`` with ``grad_accumulation: 16 / 32``: the code's contrast set is 8 sentences (+8 entities +8
      hard negatives); accumulation does not enlarge it, so the paper's batch 128 / 256 is 7 in-batch negatives there;
    - ``duplicate_negatives: mask``: neither the paper nor the code does this — polysent's own option (its earlier
      behaviour). One sentence with k links yields k examples and one entity can be the positive of several rows;
      ``mask`` drops same-text columns from the SimCSE term's and same-entity columns from the entity term's
      denominators, ``keep`` (default) leaves them as negatives as both equations do. Either way the component logs
      how many columns in how many rows it kept or masked over the run (info) and per batch (debug).

Unchanged between the readings:
    - τ_e *divides* the cosine (``Similarity.forward`` returns cos / temp): with 10 / 100 the entity logits live in
      ±0.1 / ±0.01, a nearly flat softmax; the paper states the same values as "temperature";
    - type hard negatives: one random P31 type per entity, ≤ 10 sampled, minus the entities linked from the sentence's
      page; one hard negative per sentence drawn once at load time (the corpus stage, ``hard_negatives``);
    - the entity table is trainable, initialised from Wikipedia2Vec (768-d), missing entities ~ U(−0.05, 0.05), row 0
      [PAD] = zeros (``EntityHead.from_vectors``); the code does not all-gather entity embeddings (single GPU), here
      they are gathered like the sentences.

Relations:
    - ``ease_loss`` with ``entity_weight = 0`` is ``simcse_loss``;
    - ``ease_entity_loss`` is ``info_nce(symmetric=False)`` with entities as positives, entity hard negatives, τ = τ_e
      and w = w_hn.

Settings (``EaseObjective``, kind ``ease``): its docstring. Inputs: ``hard_negatives`` (sentence, linked entity, its
type-based hard negative) and ``entity_vectors`` (Wikipedia2Vec vectors that initialise the entity table of
``models.objectives.ease.entity_head.EntityHead``, a trainable part of this objective). Shared loss parts:
``loss_parts``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from models.lazy_torch import torch
from models.objective_registry import Citation, Objective, objective
from models.objectives.loss_parts import (
    DuplicateNegatives,
    DuplicateTally,
    check_matrix,
    check_temperature,
    masked_info_nce,
)
from models.objectives.simcse import simcse_loss
from models.settings import AtLeastOne, NonNegative, Positive
from models.training import corpus_tables as ct
from models.training.components import Component, StepBatch, gathered, text_lengths
from models.training.sampling import BatchPlan

if TYPE_CHECKING:
    from models.encoder import SentenceEncoder
    from models.settings import TrainSettings

__all__ = ["EaseComponent", "EaseObjective", "ease_entity_loss", "ease_loss"]

log = logging.getLogger("polysent.models.objectives.ease")


CITATION = Citation(
    'Nishikawa, Ri, Yamada, Tsuruoka, Echizen 2022, "EASE: Entity-Aware Contrastive Learning of Sentence '
    'Embedding" (NAACL)',
    "https://arxiv.org/abs/2205.04260")


@objective(tables=("hard_negatives", "entity_vectors"), citation=CITATION)
@dataclass(frozen=True)
class EaseObjective(Objective):
    """EASE (methods §4): sentence ↔ linked-entity contrast on ``hard_negatives`` rows with Wikipedia2Vec-initialised
    entities (``entity_vectors``) through W, plus the SimCSE dropout loss: L = L_simcse + λ·L_entity. Defaults are the
    paper's (module docstring; Nishikawa et al. 2022, Eq. 1–2): a contrast set of ``batch_size`` 256,
    ``hard_negative_weight`` 0 (the hard negative only in the denominator), ``nonlinear: false`` and
    ``entity_projection_bias: false`` (W a learnable matrix: e = W · E[·], no bias, no activation),
    ``duplicate_negatives: keep``; the public code's readings are ``batch_size: 8`` (+ ``grad_accumulation``),
    ``hard_negative_weight: 1.0``, ``nonlinear: true`` and ``entity_projection_bias: true`` (``EntityMLPLayer``:
    tanh(W · E[·] + b)); ``entity_projection_bias: true`` alone (W · E[·] + b) is polysent's earlier head;
    ``duplicate_negatives: mask`` (same-text / same-entity columns out of the denominators) is polysent's own.
    ``entity_temperature`` divides (10 multilingual, 100 monolingual). ``simcse_weight`` μ scales the SimCSE term
    (1, the paper; 0 with ``entity_weight: 1``: the entity term alone, issue 51's entity-only diagnostic); it enters a
    cache key only when set."""

    KEY_WHEN_SET: ClassVar[tuple[str, ...]] = ("simcse_weight",)

    kind: Literal["ease"] = "ease"
    """``ease``: EASE (Nishikawa et al. 2022), the SimCSE term plus the sentence–entity term"""
    data: Literal["hard_negatives"] = "hard_negatives"
    """the table of (sentence, linked entity, type-based hard negative) rows; its entities' vectors come from
    ``entity_vectors``"""
    weight: NonNegative = 1.0
    """this objective's loss is multiplied by it before the run sums its objectives' losses"""
    batch_size: AtLeastOne = 256
    """sentences in one contrast set (N): the paper's 256 (default; ``grad_cache`` fits it in any memory); the public
    code's reading is 8 with ``grad_accumulation``, which does not enlarge the contrast set"""
    simcse_temperature: Positive = 0.05
    """τ_s of the SimCSE term (two dropout views of each sentence): logits are cos / τ_s"""
    entity_temperature: Positive = 10.0
    """τ_e of the entity term, which *divides* the cosine as in the paper and its code: 10 multilingual (default), 100
    monolingual"""
    entity_weight: NonNegative = 0.01
    """λ: the entity term's weight, L = μ·L_simcse + λ·L_entity (the paper's 0.01)"""
    simcse_weight: NonNegative = 1.0
    """μ: the SimCSE term's weight (1, the paper; 0 with ``entity_weight: 1``: the entity term alone, a diagnostic);
    enters a cache key only when set"""
    hard_negatives: bool = True
    """each sentence's type-based hard-negative entity joins the entity term's denominators (rows without one are
    dropped); false: positives and in-batch entities only"""
    hard_negative_weight: float = 0.0
    """w_hn, added to the logit of a row's own hard negative: 0 (default, the paper's Eq. 2: the hard negative only in
    the denominator) or 1.0 (the public code)"""
    nonlinear: bool = False
    """tanh after the entity projection, as the code's ``EntityMLPLayer``; false (default): W a learnable matrix, as the
    paper"""
    entity_projection_bias: bool = False
    """a bias in the entity projection, e = W·E[·] + b (the code's ``nn.Linear``, and polysent's earlier head); false
    (default): W alone, as the paper"""
    duplicate_negatives: DuplicateNegatives = "keep"
    """``keep`` (default, both equations): a sentence with several links, or an entity positive of several rows, stays a
    negative of its duplicates; ``mask`` (polysent's own): same-text columns leave the SimCSE term's and same-entity
    columns the entity term's denominators; the counts are logged either way"""
    seed: int = 0
    """seeds the draw of the entity vectors Wikipedia2Vec lacks, U(−0.05, 0.05)"""


class EaseComponent(Component, builds=EaseObjective):
    """EASE on ``hard_negatives`` rows: two dropout views of each sentence (SimCSE) and the sentence against its
    entity and the entity's type-based hard negative through the trainable entity head. Same-text and same-entity
    rows of a batch are counted (``DuplicateTally``) and, with ``duplicate_negatives: mask``, masked."""

    objective: EaseObjective

    def __init__(self, name: str, o: EaseObjective, tables: Mapping[str, Path], settings: TrainSettings,
                 stream: int, device: torch.device, student: SentenceEncoder) -> None:
        from models.objectives.ease.entity_head import EntityHead

        super().__init__(name, o, settings.seed, stream, device)
        self.data = ct.load_entity_pairs(tables["hard_negatives"], tables["entity_vectors"],
                                         require_negative=o.hard_negatives)
        self.text_ids = ct.meaning_ids(self.data.text)
        self.plan = BatchPlan(len(self.data), o.batch_size, settings.seed + stream,
                              lengths=text_lengths(self.data.text) if settings.length_bucketing else None,
                              what=f"objective {name} (hard_negatives)")
        batches = settings.steps * settings.grad_accumulation
        self.tallies = (
            DuplicateTally(log, name, "SimCSE term", "same-text", o.duplicate_negatives, self.text_ids, self.plan,
                           batches),
            DuplicateTally(log, name, "entity term", "same-entity", o.duplicate_negatives, self.data.entity,
                           self.plan, batches))
        # the head's own draw (init_seed): building it, with or without a bias, leaves the run's random stream as it
        # was, so the readings of the head train under the same dropout masks and batches
        head = EntityHead.from_vectors(self.data.vectors, student.dim, nonlinear=o.nonlinear, seed=o.seed,
                                       bias=o.entity_projection_bias, init_seed=settings.seed + stream)
        # the head as it starts: the retrieval witness compares the trained head with it (``export``)
        self.initial_head = {k: v.detach().clone() for k, v in head.state_dict().items()}
        self.steps = settings.steps
        self.modules["entities"] = head.to(device)

    def export(self, out: Path) -> dict[str, Any]:
        """The entity head, trained and as it started, with its vocabulary: ``out/entity_head/<name>.safetensors``
        (``entity_head.save_heads``), read by the retrieval witness (``models.evaluation.entity_retrieval``). Returns
        the file (relative to ``out``) and the head's movement, ‖W_trained − W_init‖_F / ‖W_init‖_F
        (``entity_head_movement``) and the same over the entity table (``entity_table_movement``)."""
        from models.objectives.ease.entity_head import HEAD_DIR, save_heads

        o = self.objective
        rel = f"{HEAD_DIR}/{self.name}.safetensors"
        meta = {"objective": self.name, "steps": self.steps, "entity_temperature": o.entity_temperature,
                "entity_weight": o.entity_weight, "hard_negative_weight": o.hard_negative_weight}
        moved = save_heads(out / rel, self.modules["entities"], self.initial_head, self.data.entities, meta)
        log.info("objective %s: entity head written to %s; ‖W − W₀‖/‖W₀‖ = %.4g, entity table %.4g", self.name,
                 out / rel, moved["w"], moved["table"])
        return {"entity_head": rel, "entity_head_movement": moved["w"], "entity_table_movement": moved["table"],
                **({"entity_bias_movement": moved["bias"]} if "bias" in moved else {})}

    def batch(self, step: int) -> StepBatch:
        o, idx = self.objective, self.plan.batch(step)
        texts = [self.data.text[i] for i in idx]
        ent, neg = self.data.entity[idx], self.data.negative[idx]
        local_ent = self.ids(self.local(list(ent)))
        local_neg = self.ids(self.local(list(neg)))
        for tally in self.tallies:
            tally.batch(idx, step)
        mask = o.duplicate_negatives == "mask"
        text_ids, ent_ids = (self.ids(self.text_ids[idx]), self.ids(ent)) if mask else (None, None)
        head = self.modules["entities"]

        def loss_fn(embs: list[torch.Tensor]) -> torch.Tensor:
            from models.training import distributed

            z1, z2 = gathered(embs)
            e = distributed.gather(head(local_ent).float())
            n = distributed.gather(head(local_neg).float()) if o.hard_negatives else None
            return ease_loss(z1, z2, e, n, simcse_temperature=o.simcse_temperature,
                             entity_temperature=o.entity_temperature, hard_negative_weight=o.hard_negative_weight,
                             entity_weight=o.entity_weight, groups=text_ids, entity_groups=ent_ids,
                             simcse_weight=o.simcse_weight)

        local = self.local(texts)
        return StepBatch([local, list(local)], loss_fn, 2 * len(texts))


def ease_entity_loss(sentences: torch.Tensor, entities: torch.Tensor, negatives: torch.Tensor | None = None,
                     temperature: float = 10.0, hard_negative_weight: float = 0.0,
                     entity_groups: torch.Tensor | None = None) -> torch.Tensor:
    """EASE's sentence → entity contrastive term L_e (one-directional, τ_e divides).

    Args:
        sentences: B×d sentence embeddings (EASE: the first dropout view z1).
        entities: B×d transformed positive entities (``EntityHead`` output); row i is sentence i's positive.
        negatives: optional H×d transformed hard-negative entities (EASE: H = B, row i is sentence i's own).
        temperature: τ_e > 0, the divisor of the cosine (10 multilingual, 100 monolingual).
        hard_negative_weight: w_hn added to logit (i, B+i) (default 0.0, the paper's Eq. 2; the code's 1.0 multiplies
            the own hard negative's exp-term by e; needs H = B when ≠ 0, inert without ``negatives``).
        entity_groups: optional (B,) integer entity ids; column j ≠ i of the positive block is dropped from row i's
            denominator when entity_groups[j] == entity_groups[i] (``duplicate_negatives: mask``; default None: a
            duplicated entity stays a negative, as in the paper and the code).

    Returns:
        The scalar loss (mean over the B sentences).
    """
    return masked_info_nce(sentences, entities, temperature, False, negatives, hard_negative_weight, entity_groups,
                           names=("sentences", "entities", "negatives", "entity_groups"))


def ease_loss(z1: torch.Tensor, z2: torch.Tensor, entities: torch.Tensor, negatives: torch.Tensor | None = None,
              simcse_temperature: float = 0.05, entity_temperature: float = 10.0, hard_negative_weight: float = 0.0,
              entity_weight: float = 0.01, groups: torch.Tensor | None = None,
              entity_groups: torch.Tensor | None = None, simcse_weight: float = 1.0) -> torch.Tensor:
    """EASE's total loss L = μ · simcse_loss(z1, z2) + λ · ease_entity_loss(z1, entities, negatives).

    Args:
        z1: B×d first dropout view (contrasted with z2 and with the entities).
        z2: B×d second dropout view (SimCSE term only).
        entities: B×d transformed positive entities.
        negatives: optional B×d transformed hard-negative entities.
        simcse_temperature: τ_s of the SimCSE term (0.05).
        entity_temperature: τ_e, divisor of the entity cosine (10 multilingual, 100 monolingual).
        hard_negative_weight: w_hn on the own hard negative's logit (0.0, the paper; 1.0 the code).
        entity_weight: λ (0.01).
        groups: optional (B,) ids of same-text sentences, masked from each other's SimCSE denominators (None: kept,
            the paper).
        entity_groups: optional (B,) entity ids, masked likewise in the entity term (None: kept, the paper).
        simcse_weight: μ on the SimCSE term (1.0, the paper; 0.0: the entity term alone, not even computed).

    Returns:
        The scalar loss.
    """
    check_matrix(z1, "z1")
    check_temperature(entity_temperature, "entity_temperature")
    check_temperature(simcse_temperature, "simcse_temperature")
    entity_term = ease_entity_loss(z1, entities, negatives, temperature=entity_temperature,
                                   hard_negative_weight=hard_negative_weight, entity_groups=entity_groups)
    if simcse_weight == 0.0:
        return entity_weight * entity_term
    sentence_term = simcse_loss(z1, z2, temperature=simcse_temperature, groups=groups)
    return (sentence_term if simcse_weight == 1.0 else simcse_weight * sentence_term) + entity_weight * entity_term
