"""What every objective's component is built from: a training step as text columns to embed and a loss over their
embeddings (``StepBatch``), the ``Component`` base, and the batching helpers the objectives share. Each objective's own
component lives in its module (``models/objectives/<kind>.py``) beside its settings and loss; one run combines
objectives with weights, each fed by its own corpus (e.g. MPCL groups + EASE pairs + soft labels on bitext).

A component's ``batch(step)`` is a pure function of (seed, step) — batches come from
``models.training.sampling.BatchPlan`` and per-step choices from ``step_rng`` — so a resumed run and every rank of a
distributed run draw the same global batch. Each rank embeds its contiguous shard of every column; the loss gathers the
shards (``gathered``), so all ranks compute the same full-batch loss and the summed gradients equal the single-process
ones. Meaning ids of the global batch are known on every rank, so nothing but embeddings is gathered.

Group-aware batches: rows that share a meaning (two pairs with the same pivot sentence, an IMASCL duplicate, two EASE
examples of one sentence) carry the same meaning id and the objectives mask them instead of using them as negatives.

``refuse_empty_corpora`` runs before the model loads (the pipeline's training node calls it first). torch is taken
lazily (``models.lazy_torch``): the objective modules import this one when the config loader reads their settings.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from models.lazy_torch import torch
from models.objective_registry import Objective, bind_component, spec_of
from models.training import corpus_tables as ct
from models.training.sampling import BatchPlan

if TYPE_CHECKING:
    from models.settings import TrainSettings

log = logging.getLogger("polysent.models.components")
LossFn = Callable[[list["torch.Tensor"]], "torch.Tensor"]
DirectFn = Callable[[], tuple["torch.Tensor", dict[str, "torch.Tensor"]]]


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


@dataclass
class WarmUp:
    """A component's pre-phase (``Component.warm_up``): updates of the component's own ``modules`` alone, before the
    run's update 1, which the trainer runs with every weight of the student frozen (``models.training.train``:
    ``warm_up``) and AdamW at ``lr``, constant, over those modules (the run's weight decay and clipping).

    ``batch(micro)``: the direct batch (``StepBatch.direct``) of warm-up micro-step ``micro`` (update k draws
    micro-steps k·accumulation … k·accumulation + accumulation − 1, as the run's updates do). ``probe(k)``: called
    after k warm-up updates (k = 0 first, k = ``updates`` last); it measures what the warm-up is for when due and
    returns True once that has passed its threshold — the warm-up then stops. ``record()``: the figures of the
    warm-up, name → value, for the run's stats and its ``train_steps`` (``warmup_<name>`` columns)."""

    updates: int  # the budget: at most this many warm-up updates
    lr: float
    batch: Callable[[int], StepBatch]
    probe: Callable[[int], bool]
    record: Callable[[], dict[str, float]]


class Component:
    """One weighted objective on one corpus; ``reports_metrics``: its direct batches return metrics for
    ``train_steps``.

    A subclass names the settings class it builds — ``class <Kind>Component(Component, builds=<Kind>Objective)`` —
    and is built by those settings' ``build`` (``Objective.build``) as ``cls(name, objective, tables, settings,
    stream, device, student)``; it calls this ``__init__`` and sets ``self.plan`` (its ``BatchPlan``) and ``batch``.
    ``modules`` holds the objective's own trainable parameters (EASE's entity table and W, VMSST's decoders);
    ``warm_up`` may train them alone before the run's first update (VMSST's decoder warm-up)."""

    plan: BatchPlan

    reports_metrics = False
    # True for an objective that reads the student's word-embedding table outside the trainer's forward (VMSST's
    # decoders): the run then keeps the table's plain dense gradient (models.training.embedding_rows)
    reads_student_table = False

    def __init_subclass__(cls, *, builds: type[Objective] | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if builds is not None:
            bind_component(builds, cls)

    def __init__(self, name: str, objective: Objective, seed: int, stream: int, device: torch.device) -> None:
        from models.training import distributed

        self.name, self.objective, self.weight = name, objective, objective.weight
        self.seed, self.stream, self.device = seed, stream, device
        self.modules = torch.nn.ModuleDict()
        self.rank, self.world = distributed.rank(), max(1, distributed.world_size())

    def batch(self, step: int) -> StepBatch:
        raise NotImplementedError

    def warm_up(self) -> WarmUp | None:
        """This component's pre-phase before update 1 of a fresh run (``WarmUp``), or None (the default: none)."""
        return None

    def export(self, out: Path) -> dict[str, Any]:
        """Write what the objective itself trained (its ``modules``) under the run's folder ``out``, beside the
        exported ``out/model``, and return what the run's stats record of it. Default: nothing (an objective whose
        parameters serve training only); EASE writes its entity head, whose retrieval witnesses the entity term."""
        return {}

    def local(self, texts: Sequence[str]) -> list[str]:
        """This rank's contiguous shard of a global column."""
        from models.training import distributed

        return distributed.shard(list(texts), self.rank, self.world) if self.world > 1 else list(texts)

    def ids(self, values: Sequence[int] | np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.asarray(values, dtype=np.int64), device=self.device)


def gathered(embs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Every rank's rows of each embedded column, in float32 (the global batch on every rank)."""
    from models.training import distributed

    return [distributed.gather(e.float()) for e in embs]


def text_lengths(*columns: Sequence[str]) -> np.ndarray:
    """Characters per row summed over the columns (``BatchPlan``'s length bucketing)."""
    return np.fromiter((sum(len(c[i]) for c in columns) for i in range(len(columns[0]))), dtype=np.int64,
                       count=len(columns[0]))


def groups_with_contradiction(name: str, groups: ct.Groups) -> np.ndarray:
    """The groups a hard-negative batch may draw: those with a contradiction group (XNLI premises), so the hard
    negative is always a contradiction. Logs how many of the groups that is."""
    eligible = np.flatnonzero(groups.negative >= 0)
    if len(eligible) == 0:
        raise ValueError(f"objective {name}: hard_negatives is set but xnli_groups has no negative_group_id")
    log.info("objective %s: hard negatives: %d of %d groups have a contradiction and are drawn", name, len(eligible),
             len(groups))
    return eligible


def pair_corpus(name: str, o: Any, tables: Mapping[str, Path], settings: TrainSettings,
                stream: int) -> tuple[ct.Groups | None, ct.Pairs, BatchPlan]:
    """A pair objective's corpus (its ``data`` table; the groups too when it reads ``xnli_groups``) and its batch plan
    (``batch_size``; one language pair per batch with ``language_pair_batches``)."""
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
                     lengths=text_lengths(pairs.a, pairs.b) if settings.length_bucketing else None,
                     what=f"objective {name} ({o.data})")
    return groups, pairs, plan


def objective_names(settings: TrainSettings) -> list[str]:
    """Each objective's component name: its kind, ``kind.2`` for a second of one kind, …"""
    seen: dict[str, int] = {}
    names = []
    for o in settings.objectives:
        seen[o.kind] = seen.get(o.kind, 0) + 1
        names.append(o.kind if seen[o.kind] == 1 else f"{o.kind}.{seen[o.kind]}")
    return names


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
    for name, o in zip(objective_names(settings), settings.objectives, strict=True):
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
