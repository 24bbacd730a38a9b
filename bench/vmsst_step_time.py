"""Step time of VMSST relative to CONTRASTIVE on the same batch (ratio; CPU, or GPU when lent), and the memory VMSST
keeps for backward with and without gradient checkpointing of its decoders.

What is measured:

* **step time**: seconds per full optimisation step (batch drawing, forward, backward, gradient clipping at 1.0,
  AdamW step, zero_grad, one host sync for the loss, as one step of ``models.training.train.train``) of CONTRASTIVE,
  VMSST and BITRANSLATION on the same pairs, and the ratios VMSST / CONTRASTIVE and BITRANSLATION / CONTRASTIVE;
* **activation memory**: the bytes of the tensors autograd keeps for backward during one forward, for VMSST with
  ``decoder_checkpointing`` off and on (and CONTRASTIVE and BITRANSLATION for reference); on CUDA also the peak of
  ``torch.cuda.max_memory_allocated`` over one full step.

Protocol (rebuilt on every run under ``--work``):

1. Data: the embedded sample bitext ``sample/bitext/en-de.*`` and ``en-fr.*`` (blank lines dropped) as a hive
   ``bitext_pairs`` table with English pivots (the construction of ``tests/test_vmsst.py``'s ``corpora`` fixture), and
   the pipeline's tokenizer (``models.training.tokenizer.train_tokenizer``, ``TokenizerSettings(vocab_size=--vocab)``; a
   BPE trainer) on those texts. The sample is small (218 pairs), so the tokenizer's real vocabulary can be far below
   ``--vocab``; the table prints the size used, and the decoders' output layers have that many rows.
2. Encoder, the same for every method: a random-init BERT ``EncoderSettings(hidden_size=--hidden, num_layers=--layers,
   num_heads=4, intermediate_size=4·hidden, max_length=--max-length, dropout=0.0, projection=hidden)`` (mean pooling
   + a bias-free projection: VMSST's W_μ and the CONTRASTIVE head alike).
3. Methods, each ``TrainSettings(objectives=(one objective,), seed=--seed, …)`` built as ``models.training.train.train``
   builds a run: ``torch.manual_seed(seed)``, ``SentenceEncoder.from_settings``, ``build_components``, AdamW over the
   trainer's parameter groups (unique parameters; fused on CUDA), and every method starts from the same initial
   encoder weights:
   CONTRASTIVE = ``ContrastiveObjective(data="bitext_pairs", batch_size=--batch, temperature=0.05, symmetric=True)``;
   VMSST = ``VmsstObjective(batch_size=--batch, kl_anneal_steps=1000, monitor_every=0)`` (no swap probe: a
   monitoring extra, not part of a step); BITRANSLATION = ``VmsstObjective(variant="bitranslation",
   batch_size=--batch)``.
4. Same batch: every method draws step ``i``'s pairs from a ``BatchPlan`` of the same corpus, seed and batch size, so
   in round ``i`` all methods train on the same pairs (checked before timing).
5. A step: ``batch = component.batch(i)``; VMSST / BITRANSLATION (direct batches) ``loss, _ = batch.direct();
   loss.backward()`` under autocast; CONTRASTIVE ``models.training.gradcache.embed_and_backward(embed, batch.columns,
   batch.loss_fn, mini_batch=None, scale=1.0)`` with ``embed`` = the student's forward under autocast; then clip,
   ``opt.step()``, ``opt.zero_grad(set_to_none=True)``, ``float(loss)``. Constant learning rate (the schedule does not
   change the cost). On CUDA: bf16 autocast as the trainer (``precision: auto``), ``torch.cuda.synchronize()`` before
   and after each timed step. ``torch.set_num_threads`` is left at torch's default.
6. Timing: ``--warmup`` untimed rounds, then ``--steps`` timed rounds; each round runs one step of every method
   (the order rotates each round), so drift (thermal, other load) hits all methods alike. Reported: the median
   seconds per step of each method (and min–max), the ratios of the medians and, as a check, the median of the
   per-round ratios. On the CPU a load average above 0.5 before the run is warned about.
7. Memory, after timing, each configuration freshly built (same seed, same weights) and measured on the same step
   (round ``MEM_STEP``): the forward of that step runs inside ``torch.autograd.graph.saved_tensors_hooks`` whose pack
   hook records every tensor autograd saves; the figure is the sum of the unique storages (by ``data_ptr``, each
   counted once) that are still referenced when the forward ends, excluding the parameters' own storages (which
   exist anyway). Checkpointing is non-reentrant (``torch.utils.checkpoint``): inside the checkpointed region its own
   hooks take over and keep nothing; the region's tensor inputs, which it saves through autograd, are counted. A
   tensor an operation saves of its own output (tanh, softmax, exp) is kept alive by the pack hook until backward
   even if the forward drops that branch; the forwards measured here drop no such branch. On CUDA the whole step
   (forward, backward, optimizer) runs after one warm-up step (optimizer state allocated) and
   ``torch.cuda.reset_peak_memory_stats()``; reported: the peak and the peak above what was allocated at the step's
   start. Peak RSS on the CPU is not measured.

The figures go to the warehouse's ``bench_results`` (benchmark ``vmsst_step_time``; one row per method and
configuration).

    python -m bench.vmsst_step_time [--device auto|cpu|cuda] [--batch 64] [--steps 20] [--warmup 3]
                                    [--hidden 256] [--layers 4] [--vocab 8000] [--max-length 32]
    python -m bench.vmsst_step_time --quick      # smoke test: tiny sizes, 3 steps; its numbers mean nothing
    make bench-vmsst-speed
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import os
import shutil
import statistics
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.results import append_results
from bench.shared_data import REPO, warn_if_loaded

if TYPE_CHECKING:
    import torch

    from models.encoder import SentenceEncoder
    from models.settings import TrainSettings
    from models.training.components import Component

SAMPLE = REPO / "sample" / "bitext"
LANGS = ("de", "fr")
METHODS = ("CONTRASTIVE", "VMSST", "BITRANSLATION")
MEM_STEP = 1  # the round whose batch the memory figures use (round 0 runs VMSST's swap probe)
MIB = 2**20


# ---------------------------------------------------------------------------------------------- data


def write_corpora(work: Path, vocab: int) -> dict[str, Path]:
    """``bitext_pairs`` (en-de, en-fr of the sample, English pivots) and a tokenizer trained on its texts, under
    ``work`` (emptied first)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from models.settings import TokenizerSettings
    from models.training.tokenizer import train_tokenizer

    if work.exists():
        shutil.rmtree(work)
    texts: list[str] = []
    for lang in LANGS:
        src = (SAMPLE / f"en-{lang}.en").read_text(encoding="utf-8").splitlines()
        tgt = (SAMPLE / f"en-{lang}.{lang}").read_text(encoding="utf-8").splitlines()
        if len(src) != len(tgt):
            raise ValueError(f"{SAMPLE / f'en-{lang}.en'} has {len(src)} lines but en-{lang}.{lang} has {len(tgt)}")
        pairs = [(s, t) for s, t in zip(src, tgt, strict=True) if s.strip() and t.strip()]
        part = work / "bitext_pairs" / f"lang={lang}"
        part.mkdir(parents=True)
        pq.write_table(pa.table({"pair_id": [f"{lang}{i:05d}" for i in range(len(pairs))],
                                 "pivot_lang": ["en"] * len(pairs), "pivot_text": [p for p, _ in pairs],
                                 "text": [t for _, t in pairs]}), part / "part-0.parquet")
        texts += [x for p in pairs for x in p]
    pq.write_table(pa.table({"text": texts}), work / "tok_texts.parquet")
    train_tokenizer(TokenizerSettings(vocab_size=vocab), {"t": work / "tok_texts.parquet"}, work)
    return {"bitext_pairs": work / "bitext_pairs", "tokenizer": work / "tokenizer"}


