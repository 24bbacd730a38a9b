"""SimCSE / mSimCSE contrastive loss: one-way InfoNCE with optional hard negatives (B × 2B logits).

Papers/code: Gao, Yao, Chen 2021, "SimCSE: Simple Contrastive Learning of Sentence Embeddings"
(``princeton-nlp/SimCSE`` ``simcse/models.py cl_forward``); Wang, Wu, Neubig 2022, "English Contrastive Learning Can
Learn Universal Cross-lingual Sentence Embeddings" (mSimCSE, ``yaushian/mSimCSE`` ``simcse/models.py``), methods §1.3,
§6.1. With sim(u, v) = cos(u, v) / τ, anchors z1, positives z2 and hard negatives z3 (all B×d)::

    logits_i = [ sim(z1_i, z2_j) ]_{j=1..B}  ‖  [ sim(z1_i, z3_j) + w · 1[i = j] ]_{j=1..B}      (B × 2B)
    L = −(1/B) Σ_i log( exp(logits_ii) / Σ_c exp(logits_ic) )          (CE with labels arange(B))

One-directional (anchors → candidates; no symmetric term). Every row's hard negative is in every denominator; the own
hard negative's exp-term is multiplied by e^w (``hard_negative_weight``; 0 in SimCSE and mSimCSE, 1 in EASE's code,
0 in the EASE paper).

mSimCSE's four training strategies use this one loss and differ only in the data that fills z1, z2, z3:

    - unsupervised: one (English Wikipedia) sentence fed twice; z1, z2 are its two dropout views, no z3;
    - English NLI: (sent0, sent1 = entailment hypothesis, hard_neg = contradiction hypothesis) → z1, z2, z3;
    - cross-lingual NLI: the same triplets with each sentence's language drawn at random (XNLI-MT; up to 15 rows of
      one meaning in the corpus, which can meet in one batch);
    - parallel (supervised): translation pairs (src, tgt) → z1, z2, no z3.

Defaults (the papers' equations, which are also the SimCSE / mSimCSE code): τ = 0.05, w = 0, one-directional, every
other row's z2 a negative, duplicates included (``duplicate_negatives: keep``). ``duplicate_negatives: mask`` is
polysent's own option (its earlier behaviour; neither paper nor code has it): rows that share a meaning id — the same
NLI example (``nli_triples.meaning_id``), the same pivot sentence (``parallel``); never in ``unsupervised``, whose
sentences are distinct — are dropped from each other's positive-block denominators (``groups``). The component logs
how many such columns in how many rows it kept or masked, over the run (info) and per batch (debug).

Relations:
    - exactly ``info_nce(z1, z2, τ, symmetric=False, hard_negatives=z3, hard_negative_weight=w, groups=groups)``;
      sentence-transformers' MultipleNegativesRankingLoss(scale = 1/τ) with (anchor, positive, negative) triplets is the
      same loss at w = 0;
    - ``ease_loss`` = this loss on two dropout views + λ · the entity loss;
    - ``mpcl_loss`` replaces the single positive by the K other members of a translation group.

Settings (``SimcseObjective``, kind ``simcse``): ``strategy`` picks the data — ``unsupervised`` (``sentences`` of
``sentence_language``, each twice: two dropout views), ``english_nli`` / ``cross_lingual_nli`` (``nli_triples``:
sent0, sent1, hard_neg) or ``parallel`` (``bitext_pairs``); ``temperature``, ``hard_negatives``,
``hard_negative_weight``, ``duplicate_negatives``. Shared loss parts: ``loss_parts``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from models.lazy_torch import torch
from models.objective_registry import Citation, Need, Objective, objective
from models.objectives.loss_parts import DuplicateNegatives, DuplicateTally, masked_info_nce
from models.settings import AtLeastOne, NonNegative, Positive
from models.training import corpus_tables as ct
from models.training.components import Component, StepBatch, gathered, text_lengths
from models.training.sampling import BatchPlan

if TYPE_CHECKING:
    from models.encoder import SentenceEncoder
    from models.settings import TrainSettings

__all__ = ["SimcseComponent", "SimcseObjective", "simcse_loss"]

log = logging.getLogger("polysent.models.objectives.simcse")


def _tables(o: Any) -> tuple[str, ...]:
    return {"unsupervised": (o.sentences,), "english_nli": ("nli_triples",), "cross_lingual_nli": ("nli_triples",),
            "parallel": ("bitext_pairs",)}[o.strategy]


def _languages(o: Any) -> tuple[str, ...]:
    """Unsupervised mSimCSE keeps the sentences of ``sentence_language``; the other strategies every language."""
    return (o.sentence_language,) if o.strategy == "unsupervised" and o.sentence_language else ()


def _needs(o: Any) -> list[Need]:
    if o.strategy in ("english_nli", "cross_lingual_nli"):  # rows of the strategy's own triples
        return [("nli_triples", "strategy", (o.strategy.removesuffix("_nli"),))]
    return [(t, "", ()) for t in _tables(o)]


CITATION = Citation(
    'Wang, Wu, Neubig 2022, "English Contrastive Learning Can Learn Universal Cross-lingual Sentence '
    'Embeddings" (mSimCSE, EMNLP)',
    "https://arxiv.org/abs/2211.06127")


@objective(tables=_tables, needs=_needs, languages=_languages, citation=CITATION)
@dataclass(frozen=True)
class SimcseObjective(Objective):
    """mSimCSE (methods §6): the SimCSE loss (one-way, hard negatives with ``hard_negative_weight``) with its four
    strategies as data choices: ``unsupervised`` (each sentence of ``sentences`` twice → two dropout views; language
    ``sentence_language``), ``english_nli`` / ``cross_lingual_nli`` (``nli_triples``: sent0, sent1, hard_neg) and
    ``parallel`` (``bitext_pairs``). ``duplicate_negatives``: ``keep`` (default, the papers and the code) leaves
    same-meaning rows of a batch as each other's negatives, ``mask`` (polysent's own) drops them."""

    kind: Literal["simcse"] = "simcse"
    """``simcse``: the SimCSE loss with mSimCSE's four training strategies (Wang et al. 2022)"""
    strategy: Literal["unsupervised", "english_nli", "cross_lingual_nli", "parallel"] = "unsupervised"
    """what fills the anchors, positives and hard negatives: ``unsupervised`` (each sentence twice, its two dropout
    views), ``english_nli`` / ``cross_lingual_nli`` (``nli_triples`` of that strategy: premise, entailment,
    contradiction) or ``parallel`` (``bitext_pairs``: source and translation)"""
    sentences: Literal["hard_negatives", "xnli_groups", "bitext_pairs"] = "hard_negatives"
    """unsupervised: the table whose distinct sentences are drawn (``hard_negatives``: EASE's Wikipedia sentences,
    ``xnli_groups`` or ``bitext_pairs``, both sides)"""
    sentence_language: str | None = "en"
    """unsupervised: only the sentences in this language (mSimCSE's English Wikipedia); null: every language of the
    table"""
    weight: NonNegative = 1.0
    """this objective's loss is multiplied by it before the run sums its objectives' losses"""
    batch_size: AtLeastOne = 64
    """anchors per batch (B): sentences, triples or pairs by ``strategy``"""
    temperature: Positive = 0.05
    """τ: logits are cos / τ"""
    hard_negatives: bool = True
    """english_nli / cross_lingual_nli: the contradiction hypothesis of each triple joins every anchor's denominator
    (the other strategies have none)"""
    hard_negative_weight: float = 0.0
    """w, added to the logit of a row's own hard negative after the division by τ (0 in SimCSE and mSimCSE)"""
    duplicate_negatives: DuplicateNegatives = "keep"
    """``keep`` (the papers and their code): rows of one meaning in a batch (the same NLI example, the same pivot
    sentence) stay each other's negatives; ``mask`` (polysent's own): they leave each other's denominators; the counts
    are logged either way"""


