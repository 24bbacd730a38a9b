"""Objectives wired to their corpora: each component turns a training step into text columns to embed and a loss
over those embeddings, so one run can combine objectives with weights, each fed by its own corpus (e.g. MPCL groups +
EASE pairs + soft labels on bitext).

A component's ``batch(step)`` is a pure function of (seed, step) — batches come from ``models.sampling.BatchPlan``
and per-step choices from ``step_rng`` — so a resumed run and every rank of a distributed run draw the same global
batch. Each rank embeds its contiguous shard of every column; the loss gathers the shards (``models.distributed``),
so all ranks compute the same full-batch loss and the summed gradients equal the single-process ones. Meaning ids of
the global batch are known on every rank, so nothing but embeddings is gathered.

Group-aware batches: rows that share a meaning (two pairs with the same pivot sentence, an IMASCL duplicate, two EASE
examples of one sentence) carry the same meaning id and the objectives mask them instead of using them as negatives.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from models import corpus_tables as ct
from models import distributed
from models.encoder import SentenceEncoder
from models.objective_registry import spec_of
from models.objectives import (
    EntityHead,
    ease_loss,
    embedding_mse,
    info_nce,
    mpcl_loss,
    simcse_loss,
    soft_label_loss,
    soft_label_targets,
)
from models.sampling import BatchPlan, step_rng
from models.settings import (
    ContrastiveObjective,
    EaseObjective,
    MpclObjective,
    Objective,
    SimcseObjective,
    SoftLabelObjective,
    TrainSettings,
    VmsstObjective,
)
from models.teacher import Teacher
from models.vmsst import SideBatch, VmsstModel
from models.vmsst.model import semantic_projection

log = logging.getLogger("polysent.models.components")
LossFn = Callable[[list[torch.Tensor]], torch.Tensor]
DirectFn = Callable[[], tuple[torch.Tensor, dict[str, torch.Tensor]]]


@dataclass
class StepBatch:
    """What a component asks of a step: text columns to embed and a loss over their embeddings (``loss_fn``; the
    trainer embeds, possibly through GradCache), or — for objectives that are not a function of sentence embeddings,
    such as VMSST's decoders — ``direct``, which runs the model itself and returns this rank's share of the loss plus
    detached scalar metrics for ``train_steps``."""

    columns: list[list[str]]  # this rank's texts, one list per embedded column
    loss_fn: LossFn | None  # embeddings of the columns (this rank's rows) → the full-batch loss
    sentences: int  # texts embedded in the global batch (throughput)
    direct: DirectFn | None = None


class Component:
    """One weighted objective on one corpus; ``reports_metrics``: its direct batches return metrics for
    ``train_steps``.

    A subclass is built by ``build_components`` as ``cls(name, objective, tables, settings, stream, device, student)``
    (the objective registry names the class of each kind) and sets ``self.plan`` (its ``BatchPlan``) and ``batch``."""

    plan: BatchPlan

    reports_metrics = False

    def __init__(self, name: str, objective: Objective, seed: int, stream: int, device: torch.device) -> None:
        self.name, self.objective, self.weight = name, objective, objective.weight
        self.seed, self.stream, self.device = seed, stream, device
        self.modules = nn.ModuleDict()  # trainable parameters of the objective itself (EASE's entity table and W)
        self.rank, self.world = distributed.rank(), max(1, distributed.world_size())

    def batch(self, step: int) -> StepBatch:
        raise NotImplementedError

    def local(self, texts: Sequence[str]) -> list[str]:
        return distributed.shard(list(texts), self.rank, self.world) if self.world > 1 else list(texts)

    def ids(self, values: Sequence[int] | np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.asarray(values, dtype=np.int64), device=self.device)


def _gathered(embs: list[torch.Tensor]) -> list[torch.Tensor]:
    return [distributed.gather(e.float()) for e in embs]


def _lengths(*columns: Sequence[str]) -> np.ndarray:
    return np.fromiter((sum(len(c[i]) for c in columns) for i in range(len(columns[0]))), dtype=np.int64,
                       count=len(columns[0]))


def _with_contradiction(name: str, groups: ct.Groups) -> np.ndarray:
    """The groups a hard-negative batch may draw: those with a contradiction group (XNLI premises), so the hard
    negative is always a contradiction."""
    eligible = np.flatnonzero(groups.negative >= 0)
    if len(eligible) == 0:
        raise ValueError(f"objective {name}: hard_negatives is set but xnli_groups has no negative_group_id")
    log.info("objective %s: hard negatives: %d of %d groups have a contradiction and are drawn", name, len(eligible),
             len(groups))
    return eligible


# ---------------------------------------------------------------------------------------------- pairs
def _pair_corpus(name: str, o: ContrastiveObjective | SoftLabelObjective | VmsstObjective, tables: Mapping[str, Path],
                 settings: TrainSettings, stream: int) -> tuple[ct.Groups | None, ct.Pairs, BatchPlan]:
    """A pair objective's corpus (the groups too when it reads ``xnli_groups``) and its batch plan."""
    groups = None
    if o.data == "xnli_groups":
        groups = ct.load_groups(tables["xnli_groups"])
        pairs = ct.pairs_from_groups(groups)
    elif o.data == "xnli_single_pairs":
        pairs = ct.load_single_pairs(tables["xnli_groups"], tables["xnli_single_pairs"])
    else:
        pairs = ct.load_bitext_pairs(tables["bitext_pairs"])
    plan = BatchPlan(len(pairs), o.batch_size, settings.seed + stream,
                     blocks=pairs.language_pairs() if o.language_pair_batches else None,
                     lengths=_lengths(pairs.a, pairs.b) if settings.length_bucketing else None,
                     what=f"objective {name} ({o.data})")
    return groups, pairs, plan


