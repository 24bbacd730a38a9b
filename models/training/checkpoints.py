"""Training checkpoints: written atomically, pruned to the newest few, and refused on resume when the config differs.

A checkpoint folder ``step-00000100/`` holds ``state.pt`` (student and objective weights, AdamW state, the CPU and
CUDA random states, the step, the per-step history rows, the best dev score so far) and ``config.json`` (the run's
settings). It is written under ``.tmp-step-…`` and renamed when complete, so a crash never leaves a checkpoint that
looks whole. Batches are a pure function of (seed, step) (``models.training.sampling``), so restoring these states
reproduces the loss sequence of an uninterrupted run exactly (on the same machine and software).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger("polysent.models.checkpoints")
PREFIX = "step-"


class ResumeError(ValueError):
    """A checkpoint that cannot be resumed under the current settings; the message names the differences."""


def save_checkpoint(root: Path, step: int, state: Mapping[str, Any], config: Mapping[str, Any], keep: int) -> Path:
    """Write ``root/step-{step:08d}`` atomically and delete all but the ``keep`` newest checkpoints."""
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"{PREFIX}{step:08d}"
    tmp = root / f".tmp-{PREFIX}{step:08d}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    torch.save(dict(state), tmp / "state.pt")
    (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    for f in tmp.iterdir():
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    for old in checkpoints(root)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    log.info("checkpoint written: %s", final)
    return final


def checkpoints(root: Path) -> list[Path]:
    """Complete checkpoints under ``root``, oldest first."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith(PREFIX)
                  and (p / "state.pt").exists() and (p / "config.json").exists())


def latest_checkpoint(root: Path) -> Path | None:
    found = checkpoints(root)
    return found[-1] if found else None


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> tuple[dict[str, Any], dict[str, Any]]:
    """(state, config) of a checkpoint folder."""
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    state = torch.load(path / "state.pt", map_location=map_location, weights_only=False)
    return state, config


def config_differences(saved: Any, current: Any, ignore: Iterable[str] = (), where: str = "") -> list[str]:
    """Dotted keys whose values differ, as ``key: saved → current`` (top-level keys in ``ignore`` are skipped)."""
    skip = set(ignore)
    if isinstance(saved, Mapping) and isinstance(current, Mapping):
        out = []
        for k in sorted(set(saved) | set(current)):
            if not where and k in skip:
                continue
            key = f"{where}.{k}" if where else str(k)
            if k not in saved or k not in current:
                out.append(f"{key}: {saved.get(k, '(absent)')!r} → {current.get(k, '(absent)')!r}")
            else:
                out += config_differences(saved[k], current[k], (), key)
        return out
    if isinstance(saved, list | tuple) and isinstance(current, list | tuple) and len(saved) == len(current):
        return [d for i, (a, b) in enumerate(zip(saved, current, strict=True))
                for d in config_differences(a, b, (), f"{where}.{i}")]
    return [] if saved == current else [f"{where or '(settings)'}: {saved!r} → {current!r}"]