# ---------------------------------------------------------------------------------------------- methods


def objective_for(method: str, batch: int, *, decoder_checkpointing: bool = False) -> Any:
    """The objective of ``method`` (CONTRASTIVE, VMSST or BITRANSLATION) at ``batch`` pairs per step."""
    from models.objectives.contrastive import ContrastiveObjective
    from models.objectives.vmsst import VmsstObjective

    if method == "CONTRASTIVE":
        return ContrastiveObjective(data="bitext_pairs", batch_size=batch, temperature=0.05, symmetric=True)
    if method == "VMSST":
        return VmsstObjective(batch_size=batch, kl_anneal_steps=1000, monitor_every=0,
                              decoder_checkpointing=decoder_checkpointing)
    if method == "BITRANSLATION":
        return VmsstObjective(variant="bitranslation", batch_size=batch, decoder_checkpointing=decoder_checkpointing)
    raise ValueError(f"unknown method {method!r}; expected one of {METHODS}")


def settings_for(method: str, a: argparse.Namespace, *, decoder_checkpointing: bool = False) -> TrainSettings:
    from models.settings import EncoderSettings, TrainSettings

    encoder = EncoderSettings(hidden_size=a.hidden, num_layers=a.layers, num_heads=4, intermediate_size=4 * a.hidden,
                              max_length=a.max_length, dropout=0.0, projection=a.hidden)
    return TrainSettings(objectives=(objective_for(method, a.batch, decoder_checkpointing=decoder_checkpointing),),
                         encoder=encoder, steps=a.warmup + a.steps, seed=a.seed, device=a.device, dev=None,
                         checkpoint_every=0)


