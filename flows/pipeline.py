"""The Prefect flow: one task per DAG node, submitted in dependency order.

Caching is the node contract's (``warehouse.artifacts``), not Prefect's: Prefect's cache deserialises whole result
files, silently recomputes a deleted one and cannot verify artifacts, so tasks run with ``NO_CACHE`` and return only
small references (paths, keys, hashes). Prefect contributes orchestration: concurrency of independent nodes, states,
retries, logs and schedules.

What a Prefect user sees (UI, ``prefect flow-run ls``, the client):
- flow runs named after the config and the local start time (``default 2026-11-26 09:12:03``; the node subflow
  ``… nodes``) instead of Prefect's random ``happy-monkey`` names;
- a node that was a verified cache hit ends in the state ``Cached`` (type COMPLETED, as Prefect names its own cache
  hits), a built node in ``Completed``; the node subflow and the pipeline flow end ``Cached`` when every node was a
  hit (a scheduled run with nothing to do), else ``Completed``;
- artifacts of the pipeline flow run: ``<config>-headline`` (table: the report's headline numbers), ``<config>-report``
  (link to the run's self-contained ``report.html``) and ``<config>-run`` (markdown: run id, nodes built, the report and
  warehouse paths). ``polysent run`` with nothing to build starts no flow at all (``flows/run.py:run_if_unchanged``).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.futures import PrefectFuture
from prefect.states import Completed, State
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from flows.config import ConfigError, Execution, PipelineConfig, load_config
from flows.graph import Node, topological
from flows.nodes import NodeResult, RunContext, execute
from flows.run import report_headlines, run_pipeline, summary_dict
from warehouse.artifacts import Outcome

log = logging.getLogger("polysent.flows")

CACHED = "Cached"  # the state name Prefect gives its own cache hits (a COMPLETED type): the UI shows it apart


@task(cache_policy=NO_CACHE, persist_result=False)
def run_node(node: Node, ctx: RunContext, upstream: Mapping[str, NodeResult]) -> NodeResult | State:
    """Materialise one node (cache hit, or build under the per-key lock); a verified hit ends ``Cached``."""
    result = execute(node, {name: r.ref for name, r in upstream.items()}, ctx)
    if result.outcome is Outcome.HIT:
        return Completed(name=CACHED, data=result,
                         message=f"verified cache hit {result.ref.key[:20]} ({result.ref.path})")
    return result


def prefect_executor(nodes: Mapping[str, Node], ctx: RunContext) -> dict[str, NodeResult]:
    """Submit every node once its upstream futures exist; independent nodes run concurrently."""
    futures: dict[str, PrefectFuture] = {}
    for node in topological(nodes):
        upstream = {dep: futures[dep] for dep in node.deps.values()}
        futures[node.name] = run_node.with_options(name=node.stage, task_run_name=node.name).submit(
            node, ctx, upstream)
    return {name: fut.result() for name, fut in futures.items()}


def task_runner(execution: Execution) -> TaskRunner:
    """The task runner the config's ``execution`` section names.

    ``threads``: Prefect's thread pool (``workers`` nodes at once). ``dask``: prefect-dask's ``DaskTaskRunner``, each
    node a Dask task, so a dump's shards and the languages spread over the workers — on a running scheduler
    (``address``) or on a ``LocalCluster`` of ``workers`` single-threaded processes. Dask workers are made
    non-daemonic: a shard node starts its own worker processes (``corpora.wiki.processes``).
    """
    if execution.runner == "threads":
        return ThreadPoolTaskRunner(max_workers=execution.workers)
    try:
        import dask
        import distributed
        from prefect_dask import DaskTaskRunner
    except ImportError as exc:
        raise RuntimeError("execution.runner: dask needs the extra 'dask' (pip install 'polysent[dask]', i.e. "
                           f"prefect-dask): {exc}") from exc
    dask.config.set({"distributed.worker.daemon": False})
    if execution.address is not None:
        return DaskTaskRunner(address=execution.address)
    return DaskTaskRunner(cluster_class=distributed.LocalCluster,
                          cluster_kwargs={"n_workers": execution.workers, "threads_per_worker": 1,
                                          "processes": True, "dashboard_address": None})


def _config(config_path: str, data_root: str | None, execution: dict | None) -> PipelineConfig:
    cfg = load_config(Path(config_path), Path(data_root) if data_root else None)
    if execution is not None:
        cfg = cfg.model_copy(update={"execution": Execution.model_validate(execution)})
    return cfg


# -- how the runs look in Prefect -----------------------------------------------------------------------------
def config_name(config_path: str | Path) -> str:
    """The config's ``name`` (what the warehouse's ``runs.pipeline`` says), else the file's stem (an invalid config
    still gets a readable flow run name; the flow itself then fails with the config error)."""
    try:
        return load_config(Path(config_path)).name
    except (ConfigError, OSError, ValueError):
        return Path(config_path).stem


def _run_name(suffix: str = "") -> str:
    from prefect.runtime import flow_run

    name = config_name(flow_run.parameters.get("config_path", "polysent"))
    return f"{name} {dt.datetime.now().strftime('%Y-%m-%d %H:%M:%S')}{suffix}"


def pipeline_run_name() -> str:
    """``{config name} {YYYY-MM-DD HH:MM:SS}`` (local time): the flow run's name in the UI and in ``prefect flow-run
    ls``, so a run is found by its config and when it started."""
    return _run_name()


def nodes_run_name() -> str:
    """The node subflow's name: the pipeline run's, with `` nodes``."""
    return _run_name(" nodes")


def artifact_key(name: str, what: str) -> str:
    """A Prefect artifact key (lowercase letters, digits, dashes) for this config: ``<config>-<what>``. Prefect keeps
    every version under one key, so a config's headline history is one artifact in the UI."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "polysent"
    return f"{slug}-{what}"


