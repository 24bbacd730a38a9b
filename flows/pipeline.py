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
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from flows.config import Execution, PipelineConfig, load_config
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


@flow(name="polysent-nodes", persist_result=False)
def build_nodes(config_path: str, data_root: str | None = None, force: bool = False,
                execution: dict | None = None) -> dict:
    """The DAG's nodes as tasks, on the task runner the caller set from ``execution`` (``with_options``)."""
    cfg = _config(config_path, data_root, execution)
    return summary_dict(run_pipeline(cfg, Path(config_path), prefect_executor, force=force))


@flow(name="polysent-pipeline", persist_result=False, validate_parameters=True)
def polysent_pipeline(config_path: str, data_root: str | None = None, force: bool = False,
                      execution: dict | None = None) -> dict:
    """Run the pipeline a config describes; returns a JSON-able summary (for deployments and schedules).

    The nodes run in a subflow whose task runner the config's ``execution`` section chooses (``execution`` given
    here, e.g. by ``polysent run --dask``, overrides it), so a served or deployed pipeline scales out as configured.
    """
    cfg = _config(config_path, data_root, execution)
    runner = task_runner(cfg.execution)
    return build_nodes.with_options(task_runner=runner)(config_path, data_root, force, execution)
