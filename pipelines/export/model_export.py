"""``polysent export-model RUN DIR``: the model a user takes home, in one folder, published at once.

``DIR`` receives, from the data root's warehouse:

* the trained sentence-transformers folder (the ``train`` artifact's ``model/``: weights, tokenizer, modules) —
  the checkpoint the run's newest evaluation scored;
* ``README.md``: the model card (``pipelines.export.model_card``), with ``polysent_card.json`` holding the same facts
  for programs;
* ``mteb/``: the run's results that mteb computes the same way, in mteb's results layout
  (``pipelines.export.mteb_results``; ``mteb.ResultCache(DIR / "mteb")`` reads them), when there are any.

Everything is written into a temporary folder beside ``DIR`` and renamed into place (``warehouse.atomic``), so
``DIR`` is never seen half-written; a non-empty ``DIR`` is refused unless ``force`` (then replaced whole).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.export.model_card import (
    CARD_FILE,
    FACTS_FILE,
    CardFacts,
    ObjectiveInfo,
    card_facts,
    render_card,
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


def export_model(root: Any, run: str, out: Path, *,
                 describe_objectives: Callable[[Sequence[Mapping[str, Any]]], list[ObjectiveInfo]],
                 force: bool = False, model_name: str | None = None) -> ModelExport:
    """Publish training run ``run`` of the data root ``root`` (a ``warehouse.layout.DataRoot``) as ``out``.

    Raises FileExistsError for a non-empty ``out`` without ``force``, ``model_card.CardError`` for an unknown run or
    a damaged artifact, ValueError for a model name that is not ``organisation/model``."""
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
    mteb_files: list[str] = []
    with atomic_dir(out) as tmp:
        shutil.copytree(model, tmp, dirs_exist_ok=True)
        if facts.results and history is not None:
            results = run_results(history, run)
            files, skipped = task_results(results)
            if files:
                models = sorted(set(results.rows["model"].drop_nulls()))
                rev = default_revision(models[0] if len(models) == 1 else None)
                _, written, _ = write_mteb_files(results, tmp / MTEB_DIR, files, skipped, name, rev, models)
                mteb_files = [f"{MTEB_DIR}/{w}" for w in written]
        (tmp / CARD_FILE).write_text(render_card(facts, out.name), encoding="utf-8")
        (tmp / FACTS_FILE).write_text(facts.to_json(), encoding="utf-8")
    log.info("export-model %s: train artifact %s → %s (card, %d mteb file(s))", run, facts.train_key[:20], out,
             len(mteb_files))
    return ModelExport(out, facts, mteb_files)


__all__ = ["ModelExport", "eval_history", "export_model", "train_artifact"]
