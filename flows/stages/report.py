"""The ``report`` node: every corpus, evaluation and training run of the DAG in one Markdown and HTML report.

Its inputs are named by role (``corpus:<table>``, ``eval:<node>``, ``train:<run>``); what it says of each trained run
— its start model, and per objective the corpora it reads and the languages it keeps — is in its config, so a changed
start model or objective re-renders the report.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from contract import StageResult
from flows.config import PipelineConfig
from flows.graph import Node, canonical
from flows.stages.corpora import corpus_tables
from flows.stages.evaluate import model_name, start_models
from models.objective_registry import objective_languages, objective_tables
from pipelines.report import STAGE_VERSION as REPORT_VERSION
from pipelines.report import ReportSettings, TrainedRun, build_report
from warehouse.artifacts import ArtifactRef


def run_report(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any], *, settings: ReportSettings,
               pipeline: str, trained: dict[str, dict[str, Any]], peers: list[str]) -> StageResult:
    corpora = {}
    for name, ref in up.items():
        if name.startswith("corpus:"):
            for table, rel in ref.tables.items():
                # several corpus nodes write a ``leakage`` table: keep each under its own name
                corpora[f"leakage@{name}" if table == "leakage" else table] = ref.path / rel
    evals = {name: ref.table_path("eval_results") for name, ref in up.items() if name.startswith("eval:")}
    runs = {name: TrainedRun(t["start"], t["pretrained"], {k: up[f"train:{name}"].path / rel for k, rel
                                                           in up[f"train:{name}"].tables.items()},
                             [(tuple(tables), tuple(langs)) for tables, langs in t["sources"]])
            for name, t in trained.items()}
    return build_report(settings, corpora, evals, pipeline, out, runs, peers)


def report_nodes(cfg: PipelineConfig, upstream: Mapping[str, Node]) -> list[Node]:
    """The report over every corpus, evaluation and training node in ``upstream`` (none when there are none)."""
    evaluated = "eval_sets" in upstream
    starts = start_models(cfg) if evaluated else {}
    trained = {name: {"start": starts[ts.encoder.pretrained] if ts.encoder.pretrained is not None and evaluated
                      else None,
                      "pretrained": model_name(ts.encoder.pretrained),
                      "sources": [[list(objective_tables(o)), list(objective_languages(o))] for o in ts.objectives]}
               for name, ts in sorted(cfg.training.items())}
    deps = {**{f"corpus:{t}": n for t, n in corpus_tables(upstream).items()},
            **{f"eval:{n}": n for n, node in upstream.items() if node.stage == "evaluate"},
            **{f"train:{r}": f"train.{r}" for r in trained}}
    if not deps:
        return []
    peers = sorted(cfg.evaluation.models)
    return [Node("report", "report", REPORT_VERSION,
                 {"settings": canonical(cfg.report), "pipeline": cfg.name, "runs": trained, "peers": peers},
                 partial(run_report, settings=cfg.report, pipeline=cfg.name, trained=trained, peers=peers),
                 deps=deps)]
