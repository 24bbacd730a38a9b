"""``polysent export-model RUN DIR``: the model a user takes home, in one folder, published at once.

``DIR`` receives, from the data root's warehouse:

* the trained sentence-transformers folder (the ``train`` artifact's ``model/``: weights, tokenizer, modules) —
  the checkpoint the run's newest evaluation scored;
* ``README.md``: the model card (``pipelines.export.model_card``), with ``polysent_card.json`` holding the same facts
  for programs;
* ``mteb/``: the run's results that mteb computes the same way, in mteb's results layout
  (``pipelines.export.mteb_results``; ``mteb.ResultCache(DIR / "mteb")`` reads them), when there are any.

The model files then pass through ``portable`` (the caller's, ``models.export_files.write_portable``, the writer
``polysent convert-model`` uses too), so the folder loads in every transformers version the format promises — not
only the one that trained it: the train artifact itself is left as it is (its bytes are its content hash, which later
cache keys read).

With ``interpolate_start`` α (``--interpolate-start``), the folder holds (1 − α)·start + α·trained instead of the
trained weights (WiSE-FT; the caller passes the interpolation, ``models.training.interpolation``, since this package
never imports torch): the start is the folder the run trained from, checked against the sha256 its train manifest
recorded. The card then names α and both parents; its results are the parents' (the pipeline never scored the new
weights), so it has no ``model-index`` and no ``mteb/`` files.

Everything is written into a temporary folder beside ``DIR`` and renamed into place (``warehouse.atomic``), so
``DIR`` is never seen half-written; a non-empty ``DIR`` is refused unless ``force`` (then replaced whole). Every
file of ``DIR`` is world-readable (0644, folders 0755).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.export.card_facts import CardFacts, ObjectiveInfo
from pipelines.export.limitations import limitations
from pipelines.export.model_card import (
    CARD_FILE,
    FACTS_FILE,
    CardError,
    card_facts,
    render_card,
    start_model_files,
    train_artifact,
)
from pipelines.export.mteb_results import (
    default_revision,
    eval_history,
    run_results,
    task_results,
    write_mteb_files,
)

log = logging.getLogger("polysent.pipelines.export")
MTEB_DIR = "mteb"


@dataclass
class ModelExport:
    """What ``export_model`` published: the folder, its card facts, and the mteb files (relative to the folder)."""

    folder: Path
    facts: CardFacts
    mteb_files: list[str]


# (start folder, trained folder, α, output folder, start name, trained name) → the lineage written
Interpolate = Callable[[Path, Path, float, Path, str, str], dict[str, Any]]
# the model folder, rewritten in place to load everywhere → what it changed
Portable = Callable[[Path], Sequence[str]]


def export_model(root: Any, run: str, out: Path, *,
                 describe_objectives: Callable[[Sequence[Mapping[str, Any]]], list[ObjectiveInfo]],
                 force: bool = False, model_name: str | None = None, interpolate_start: float | None = None,
                 interpolate: Interpolate | None = None, portable: Portable | None = None) -> ModelExport:
    """Publish training run ``run`` of the data root ``root`` (a ``warehouse.layout.DataRoot``) as ``out``; with
    ``interpolate_start`` α, the interpolation of its start and its trained weights, written by ``interpolate``; the
    model files made loadable everywhere by ``portable``.

    Raises FileExistsError for a non-empty ``out`` without ``force``, ``model_card.CardError`` for an unknown run, a
    damaged artifact or a start that cannot be interpolated with, ValueError for a model name that is not
    ``organisation/model`` or an α outside [0, 1]."""
    from warehouse.atomic import atomic_dir

    out = Path(out).absolute()
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise FileExistsError(f"{out} exists and is not empty; choose another folder or pass --force to replace it")
    name = model_name or f"polysent/{run}"
    if "/" not in name:
        raise ValueError(f"model name {name!r}: expected 'organisation/model' (the Hub's and mteb's form)")
    history = eval_history(root)
    facts = card_facts(root.artifacts, history, run, describe_objectives=describe_objectives, model_name=name)
    model = root.artifacts / "train" / facts.train_key[:20] / "model"
    if not (model / "modules.json").is_file():
        raise FileNotFoundError(f"{model}: no sentence-transformers folder (modules.json) in the train artifact")
    start = _interpolation_start(root.artifacts, facts, interpolate_start, interpolate)
    mteb_files: list[str] = []
    with atomic_dir(out) as tmp:
        if start is not None and interpolate is not None and interpolate_start is not None:
            lineage = interpolate(start, model, interpolate_start, tmp,
                                  str(facts.base_model.get("hub_id") or start.name), run)
            facts.interpolation = {**lineage, "where": "export", "evaluated": False}
            facts.model_index, facts.mteb_skipped = [], {}  # the results are the parents', not these weights'
            facts.limitations = limitations(facts, run_results(history, run).rows
                                            if facts.results and history is not None else None)
        else:
            shutil.copytree(model, tmp, dirs_exist_ok=True)
        for change in portable(tmp) if portable is not None else ():
            log.info("export-model %s: %s", run, change)
        if facts.results and history is not None and start is None:
            results = run_results(history, run)
            files, skipped = task_results(results)
            if files:
                models = sorted(set(results.rows["model"].drop_nulls()))
                rev = default_revision(models[0] if len(models) == 1 else None)
                _, written, _ = write_mteb_files(results, tmp / MTEB_DIR, files, skipped, name, rev, models)
                mteb_files = [f"{MTEB_DIR}/{w}" for w in written]
        (tmp / CARD_FILE).write_text(render_card(facts, out.name), encoding="utf-8")
        (tmp / FACTS_FILE).write_text(facts.to_json(), encoding="utf-8")
        readable(tmp)
    log.info("export-model %s: train artifact %s → %s (card, %d mteb file(s))", run, facts.train_key[:20], out,
             len(mteb_files))
    return ModelExport(out, facts, mteb_files)


def _interpolation_start(artifacts: Path, facts: CardFacts, alpha: float | None,
                         interpolate: Interpolate | None) -> Path | None:
    """The start folder to interpolate with (``None`` without ``alpha``), checked: α in [0, 1], a run with a start
    that is not already interpolated, the start's weights still those the run trained from."""
    if alpha is None:
        return None
    if interpolate is None:
        raise ValueError("interpolate_start needs the interpolation function (models.training.interpolation)")
    if isinstance(alpha, bool) or not 0.0 <= float(alpha) <= 1.0:
        raise ValueError(f"--interpolate-start {alpha}: expected a number in [0, 1] (0: the start, 1: the trained "
                         "model)")
    if facts.interpolation:
        raise CardError(f"training run {facts.run!r} already exports the interpolation at α = "
                        f"{facts.interpolation.get('alpha')} (training.{facts.run}.interpolate_start); export it "
                        "without --interpolate-start, or change that setting")
    manifest = artifacts / "train" / facts.train_key[:20] / "manifest.json"
    folder, sha = start_model_files(json.loads(manifest.read_text("utf-8")).get("inputs") or {})
    if folder is None:
        raise CardError(f"training run {facts.run!r} has no start model (encoder.pretrained) to interpolate with: "
                        f"{manifest} lists no model/encoder/* input")
    start = Path(folder)
    weights = start / "model.safetensors"
    if not weights.is_file():
        raise CardError(f"{weights}: the start model the run trained from is gone (expected its weights there)")
    if sha and _sha256(weights) != sha:
        raise CardError(f"{weights}: changed since the run trained from it (sha256 recorded in {manifest}: "
                        f"{sha[:16]}…); interpolation needs the same start")
    return start


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def readable(root: Path) -> None:
    """Files 0644, folders 0755 below ``root``: a published model is read by other users and services."""
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), 0o755)
        for f in filenames:
            if not os.path.islink(os.path.join(dirpath, f)):
                os.chmod(os.path.join(dirpath, f), 0o644)


__all__ = ["Interpolate", "ModelExport", "Portable", "eval_history", "export_model", "readable", "train_artifact"]
