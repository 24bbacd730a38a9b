"""One pipeline run: validate, set up the data root, execute the DAG, then publish run records and the warehouse.

Used by the Prefect flow (``flows.pipeline``), by ``--executor local`` and by the no-op shortcut
(``run_if_unchanged``); all share this bookkeeping so the warehouse looks the same whichever ran it.

Why the shortcut: a run where every node is a verified cache hit does no work, yet starting Prefect's ephemeral API
server costs ~10–20 s on a small machine — a user waited 20 s to learn that nothing changed. ``run_if_unchanged``
makes the check every node makes before it builds (same keys, same verification: ``flows.nodes.verified_hits``) for
the whole DAG, without importing Prefect; when all are hits it records the run like any other (``runs``,
``run_nodes``, catalog, report copies) and Prefect is never started. Anything that has to be built still runs as a
Prefect flow, and served or deployed runs (``flows.schedule``) always do.
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
from flows.dag import build_dag
from flows.graph import Node
from flows.nodes import NodeResult, RunContext, verified_hits
from pipelines.hub import settle_offline_mode
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
    unchanged: bool = False  # every node a verified hit, found before any orchestrator started (no Prefect flow run)

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


def run_if_unchanged(cfg: PipelineConfig, config_path: Path, nodes: Mapping[str, Node] | None = None
                     ) -> RunSummary | None:
    """The run, recorded, when every node of the DAG is a verified cache hit; None (nothing written but the data
    root's folders) when any node would have to be built — the caller then runs the pipeline (see the module
    docstring)."""
    t0 = time.perf_counter()
    nodes = build_dag(cfg) if nodes is None else nodes
    if missing_inputs(nodes, config_path):
        return None  # the run that follows refuses with the message
    root = DataRoot.at(cfg.data_root)
    hashes = FileHashCache(root.file_hashes)
    hits = verified_hits(nodes, ArtifactStore(root), hashes)
    if hits is None:
        return None
    hashes.save()  # digests re-computed for touched input files: the next check skips them
    summary = run_pipeline(cfg, config_path, lambda _nodes, _ctx: hits, nodes=nodes, reuse_warehouse=True)
    summary.unchanged = True
    summary.seconds = time.perf_counter() - t0
    log.info("nothing changed: all %d nodes are verified cache hits, so Prefect was not started (no flow run); "
             "run %s is recorded in the warehouse's runs table", len(hits), summary.run_id)
    return summary


def _views_snapshot(root: DataRoot) -> tuple[str, int] | None:
    """``views.sql``'s text and mtime, or None when there is none."""
    try:
        return root.views_sql.read_text(encoding="utf-8"), root.views_sql.stat().st_mtime_ns
    except FileNotFoundError:
        return None


def _warehouse_file_current(root: DataRoot, before: tuple[str, int]) -> bool:
    """Whether ``warehouse.duckdb`` already holds the views ``set_current`` just wrote to ``views.sql``: the text is
    unchanged and the DuckDB file was written after the old ``views.sql`` (a run that died between its last node and
    its warehouse rewrite leaves ``views.sql`` newer: rewritten then). The file is touched so that the next no-op
    sees it as current again (``views.sql`` was just rewritten)."""
    text, mtime_before = before
    try:
        fresh = (root.views_sql.read_text(encoding="utf-8") == text
                 and root.duckdb_file.stat().st_mtime_ns >= mtime_before)
    except FileNotFoundError:
        return False
    if fresh:
        os.utime(root.duckdb_file)
    return fresh


@dataclass
class OpenRun:
    """A run under way: its data root, artifact store, input-file digests, record (``runs``) and the context nodes
    are built in."""

    root: DataRoot
    store: ArtifactStore
    hashes: FileHashCache
    record: RunRecord
    ctx: RunContext


def run_pipeline(cfg: PipelineConfig, config_path: Path, executor: Executor, force: bool = False,
                 run_id: str | None = None, nodes: Mapping[str, Node] | None = None,
                 reuse_warehouse: bool = False) -> RunSummary:
    """Run ``nodes`` (default: the config's DAG) with ``executor`` and publish the run's records and warehouse.

    ``reuse_warehouse`` (a run that built nothing): ``warehouse.duckdb`` is rewritten only when its views changed (the
    ``runs`` and ``run_nodes`` views read their folders, so the new run's rows appear without a rewrite).
    """
    t0 = time.perf_counter()
    nodes = build_dag(cfg) if nodes is None else nodes
    refuse_missing_inputs(nodes, config_path)
    run = open_run(cfg, config_path, nodes, run_id, force)
    settle_offline_mode()  # once, before the executor starts the threads that build nodes
    results = build_nodes(run, nodes, executor, t0)
    record_node_outcomes(run, results)
    views_before = _views_snapshot(run.root) if reuse_warehouse else None
    set_current(run.root, {name: r.ref for name, r in results.items()})
    report = copy_report(run.root, results, cfg.name)
    close_run(run, results, t0)
    write_warehouse(run.root, views_before)
    return RunSummary(run.record.run_id, results, run.root, run.record.seconds, report)


def refuse_missing_inputs(nodes: Mapping[str, Node], config_path: Path) -> None:
    """Refuse before any node starts, rather than fail halfway through the DAG: FileNotFoundError naming every input
    file of ``nodes`` that does not exist."""
    missing = missing_inputs(nodes, config_path)
    if missing:
        raise FileNotFoundError(missing)


