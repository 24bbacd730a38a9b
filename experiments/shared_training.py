"""Rows that differ only in ``interpolate_start`` train once.

An interpolation sweep in the ledger is one condition per α (``interpolate_start: 0.3``, ``0.5`` …) beside the
plain condition, all with the same objectives, seed and scale. Their fine-tuned weights are the same (training
ignores α until the export: ``models.training.train.save_interpolated``), so training each would spend the same
~17 min (multilingual-e5-small, 60 steps on 2 cores) once per α for nothing. Here a row's training is keyed by its
*training key* — the content hash of its training settings with ``interpolate_start`` left out and of the corpus
tables it reads — and the first row of a key to run keeps its fine-tuned model under
``data/experiments/runs/<question>/trained/<key>/`` while a planned row of the same key is still pending; the others
interpolate from it and only score. The kept folder is complete or absent (copied under a temporary name, then
renamed; ``training.json`` written last) and is removed once no pending row needs it — except a search's candidates
when its decision has ``keep_trainings`` (``Question.keeps_training``): their trainings stay for the winner's final
rows and go with ``release_unneeded`` (``polysent experiment release``).

A row that reused a training says so: ``training_from`` names the row that trained it and its training seconds, and
the row's own ``train_seconds`` is what it spent (the interpolation).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from experiments.ledger import RowKey, canonical_hash, read_rows, row_key
from experiments.question import ConditionSpec, Question
from experiments.row_hash import trained_hash, training_view

log = logging.getLogger("polysent.experiments.shared_training")
DONE_FILE = "training.json"  # written last: its presence says the kept training is complete


def training_key(q: Question, condition: ConditionSpec, seed: int, scale: int, tables: dict[str, str]) -> str:
    """The content hash of what a row trains, ``interpolate_start`` left out: rows with equal keys train the same
    weights. ``tables``: kit table name → hash; an objective table counts by the kit table the condition's ``corpora``
    feeds it from (``row_hash.training_view``), so rows on the six- and on the all-language corpora never share."""
    return canonical_hash(training_view(q, replace(condition, interpolate_start=None), seed, scale, tables))


def pending_siblings(q: Question, condition: ConditionSpec, seed: int, scale: int, tables: dict[str, str],
                     results: Path | None = None) -> list[str]:
    """The other conditions planned at ``seed`` and ``scale`` with ``condition``'s training key whose rows are done in
    neither the question's ledger nor ``results`` (where this run writes its rows: the GPU drain's own folder); a
    stale row (trained or scored otherwise than the question now asks) is not done."""
    rows = {row_key(r): r for folder in {q.results, results or q.results} for r in read_rows(folder)}
    key = training_key(q, condition, seed, scale, tables)

    def done(c: ConditionSpec, s: int, sc: int) -> bool:
        row = rows.get(RowKey(c.name, s, sc))
        return row is not None and row.get("trained_hash") == trained_hash(q, c, s, sc, tables)

    return [c.name for c, s, sc in q.planned()
            if (s, sc) == (seed, scale) and c.name != condition.name and not done(c, s, sc)
            and training_key(q, c, s, sc, tables) == key]


def kept_folder(runs: Path, q: Question, key: str) -> Path:
    return runs / q.name / "trained" / key[:20]


def load_kept(folder: Path) -> dict[str, Any] | None:
    """A kept training's record (``training.json``: the row that trained it, its stats and seconds), ``None`` when
    the folder is absent or incomplete."""
    path = folder / DONE_FILE
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def keep(train_dir: Path, folder: Path, record: dict[str, Any]) -> None:
    """Copy the finished training ``train_dir`` (its ``model`` and tables) to ``folder`` under a temporary name, write
    ``training.json``, rename into place. A folder already kept (a sibling row running at the same time on the GPU
    drain kept its own) is left as it is: a row may be reading it."""
    if load_kept(folder) is not None:
        return
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
    try:
        shutil.copytree(train_dir, tmp / "train")
        (tmp / DONE_FILE).write_text(json.dumps(record, indent=1, default=str) + "\n", encoding="utf-8")
        if folder.exists():  # an incomplete folder left by a run that was killed while copying
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("kept the training of %s for %d pending row(s) that interpolate from it: %s", record["row"],
             len(record.get("for", [])), folder)


def release(folder: Path) -> None:
    """Remove a kept training no pending row needs."""
    if folder.exists():
        shutil.rmtree(folder, ignore_errors=True)
        log.info("removed the kept training %s: no pending row needs it", folder)


def kept_trainings(runs: Path, q: Question) -> list[Path]:
    """The question's kept training folders, complete or left incomplete by a killed copy (``.<key>.tmp-…``)."""
    root = runs / q.name / "trained"
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def release_unneeded(runs: Path, q: Question, pending: list[tuple[ConditionSpec, int, int]],
                     tables: dict[str, str], *, dry_run: bool = False) -> tuple[list[Path], list[Path]]:
    """Remove every kept training of ``q`` that none of the ``pending`` rows (condition, seed, scale) would read —
    the trainings a decision keeps for its final table (``DecisionSpec.keep_trainings``) once that table is in —
    and every incomplete one; ``tables``: the kit's table hashes. Returns (removed, kept)."""
    needed = {kept_folder(runs, q, training_key(q, c, seed, scale, tables)) for c, seed, scale in pending}
    removed, kept = [], []
    for folder in kept_trainings(runs, q):
        if folder in needed and load_kept(folder) is not None:
            kept.append(folder)
            continue
        removed.append(folder)
        if not dry_run:
            release(folder)
    return removed, kept
