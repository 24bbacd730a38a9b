"""Executing one node under the content-hash contract, and planning or verifying without executing.

``execute`` turns a ``Node`` plus its upstream artifacts into the input descriptions that enter the cache key
(upstream content hashes; external files' sha256 via the size+mtime hash cache), asks the ``ArtifactStore`` to
materialise it, and points the warehouse views at the result. ``plan`` and ``verified_hits`` compute the same keys
(``node_key``, the function ``ArtifactStore.materialize`` keys by) and look them up with the same verification
(``ArtifactStore.lookup``: manifest whole, every file checked), without building anything.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flows.fault_pause import with_fault_pause
from flows.graph import Node, topological
from warehouse.artifacts import ArtifactRef, ArtifactStore, Outcome, StageResult, cache_key
from warehouse.artifacts import _input_hash as input_hash
from warehouse.catalog import record_current
from warehouse.hashing import FileHashCache

log = logging.getLogger("polysent.flows")


@dataclass
class RunContext:
    store: ArtifactStore
    hashes: FileHashCache
    run_id: str
    force: bool = False


@dataclass(frozen=True)
class NodeResult:
    node: str
    ref: ArtifactRef
    outcome: Outcome
    seconds: float


def describe_inputs(node: Node, upstream: Mapping[str, ArtifactRef], hashes: FileHashCache) -> dict[str, dict]:
    inputs: dict[str, dict[str, Any]] = {}
    for name, dep in sorted(node.deps.items()):
        ref = upstream[dep]
        inputs[name] = {"kind": "artifact", "stage": ref.stage, "key": ref.key, "content_hash": ref.content_hash,
                        "path": str(ref.path)}
    for name, path in sorted(node.files.items()):
        try:
            digest = hashes.digest(path)
        except FileNotFoundError:
            raise FileNotFoundError(f"node {node.name}: input file {path} does not exist") from None
        inputs[name] = {"kind": "file", "path": str(path), **digest}
    return inputs


def node_key(node: Node, inputs: Mapping[str, Mapping[str, Any]]) -> str:
    """The cache key ``ArtifactStore.materialize`` gives ``node`` for these input descriptions (``describe_inputs``):
    one function, so a lookup made ahead of a run finds exactly the artifact the run would."""
    return cache_key(node.stage, node.version, node.config, {k: input_hash(k, v) for k, v in inputs.items()})


def execute(node: Node, upstream: Mapping[str, ArtifactRef], ctx: RunContext) -> NodeResult:
    inputs = describe_inputs(node, upstream, ctx.hashes)
    by_input = {name: upstream[dep] for name, dep in node.deps.items()}

    def build(out: Path) -> StageResult:
        return node.run(out, by_input, {"run_id": ctx.run_id, "node": node.name})

    ref, outcome, seconds = ctx.store.materialize(
        node=node.name, stage=node.stage, version=node.version, config=node.config, inputs=inputs,
        build=with_fault_pause(node.name, build, ctx.store.root.root), run_id=ctx.run_id, force=ctx.force,
    )
    record_current(ctx.store.root, node.name, ref)
    return NodeResult(node.name, ref, outcome, seconds)


def execute_local(nodes: Mapping[str, Node], ctx: RunContext) -> dict[str, NodeResult]:
    """Run the DAG in topological order in this process, without Prefect (tests, bare machines)."""
    results: dict[str, NodeResult] = {}
    for node in topological(nodes):
        up = {d: results[d].ref for d in node.deps.values()}
        results[node.name] = execute(node, up, ctx)
    return results


@dataclass(frozen=True)
class PlanRow:
    node: str
    stage: str
    key: str | None
    status: str  # hit | miss | rebuild | blocked
    detail: str


def plan(nodes: Mapping[str, Node], store: ArtifactStore, hashes: FileHashCache) -> list[PlanRow]:
    """Each node's key and whether it would be a cache hit, computed without running anything.

    A node whose upstream is not a hit cannot know its key yet (keys chain through content hashes): ``blocked``.
    """
    known: dict[str, ArtifactRef] = {}
    rows: list[PlanRow] = []
    for node in topological(nodes):
        waiting = [d for d in node.deps.values() if d not in known]
        if waiting:
            rows.append(PlanRow(node.name, node.stage, None, "blocked", f"after {', '.join(sorted(set(waiting)))}"))
            continue
        try:
            inputs = describe_inputs(node, {d: known[d] for d in node.deps.values()}, hashes)
        except FileNotFoundError as exc:
            rows.append(PlanRow(node.name, node.stage, None, "error", str(exc)))
            continue
        key = node_key(node, inputs)
        ref, reason = store.lookup(node.stage, key)
        if ref is not None:
            known[node.name] = ref
            rows.append(PlanRow(node.name, node.stage, key, "hit", str(ref.path)))
        elif reason:
            rows.append(PlanRow(node.name, node.stage, key, "rebuild", reason))
        else:
            rows.append(PlanRow(node.name, node.stage, key, "miss", str(store.root.artifact_dir(node.stage, key))))
    return rows


def verified_hits(nodes: Mapping[str, Node], store: ArtifactStore,
                  hashes: FileHashCache) -> dict[str, NodeResult] | None:
    """Every node as a verified cache hit, in topological order, or None as soon as one is not.

    The check a run makes for each node before it builds (``node_key`` through upstream content hashes, then
    ``ArtifactStore.lookup``: the manifest whole and every file verified), made for the whole DAG up front, so that a
    run with nothing to do can say so without starting an orchestrator. Logs each hit as a run does, but only when
    all are hits (otherwise the run that follows logs them itself). A missing input file is "not a hit" here: the
    run that follows reports it.
    """
    t0 = time.perf_counter()
    results: dict[str, NodeResult] = {}
    for node in topological(nodes):
        try:
            inputs = describe_inputs(node, {d: results[d].ref for d in node.deps.values()}, hashes)
        except FileNotFoundError:
            return None
        key = node_key(node, inputs)
        t_node = time.perf_counter()
        ref, reason = store.lookup(node.stage, key)
        if ref is None:
            log.debug("%s: not a verified hit (%s); the pipeline runs", node.name, reason or "no artifact")
            return None
        results[node.name] = NodeResult(node.name, ref, Outcome.HIT, time.perf_counter() - t_node)
    for r in results.values():
        log.info("%s: cache hit %s (%s)", r.node, r.ref.key[:12], r.ref.path)
    log.debug("verified %d nodes as cache hits in %.2fs", len(results), time.perf_counter() - t0)
    return results