@dataclass
class Run:
    """One method built as ``models.training.train.train`` builds a run: student, its component, AdamW."""

    name: str
    settings: TrainSettings
    device: torch.device
    model: SentenceEncoder
    component: Component
    params: list[torch.nn.Parameter]
    opt: torch.optim.Optimizer
    times: list[float] = field(default_factory=list)

    @property
    def bf16(self) -> bool:
        return self.device.type == "cuda" and self.settings.precision in ("auto", "bf16")

    def autocast(self) -> contextlib.AbstractContextManager:
        import torch

        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16)

    def embed(self, texts: list[str]) -> torch.Tensor:
        with self.autocast():
            return self.model(texts)

    def forward(self, step: int) -> tuple[torch.Tensor, Callable[[], torch.Tensor]]:
        """The forward of step ``step``: its loss and a function that back-propagates it (and returns the loss)."""
        batch = self.component.batch(step)
        if batch.direct is not None:
            with self.autocast():
                loss, _ = batch.direct()
        else:
            assert batch.loss_fn is not None
            loss = batch.loss_fn([self.embed(list(column)) for column in batch.columns])

        def backward() -> torch.Tensor:
            loss.backward()
            return loss.detach()

        return loss, backward

    def step(self, step: int) -> float:
        """One full optimisation step on the pairs of step ``step``; returns the loss (one host sync, as the
        trainer)."""
        import torch

        from models.training.gradcache import embed_and_backward

        batch = self.component.batch(step)
        if batch.direct is not None:
            with self.autocast():
                loss, _ = batch.direct()
            loss.backward()
            loss = loss.detach()
        else:
            assert batch.loss_fn is not None
            loss = embed_and_backward(self.embed, batch.columns, batch.loss_fn, mini_batch=None, scale=1.0)
        if self.settings.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(self.params, self.settings.max_grad_norm)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return float(loss)


