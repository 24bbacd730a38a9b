"""Training: the shared ``tokenizer`` (only when a run trains from scratch) and one ``train.<run>`` per training run.

A run's node depends on the corpus node of every table its objectives read, on the tokenizer when it has no
pretrained start, on ``eval_sets`` when it keeps a dev checkpoint, and on the content of its local model folders (a
pretrained start point, a teacher). The torch code (``models.training.train``, ``models.training.tokenizer``) is
imported inside the run functions: building the DAG — planning, validating — never pays for torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from contract import StageResult
from flows.config import PipelineConfig
from flows.graph import Node, canonical, folder_files
from flows.stages.corpora import corpus_tables
from models import stage_versions
from models.settings import TokenizerSettings, TrainSettings
from warehouse.artifacts import ArtifactRef


def run_tokenizer(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any], *,
                  settings: TokenizerSettings) -> StageResult:
    from models.training.tokenizer import train_tokenizer

    return train_tokenizer(settings, {t: up[t].table_path(t) for t in up}, out)


def run_train(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any], *, settings: TrainSettings,
              run_name: str, tables: dict[str, str], checkpoints: Path) -> StageResult:
    """``tables``: corpus table → the input (upstream node) writing it; ``checkpoints``: the folder holding every
    run's checkpoints, outside the artifact."""
    from models.training.components import refuse_empty_corpora
    from models.training.train import train
    from warehouse.hashing import hash_obj
    from warehouse.manifest import TIMINGS_DIR

    paths = {t: up[node].table_path(t) for t, node in tables.items()}
    refuse_empty_corpora(settings, paths, run_name)  # before the model, teachers or a teacher cache load
    dev = ({t: up["eval_sets"].table_path(t) for t in up["eval_sets"].tables if t in ("eval_tatoeba", "eval_sts")}
           if settings.dev is not None else {})
    # checkpoints keyed by everything the run depends on: a killed run resumes, a changed one starts afresh
    key = hash_obj({"settings": canonical(settings),
                    "inputs": {n: r.content_hash for n, r in sorted(up.items())}})
    return train(settings, paths, out, run_name=run_name,
                 tokenizer_dir=up["tokenizer"].path / "tokenizer" if "tokenizer" in up else None, dev_tables=dev,
                 checkpoint_dir=checkpoints / f"{run_name}-{key[:16]}", keep_checkpoints_after=False,
                 tables_dir=TIMINGS_DIR)


def model_folders(ts: TrainSettings) -> dict[str, Path]:
    """Local model folders a training run reads (a pretrained start point, a teacher): their files enter its key."""
    found = {"encoder": ts.encoder.pretrained} | {f"{role}{i}": model for i, o in enumerate(ts.objectives)
                                                  for role, model in o.models().items()}
    return {role: Path(v) for role, v in found.items() if v and Path(v).is_dir()}


def portable_train(ts: TrainSettings) -> dict[str, Any]:
    """A training run's settings for its cache key, with local model folders cut to their names (their content
    enters through the node's files)."""
    data = canonical(ts)
    if data["encoder"].get("pretrained") and Path(data["encoder"]["pretrained"]).is_dir():
        data["encoder"]["pretrained"] = Path(data["encoder"]["pretrained"]).name
    for o, settings in zip(data["objectives"], ts.objectives, strict=True):
        for role, model in settings.models().items():
            if Path(model).is_dir():
                o[role] = Path(model).name
    return data


def tokenizer_nodes(cfg: PipelineConfig, upstream: Mapping[str, Node]) -> list[Node]:
    """The tokenizer, trained on every corpus table in ``upstream``, when some run starts from scratch."""
    if all(ts.encoder.pretrained is not None for ts in cfg.training.values()):
        return []
    return [Node("tokenizer", "tokenizer", stage_versions.TOKENIZER, canonical(cfg.tokenizer),
                 partial(run_tokenizer, settings=cfg.tokenizer), deps=corpus_tables(upstream))]


def train_nodes(cfg: PipelineConfig, upstream: Mapping[str, Node]) -> list[Node]:
    """``train.<run>`` for every training run; a ``ValueError`` names the run whose inputs no node produces."""
    # corpus table → the node writing it (xnli_groups also writes MPCL's "+Single" pairs)
    table_nodes = {**corpus_tables(upstream), "xnli_single_pairs": "xnli_groups"}
    if "entity_vectors" in upstream:
        table_nodes["entity_vectors"] = "entity_vectors"
    nodes = []
    for run_name, ts in sorted(cfg.training.items()):
        missing = [t for t in ts.tables() if table_nodes.get(t) not in upstream]
        if missing:
            raise ValueError(f"training.{run_name}.objectives use {missing}, but no source produces them")
        if ts.dev is not None and "eval_sets" not in upstream:
            raise ValueError(f"training.{run_name}.dev needs evaluation sets (sources.eval)")
        if ts.interpolate_start is not None and ts.encoder.pretrained is None:
            raise ValueError(f"training.{run_name}.interpolate_start: {ts.interpolate_start} interpolates with the "
                             "start model, but the run has none; expected encoder.pretrained (or no "
                             "interpolate_start)")
        tables = {t: table_nodes[t] for t in ts.tables()}
        deps = {n: n for n in tables.values()}
        if ts.encoder.pretrained is None:
            deps["tokenizer"] = "tokenizer"
        if ts.dev is not None:
            deps["eval_sets"] = "eval_sets"
        files = {k: v for role, folder in model_folders(ts).items()
                 for k, v in folder_files(f"model/{role}", folder).items()}
        nodes.append(Node(f"train.{run_name}", "train", stage_versions.TRAIN,
                          {"run": run_name, "settings": portable_train(ts)},
                          partial(run_train, settings=ts, run_name=run_name, tables=tables,
                                  checkpoints=cfg.data_root / "cache" / "checkpoints"),
                          files=files, deps=deps))
    return nodes
