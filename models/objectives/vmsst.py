"""VMSST (Wieting, Clark, Cohen, Neubig, Berg-Kirkpatrick, "Beyond Contrastive Learning: A Variational Generative Model
for Multilingual Retrieval", ACL 2023; methods §5, §13) and its baselines BITRANSLATION and VMSST-CONTRASTIVE on
translation pairs: settings, batches and the component that runs the generative model.

The loss, per pair (x_i, x_j) — ``models/vmsst/loss.py`` has the maths and its docstring the full equation::

    L = −log p(x_i | μ_sem(x_j)) − log p(x_j | μ_sem(x_i))                                  (translation terms)
        + λ · [ reconstruction from (z_l, z_sem) + β(t) · (KL_sem + KL_{l_i} + KL_{l_j}) ]   (ELBO)

computed by ``models.vmsst.VmsstModel`` (semantic encoder = the student with its bias-free W_μ, language encoder,
the shared decoder); VMSST-CONTRASTIVE adds the paper's contrastive loss on μ_sem at weight 1 with the VMSST loss
weighted by λ_vc, and CONTRASTIVE is that contrastive loss alone:

    L_CONTRASTIVE = −½ Σ_i [ log exp(s_i·t_i) / Σ_j exp(s_i·t_j) + log exp(t_i·s_i) / Σ_j exp(t_i·s_j) ] / B

with s_i = μ_sem(x_i), t_i = μ_sem(x_j): dot products, no temperature (``contrastive_similarity: dot``, the paper's
p(s_i | t_i)); ``cosine`` divides cosines by ``contrastive_temperature`` instead.
Defaults (§13, §6.3): λ = 0.025 pretrained / 0.1 random init; λ_vc = 0.0005 for the pretrained and the 6-layer
random-init settings, 0.001 for the 24-layer random-init one (a random init of ≥ 24 layers); β annealed over
1,000,000 updates; no dropout in the semantic encoder for BITRANSLATION, VMSST-CONTRASTIVE and VMSST, dropout kept for
CONTRASTIVE (the paper: "dropout 0.1 for CONTRASTIVE only").

Decoder warm-up (``warmup_decoder_steps`` > 0, every variant with a decoder): the paper initialises the whole
encoder–decoder from mT5, so its decoder reads μ_sem from the first update; from a pretrained *encoder* the decoders
start from scratch, and at the encoder's learning rate they do not learn to read μ_sem in a short run (their gradients
into the encoder then say nothing about meaning). Before the run's update 1 the trainer's pre-phase
(``Component.warm_up``, ``models.training.train.warm_up``) trains the decoders and VMSST's other own parts (language
encoder and embeddings, W_σ) with the student frozen, at their own learning rate, until the probe gap
(``models.vmsst.probe``: translation NLL from an unrelated pair's μ_sem − from the translation's, on held-out pairs)
reaches ``warmup_probe_gap`` nats or ``warmup_decoder_steps`` updates are spent; then every method trains its
``steps`` as without it.

Settings (``VmsstObjective``, kind ``vmsst``): its docstring. Inputs: the ``data`` pair table, tokenised once.
Relations: BITRANSLATION is the translation terms alone; VMSST-CONTRASTIVE with λ_vc = 0 is CONTRASTIVE (and, with
``contrastive_similarity: cosine``, the project's symmetric ``info_nce``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

import numpy as np

from models.lazy_torch import torch
from models.objective_registry import Citation, Objective, objective
from models.objectives.contrastive import info_nce
from models.objectives.loss_parts import (
    DuplicateNegatives,
    DuplicateTally,
    check_ids,
    check_pair,
    diagonal_ce,
    same_group_mask,
)
from models.settings import AtLeastOne, Dropout, NonNegative, NonNegativeInt, PairData, Positive, pair_tables
from models.training.components import Component, StepBatch, WarmUp, gathered, pair_corpus, text_lengths
from models.training.sampling import BatchPlan, step_rng

if TYPE_CHECKING:
    from models.encoder import SentenceEncoder
    from models.settings import TrainSettings
    from models.vmsst import SideBatch
    from models.vmsst.model import VmsstModelConfig

__all__ = ["VmsstComponent", "VmsstObjective"]

log = logging.getLogger("polysent.models.objectives.vmsst")
WARMUP_STREAM = 2_000_003  # the warm-up's random draws: apart from step_rng's (1_000_003 + stream) of the run's steps


CITATION = Citation(
    'Wieting, Clark, Cohen, Neubig, Berg-Kirkpatrick 2023, "Beyond Contrastive Learning: A Variational '
    'Generative Model for Multilingual Retrieval" (VMSST, ACL)',
    "https://arxiv.org/abs/2212.10726")


@objective(tables=pair_tables, citation=CITATION)
@dataclass(frozen=True)
class VmsstObjective(Objective):
    """VMSST (Wieting et al., ACL 2023; methods §5, §13): variational source separation on translation pairs, and
    its baselines on the same code (the networks and loss maths in ``models/vmsst/``, the component below).

    ``variant``:

    * ``vmsst`` (the paper's model): per pair (x_i, x_j),
      L = −log p(x_i | μ_sem(x_j)) − log p(x_j | μ_sem(x_i))
      + λ·[−log p(x_i | z_{l_i}, z_sem) − log p(x_j | z_{l_j}, z_sem) + β(t)·(KL_sem + KL_{l_i} + KL_{l_j})],
      λ = ``elbo_weight`` (paper: 0.025 from a pretrained encoder, 0.1 from random init — the defaults);
    * ``bitranslation`` (baseline): the translation terms alone, from a decoder conditioned on μ_sem only (no
      language variables, no KL);
    * ``vmsst_contrastive`` (paper §6.3, "we weight the contribution of the VMSST loss by λ"):
      L = L_CONTRASTIVE(μ_sem(x_i), μ_sem(x_j)) + ``vmsst_weight``·L_VMSST, with the contrastive term at weight 1
      and ``vmsst_weight`` defaulting to the paper's 0.0005 (pretrained, 6-layer random init) / 0.001 (24-layer
      random init: a random-init encoder of ≥ 24 layers); refused for other variants;
    * ``contrastive`` (baseline): L_CONTRASTIVE alone on μ_sem, no decoder (= ``vmsst_contrastive`` at λ_vc = 0).

    ``contrastive_similarity``: ``dot`` (default, the paper's p(s_i | t_i) = exp(s_i·t_i) / Σ_j exp(s_i·t_j), no
    temperature) or ``cosine`` (cos / ``contrastive_temperature``, this code's former reading); symmetric.
    ``duplicate_negatives``: ``keep`` (default, the paper's equation: every other pair of the batch is a negative,
    another pair with the same pivot sentence included) or ``mask`` (pairs of one meaning out of each other's
    denominators, this code's former behaviour); the counts are logged. ``semantic_dropout``: whether the student
    keeps its dropout (unset: the paper's — off for BITRANSLATION, VMSST-CONTRASTIVE and VMSST, on for CONTRASTIVE).
    Turning it off sets every dropout of the student to 0 for the whole run (logged with the count), so it also holds
    for any other objective trained beside this one.

    ``translation_decoder`` (variants with language variables): ``shared`` (the paper: "a single decoder for all
    languages", the translation terms read the same decoder as the ELBO, conditioned on [0 ; μ_sem of the other
    side] — the language variable at its prior mean: the paper's term is p(x_i | μ_sem(x_j)), and z_lang, encoded
    from the target itself, would hand the decoder its answer) or ``separate`` (a second decoder conditioned on
    μ_sem alone for the translation terms). ``semantic_side``: which translation the semantic posterior
    q(z_sem | ·) reads —
    ``rows`` (the paper: alternating within the batch, even *global* rows read side a, odd rows side b, so the same
    on any number of ranks) or ``steps`` (BGT's ``counter % 2``: the whole batch reads a on even micro-steps, b on
    odd ones).

    The semantic variable's W_μ is the student encoder's ``projection`` (required; the exported embedding is μ_sem).
    ``kl_anneal_steps`` x0: β(t) = min(1, t/x0); the paper's 1,000,000 over 100k updates ends at β = 0.1.
    ``free_bits``: BGT's ``kl_threshold`` (each dimension's KL clamped at free_bits / latent size). ``languages``: the
    language-embedding table (every language of the corpus when empty; a pair in another language is refused before
    training). ``language_layers``: depth of the language encoder (the semantic encoder's when unset); the decoder has
    ``decoder_layers`` (1 in the paper). ``decoder_heads`` and ``decoder_intermediate_size`` (the semantic encoder's
    when unset) size the attention and feed-forward of the decoders *and* of the language encoder (the paper gives the
    two one width). ``dropout`` applies to the language encoder and the decoders (the paper uses none for VMSST).
    ``decoder_vocab_size``: the ids the decoders' softmax runs over — unset (the tokenizer's whole vocabulary), the
    tokenizer's vocabulary size (the same, checked), or ``corpus``: only the token ids that occur in the decoder
    targets of the ``data`` table (every sentence of both sides, tokenised as the targets are, and the end token),
    with the log-softmax renormalised exactly over that set and the output layers holding only that set's rows as
    parameters (``models.vmsst.decoder``; the set's size is logged; initialised as those rows of the full-size layer,
    and the other rows would never get a gradient, so nothing else the model learns changes, and the exported
    sentence encoder does not contain the decoders). ``corpus`` makes a step from a pretrained multilingual encoder
    cheaper (the output projection over a 250k-piece vocabulary is the largest part of its cost, and its parameters
    the largest part of what clipping and AdamW update; ``bench/vmsst_vocabulary.py`` measures it) but changes the
    objective: each token's NLL is the full model's conditioned on the set, so ids outside it are no longer pushed
    down. It is a value of this key rather than a key of its own so that the settings, and hence the cache keys, of
    every existing run stay as they were.
    ``decoder_embeddings``: the word-embedding table the decoders read the target prefix from — ``shared`` (default,
    BGT's shared embeddings: the student's table, which the decoder terms then train too), ``detached`` (the
    student's table with its gradient stopped: the table learns only from the student's and the language encoder's
    paths) or ``own`` (a table of the decoders' own, a copy of the student's at the start, trained by the decoder
    terms only; not exported). The language encoder reads the student's table, with its gradient, in every case.
    ``monitor_every``: swap probe interval in updates, from update 0 (``train_steps.swap_nll_own`` /
    ``swap_nll_swapped``; 0 switches the probe off). ``decoder_checkpointing`` recomputes the decoders (logits
    included) in the backward pass.

    Decoder warm-up (module docstring; variants with a decoder): ``warmup_decoder_steps`` (default 0: none, the
    behaviour and cache key of every run without it) updates at most, before the run's update 1 and on top of its
    ``steps``, of the decoders and VMSST's other own parts alone — the student frozen, no gradient into it —
    at the constant AdamW learning rate ``warmup_decoder_lr`` (default 1e-3, the paper's peak rate §13; the run's
    ``lr`` schedule then starts at its update 1 as without it), on the objective's generative loss alone (L_VMSST,
    or BITRANSLATION's translation terms; VMSST-CONTRASTIVE's contrastive term would give those parts no gradient)
    at β(0), one update of ``grad_accumulation`` micro-batches of ``batch_size`` as in the run. It stops early at the
    first probe whose gap reaches ``warmup_probe_gap`` nats (default 1.0; null: it runs its budget): the probe
    (``models.vmsst.probe``) reads ``warmup_probe_pairs`` pairs (default 256) of distinct meanings drawn once
    (seeded), the warm-up's batches are drawn from the pairs of other meanings, and it runs before the first warm-up
    update, every ``monitor_every`` updates (0: only before the first and after the last) and after the last. The
    run's stats (``warmup``) and every row of ``train_steps`` (``warmup_updates``, ``warmup_probe_gap_start``,
    ``warmup_probe_gap``) record it. The four fields enter a cache key only when set (``KEY_WHEN_SET``)."""

    kind: Literal["vmsst"] = "vmsst"
    """``vmsst``: VMSST's variational source separation on translation pairs (Wieting et al. 2023) and its baselines
    (docs/training.md#vmsst)"""
    variant: Literal["vmsst", "bitranslation", "vmsst_contrastive", "contrastive"] = "vmsst"
    """``vmsst`` (the paper's model: translation terms + λ·ELBO), ``bitranslation`` (the translation terms alone),
    ``vmsst_contrastive`` (paper §6.3: the contrastive loss at weight 1 + ``vmsst_weight``·L_VMSST) or ``contrastive``
    (the paper's CONTRASTIVE baseline: that contrastive loss alone, no decoder)"""
    data: PairData = "bitext_pairs"
    """the pair table: ``bitext_pairs``, ``xnli_single_pairs`` or ``xnli_groups`` (pairs of group members)"""
    weight: NonNegative = 1.0
    """this objective's loss is multiplied by it before the run sums its objectives' losses"""
    batch_size: AtLeastOne = 64
    """translation pairs per batch"""
    elbo_weight: NonNegative | None = None
    """λ on the ELBO (reconstruction + β·KL); null: the paper's 0.025 from a pretrained encoder, 0.1 from a random
    init"""
    vmsst_weight: NonNegative | None = None
    """``vmsst_contrastive`` only: λ_vc on the VMSST loss beside the weight-1 contrastive term; null: the paper's 0.0005
    (pretrained, or a random init under 24 layers) or 0.001 (a random init of ≥ 24 layers)"""
    contrastive_similarity: Literal["dot", "cosine"] = "dot"
    """the contrastive term's similarity on μ_sem: ``dot`` (default, the paper's p(s_i | t_i) = exp(s_i·t_i) / Σ_j
    exp(s_i·t_j), no temperature) or ``cosine`` (cos / ``contrastive_temperature``, this code's former reading); both
    directions"""
    contrastive_temperature: Positive = 0.05
    """τ of ``contrastive_similarity: cosine`` (unused with ``dot``)"""
    duplicate_negatives: DuplicateNegatives = "keep"
    """the contrastive term's duplicates: ``keep`` (default, the paper's equation: another pair with the same pivot
    sentence is a negative too) or ``mask`` (pairs of one meaning out of each other's denominators, this code's former
    behaviour); the counts are logged"""
    semantic_dropout: bool | None = None
    """whether the student keeps its dropout; null: the paper's — off for ``bitranslation``, ``vmsst_contrastive`` and
    ``vmsst``, on for ``contrastive``; off sets every dropout of the student to 0 for the whole run, also for the run's
    other objectives (logged)"""
    translation_decoder: Literal["shared", "separate"] = "shared"
    """``shared`` (default, the paper's "single decoder for all languages": the translation terms read the ELBO's
    decoder on [0 ; μ_sem of the other side], the language variable at its prior mean) or ``separate`` (a second decoder
    of μ_sem alone for them)"""
    semantic_side: Literal["rows", "steps"] = "rows"
    """which translation q(z_sem | ·) reads: ``rows`` (default, the paper: even global rows side a, odd rows side b, the
    same on any number of ranks) or ``steps`` (BGT's ``counter % 2``: the whole batch side a on even micro-steps, b on
    odd ones)"""
    kl_anneal_steps: AtLeastOne = 1_000_000
    """x0 of the KL weight β(t) = min(1, t/x0) (the paper's 1,000,000 over 100k updates ends at β = 0.1)"""
    free_bits: NonNegative = 0.0
    """BGT's ``kl_threshold``: each latent dimension's KL is clamped from below at free_bits / latent size (0: no
    clamp)"""
    languages: tuple[str, ...] = ()
    """the language-embedding table; empty: every language of the corpus (a pair in a language not listed is refused
    before training)"""
    language_layers: AtLeastOne | None = None
    """transformer layers of the language encoder; null: the semantic encoder's"""
    decoder_layers: AtLeastOne = 1
    """layers of each decoder (1, the paper)"""
    decoder_heads: AtLeastOne | None = None
    """attention heads of the decoders and of the language encoder; null: the semantic encoder's"""
    decoder_intermediate_size: AtLeastOne | None = None
    """feed-forward width of the decoders and of the language encoder; null: the semantic encoder's"""
    dropout: Dropout = 0.0
    """dropout of the language encoder and the decoders (the paper uses none for VMSST)"""
    decoder_vocab_size: AtLeastOne | Literal["corpus"] | None = None
    """the ids the decoders' softmax runs over: null (the tokenizer's whole vocabulary), the tokenizer's vocabulary size
    (the same, checked) or ``corpus`` (only the ids that occur in the decoder targets of ``data``: a cheaper step from a
    250k-piece vocabulary, but each token's NLL is then conditioned on that set)"""
    decoder_embeddings: Literal["shared", "detached", "own"] = "shared"
    """the table the decoders read the target prefix from: ``shared`` (default, BGT: the student's table, which the
    decoder terms then train too), ``detached`` (the student's, gradient stopped) or ``own`` (a copy of the student's at
    the start, trained by the decoder terms only; not exported)"""
    decoder_checkpointing: bool = False
    """recompute the decoders (logits included) in the backward pass: less memory, more compute"""
    monitor_every: NonNegativeInt = 50
    """the swap probe's interval in updates, from update 0 (``train_steps.swap_nll_own`` / ``swap_nll_swapped`` /
    ``swap_nll_unrelated``); 0: off"""
    language_pair_batches: bool = False
    """every batch holds pairs of one language pair; false: language pairs mixed"""
    warmup_decoder_steps: NonNegativeInt = 0
    """decoder warm-up: at most this many updates of the decoders and VMSST's other own parts, the student frozen,
    before the run's update 1 and on top of its ``steps`` (0: none); enters a cache key only when set
    (docs/training.md#vmsst)"""
    warmup_decoder_lr: Positive = 1e-3
    """the warm-up's constant AdamW learning rate (the paper's peak rate, §13)"""
    warmup_probe_gap: NonNegative | None = 1.0
    """nats: the warm-up stops at the first probe whose gap (translation NLL from an unrelated pair's μ_sem − from the
    translation's) reaches it; null: it runs its whole budget"""
    warmup_probe_pairs: AtLeastOne = 256
    """held-out pairs of distinct meanings the warm-up's probe reads (drawn once, seeded; the warm-up trains on the
    other meanings)"""
    # added after runs were keyed: out of a cache key while at their default (models.settings.key_view)
    KEY_WHEN_SET: ClassVar[tuple[str, ...]] = ("warmup_decoder_steps", "warmup_decoder_lr", "warmup_probe_gap",
                                               "warmup_probe_pairs")

    def model_config(self, elbo_weight: float) -> VmsstModelConfig:
        """What ``models.vmsst.VmsstModel`` is built from: these settings' model fields, and λ = ``elbo_weight`` as
        the component resolved it (the paper's default for a pretrained or a random-init start when unset)."""
        from models.vmsst.model import VmsstModelConfig

        return VmsstModelConfig(
            elbo_weight=elbo_weight, generative=self.variant != "bitranslation",
            translation_decoder=self.translation_decoder, decoder_layers=self.decoder_layers,
            decoder_heads=self.decoder_heads, decoder_intermediate_size=self.decoder_intermediate_size,
            language_layers=self.language_layers, dropout=self.dropout,
            decoder_checkpointing=self.decoder_checkpointing, decoder_embeddings=self.decoder_embeddings,
            kl_anneal_steps=self.kl_anneal_steps, free_bits=self.free_bits)


class VmsstComponent(Component, builds=VmsstObjective):
    """VMSST / BITRANSLATION / VMSST-CONTRASTIVE (``models/vmsst/``) on translation pairs.

    Loss of a batch (per pair, averaged over the global batch): L_VMSST = translation terms + λ·ELBO
    (``models.vmsst.model``; λ = ``elbo_weight``, paper 0.025 pretrained / 0.1 random init). VMSST-CONTRASTIVE is the
    paper's §6.3 "we weight the contribution of the VMSST loss by λ":

        L = InfoNCE(μ_sem(x_a), μ_sem(x_b)) + λ_vc · L_VMSST,   λ_vc = ``vmsst_weight`` (0.0005 pretrained, 0.001
                                                                 random init, the defaults)

    with the symmetric in-batch InfoNCE at weight 1 (``contrastive_temperature``); ``train_steps`` gets both
    unweighted terms, ``contrastive_loss`` and ``vmsst_loss`` (per pair). The semantic posterior reads side a or b
    per row: ``semantic_side: rows`` (paper) alternates within the batch by *global* row index (even → a, odd → b),
    so a rank's contiguous shard gets the same choices as one process; ``steps`` alternates the whole batch every
    micro-step (BGT).

    Before training it refuses, with the table and an example: a pair whose language is not in the
    language-embedding table (``languages``), a sentence that tokenises to nothing (an empty decoder target), a
    ``decoder_vocab_size`` that is not the tokenizer's vocabulary, and a tokenizer with ids beyond the embedding
    table. The corpus is tokenised once (unique texts); with ``decoder_vocab_size: corpus`` the decoders' output
    vocabulary is the set of ids in those targets (``output_vocabulary``), the same on every rank. Each rank runs its
    shard of the pairs; its loss is the sum of its per-pair losses over the *global* batch size, so the ranks' summed
    gradients equal one process's, and the VMSST-CONTRASTIVE term reads gathered μ_sem like the other contrastive
    objectives.

    ``warm_up``: the decoder warm-up (``warmup_decoder_steps``) as the trainer's pre-phase: its probe pairs and the
    batch plan over the other meanings are drawn when the component is built (a corpus too small for them is refused
    then), its batches are this component's batches at β(0) without the contrastive term or the probe, their ε drawn
    apart from the run's (``WARMUP_STREAM``)."""

    objective: VmsstObjective
    reports_metrics = True
    reads_student_table = True  # the student runs its own padded forward here, and the decoders may read its table

    def __init__(self, name: str, o: VmsstObjective, tables: Mapping[str, Path], settings: TrainSettings,
                 stream: int, device: torch.device, student: SentenceEncoder) -> None:
        from models.vmsst import VmsstModel
        from models.vmsst.model import semantic_projection

        super().__init__(name, o, settings.seed, stream, device)
        self.latent = semantic_projection(student).out_features  # refuses an encoder without the bias-free W_μ
        self.student, self.accum = student, settings.grad_accumulation
        table = o.data
        _, self.pairs, self.plan = pair_corpus(name, o, tables, settings, stream)
        self.languages = self._language_table(name, table, o)
        pretrained = settings.encoder.pretrained is not None
        self.elbo_weight = o.elbo_weight if o.elbo_weight is not None else (0.025 if pretrained else 0.1)
        self.contrastive = o.variant in ("vmsst_contrastive", "contrastive")
        self.vmsst_weight: float | None = None  # λ on the VMSST loss next to the weight-1 contrastive term
        if o.variant == "vmsst_contrastive":
            self.vmsst_weight = (o.vmsst_weight if o.vmsst_weight is not None
                                 else default_vmsst_weight(pretrained, settings.encoder.num_layers))
        elif o.vmsst_weight is not None:
            raise ValueError(f"objective {name}: vmsst_weight (λ on the VMSST loss next to the InfoNCE) applies to "
                             f"variant vmsst_contrastive, not {o.variant!r}")
        if o.variant == "contrastive" and o.decoder_embeddings != "shared":
            raise ValueError(f"objective {name}: decoder_embeddings {o.decoder_embeddings!r} applies to the variants "
                             "with a decoder; variant contrastive has none")
        self.tally = (DuplicateTally(log, name, "contrastive term", "same-meaning", o.duplicate_negatives,
                                     self.pairs.meaning, self.plan, settings.steps * settings.grad_accumulation)
                      if self.contrastive else None)
        for key in ("monitor_every", "free_bits", "dropout", "vmsst_weight"):
            if (getattr(o, key) or 0) < 0:
                raise ValueError(f"objective {name}: {key} must be ≥ 0 (monitor_every 0 switches the swap probe off),"
                                 f" got {getattr(o, key)}")
        if settings.grad_cache:
            log.warning("objective %s: grad_cache applies to embedding losses; VMSST's decoders run whole (use "
                        "grad_accumulation or decoder_checkpointing to bound memory)", name)
        tok = student.tokenizer
        vocab, rows = len(tok), student.backbone.get_input_embeddings().num_embeddings
        if isinstance(o.decoder_vocab_size, int) and o.decoder_vocab_size != vocab:
            raise ValueError(f"objective {name}: decoder_vocab_size {o.decoder_vocab_size} does not match the "
                             f"tokenizer's vocabulary of {vocab} tokens ({type(tok).__name__}); the decoder predicts "
                             f"the tokenizer's ids, so leave decoder_vocab_size unset, set it to {vocab} or to "
                             "corpus (the ids that occur in the corpus)")
        if rows < vocab:
            raise ValueError(f"objective {name}: the tokenizer has {vocab} tokens but the encoder's embedding table "
                             f"only {rows} rows; resize the model's embeddings to the tokenizer")
        self.eos = tok.eos_token_id if tok.eos_token_id is not None else tok.sep_token_id
        if self.eos is None:
            raise ValueError(f"objective {name}: the tokenizer ({type(tok).__name__}) has neither an eos nor a sep "
                             "token to end the decoder's targets")
        self.pad = tok.pad_token_id or 0
        self.max_length = settings.encoder.max_length
        self._tokenise(name, table)
        self.semantic_dropout = o.semantic_dropout if o.semantic_dropout is not None else o.variant == "contrastive"
        if not self.semantic_dropout:
            off = disable_dropout(student)
            log.info("objective %s: semantic encoder dropout off (the paper trains %s without dropout): %d dropout "
                     "module(s) of the student set to p = 0 for the whole run%s", name, o.variant, off,
                     f" — also for the {len(settings.objectives) - 1} other objective(s)"
                     if len(settings.objectives) > 1 else "")
        self.warm = self._warm_up_pairs(name, o, settings)
        if o.variant != "contrastive":
            output_ids = self.output_vocabulary(name, table, rows) if o.decoder_vocab_size == "corpus" else None
            self.modules["vmsst"] = VmsstModel(student, o.model_config(self.elbo_weight), self.languages,
                                               max_positions=self.max_length + 2, output_ids=output_ids).to(device)
        similarity = ("dot products" if o.contrastive_similarity == "dot"
                      else f"cosine / {o.contrastive_temperature:g}")
        log.info("objective %s: %s, %d languages, λ %g%s, %s translation decoder, z_sem side by %s, KL annealed "
                 "over %d updates, semantic dropout %s%s", name, o.variant, len(self.languages), self.elbo_weight,
                 f", contrastive ({similarity}) + {self.vmsst_weight:g}·VMSST" if o.variant == "vmsst_contrastive"
                 else (f", contrastive on {similarity}" if o.variant == "contrastive" else ""),
                 o.translation_decoder if o.variant != "bitranslation" else "bitranslation", o.semantic_side,
                 o.kl_anneal_steps, "on" if self.semantic_dropout else "off",
                 f", decoder embeddings {o.decoder_embeddings}" if o.variant != "contrastive" else "")

    def _language_table(self, name: str, table: str, o: VmsstObjective) -> tuple[str, ...]:
        langs = self.pairs.a_lang + self.pairs.b_lang
        present = sorted(set(langs))
        if not o.languages:
            return tuple(present)
        unknown = sorted(set(present) - set(o.languages))
        if unknown:
            counts = ", ".join(f"{lang}: {langs.count(lang)} sentences" for lang in unknown[:10])
            raise ValueError(f"objective {name}: {table} has pairs in language(s) the language-embedding table "
                             f"does not have ({counts}); the table is languages {list(o.languages)}. Add them to "
                             f"the objective's languages (or leave languages empty to take the corpus's).")
        return tuple(o.languages)

    def _tokenise(self, name: str, table: str) -> None:
        """Token ids of every unique text, once: decoder targets (no special tokens, truncated to leave room for the
        end token) and encoder inputs."""
        tok = self.student.tokenizer
        texts = sorted(set(self.pairs.a) | set(self.pairs.b))
        room = self.max_length - tok.num_special_tokens_to_add(pair=False)
        ids = tok(texts, add_special_tokens=False, truncation=True, max_length=room,
                  return_attention_mask=False, return_token_type_ids=False)["input_ids"]
        empty = [t for t, x in zip(texts, ids, strict=True) if not x or not t.strip()]
        if empty:
            where = next((i, side) for i in range(len(self.pairs))
                         for side, t in (("a", self.pairs.a[i]), ("b", self.pairs.b[i])) if t == empty[0])
            raise ValueError(f"objective {name}: {len(empty)} text(s) of {table} are blank or tokenise to no "
                             f"token (an empty decoder target), e.g. pair {where[0]} side {where[1]}: "
                             f"{empty[0]!r}; remove "
                             "them from the corpus")
        rows = self.student.backbone.get_input_embeddings().num_embeddings
        top = max(max(x) for x in ids)
        if top >= rows:
            raise ValueError(f"objective {name}: the tokenizer produced id {top}, beyond the embedding table's "
                             f"{rows} rows")
        index = {t: i for i, t in enumerate(texts)}
        self.tokens = ids  # decoder targets: content + eos
        # encoder inputs exactly as the student's tokenize / encode builds them (special tokens, truncation)
        self.encoder_tokens = tok(self.student.prompted(texts), truncation=True, max_length=self.max_length,
                                  return_attention_mask=False, return_token_type_ids=False)["input_ids"]
        self.a_tok = np.fromiter((index[t] for t in self.pairs.a), dtype=np.int64, count=len(self.pairs))
        self.b_tok = np.fromiter((index[t] for t in self.pairs.b), dtype=np.int64, count=len(self.pairs))
        lang_index = {lang: i for i, lang in enumerate(self.languages)}
        self.a_lang = np.asarray([lang_index[x] for x in self.pairs.a_lang], dtype=np.int64)
        self.b_lang = np.asarray([lang_index[x] for x in self.pairs.b_lang], dtype=np.int64)

    def output_vocabulary(self, name: str, table: str, rows: int) -> np.ndarray:
        """The sorted token ids the decoders predict on this corpus: every id of the targets (``self.tokens``, all
        unique texts of both sides, as ``side`` builds the targets) and the end token; logged with its size
        against the ``rows`` of the output layer."""
        ids = np.unique(np.concatenate([np.asarray(x, dtype=np.int64) for x in self.tokens]
                                       + [np.asarray([self.eos], dtype=np.int64)]))
        log.info("objective %s: VMSST output vocabulary: %s of %s ids occur in %s (decoder_vocab_size: corpus; the "
                 "decoders' softmax runs over those)", name, f"{len(ids):,}", f"{rows:,}", table)
        return ids

    def side(self, rows: Sequence[int], which: str) -> SideBatch:
        """Padded tensors of one side of the pairs ``rows``."""
        from models.vmsst import SideBatch

        toks = self.a_tok if which == "a" else self.b_tok
        langs = self.a_lang if which == "a" else self.b_lang
        encoder = [self.encoder_tokens[toks[i]] for i in rows]
        targets = [[*self.tokens[toks[i]], self.eos] for i in rows]
        ids, mask = self._pad(encoder)
        tgt, tgt_mask = self._pad(targets)
        width = max(len(x) for x in targets)  # the real target positions, flat into B×T: no device sync to find them
        index = np.concatenate([r * width + np.arange(len(x)) for r, x in enumerate(targets)])
        return SideBatch(ids, mask, tgt, tgt_mask, self.ids(langs[list(rows)]),
                         torch.from_numpy(index).to(self.device))

    def _pad(self, seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(x) for x in seqs)
        ids = np.full((len(seqs), width), self.pad, dtype=np.int64)
        mask = np.zeros((len(seqs), width), dtype=np.int64)
        for r, x in enumerate(seqs):
            ids[r, : len(x)] = x
            mask[r, : len(x)] = 1
        return torch.from_numpy(ids).to(self.device), torch.from_numpy(mask).to(self.device)

    def semantic_reads_b(self, step: int, total: int) -> torch.Tensor:
        """(local rows,) bool: True where micro-step ``step``'s semantic posterior reads side b of this rank's rows of
        a ``total``-pair global batch — ``rows``: odd global row index (rows are sharded contiguously, rank r holds
        r·n … (r+1)·n − 1); ``steps``: every row on odd micro-steps."""
        n = total // self.world
        if self.objective.semantic_side == "steps":
            return torch.full((n,), step % 2 == 1, dtype=torch.bool, device=self.device)
        rows = np.arange(self.rank * n, (self.rank + 1) * n)
        return torch.as_tensor(rows % 2 == 1, device=self.device)

    def contrastive_loss(self, mu_a: torch.Tensor, mu_b: torch.Tensor, meaning: torch.Tensor | None) -> torch.Tensor:
        """The paper's contrastive term on gathered μ_sem (``contrastive_similarity``)."""
        o = self.objective
        z = gathered([mu_a, mu_b])
        if o.contrastive_similarity == "cosine":
            return info_nce(z[0], z[1], o.contrastive_temperature, True, groups=meaning)
        return dot_product_info_nce(z[0], z[1], groups=meaning)

    def batch(self, step: int) -> StepBatch:
        from models.vmsst.model import VmsstModel, active_unit_metrics

        idx = self.plan.batch(step)
        rows = self.local(list(idx))
        a, b = self.side(rows, "a"), self.side(rows, "b")
        update, total = step // self.accum, len(idx)
        every = self.objective.monitor_every
        monitor = every > 0 and step % self.accum == 0 and update % every == 0
        meaning = None
        if self.tally is not None:
            self.tally.batch(idx, step)
            if self.objective.duplicate_negatives == "mask":
                meaning = self.ids(self.pairs.meaning[idx])
        if self.objective.variant == "contrastive":  # the paper's CONTRASTIVE baseline: μ_sem of both sides only

            def contrastive_only() -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
                (_, mu_a), (_, mu_b) = VmsstModel.semantic_means(self.student, a, b)
                loss = self.contrastive_loss(mu_a, mu_b, meaning)
                return loss, {"contrastive_loss": loss.detach(),
                              **active_unit_metrics("sem", torch.cat([mu_a, mu_b]))}

            return StepBatch([], None, 2 * total, direct=contrastive_only)
        return self.decoder_batch(a, b, step, total, update=update, monitor=monitor, meaning=meaning,
                                  vmsst_weight=self.vmsst_weight, rng=step_rng(self.seed, self.stream, step))

    def decoder_batch(self, a: SideBatch, b: SideBatch, step: int, total: int, *, update: int, monitor: bool,
                      meaning: torch.Tensor | None, vmsst_weight: float | None,
                      rng: np.random.Generator) -> StepBatch:
        """The direct batch of the variants with a decoder on this rank's sides ``a``, ``b`` of a ``total``-pair global
        batch: L_VMSST (or BITRANSLATION's terms) at update ``update`` (β), plus VMSST-CONTRASTIVE's contrastive term
        when ``vmsst_weight`` is set; ε of every global row drawn from ``rng``."""
        reads_b = self.semantic_reads_b(step, total)
        model = self.modules["vmsst"]
        noise = None
        if model.generative:  # ε per global row from (seed, step): the same samples on any number of ranks
            eps = rng.standard_normal((3, total, self.latent), dtype=np.float32)
            part = slice(self.rank * len(a), (self.rank + 1) * len(a))
            noise = {k: torch.from_numpy(eps[i, part]).to(self.device) for i, k in
                     enumerate(("sem", "lang_a", "lang_b"))}

        def direct() -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
            out = model(self.student, a, b, update=update, reads_b=reads_b, monitor=monitor, noise=noise)
            loss = out.loss.sum() / total  # this rank's share of the per-pair mean over the global batch
            if vmsst_weight is not None:  # VMSST-CONTRASTIVE: contrastive (weight 1) + λ·L_VMSST (paper §6.3)
                contrastive = self.contrastive_loss(out.mu_a, out.mu_b, meaning)
                out.metrics["contrastive_loss"] = contrastive.detach()
                out.metrics["vmsst_loss"] = out.loss.detach().mean()
                loss = contrastive + vmsst_weight * loss
            return loss, out.metrics

        return StepBatch([], None, 2 * total, direct=direct)

    def _warm_up_pairs(self, name: str, o: VmsstObjective,
                       settings: TrainSettings) -> tuple[np.ndarray, np.ndarray, BatchPlan] | None:
        """The decoder warm-up's pairs (class docstring), or None without a warm-up: ``warmup_probe_pairs`` probe
        pairs of distinct meanings (a seeded draw, ordered by length so that each probe chunk pads little), the pairs
        of every other meaning, and the warm-up's batch plan over those (its own shuffle)."""
        if not o.warmup_decoder_steps:
            return None
        if o.variant == "contrastive":
            raise ValueError(f"objective {name}: warmup_decoder_steps {o.warmup_decoder_steps} warms up the decoders, "
                             "but variant contrastive has none; expected warmup_decoder_steps: 0 or a variant with a "
                             "decoder (vmsst, bitranslation, vmsst_contrastive)")
        order = np.random.default_rng([self.seed, WARMUP_STREAM, self.stream]).permutation(len(self.pairs))
        _, first = np.unique(self.pairs.meaning[order], return_index=True)
        distinct = order[np.sort(first)]  # one pair per meaning, in the seeded order
        probe = distinct[: o.warmup_probe_pairs]
        rest = np.flatnonzero(~np.isin(self.pairs.meaning, self.pairs.meaning[probe]))
        if len(probe) < o.warmup_probe_pairs or len(rest) < o.batch_size:
            raise ValueError(f"objective {name}: the decoder warm-up holds out warmup_probe_pairs "
                             f"{o.warmup_probe_pairs} pairs of distinct meanings and trains on batches of "
                             f"{o.batch_size} of the others, but {o.data} has {len(self.pairs)} pairs of "
                             f"{len(distinct)} meanings; lower warmup_probe_pairs or batch_size")
        lengths = text_lengths(self.pairs.a, self.pairs.b)
        probe = probe[np.argsort(lengths[probe], kind="stable")]
        plan = BatchPlan(len(rest), o.batch_size, settings.seed + self.stream + WARMUP_STREAM,
                         blocks=self.pairs.language_pairs()[rest] if o.language_pair_batches else None,
                         lengths=lengths[rest] if settings.length_bucketing else None,
                         what=f"objective {name} warm-up ({o.data} without the probe's meanings)")
        log.info("objective %s: decoder warm-up: at most %d updates at lr %g, probe on %d held-out pairs every %s "
                 "updates, %s", name, o.warmup_decoder_steps, o.warmup_decoder_lr, len(probe),
                 o.monitor_every or "(before and after only)",
                 f"stops at a probe gap ≥ {o.warmup_probe_gap:g} nats" if o.warmup_probe_gap is not None
                 else "runs its budget")
        return probe, rest, plan

    def warm_up(self) -> WarmUp | None:
        """The decoder warm-up (``warmup_decoder_steps``; class and objective docstrings) as the trainer's
        pre-phase, or None without one."""
        from models.vmsst.probe import WarmupProbe

        if self.warm is None:
            return None
        o, (probe_pairs, rest, plan) = self.objective, self.warm
        chunks = [(self.side(list(c), "a"), self.side(list(c), "b"))
                  for c in np.array_split(probe_pairs, -(-len(probe_pairs) // o.batch_size))]
        probe = WarmupProbe(self.modules["vmsst"], self.student, chunks, every=o.monitor_every,
                            threshold=o.warmup_probe_gap, budget=o.warmup_decoder_steps, name=self.name)

        def batch(micro: int) -> StepBatch:
            idx = rest[plan.batch(micro)]
            rows = self.local(list(idx))
            return self.decoder_batch(self.side(rows, "a"), self.side(rows, "b"), micro, len(idx), update=0,
                                      monitor=False, meaning=None, vmsst_weight=None,
                                      rng=np.random.default_rng([self.seed, WARMUP_STREAM + self.stream, micro]))

        return WarmUp(o.warmup_decoder_steps, o.warmup_decoder_lr, batch, probe, probe.record)


def default_vmsst_weight(pretrained: bool, layers: int) -> float:
    """VMSST-CONTRASTIVE's λ_vc by setting (paper §6.3): 0.0005 from a pretrained encoder and for the 6-layer random
    init, 0.001 for the 24-layer random init (here: a random init of 24 layers or more)."""
    return 0.001 if not pretrained and layers >= 24 else 0.0005


def dot_product_info_nce(s: torch.Tensor, t: torch.Tensor, groups: torch.Tensor | None = None) -> torch.Tensor:
    """VMSST's contrastive loss (Wieting et al. 2023, §5 baselines): p(s_i | t_i) = exp(s_i·t_i) / Σ_j exp(s_i·t_j)
    on raw dot products of the B×d embeddings (no normalisation, no temperature), both directions averaged:
    −½ (mean_i log p(s_i | t_i) + mean_i log p(t_i | s_i)). ``groups`` (B,): j ≠ i with the same id (another pair
    of the same meaning) is removed from row i's and column i's denominators."""
    n, _ = check_pair(s, t, "s", "t")
    groups = check_ids(groups, "groups", n)
    logits = s.float() @ t.float().T
    if groups is not None:
        logits = logits.masked_fill(same_group_mask(groups, logits.device), float("-inf"))
    return (diagonal_ce(logits) + diagonal_ce(logits.T)) / 2


def disable_dropout(module: torch.nn.Module) -> int:
    """Set every ``nn.Dropout`` of ``module`` to p = 0 (Hugging Face BERT-likes also read their attention dropout from
    these modules); returns how many had p > 0."""
    changed = 0
    for m in module.modules():
        if isinstance(m, torch.nn.Dropout) and m.p > 0:
            m.p = 0.0
            changed += 1
    return changed
