"""A row cut short (a session's stop, a kill) goes on where it was instead of from scratch.

On 2 CPU cores a row trains for 10–40 min and scores for 5–10; a stop used to lose all of it. Now:

* **Training resumes.** On the CPU a row's training writes a checkpoint every quarter of its steps (the newest one
  kept) under its run folder, ``data/experiments/runs/<question>/<row>/train/checkpoints``, beside
  ``progress.json``: the row's training key (its training settings and the hashes of the kit tables it reads,
  ``experiments.shared_training.training_key``) and its device. The next run of the same row keeps that checkpoint
  when both match and ``models.training.train`` resumes from it: weights, objective modules, optimiser, embedding
  rows, random state and history, so the loss sequence is the uninterrupted run's (``tests/test_training.py``,
  ``tests/test_vmsst_warmup.py``). A pre-phase (VMSST's decoder warm-up, 6–15 min here) is followed by a
  checkpoint at step 0, so a stop after it keeps the warm-up. Anything else in the folder is removed; a folder of
  another key or device, or one without a complete checkpoint, starts afresh, and so does a checkpoint the trainer
  refuses to resume (settings it sees otherwise under the same key: a start folder moved, a default changed). A
  multilingual-e5-small checkpoint with its optimiser state is 0.65 GB and takes about 1.3 s to write here (against
  5–9 s a CPU step); on a GPU, where a whole row trains in seconds, it would cost more than it saves, so GPU rows
  write none.
* **Scoring restarts without training again.** A finished training is kept (``experiments.shared_training.keep``)
  before scoring starts, so a stop while scoring leaves the next run only the scoring to do.

A row that resumed says so: ``resumed_from_step`` (its steps when only the scoring ran again). Its
``train_seconds`` then count the whole training only when the training was kept whole; after a checkpoint they
count the part after the stop, so the ledger's time estimates leave such rows out of the training rate
(``experiments.plan``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

log = logging.getLogger("polysent.experiments.row_progress")
PROGRESS_FILE = "progress.json"
CHECKPOINTS = Path("train") / "checkpoints"
MIN_STEPS = 8  # fewer steps: a row short enough that checkpoints are not worth their writing


def checkpoint_every(steps: int, device: str) -> int:
    """Steps between a row's checkpoints: a quarter of its steps on the CPU, none on a GPU or for a row of fewer than
    ``MIN_STEPS`` steps (0: no checkpoint)."""
    if device != "cpu" or steps < MIN_STEPS:
        return 0
    return steps // 4


def prepare(folder: Path, marker: dict[str, Any], *, afresh: bool = False) -> int | None:
    """Make ``folder`` ready for a row whose progress is identified by ``marker``: keep the checkpoints a stopped run
    of the same row left (and nothing else), or start the folder afresh (always with ``afresh``: a checkpoint the
    trainer refused). Returns the step of the newest checkpoint kept, ``None`` when starting afresh."""
    from models.training.checkpoints import latest_checkpoint

    saved = _read_marker(folder / PROGRESS_FILE)
    latest = latest_checkpoint(folder / CHECKPOINTS) if saved == marker and not afresh else None
    if latest is None:
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        tmp = folder / f".{PROGRESS_FILE}.tmp"
        tmp.write_text(json.dumps(marker, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, folder / PROGRESS_FILE)
        return None
    # down the path to the checkpoints, everything beside it goes (and a checkpoint's half-written .tmp- folder)
    along = ((folder, {PROGRESS_FILE, CHECKPOINTS.parent.name}), (folder / CHECKPOINTS.parent, {CHECKPOINTS.name}))
    for parent, kept in along:
        for path in parent.iterdir():
            if path.name not in kept:
                _remove(path)
    for path in (folder / CHECKPOINTS).glob(".tmp-*"):
        _remove(path)
    step = int(latest.name.split("-")[-1])
    log.info("%s: resuming from its checkpoint at step %d (%s)", folder.name, step, latest)
    return step


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def _read_marker(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None