class SimcseComponent(Component, builds=SimcseObjective):
    objective: SimcseObjective

    def __init__(self, name: str, o: SimcseObjective, tables: Mapping[str, Path], settings: TrainSettings,
                 stream: int, device: torch.device, student: SentenceEncoder | None = None) -> None:
        super().__init__(name, o, settings.seed, stream, device)
        self.triples: ct.Triples | None = None
        self.sentences: ct.Sentences | None = None
        self.pairs: ct.Pairs | None = None
        if o.strategy == "unsupervised":
            self.sentences = ct.load_sentences(o.sentences, tables[o.sentences], o.sentence_language)
            n, lengths = len(self.sentences), text_lengths(self.sentences.text)
            self.meaning = np.arange(n, dtype=np.int64)
        elif o.strategy == "parallel":
            self.pairs = ct.load_bitext_pairs(tables["bitext_pairs"])
            n, lengths, self.meaning = len(self.pairs), text_lengths(self.pairs.a, self.pairs.b), self.pairs.meaning
        else:
            strategy = "english" if o.strategy == "english_nli" else "cross_lingual"
            self.triples = ct.load_triples(tables["nli_triples"], strategy)
            n, lengths = len(self.triples), text_lengths(self.triples.sent0, self.triples.sent1)
            self.meaning = self.triples.meaning
        self.plan = BatchPlan(n, o.batch_size, settings.seed + stream,
                              lengths=lengths if settings.length_bucketing else None,
                              what=f"objective {name} ({o.strategy})")
        self.tally = DuplicateTally(log, name, o.strategy, "same-meaning", o.duplicate_negatives, self.meaning,
                                    self.plan, settings.steps * settings.grad_accumulation)

    def batch(self, step: int) -> StepBatch:
        o, idx = self.objective, self.plan.batch(step)
        if self.sentences is not None:
            s = [self.sentences.text[i] for i in idx]
            columns = [self.local(s), self.local(s)]
        elif self.pairs is not None:
            columns = [self.local([self.pairs.a[i] for i in idx]), self.local([self.pairs.b[i] for i in idx])]
        else:
            assert self.triples is not None
            t = self.triples
            columns = [self.local([t.sent0[i] for i in idx]), self.local([t.sent1[i] for i in idx])]
            if o.hard_negatives:
                columns.append(self.local([t.hard_neg[i] for i in idx]))
        self.tally.batch(idx, step)
        meaning = self.ids(self.meaning[idx]) if o.duplicate_negatives == "mask" else None

        def loss_fn(embs: list[torch.Tensor]) -> torch.Tensor:
            z = gathered(embs)
            return simcse_loss(z[0], z[1], z[2] if len(z) > 2 else None, o.temperature,
                               hard_negative_weight=o.hard_negative_weight, groups=meaning)

        return StepBatch(columns, loss_fn, len(idx) * len(columns))


def simcse_loss(z1: torch.Tensor, z2: torch.Tensor, z3: torch.Tensor | None = None, temperature: float = 0.05,
                hard_negative_weight: float = 0.0, groups: torch.Tensor | None = None) -> torch.Tensor:
    """SimCSE loss of B anchors ``z1`` against positives ``z2`` and optional hard negatives ``z3``.

    Args:
        z1: B×d anchor embeddings (first view / sent0).
        z2: B×d positive embeddings (second dropout view / entailment / translation).
        z3: optional H×d hard negatives (SimCSE: H = B, row i is z1_i's own hard negative).
        temperature: τ > 0 (default 0.05).
        hard_negative_weight: w, added to logit (i, B+i) after the division by τ (needs H = B when w ≠ 0).
        groups: optional (B,) integer ids; same-id rows are not each other's in-batch negatives
            (``duplicate_negatives: mask``; default None: every other row is a negative, as in the papers).

    Returns:
        The scalar loss (mean over the B anchors).
    """
    return masked_info_nce(z1, z2, temperature, False, z3, hard_negative_weight, groups,
                           names=("z1", "z2", "z3", "groups"))
