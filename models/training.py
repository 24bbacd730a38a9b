"""Stage ``train``: a sentence encoder trained with an in-batch contrastive objective on translation groups.

A nanoGPT-style loop: build the encoder from its settings and the trained tokenizer, sample group batches, compute the
objective, AdamW with linear warm-up and decay, log every ``log_every`` steps into ``train_steps``, save the model in
sentence-transformers' format. Deterministic for a seed on a given machine (seeded sampler, seeded init and dropout).
Runs bare: ``python -m models.training --help``.
"""

from __future__ import annotations

import argparse
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import torch
from tqdm.auto import tqdm

from models import stage_versions
from models.batching import PairSampler, load_groups
from models.encoder import SentenceEncoder, pick_device
from models.objectives import info_nce
from models.settings import EncoderSettings, TrainSettings

log = logging.getLogger("polysent.models.training")
STAGE_VERSION = stage_versions.TRAIN


def lr_at(step: int, settings: TrainSettings) -> float:
    """Linear warm-up to ``lr`` over ``warmup_steps``, then linear decay to 0 at ``steps``."""
    if step < settings.warmup_steps:
        return settings.lr * (step + 1) / settings.warmup_steps
    return settings.lr * max(0.0, (settings.steps - step) / max(1, settings.steps - settings.warmup_steps))


def train(settings: TrainSettings, tables: Mapping[str, Path], tokenizer_dir: Path, out: Path,
          run_name: str = "run") -> dict:
    torch.manual_seed(settings.seed)
    device = pick_device(settings.device)
    groups = load_groups({k: v for k, v in tables.items() if k in settings.data})
    sampler = PairSampler(groups, settings.batch_size, settings.seed)
    model = SentenceEncoder.from_settings(settings.encoder, tokenizer_dir).to(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    rows: dict[str, list] = {"train_run": [], "step": [], "loss": [], "lr": [], "examples": []}
    t0 = time.perf_counter()
    window: list[float] = []
    log.info("training %s on %s: %d groups, %d parameters, %d steps × %d", run_name, device, len(groups),
             sum(p.numel() for p in model.parameters()), settings.steps, sampler.batch_size)
    for step in tqdm(range(settings.steps), desc=f"train {run_name}", leave=False, mininterval=1.0):
        lr = lr_at(step, settings)
        for g in opt.param_groups:
            g["lr"] = lr
        anchors, positives = sampler.sample()
        loss = info_nce(model(anchors), model(positives), settings.temperature, settings.symmetric)
        if not math.isfinite(loss.item()):
            raise FloatingPointError(f"{run_name}: loss became {loss.item()} at step {step}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        window.append(loss.item())
        if (step + 1) % settings.log_every == 0 or step + 1 == settings.steps:
            rows["train_run"].append(run_name)
            rows["step"].append(step + 1)
            rows["loss"].append(sum(window) / len(window))
            rows["lr"].append(lr)
            rows["examples"].append((step + 1) * sampler.batch_size)
            window.clear()
    seconds = time.perf_counter() - t0
    model.save(out / "model")
    pq.write_table(pa.table(rows), out / "train_steps.parquet")
    final = rows["loss"][-1] if rows["loss"] else float("nan")
    log.info("%s: %d steps in %.1fs, final loss %.4f", run_name, settings.steps, seconds, final)
    return {"tables": {"train_steps": "train_steps.parquet"},
            "stats": {"final_loss": final, "train_seconds": round(seconds, 2), "device": str(device),
                      "groups": len(groups), "steps_per_second": round(settings.steps / seconds, 2)}}


def main(argv: list[str] | None = None) -> int:
    """Train outside the pipeline (e.g. on a bare GPU machine) from artifact folders."""
    p = argparse.ArgumentParser(prog="python -m models.training", description=__doc__.splitlines()[0])
    p.add_argument("--xnli-groups", type=Path, help="xnli_groups table folder")
    p.add_argument("--bitext-pairs", type=Path, help="bitext_pairs table folder")
    p.add_argument("--tokenizer", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--steps", type=int, default=TrainSettings.steps)
    p.add_argument("--batch-size", type=int, default=TrainSettings.batch_size)
    p.add_argument("--device", default="auto")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    tables = {k: v for k, v in (("xnli_groups", a.xnli_groups), ("bitext_pairs", a.bitext_pairs)) if v}
    settings = TrainSettings(steps=a.steps, batch_size=a.batch_size, device=a.device,
                             data=tuple(tables), encoder=EncoderSettings())
    a.out.mkdir(parents=True, exist_ok=True)
    print(train(settings, tables, a.tokenizer, a.out, "cli"), asdict(settings))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
