"""The Prefect flow: one task per DAG node, submitted in dependency order.

Caching is the node contract's (``warehouse.artifacts``), not Prefect's: Prefect's cache deserialises whole result
files, silently recomputes a deleted one and cannot verify artifacts, so tasks run with ``NO_CACHE`` and return only
small references (paths, keys, hashes). Prefect contributes orchestration: concurrency of independent nodes, states,
retries, logs and schedules.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import PrefectFuture
from prefect.task_runners import ThreadPoolTaskRunner

from flows.config import load_config
from flows.dag import Node, topological
from flows.nodes import NodeResult, RunContext, execute
from flows.run import run_pipeline, summary_dict


@task(cache_policy=NO_CACHE, persist_result=False)
def run_node(node: Node, ctx: RunContext, upstream: Mapping[str, NodeResult]) -> NodeResult:
    """Materialise one node (cache hit, or build under the per-key lock)."""
    return execute(node, {name: r.ref for name, r in upstream.items()}, ctx)


def prefect_executor(nodes: Mapping[str, Node], ctx: RunContext) -> dict[str, NodeResult]:
    """Submit every node once its upstream futures exist; independent nodes run concurrently."""
    futures: dict[str, PrefectFuture] = {}
    for node in topological(nodes):
        upstream = {dep: futures[dep] for dep in node.deps.values()}
        futures[node.name] = run_node.with_options(name=node.stage, task_run_name=node.name).submit(
            node, ctx, upstream)
    return {name: fut.result() for name, fut in futures.items()}


def task_runner(address: str) -> object:
    """A ``DaskTaskRunner`` for ``polysent run --dask [ADDRESS]``: nodes become Dask tasks, so a dump's shards and
    the languages spread over the cluster's workers. ``local`` starts one single-threaded worker process per core.

    Workers must be non-daemonic: a shard node starts its own worker processes (``corpora.wiki.processes``).
    """
    import os

    import dask
    import distributed
    from prefect_dask import DaskTaskRunner

    dask.config.set({"distributed.worker.daemon": False})
    if address != "local":
        return DaskTaskRunner(address=address)
    return DaskTaskRunner(cluster_class=distributed.LocalCluster,
                          cluster_kwargs={"n_workers": os.cpu_count() or 1, "threads_per_worker": 1,
                                          "processes": True, "dashboard_address": None})


@flow(name="polysent-pipeline", persist_result=False, task_runner=ThreadPoolTaskRunner(max_workers=2),
      validate_parameters=True)
def polysent_pipeline(config_path: str, data_root: str | None = None, force: bool = False) -> dict:
    """Run the pipeline a config describes; returns a JSON-able summary (for deployments and schedules)."""
    path = Path(config_path)
    cfg = load_config(path, Path(data_root) if data_root else None)
    summary = run_pipeline(cfg, path, prefect_executor, force=force)
    return summary_dict(summary)