def open_run(cfg: PipelineConfig, config_path: Path, nodes: Mapping[str, Node], run_id: str | None,
             force: bool) -> OpenRun:
    """The data root made ready (half-written artifacts swept, earlier runs whose process died marked ``killed``) and
    the run recorded as started."""
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
    return OpenRun(root, store, hashes, record, RunContext(store=store, hashes=hashes, run_id=run_id, force=force))


def build_nodes(run: OpenRun, nodes: Mapping[str, Node], executor: Executor, t0: float) -> dict[str, NodeResult]:
    """Every node's result from ``executor``; when it fails, the run is recorded as failed and the error raised."""
    try:
        return executor(nodes, run.ctx)
    except BaseException:
        record = run.record
        record.status = "failed"
        record.finished_at = dt.datetime.now(dt.UTC)
        record.seconds = time.perf_counter() - t0
        # Bookkeeping must not replace the error that failed the run: with a full disk (tests/faults) writing the run
        # record fails too, and that second OSError used to surface instead of the node's (naming runs/…parquet).
        try:
            record_unfinished_run(run.root, record)  # counts the nodes it built before the failure
            run.hashes.save()
        except OSError as book:
            log.warning("could not record run %s as failed (%s); the next run marks it 'killed'", record.run_id,
                        book)
        raise


def record_node_outcomes(run: OpenRun, results: Mapping[str, NodeResult]) -> None:
    """The input-file digests saved for the next run, and one ``run_nodes`` row per node."""
    run.hashes.save()
    write_run_nodes(run.root, run.record.run_id, [
        {"node": r.node, "stage": r.ref.stage, "artifact_key": r.ref.key, "outcome": r.outcome.value,
         "seconds": round(r.seconds, 3)} for r in results.values()])


def copy_report(root: DataRoot, results: Mapping[str, NodeResult], pipeline: str) -> Path | None:
    """The report node's Markdown (and HTML) copied to ``reports/latest.*`` and ``reports/<pipeline>.*``; the path of
    ``latest.md``, or None when the run has no report node."""
    if "report" not in results:
        return None
    art = results["report"].ref.path
    # the Markdown links its plots relatively: point the copies at the artifact's plots folder
    plots = os.path.relpath(art / "plots", root.reports).replace(os.sep, "/")
    text = (art / "report.md").read_text(encoding="utf-8").replace("](plots/", f"]({plots}/").encode()
    report = root.reports / "latest.md"
    write_bytes_atomic(report, text)
    write_bytes_atomic(root.reports / f"{pipeline}.md", text)
    if (art / "report.html").exists():  # self-contained (inline SVG)
        html = (art / "report.html").read_bytes()
        write_bytes_atomic(root.reports / "latest.html", html)
        write_bytes_atomic(root.reports / f"{pipeline}.html", html)
    return report


def close_run(run: OpenRun, results: Mapping[str, NodeResult], t0: float) -> None:
    """The run recorded as completed, with the nodes it built and the nodes it found."""
    record = run.record
    record.status = "completed"
    record.finished_at = dt.datetime.now(dt.UTC)
    record.nodes_built = sum(r.outcome is not Outcome.HIT for r in results.values())
    record.nodes_hit = sum(r.outcome is Outcome.HIT for r in results.values())
    record.seconds = time.perf_counter() - t0
    record.write(run.root)


def write_warehouse(root: DataRoot, views_before: tuple[str, int] | None) -> None:
    """``warehouse.duckdb`` rewritten, unless ``views_before`` (a run that built nothing) shows it holds the views
    ``set_current`` just wrote already."""
    if views_before is not None and _warehouse_file_current(root, views_before):
        log.debug("%s holds these views already; not rewritten", root.duckdb_file)
    else:
        write_duckdb_file(root)


def summary_dict(s: RunSummary) -> dict:
    """JSON-able summary of a run (the flow's return value)."""
    return {"run_id": s.run_id, "seconds": round(s.seconds, 2), "executed": s.executed,
            "data_root": str(s.root.root), "report": str(s.report) if s.report else None, "unchanged": s.unchanged,
            "nodes": {n: {"outcome": r.outcome.value, "key": r.ref.key[:20], "path": str(r.ref.path)}
                      for n, r in s.results.items()}}


HEADLINE_PARAGRAPH = "Headline numbers"  # the report's lead-in to its headline table (pipelines/report/results.py)


def report_headlines(markdown: str) -> list[dict[str, str]]:
    """The rows of the report's headline table (the first table after the paragraph that starts with "Headline
    numbers"), one dict per row keyed by the header; [] when the report has none (no evaluation in the config).

    Read from the report as written rather than recomputed from ``eval_results``, so what Prefect shows is exactly the
    table the report shows (formatting, Δ columns and all), as plain text. Parsed with markdown-it-py (GFM tables; a
    dependency of rich), which handles escaped pipes and inline markup in cells.
    """
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    start = next((i for i, t in enumerate(tokens) if t.type == "inline" and t.content.startswith(HEADLINE_PARAGRAPH)),
                 None)
    if start is None:
        return []
    rows: list[list[str]] = []
    for tok in tokens[start + 1:]:
        if tok.type in ("paragraph_open", "heading_open") and not rows:
            return []  # another block before any table: this report's paragraph has no table under it
        if tok.type == "tr_open":
            rows.append([])
        elif tok.type == "inline" and rows:  # the cell as plain text (`code`, **bold**, [links](…) unwrapped)
            rows[-1].append("".join(c.content for c in tok.children or () if c.type in ("text", "code_inline")))
        elif tok.type == "table_close":
            break
    if not rows:
        return []
    header, *body = rows
    return [dict(zip(header, row, strict=False)) for row in body]