def publish_artifacts(cfg: PipelineConfig, summary: Mapping[str, Any]) -> list[str]:
    """The run as Prefect artifacts of the current flow run: the report's headline table, a link to its HTML and a
    markdown summary (run id, nodes built, paths). Returns the keys created."""
    keys: list[str] = []
    report_node = summary["nodes"].get("report")
    built = summary["executed"]
    lines = [f"**polysent run `{summary['run_id']}`** — config `{cfg.name}`, {len(summary['nodes'])} nodes, "
             f"{len(built)} built ({', '.join(built) if built else 'all verified cache hits'}).", ""]
    if report_node is not None:
        folder = Path(report_node["path"])
        html = folder / "report.html"
        if html.exists():
            key = artifact_key(cfg.name, "report")
            copy = Path(summary["data_root"]) / "reports" / f"{cfg.name}.html"
            create_link_artifact(link=html.as_uri(), link_text=f"report of {cfg.name} ({html})", key=key,
                                 description=f"The HTML report of run {summary['run_id']} (self-contained; the "
                                             f"latest one of this config is also at {copy})")
            keys.append(key)
            lines.append(f"- HTML report: `{html}`")
        md = folder / "report.md"
        rows = report_headlines(md.read_text(encoding="utf-8")) if md.exists() else []
        if rows:
            key = artifact_key(cfg.name, "headline")
            create_table_artifact(table=rows, key=key,
                                  description=f"Headline numbers of run {summary['run_id']} (the report's table; "
                                              f"{md})")
            keys.append(key)
    if summary.get("report"):
        lines.append(f"- Markdown report: `{summary['report']}`")
    lines.append(f"- Warehouse: `{summary['data_root']}/warehouse.duckdb` (`polysent sql \"SELECT * FROM runs\"`)")
    key = artifact_key(cfg.name, "run")
    create_markdown_artifact(markdown="\n".join(lines), key=key, description=f"polysent run {summary['run_id']}")
    keys.append(key)
    return keys


def _final(summary: dict) -> dict | State:
    """A flow's return: ``Cached`` when no node was built, so a no-op scheduled run reads as one in the UI."""
    if summary["executed"]:
        return summary
    return Completed(name=CACHED, data=summary, message=f"all {len(summary['nodes'])} nodes were verified cache hits")


class _FailureReportedOnce(logging.Filter):
    """Drops Prefect's console copies of a failed node — the task run's and each flow run's error with its traceback
    (three tracebacks of one error) — since the node's own log line names the node and its error once
    (``warehouse.artifacts``). Prefect's API still records them for its UI; ``-v`` keeps them on the console too."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno >= logging.ERROR and record.name.startswith(("prefect.task_runs",
                                                                                "prefect.flow_runs")))


def import_model_libraries_before_node_threads(cfg: PipelineConfig) -> None:
    """Where the DAG trains, evaluates or mines, torch and transformers are imported here, before the task runner's
    threads start: two nodes importing either at once fail (``models.import_before_threads``)."""
    if cfg.training or cfg.evaluation.models or cfg.mining:
        from models.import_before_threads import import_model_libraries_now

        import_model_libraries_now()


def report_failures_once() -> None:
    """Install ``_FailureReportedOnce`` on Prefect's console handler (the root logger's, set up by Prefect when a flow
    runs); idempotent; nothing with ``-v``."""
    if logging.getLogger("polysent").isEnabledFor(logging.DEBUG):
        return
    for handler in logging.getLogger().handlers:
        if type(handler).__name__ == "PrefectConsoleHandler" and \
                not any(isinstance(f, _FailureReportedOnce) for f in handler.filters):
            handler.addFilter(_FailureReportedOnce())


# -- the flows ----------------------------------------------------------------------------------------------------
@flow(name="polysent-nodes", persist_result=False, flow_run_name=nodes_run_name)
def build_nodes(config_path: str, data_root: str | None = None, force: bool = False,
                execution: dict | None = None) -> dict | State:
    """The DAG's nodes as tasks, on the task runner the caller set from ``execution`` (``with_options``)."""
    report_failures_once()
    cfg = _config(config_path, data_root, execution)
    import_model_libraries_before_node_threads(cfg)
    return _final(summary_dict(run_pipeline(cfg, Path(config_path), prefect_executor, force=force)))


@flow(name="polysent-pipeline", persist_result=False, validate_parameters=True, flow_run_name=pipeline_run_name)
def polysent_pipeline(config_path: str, data_root: str | None = None, force: bool = False,
                      execution: dict | None = None) -> dict | State:
    """Run the pipeline a config describes; returns a JSON-able summary (for deployments and schedules).

    The nodes run in a subflow whose task runner the config's ``execution`` section chooses (``execution`` given
    here, e.g. by ``polysent run --dask``, overrides it), so a served or deployed pipeline scales out as configured.
    The run's report headline and paths are published as Prefect artifacts of this flow run.
    """
    report_failures_once()
    cfg = _config(config_path, data_root, execution)
    runner = task_runner(cfg.execution)
    summary = build_nodes.with_options(task_runner=runner)(config_path, data_root, force, execution)
    try:
        publish_artifacts(cfg, summary)
    except Exception as exc:  # the run is done and recorded; a UI extra must not fail it
        log.warning("could not publish the run's Prefect artifacts: %s: %s", type(exc).__name__, exc)
    return _final(summary)