class PairComponent(Component):
    """Contrastive InfoNCE (+ optional XNLI hard negatives) on pairs, or on two members of each XNLI group."""

    objective: ContrastiveObjective

    def __init__(self, name: str, o: ContrastiveObjective, tables: Mapping[str, Path], settings: TrainSettings,
                 stream: int, device: torch.device, student: SentenceEncoder | None = None) -> None:
        super().__init__(name, o, settings.seed, stream, device)
        if o.hard_negatives and o.data != "xnli_groups":
            raise ValueError(f"objective {name}: hard_negatives needs data: xnli_groups (its contradiction groups)")
        self.groups, self.pairs, self.plan = _pair_corpus(name, o, tables, settings, stream)
        self.eligible: np.ndarray | None = None
        if o.hard_negatives:  # only groups with a contradiction (XNLI premises): the hard negative is always one
            assert self.groups is not None
            self.eligible = _with_contradiction(name, self.groups)
            lengths = _lengths(self.pairs.a, self.pairs.b)[self.eligible]
            self.plan = BatchPlan(len(self.eligible), o.batch_size, settings.seed + stream,
                                  lengths=lengths if settings.length_bucketing else None,
                                  what=f"objective {name} ({o.data} with a contradiction)")

    def batch(self, step: int) -> StepBatch:
        o, idx = self.objective, self.plan.batch(step)
        if self.eligible is not None:
            idx = self.eligible[idx]
        a, b, negs = [], [], []
        if self.groups is not None:
            rng = step_rng(self.seed, self.stream, step)
            for g in idx:
                members = self.groups.members[g]
                i, j = rng.choice(len(members), size=2, replace=False)
                a.append(members[i][1])
                b.append(members[j][1])
                if o.hard_negatives:  # the contradiction hypothesis, in b's language when it has one
                    pool = self.groups.members[self.groups.negative[g]]
                    same = [t for lang, t in pool if lang == members[j][0]]
                    negs.append(same[0] if same else pool[int(rng.integers(len(pool)))][1])
        else:
            a, b = [self.pairs.a[i] for i in idx], [self.pairs.b[i] for i in idx]
        meaning = self.ids(self.pairs.meaning[idx])
        columns = [self.local(a), self.local(b)] + ([self.local(negs)] if negs else [])

        def loss_fn(embs: list[torch.Tensor]) -> torch.Tensor:
            z = _gathered(embs)
            return info_nce(z[0], z[1], o.temperature, o.symmetric, hard_negatives=z[2] if len(z) > 2 else None,
                            hard_negative_weight=o.hard_negative_weight, groups=meaning)

        return StepBatch(columns, loss_fn, len(a) + len(b) + len(negs))