def build_run(name: str, settings: TrainSettings, tables: dict[str, Path], device: torch.device) -> Run:
    """Student, component and optimiser of one method, exactly as ``models.training.train.train`` builds them."""
    import torch

    from models.encoder import SentenceEncoder
    from models.training.train import _param_groups, build_components

    torch.manual_seed(settings.seed)
    model = SentenceEncoder.from_settings(settings.encoder, tables["tokenizer"]).to(device)
    model.train()
    (component,) = build_components(settings, {"bitext_pairs": tables["bitext_pairs"]}, model, device)
    trainable: list[torch.nn.Module] = [model, component.modules]
    params = list({id(p): p for m in trainable for p in m.parameters() if p.requires_grad}.values())
    opt = torch.optim.AdamW(_param_groups(trainable, settings.weight_decay), lr=settings.lr,
                            fused=device.type == "cuda")
    return Run(name, settings, device, model, component, params, opt)


def _sync(device: torch.device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ---------------------------------------------------------------------------------------------- memory


@contextlib.contextmanager
def saved_tensor_bytes(exclude: set[int]) -> Iterator[Callable[[], tuple[int, int]]]:
    """Inside the block, record every tensor autograd saves for backward. The yielded function returns (bytes, count)
    of the unique storages (by ``data_ptr``) of the saved tensors still alive when it is called, storages whose
    ``data_ptr`` is in ``exclude`` (the parameters) left out."""
    import torch

    seen: list[tuple[weakref.ref, int, int]] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        seen.append((weakref.ref(t), storage.data_ptr(), storage.nbytes()))
        return t

    def total() -> tuple[int, int]:
        unique: dict[int, int] = {}
        for ref, ptr, nbytes in seen:
            if ref() is not None and ptr not in exclude and nbytes:
                unique[ptr] = max(nbytes, unique.get(ptr, 0))
        return sum(unique.values()), len(unique)

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        yield total


def measure_memory(run: Run) -> dict[str, Any]:
    """Bytes saved for backward by the forward of step ``MEM_STEP``; on CUDA also the peak allocated over that full
    step (after one warm-up step, so the optimizer state exists)."""
    import torch

    cuda = run.device.type == "cuda"
    if cuda:
        run.step(MEM_STEP + 1)  # warm-up on another batch: AdamW state, cuBLAS workspaces, autocast paths
        _sync(run.device)
        torch.cuda.reset_peak_memory_stats(run.device)
        start = torch.cuda.memory_allocated(run.device)
    exclude = {p.untyped_storage().data_ptr() for p in run.params}
    exclude |= {b.untyped_storage().data_ptr() for m in (run.model, run.component.modules) for b in m.buffers()}
    with saved_tensor_bytes(exclude) as total:
        _, backward = run.forward(MEM_STEP)
        saved, tensors = total()
    backward()
    if run.settings.max_grad_norm:
        torch.nn.utils.clip_grad_norm_(run.params, run.settings.max_grad_norm)
    run.opt.step()
    run.opt.zero_grad(set_to_none=True)
    out: dict[str, Any] = {"saved_bytes": saved, "saved_storages": tensors, "cuda_peak_bytes": None,
                           "cuda_peak_above_start_bytes": None}
    if cuda:
        _sync(run.device)
        peak = torch.cuda.max_memory_allocated(run.device)
        out.update(cuda_peak_bytes=peak, cuda_peak_above_start_bytes=peak - start)
    return out


# ---------------------------------------------------------------------------------------------- main


def _release(device: torch.device) -> None:
    import torch

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _mib(x: int | None) -> str:
    return "—" if x is None else f"{x / MIB:.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto", help="auto = cuda when available")
    ap.add_argument("--batch", type=int, default=64, help="translation pairs per step (every method)")
    ap.add_argument("--steps", type=int, default=20, help="timed rounds (one step of each method per round)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed rounds first")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=8000, help="TokenizerSettings.vocab_size (the sample may give fewer)")
    ap.add_argument("--max-length", type=int, default=32)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--work", type=Path, default=REPO / "data" / "bench-vmsst-step-time", help="corpus + tokenizer")
    ap.add_argument("--data-root", type=Path, default=REPO / "data", help="warehouse root (bench_results)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke test: hidden 64, 1 layer, vocab 1000, batch 16, 1 + 3 rounds; numbers mean nothing")
    a = ap.parse_args(argv)
    if a.quick:
        a.hidden, a.layers, a.vocab, a.batch, a.steps, a.warmup = 64, 1, 1000, 16, 3, 1
    if a.steps < 1 or a.warmup < 1 or a.batch < 2:
        ap.error("--steps and --warmup must be ≥ 1 (round 0 runs VMSST's swap probe) and --batch ≥ 2")
    if a.hidden % 4:
        ap.error("--hidden must be divisible by the 4 attention heads")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")

    import numpy as np
    import torch

    from models.encoder import pick_device

    device = pick_device(a.device)
    a.device = device.type
    warn_if_loaded(device.type, "other processes competing for the cores (torch uses one thread per core) distort "
                   "CPU timings, the ratios included")
    t0 = time.perf_counter()
    tables = write_corpora(a.work, a.vocab)

    # ---- step time: the three methods, interleaved rounds on the same pairs
    runs = [build_run(m, settings_for(m, a), tables, device) for m in METHODS]
    vocab = len(runs[0].model.tokenizer)
    pairs = len(runs[0].component.pairs)  # type: ignore[attr-defined]
    first = runs[0].component.plan
    for r in runs[1:]:
        for i in range(a.warmup + a.steps):
            if not np.array_equal(r.component.plan.batch(i), first.batch(i)):
                raise RuntimeError(f"{r.name} draws other pairs than {runs[0].name} at step {i}: not the same batch")
    parameters = {r.name: sum(p.numel() for p in r.params) for r in runs}
    bf16 = runs[0].bf16
    print(f"vmsst_step_time{' (QUICK smoke test: numbers mean nothing)' if a.quick else ''}: {device} "
          f"({torch.cuda.get_device_name(device) if device.type == 'cuda' else f'{os.cpu_count()} cpus'}), "
          f"{'bf16 autocast' if bf16 else 'fp32'}, torch {torch.__version__} threads {torch.get_num_threads()}; "
          f"BERT {a.hidden}×{a.layers} (4 heads, FFN {4 * a.hidden}, projection {a.hidden}), max_length "
          f"{a.max_length}, tokenizer vocabulary {vocab} (asked {a.vocab}); batch {a.batch} pairs of {pairs} sample "
          f"pairs (en-de, en-fr); {a.warmup} warm-up + {a.steps} timed rounds; setup {time.perf_counter() - t0:.1f} s",
          flush=True)
    losses: dict[str, list[float]] = {r.name: [] for r in runs}
    for rnd in range(a.warmup + a.steps):
        k = rnd % len(runs)
        for r in runs[k:] + runs[:k]:
            _sync(device)
            t = time.perf_counter()
            loss = r.step(rnd)
            _sync(device)
            dt = time.perf_counter() - t
            losses[r.name].append(loss)
            if rnd >= a.warmup:
                r.times.append(dt)
    median = {r.name: statistics.median(r.times) for r in runs}
    base = median["CONTRASTIVE"]
    contrastive = runs[0].times
    paired = {r.name: statistics.median(x / y for x, y in zip(r.times, contrastive, strict=True)) for r in runs}
    print(f"\n{'method':<15} {'s/step (median)':>16} {'min–max':>17} {'× CONTRASTIVE':>14} {'pairs/s':>9} "
          f"{'parameters':>11}  loss first → last")
    for r in runs:
        print(f"{r.name:<15} {median[r.name]:>16.4f} {min(r.times):>8.4f}–{max(r.times):<8.4f} "
              f"{median[r.name] / base:>14.2f} {a.batch / median[r.name]:>9.1f} {parameters[r.name]:>11,}  "
              f"{losses[r.name][0]:.3f} → {losses[r.name][-1]:.3f}")
    print(f"ratios of the medians: VMSST / CONTRASTIVE {median['VMSST'] / base:.2f}, BITRANSLATION / CONTRASTIVE "
          f"{median['BITRANSLATION'] / base:.2f} (median of the per-round ratios: {paired['VMSST']:.2f}, "
          f"{paired['BITRANSLATION']:.2f})", flush=True)
    times = {r.name: list(r.times) for r in runs}
    del runs, r
    _release(device)

    # ---- memory: fresh builds, the same batch (step MEM_STEP)
    configs = [("CONTRASTIVE", False), ("BITRANSLATION", False), ("VMSST", False), ("VMSST", True)]
    memory: dict[tuple[str, bool], dict[str, Any]] = {}
    for method, ckpt in configs:
        run = build_run(method, settings_for(method, a, decoder_checkpointing=ckpt), tables, device)
        memory[(method, ckpt)] = measure_memory(run)
        del run
        _release(device)
    plain, ckpt_mem = memory[("VMSST", False)], memory[("VMSST", True)]
    peak_note = "; CUDA peak allocated over one full step (after a warm-up step)" if device.type == "cuda" else ""
    print(f"\nmemory on step {MEM_STEP}'s batch: tensors saved for backward by one forward (unique storages, "
          f"parameters excluded){peak_note}")
    print(f"{'configuration':<32} {'saved MiB':>10} {'storages':>9} {'× VMSST':>8} {'CUDA peak MiB':>14} "
          f"{'above start':>12}")
    for (method, ckpt), m in memory.items():
        label = f"{method}{' + decoder checkpointing' if ckpt else ''}"
        print(f"{label:<32} {_mib(m['saved_bytes']):>10} {m['saved_storages']:>9} "
              f"{m['saved_bytes'] / plain['saved_bytes']:>8.2f} {_mib(m['cuda_peak_bytes']):>14} "
              f"{_mib(m['cuda_peak_above_start_bytes']):>12}")
    saved_ratio = ckpt_mem["saved_bytes"] / plain["saved_bytes"]
    peak_ratio = (ckpt_mem["cuda_peak_above_start_bytes"] / plain["cuda_peak_above_start_bytes"]
                  if device.type == "cuda" else None)
    print(f"decoder checkpointing: saved bytes × {saved_ratio:.3f}"
          + (f", CUDA peak above start × {peak_ratio:.3f}" if peak_ratio is not None else ""))

    common = {"benchmark": "vmsst_step_time", "device": device.type,
              "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
              "precision": "bf16" if bf16 else "fp32", "batch": a.batch, "hidden": a.hidden, "layers": a.layers,
              "max_length": a.max_length, "vocab_requested": a.vocab, "vocab": vocab, "pairs": pairs,
              "steps": a.steps, "warmup": a.warmup, "seed": a.seed, "torch_threads": torch.get_num_threads(),
              "quick": a.quick, "memory_step": MEM_STEP}
    rows = []
    for (method, ckpt), m in memory.items():
        timed = not ckpt
        rows.append({**common, "method": method, "decoder_checkpointing": ckpt,
                     "parameters": parameters[method],
                     "seconds_per_step": median[method] if timed else None,
                     "ratio_to_contrastive": median[method] / base if timed else None,
                     "ratio_to_contrastive_paired": paired[method] if timed else None,
                     "step_seconds_runs": times[method] if timed else None,
                     "saved_bytes": m["saved_bytes"], "saved_mib": m["saved_bytes"] / MIB,
                     "saved_ratio_to_vmsst": m["saved_bytes"] / plain["saved_bytes"],
                     "cuda_peak_bytes": m["cuda_peak_bytes"],
                     "cuda_peak_above_start_bytes": m["cuda_peak_above_start_bytes"]})
    append_results(a.data_root, "vmsst_step_time", rows)
    print(f"total {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
