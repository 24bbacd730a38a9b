"""One pipeline run: validate, set up the data root, execute the DAG, then publish run records and the warehouse.

Used by the Prefect flow (``flows.pipeline``) and by ``--executor local``; both share this bookkeeping so the
warehouse looks the same whichever ran it.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from flows.config import PipelineConfig
from flows.dag import Node, build_dag
from flows.nodes import NodeResult, RunContext
from warehouse.artifacts import ArtifactStore, Outcome
from warehouse.atomic import write_bytes_atomic
from warehouse.catalog import (
    RunRecord,
    mark_dead_runs,
    record_unfinished_run,
    set_current,
    write_duckdb_file,
    write_run_nodes,
)
from warehouse.hashing import FileHashCache, hash_obj
from warehouse.layout import DataRoot

log = logging.getLogger("polysent.flows")

Executor = Callable[[Mapping[str, Node], RunContext], dict[str, NodeResult]]


@dataclass
class RunSummary:
    run_id: str
    results: dict[str, NodeResult]
    root: DataRoot
    seconds: float
    report: Path | None

    @property
    def executed(self) -> list[str]:
        return [n for n, r in self.results.items() if r.outcome is not Outcome.HIT]


def new_run_id() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]


def missing_inputs(nodes: Mapping[str, Node], config_path: Path) -> str | None:
    """What to say when input files of the DAG do not exist (a dump not downloaded yet, a moved file), else None."""
    missing = [f"{n}: {path}" for n, node in sorted(nodes.items()) for path in node.files.values()
               if not Path(path).exists()]
    if not missing:
        return None
    return (f"{config_path}: {len(missing)} input file(s) do not exist (download or fix the paths first; "
            "`polysent plan` shows the nodes they block):\n  " + "\n  ".join(missing))


def run_pipeline(cfg: PipelineConfig, config_path: Path, executor: Executor, force: bool = False,
                 run_id: str | None = None) -> RunSummary:
    t0 = time.perf_counter()
    nodes = build_dag(cfg)
    missing = missing_inputs(nodes, config_path)
    if missing:  # refuse before any node starts, rather than fail halfway through the DAG
        raise FileNotFoundError(missing)
    root = DataRoot.at(cfg.data_root)
    store = ArtifactStore(root)
    store.sweep_tmp()
    killed = mark_dead_runs(root)
    if killed:
        log.info("marked %d earlier run(s) whose process died as 'killed'", killed)
    run_id = run_id or new_run_id()
    record = RunRecord(run_id=run_id, pipeline=cfg.name, config_path=str(config_path),
                       config_hash=hash_obj(cfg.model_dump(mode="json")),
                       started_at=dt.datetime.now(dt.UTC), nodes_total=len(nodes))
    record.write(root)
    hashes = FileHashCache(root.file_hashes)
    ctx = RunContext(store=store, hashes=hashes, run_id=run_id, force=force)
    try:
        results = executor(nodes, ctx)
    except BaseException:
        record.status = "failed"
        record.finished_at = dt.datetime.now(dt.UTC)
        record.seconds = time.perf_counter() - t0
        # Bookkeeping must not replace the error that failed the run: with a full disk (tests/faults) writing the run
        # record fails too, and that second OSError used to surface instead of the node's (naming runs/…parquet).
        try:
            record_unfinished_run(root, record)  # counts the nodes it built before the failure
            hashes.save()
        except OSError as book:
            log.warning("could not record run %s as failed (%s); the next run marks it 'killed'", run_id, book)
        raise
    hashes.save()
    write_run_nodes(root, run_id, [
        {"node": r.node, "stage": r.ref.stage, "artifact_key": r.ref.key, "outcome": r.outcome.value,
         "seconds": round(r.seconds, 3)} for r in results.values()])
    set_current(root, {name: r.ref for name, r in results.items()})
    report = None
    if "report" in results:
        art = results["report"].ref.path
        # the Markdown links its plots relatively: point the copies at the artifact's plots folder
        plots = os.path.relpath(art / "plots", root.reports).replace(os.sep, "/")
        text = (art / "report.md").read_text(encoding="utf-8").replace("](plots/", f"]({plots}/").encode()
        report = root.reports / "latest.md"
        write_bytes_atomic(report, text)
        write_bytes_atomic(root.reports / f"{cfg.name}.md", text)
        if (art / "report.html").exists():  # self-contained (inline SVG)
            html = (art / "report.html").read_bytes()
            write_bytes_atomic(root.reports / "latest.html", html)
            write_bytes_atomic(root.reports / f"{cfg.name}.html", html)
    record.status = "completed"
    record.finished_at = dt.datetime.now(dt.UTC)
    record.nodes_built = sum(r.outcome is not Outcome.HIT for r in results.values())
    record.nodes_hit = sum(r.outcome is Outcome.HIT for r in results.values())
    record.seconds = time.perf_counter() - t0
    record.write(root)
    write_duckdb_file(root)
    return RunSummary(run_id, results, root, record.seconds, report)


def summary_dict(s: RunSummary) -> dict:
    """JSON-able summary of a run (the flow's return value)."""
    return {"run_id": s.run_id, "seconds": round(s.seconds, 2), "executed": s.executed,
            "data_root": str(s.root.root), "report": str(s.report) if s.report else None,
            "nodes": {n: {"outcome": r.outcome.value, "key": r.ref.key[:20], "path": str(r.ref.path)}
                      for n, r in s.results.items()}}