# ---------------------------------------------------------------------------------------------- MPCL
class MpclComponent(Component):
    """MPCL (``models.objectives.mpcl``) on XNLI translation groups; with ``split_pairs`` the paper's "+Single" baseline
    through the same loss, scaling and sentences per step."""

    objective: MpclObjective

    def __init__(self, name: str, o: MpclObjective, tables: Mapping[str, Path], settings: TrainSettings,
                 stream: int, device: torch.device, student: SentenceEncoder | None = None) -> None:
        super().__init__(name, o, settings.seed, stream, device)
        if o.group_members is not None and o.group_members < 2:
            raise ValueError(f"objective {name}: group_members must be ≥ 2 (an anchor and a positive) or null for "
                             f"every member, got {o.group_members}")
        self.groups = ct.load_groups(tables["xnli_groups"], o.languages)
        # the groups a batch draws from: with hard negatives, only those with a contradiction (XNLI premises)
        self.eligible = np.arange(len(self.groups))
        if o.hard_negatives:
            self.eligible = _with_contradiction(name, self.groups)
        members = [self.groups.members[g] for g in self.eligible]
        lengths = np.array([max(len(t) for _, t in m) for m in members], dtype=np.int64)
        self.plan = BatchPlan(len(self.eligible), o.batch_size, settings.seed + stream,
                              lengths=lengths if settings.length_bucketing else None,
                              what=f"objective {name} (xnli_groups)")
        drawn = {min(len(m), o.group_members or len(m)) for m in members}
        if self.world > 1 and len(drawn) > 1:
            raise ValueError(f"objective {name}: distributed MPCL needs groups of one size, found sizes {sorted(drawn)}"
                             " (set languages: to ones every group has, or group_members)")

    def batch(self, step: int) -> StepBatch:
        o = self.objective
        idx = self.eligible[self.plan.batch(step)]
        rng = step_rng(self.seed, self.stream, step)
        warmup = step < o.single_positive_steps
        texts, group, anchor, negs, origin = [], [], [], [], []
        for n, g in enumerate(idx):
            members = self.groups.members[g]
            size = 2 if warmup else min(len(members), o.group_members or len(members))
            pick = sorted(rng.choice(len(members), size=size, replace=False)) if size < len(members) \
                else range(len(members))
            chosen = [members[k][1] for k in pick]
            if o.split_pairs and not warmup:  # "+Single": disjoint random pairs of the drawn members, K = 1 each
                order = rng.permutation(len(chosen))[: len(chosen) // 2 * 2]
                parts = [[chosen[order[k]], chosen[order[k + 1]]] for k in range(0, len(order), 2)]
            else:
                parts = [chosen]
            for part in parts:
                gid = group[-1] + 1 if group else 0
                first = int(rng.integers(len(part)))
                texts += part
                group += [gid] * len(part)
                origin += [n] * len(part)
                anchor += [o.anchors == "all" or k == first for k in range(len(part))]
            if o.hard_negatives:  # a member of the contradiction hypothesis's group, in a random language
                pool = self.groups.members[self.groups.negative[g]]
                negs.append(pool[int(rng.integers(len(pool)))][1])
        groups_t, anchors_t = self.ids(group), torch.tensor(anchor, device=self.device)
        columns = [self.local(texts)] + ([self.local(negs)] if negs else [])
        candidates = None
        if o.split_pairs and not warmup:
            # the other pairs cut from a row's own group are translations of it: neither positives nor negatives
            # (the paper's "+Single" corpus would put them in other batches), so both conditions see the same
            # in-batch negatives and differ only in K
            src = self.ids(origin)
            candidates = (src[:, None] != src[None, :]) | (groups_t[:, None] == groups_t[None, :])

        def loss_fn(embs: list[torch.Tensor]) -> torch.Tensor:
            z = _gathered(embs)
            return mpcl_loss(z[0], groups_t, o.temperature, positives=o.positives, scaling=o.scaling,
                             minmax_self=o.minmax_self, anchors=anchors_t,
                             hard_negatives=z[1] if len(z) > 1 else None, candidate_mask=candidates)

        return StepBatch(columns, loss_fn, len(texts) + len(negs))


def _micro_steps(settings: TrainSettings) -> int:
    """How many batches each objective draws in a whole run (``batch(step × accumulation + micro)``)."""
    return settings.steps * settings.grad_accumulation


# ---------------------------------------------------------------------------------------------- soft labels
class SoftLabelComponent(Component):
    objective: SoftLabelObjective

    def __init__(self, name: str, o: SoftLabelObjective, tables: Mapping[str, Path], settings: TrainSettings,
                 stream: int, device: torch.device, student: SentenceEncoder) -> None:
        super().__init__(name, o, settings.seed, stream, device)
        _, self.pairs, self.plan = _pair_corpus(name, o, tables, settings, stream)
        if o.teacher == "self":
            encoder = copy.deepcopy(student)
            encoder.train_head = None
        else:
            encoder = SentenceEncoder.load(o.teacher, device)
        self.teacher = Teacher(encoder.to(device), prefix=o.teacher_prefix, name=f"objective {name} teacher")
        if o.loss == "mse" and self.teacher.dim != student.dim:
            raise ValueError(f"objective {name}: loss mse regresses the teacher's embeddings, but the teacher "
                             f"{o.teacher!r} has dimension {self.teacher.dim} and the student {student.dim}; use "
                             "loss: soft_ce (targets are similarities, any teacher dimension) or a matching teacher")
        rank = {lang: i for i, lang in enumerate(o.priority)}
        # the side the teacher reads ("Priority"): the pair's language that comes first in ``priority``
        self.b_first = np.array([rank.get(lb, len(rank)) < rank.get(la, len(rank))
                                 for la, lb in zip(self.pairs.a_lang, self.pairs.b_lang, strict=True)])
        if o.teacher_cache:  # only the texts this run's batches hand the teacher (60 steps read ~2k of ~38k)
            drawn = np.unique(np.concatenate([self.plan.batch(s) for s in range(_micro_steps(settings))]))
            texts = [self.pairs.b[i] if self.b_first[i] else self.pairs.a[i] for i in drawn]
            if o.labels == "average":
                texts += [self.pairs.a[i] if self.b_first[i] else self.pairs.b[i] for i in drawn]
            self.teacher.cache(texts)

    def batch(self, step: int) -> StepBatch:
        o, idx = self.objective, self.plan.batch(step)
        a, b = [self.pairs.a[i] for i in idx], [self.pairs.b[i] for i in idx]
        first = [b[n] if self.b_first[i] else a[n] for n, i in enumerate(idx)]
        second = [a[n] if self.b_first[i] else b[n] for n, i in enumerate(idx)]
        t_first = self.teacher.embed(first, self.device)
        if o.loss == "mse":
            target = t_first
        else:
            t_second = self.teacher.embed(second, self.device) if o.labels == "average" else None
            target = soft_label_targets(t_first, t_second, o.temperature, mode=o.labels, w_func=o.w_func)

        def loss_fn(embs: list[torch.Tensor]) -> torch.Tensor:
            za, zb = _gathered(embs)
            if o.loss == "mse":
                return embedding_mse(za, zb, target)
            return soft_label_loss(za, zb, target, o.temperature, tms=o.tms, cross_weight=o.cross_weight,
                                   column_target=o.column_target, mono_terms=o.mono_terms)

        return StepBatch([self.local(a), self.local(b)], loss_fn, 2 * len(a))


# ---------------------------------------------------------------------------------------------- EASE
class EaseComponent(Component):
    objective: EaseObjective

    def __init__(self, name: str, o: EaseObjective, tables: Mapping[str, Path], settings: TrainSettings,
                 stream: int, device: torch.device, student: SentenceEncoder) -> None:
        super().__init__(name, o, settings.seed, stream, device)
        self.data = ct.load_entity_pairs(tables["hard_negatives"], tables["entity_vectors"],
                                         require_negative=o.hard_negatives)
        self.text_ids = ct.meaning_ids(self.data.text)
        self.plan = BatchPlan(len(self.data), o.batch_size, settings.seed + stream,
                              lengths=_lengths(self.data.text) if settings.length_bucketing else None,
                              what=f"objective {name} (hard_negatives)")
        head = EntityHead.from_vectors(self.data.vectors, student.dim, nonlinear=o.nonlinear, seed=o.seed)
        self.modules["entities"] = head.to(device)

    def batch(self, step: int) -> StepBatch:
        o, idx = self.objective, self.plan.batch(step)
        texts = [self.data.text[i] for i in idx]
        ent, neg = self.data.entity[idx], self.data.negative[idx]
        local_ent = self.ids(self.local(list(ent)))
        local_neg = self.ids(self.local(list(neg)))
        text_ids, ent_ids = self.ids(self.text_ids[idx]), self.ids(ent)
        head = self.modules["entities"]

        def loss_fn(embs: list[torch.Tensor]) -> torch.Tensor:
            z1, z2 = _gathered(embs)
            e = distributed.gather(head(local_ent).float())
            n = distributed.gather(head(local_neg).float()) if o.hard_negatives else None
            return ease_loss(z1, z2, e, n, simcse_temperature=o.simcse_temperature,
                             entity_temperature=o.entity_temperature, hard_negative_weight=o.hard_negative_weight,
                             entity_weight=o.entity_weight, groups=text_ids, entity_groups=ent_ids)

        local = self.local(texts)
        return StepBatch([local, list(local)], loss_fn, 2 * len(texts))


# ---------------------------------------------------------------------------------------------- mSimCSE
class SimcseComponent(Component):
    objective: SimcseObjective

    def __init__(self, name: str, o: SimcseObjective, tables: Mapping[str, Path], settings: TrainSettings,
                 stream: int, device: torch.device, student: SentenceEncoder | None = None) -> None:
        super().__init__(name, o, settings.seed, stream, device)
        self.triples: ct.Triples | None = None
        self.sentences: ct.Sentences | None = None
        self.pairs: ct.Pairs | None = None
        if o.strategy == "unsupervised":
            self.sentences = ct.load_sentences(o.sentences, tables[o.sentences], o.sentence_language)
            n, lengths = len(self.sentences), _lengths(self.sentences.text)
            self.meaning = np.arange(n, dtype=np.int64)
        elif o.strategy == "parallel":
            self.pairs = ct.load_bitext_pairs(tables["bitext_pairs"])
            n, lengths, self.meaning = len(self.pairs), _lengths(self.pairs.a, self.pairs.b), self.pairs.meaning
        else:
            strategy = "english" if o.strategy == "english_nli" else "cross_lingual"
            self.triples = ct.load_triples(tables["nli_triples"], strategy)
            n, lengths = len(self.triples), _lengths(self.triples.sent0, self.triples.sent1)
            self.meaning = self.triples.meaning
        self.plan = BatchPlan(n, o.batch_size, settings.seed + stream,
                              lengths=lengths if settings.length_bucketing else None,
                              what=f"objective {name} ({o.strategy})")

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
        meaning = self.ids(self.meaning[idx])

        def loss_fn(embs: list[torch.Tensor]) -> torch.Tensor:
            z = _gathered(embs)
            return simcse_loss(z[0], z[1], z[2] if len(z) > 2 else None, o.temperature,
                               hard_negative_weight=o.hard_negative_weight, groups=meaning)

        return StepBatch(columns, loss_fn, len(idx) * len(columns))


# ---------------------------------------------------------------------------------------------- VMSST
class VmsstComponent(Component):
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
    table. The corpus is tokenised once (unique texts). Each rank runs its shard of the pairs; its loss is the sum of
    its per-pair losses over the *global* batch size, so the ranks' summed gradients equal one process's, and the
    VMSST-CONTRASTIVE term reads gathered μ_sem like the other contrastive objectives."""

    objective: VmsstObjective
    reports_metrics = True

    def __init__(self, name: str, o: VmsstObjective, tables: Mapping[str, Path], settings: TrainSettings,
                 stream: int, device: torch.device, student: SentenceEncoder) -> None:
        super().__init__(name, o, settings.seed, stream, device)
        self.latent = semantic_projection(student).out_features  # refuses an encoder without the bias-free W_μ
        self.student, self.accum = student, settings.grad_accumulation
        table = o.data
        _, self.pairs, self.plan = _pair_corpus(name, o, tables, settings, stream)
        self.languages = self._language_table(name, table, o)
        pretrained = settings.encoder.pretrained is not None
        self.elbo_weight = o.elbo_weight if o.elbo_weight is not None else (0.025 if pretrained else 0.1)
        self.contrastive = o.variant == "vmsst_contrastive"
        self.vmsst_weight: float | None = None  # λ on the VMSST loss next to the weight-1 InfoNCE
        if self.contrastive:
            self.vmsst_weight = (o.vmsst_weight if o.vmsst_weight is not None
                                 else (0.0005 if pretrained else 0.001))
        elif o.vmsst_weight is not None:
            raise ValueError(f"objective {name}: vmsst_weight (λ on the VMSST loss next to the InfoNCE) applies to "
                             f"variant vmsst_contrastive, not {o.variant!r}")
        for key in ("monitor_every", "free_bits", "dropout", "vmsst_weight"):
            if (getattr(o, key) or 0) < 0:
                raise ValueError(f"objective {name}: {key} must be ≥ 0 (monitor_every 0 switches the swap probe off),"
                                 f" got {getattr(o, key)}")
        if settings.grad_cache:
            log.warning("objective %s: grad_cache applies to embedding losses; VMSST's decoders run whole (use "
                        "grad_accumulation or decoder_checkpointing to bound memory)", name)
        tok = student.tokenizer
        vocab, rows = len(tok), student.backbone.get_input_embeddings().num_embeddings
        if o.decoder_vocab_size is not None and o.decoder_vocab_size != vocab:
            raise ValueError(f"objective {name}: decoder_vocab_size {o.decoder_vocab_size} does not match the "
                             f"tokenizer's vocabulary of {vocab} tokens ({type(tok).__name__}); the decoder predicts "
                             f"the tokenizer's ids, so leave decoder_vocab_size unset or set it to {vocab}")
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
        self.modules["vmsst"] = VmsstModel(student, o, self.languages, elbo_weight=self.elbo_weight,
                                           max_positions=self.max_length + 2).to(device)
        log.info("objective %s: %s, %d languages, λ %g%s, %s translation decoder, z_sem side by %s, KL annealed "
                 "over %d updates", name, o.variant, len(self.languages), self.elbo_weight,
                 f", InfoNCE + {self.vmsst_weight:g}·VMSST" if self.contrastive else "",
                 o.translation_decoder if o.variant != "bitranslation" else "bitranslation", o.semantic_side,
                 o.kl_anneal_steps)

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

    def side(self, rows: Sequence[int], which: str) -> SideBatch:
        """Padded tensors of one side of the pairs ``rows``."""
        toks = self.a_tok if which == "a" else self.b_tok
        langs = self.a_lang if which == "a" else self.b_lang
        encoder = [self.encoder_tokens[toks[i]] for i in rows]
        targets = [[*self.tokens[toks[i]], self.eos] for i in rows]
        ids, mask = self._pad(encoder)
        tgt, tgt_mask = self._pad(targets)
        return SideBatch(ids, mask, tgt, tgt_mask, self.ids(langs[list(rows)]))

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

    def batch(self, step: int) -> StepBatch:
        idx = self.plan.batch(step)
        rows = self.local(list(idx))
        a, b = self.side(rows, "a"), self.side(rows, "b")
        update, total = step // self.accum, len(idx)
        every = self.objective.monitor_every
        monitor = every > 0 and step % self.accum == 0 and update % every == 0
        meaning = self.ids(self.pairs.meaning[idx]) if self.contrastive else None
        reads_b = self.semantic_reads_b(step, total)
        vmsst_weight = self.vmsst_weight
        model = self.modules["vmsst"]
        noise = None
        if model.generative:  # ε per global row from (seed, step): the same samples on any number of ranks
            eps = step_rng(self.seed, self.stream, step).standard_normal((3, total, self.latent), dtype=np.float32)
            part = slice(self.rank * len(rows), (self.rank + 1) * len(rows))
            noise = {k: torch.from_numpy(eps[i, part]).to(self.device) for i, k in
                     enumerate(("sem", "lang_a", "lang_b"))}

        def direct() -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
            out = model(self.student, a, b, update=update, reads_b=reads_b, monitor=monitor, noise=noise)
            loss = out.loss.sum() / total  # this rank's share of the per-pair mean over the global batch
            if vmsst_weight is not None:  # VMSST-CONTRASTIVE: InfoNCE (weight 1) + λ·L_VMSST (paper §6.3)
                z = _gathered([out.mu_a, out.mu_b])
                contrastive = info_nce(z[0], z[1], self.objective.contrastive_temperature, True, groups=meaning)
                out.metrics["contrastive_loss"] = contrastive.detach()
                out.metrics["vmsst_loss"] = out.loss.detach().mean()
                loss = contrastive + vmsst_weight * loss
            return loss, out.metrics

        return StepBatch([], None, 2 * total, direct=direct)


class EmptyCorpusError(ct.CorpusError):
    """An objective whose corpus table has no rows (for its languages or strategy): refused before the model loads."""


# why a corpus table can come out empty, for the refusal: where to look
_EMPTY_REASONS = {
    "bitext_pairs": "no bitext pair survived reading and filtering (see the bitext_filter_counts table: blank, too "
                    "short/long, length ratio, leaked, duplicate)",
    "xnli_groups": "no XNLI translation group was built (see sources.xnli and corpora.xnli_groups)",
    "xnli_single_pairs": "no XNLI translation group was built (see sources.xnli and corpora.xnli_groups)",
    "nli_triples": "no NLI triple was built (see sources.nli, corpora.nli_triples)",
    "hard_negatives": "no EASE pair was built (see the ease_drop_counts table; corpora.entities.types: none gives no "
                      "entity a hard-negative candidate)",
    "entity_vectors": "no entity vector was built (see corpora.entity_vectors)",
}


def refuse_empty_corpora(settings: TrainSettings, tables: Mapping[str, Path], run: str = "run") -> None:
    """Raise ``EmptyCorpusError`` naming the run, the objective, the table and the reason when an objective's corpus
    has no rows. Runs before the model and tokenizer load (the pipeline calls it first thing in the training node),
    from Parquet footers and one filtered count: an empty corpus otherwise surfaces only after the student, a teacher
    or a teacher cache have been built, as a reader's error or a division by zero."""
    import pyarrow.dataset as ds

    problems = []
    seen: dict[str, int] = {}
    for o in settings.objectives:
        seen[o.kind] = seen.get(o.kind, 0) + 1
        name = o.kind if seen[o.kind] == 1 else f"{o.kind}.{seen[o.kind]}"
        for table, column, values in spec_of(o).required_rows(o):
            path = tables.get(table)
            if path is None or not Path(path).exists():
                continue  # build_components / the readers say what is missing
            try:
                dataset = ds.dataset(str(path), format="parquet", partitioning="hive")
                use = bool(values) and column in dataset.schema.names
                rows = dataset.count_rows(filter=ds.field(column).isin(list(values)) if use else None)
            except (OSError, ValueError):
                continue  # unreadable: the readers name the file and the problem
            if rows == 0:
                what = f" for {column} {list(values)}" if use else ""
                problems.append(f"training.{run} ({name}): corpus table {table} has 0 rows{what}: "
                                f"{_EMPTY_REASONS.get(table, 'its corpus node built it empty')}; an objective "
                                "cannot train on an empty corpus")
    if problems:
        raise EmptyCorpusError("\n".join(problems))


def build_components(settings: TrainSettings, tables: Mapping[str, Path], student: SentenceEncoder,
                     device: torch.device) -> list[Component]:
    """One component per objective, named by kind (``mpcl``, ``ease``, …; ``kind.2`` for a second of one kind), of the
    class the objective registry names for its kind (``models.objective_registry``)."""
    missing = sorted({t for t in settings.tables() if t not in tables})
    if missing:
        raise ValueError(f"training needs corpus table(s) {missing}; given {sorted(tables)}")
    out: list[Component] = []
    seen: dict[str, int] = {}
    for stream, o in enumerate(settings.objectives):
        seen[o.kind] = seen.get(o.kind, 0) + 1
        name = o.kind if seen[o.kind] == 1 else f"{o.kind}.{seen[o.kind]}"
        cls = spec_of(o).component_class()
        if not (isinstance(cls, type) and issubclass(cls, Component)):
            raise TypeError(f"objective {name}: the registry names {cls!r} as its component, not a Component subclass")
        out.append(cls(name, o, tables, settings, stream, device, student))
        log.info("objective %s: weight %g, batch %d, %d items per epoch", name, o.weight, o.batch_size,
                 out[-1].plan.per_epoch * o.batch_size)
    return out
