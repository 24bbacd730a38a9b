"""Evaluation: the ``eval_sets`` node, and one ``evaluate.<name>`` per model evaluated.

The models evaluated: each training run's trained model (``evaluate.<run>``), each ``evaluation.models`` peer
(``evaluate.<name>``), and each run's start model (``encoder.pretrained``) once — by the peer naming the same model,
else by its own ``evaluate.start:<model name>`` node, shared by every run that starts from it (``start_models``).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from contract import StageResult
from flows.config import PipelineConfig
from flows.graph import Node, canonical, folder_files, portable
from models import stage_versions
from models.evaluation.settings import EvaluationSettings
from pipelines.eval_sets import STAGE_VERSION as EVAL_SETS_VERSION
from pipelines.eval_sets import EvalSetsSettings, EvalSources, build_eval_sets
from warehouse.artifacts import ArtifactRef


def run_eval_sets(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any], *, settings: EvalSetsSettings,
                  sources: EvalSources) -> StageResult:
    return build_eval_sets(settings, sources, out)


def run_evaluate(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any], *, settings: EvaluationSettings,
                 run: str, model: str | None, cache_root: Path | None) -> StageResult:
    """``model``: None for a model this pipeline trained (input ``model``), else a local folder or a hub id."""
    from models.evaluation.suite import evaluate_model

    tables = {t: up["eval_sets"].table_path(t) for t in up["eval_sets"].tables}
    if model is None:  # a model trained by this pipeline: its artifact's content hash names it
        path, content, key = up["model"].path / "model", up["model"].content_hash, up["model"].key
    else:  # an external model: a local folder (hashed by the stage) or a hub id
        path, content, key = Path(model) if Path(model).exists() else model, None, None
    return evaluate_model(settings, path, tables, out, run=run, model_hash=content, model_key=key,
                          cache_root=cache_root)


def eval_sets_nodes(cfg: PipelineConfig, upstream: Mapping[str, Node]) -> list[Node]:
    """The evaluation sets, when ``sources.eval`` names any."""
    ev = cfg.sources.eval
    if not ev.configured():
        return []
    return [Node("eval_sets", "eval_sets", EVAL_SETS_VERSION,
                 {"settings": canonical(cfg.corpora.eval_sets), "sources": portable(ev)},
                 partial(run_eval_sets, settings=cfg.corpora.eval_sets, sources=ev), files=ev.files())]


def model_name(model: str | None) -> str | None:
    """A model as the report names it: a hub id as it is; a local folder by its name (its parent's name for the
    ``model`` folder of a ``pkg:`` package); where a folder lives is no part of a cache key."""
    if model is None or not Path(model).exists():
        return model
    path = Path(model)
    return path.parent.name if path.name == "model" else path.name


def start_models(cfg: PipelineConfig) -> dict[str, str]:
    """Start model (``encoder.pretrained``) or peer model → the run name its evaluation carries: the
    ``evaluation.models`` peer naming it, else ``start:<model name>`` (numbered when taken)."""
    by_model = {model: name for name, model in sorted(cfg.evaluation.models.items())}
    for _, ts in sorted(cfg.training.items()):
        model = ts.encoder.pretrained
        if model is not None and model not in by_model:
            taken = {*cfg.training, *cfg.evaluation.models, *by_model.values()}
            label, i = f"start:{model_name(model)}", 2
            while label in taken:
                label, i = f"start:{model_name(model)}#{i}", i + 1
            by_model[model] = label
    return by_model


def evaluate_nodes(cfg: PipelineConfig, upstream: Mapping[str, Node]) -> list[Node]:
    """Every model's evaluation, when ``eval_sets`` is in ``upstream``; a ``ValueError`` names a peer whose name is
    already a training run."""
    if "eval_sets" not in upstream:
        return []
    ecfg = cfg.evaluation
    settings = {k: v for k, v in canonical(ecfg).items() if k != "models"}
    cache_root = cfg.data_root / "cache" / "embeddings" if ecfg.cache else None

    def node(name: str, model: str | None, deps: dict[str, str]) -> Node:
        folder = Path(model) if model is not None else None
        return Node(f"evaluate.{name}", "evaluate", stage_versions.EVALUATE,
                    {"run": name, "model": folder.name if folder is not None and folder.exists() else model,
                     "settings": settings},
                    partial(run_evaluate, settings=ecfg, run=name, model=model, cache_root=cache_root),
                    files=folder_files("model", folder) if folder is not None and folder.is_dir() else {},
                    deps={"eval_sets": "eval_sets", **deps})

    nodes = [node(run_name, None, {"model": f"train.{run_name}"}) for run_name in sorted(cfg.training)]
    for name, model in sorted(ecfg.models.items()):
        if name in cfg.training:
            raise ValueError(f"evaluation.models.{name}: the name is already a training run")
        nodes.append(node(name, model, {}))
    peers = set(ecfg.models.values())
    nodes += [node(name, model, {}) for model, name in start_models(cfg).items() if model not in peers]
    return nodes
