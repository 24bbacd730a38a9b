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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flows.fault_pause import with_fault_pause
from flows.graph import Node, topological
from warehouse.artifacts import ArtifactRef, ArtifactStore, Outcome, StageResult, input_key
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
    return input_key(node.stage, node.version, node.config, inputs)


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


@dataclass(frozen=True)
class Check:
    """One node's key and lookup, made without building: ``status`` hit | miss | rebuild | blocked | error."""

    node: Node
    key: str | None
    status: str
    detail: str
    ref: ArtifactRef | None = None
    seconds: float = 0.0


def checks(nodes: Mapping[str, Node], store: ArtifactStore, hashes: FileHashCache) -> Iterator[Check]:
    """Each node in topological order with the key a run would give it (``node_key`` through upstream content hashes)
    and ``ArtifactStore.lookup``'s verdict (manifest whole, every file verified). A node whose upstream is not a hit
    cannot know its key yet (keys chain through content hashes): ``blocked``. Lazy, so a caller may stop early."""
    known: dict[str, ArtifactRef] = {}
    for node in topological(nodes):
        waiting = [d for d in node.deps.values() if d not in known]
        if waiting:
            yield Check(node, None, "blocked", f"after {', '.join(sorted(set(waiting)))}")
            continue
        t0 = time.perf_counter()
        try:
            inputs = describe_inputs(node, {d: known[d] for d in node.deps.values()}, hashes)
        except FileNotFoundError as exc:
            yield Check(node, None, "error", str(exc))
            continue
        key = node_key(node, inputs)
        ref, reason = store.lookup(node.stage, key)
        if ref is not None:
            known[node.name] = ref
            yield Check(node, key, "hit", str(ref.path), ref, time.perf_counter() - t0)
        elif reason:
            yield Check(node, key, "rebuild", reason)
        else:
            yield Check(node, key, "miss", str(store.root.artifact_dir(node.stage, key)))


def plan(nodes: Mapping[str, Node], store: ArtifactStore, hashes: FileHashCache) -> list[PlanRow]:
    """Each node's key and whether it would be a cache hit, computed without running anything (``checks``)."""
    return [PlanRow(c.node.name, c.node.stage, c.key, c.status, c.detail) for c in checks(nodes, store, hashes)]


def verified_hits(nodes: Mapping[str, Node], store: ArtifactStore,
                  hashes: FileHashCache) -> dict[str, NodeResult] | None:
    """Every node as a verified cache hit, in topological order, or None as soon as one is not.

    The check a run makes for each node before it builds (``checks``), made for the whole DAG up front, so that a run
    with nothing to do can say so without starting an orchestrator. Logs each hit as a run does, but only when all are
    hits (otherwise the run that follows logs them itself). A missing input file is "not a hit" here: the run that
    follows reports it.
    """
    t0 = time.perf_counter()
    results: dict[str, NodeResult] = {}
    for c in checks(nodes, store, hashes):
        if c.ref is None:
            log.debug("%s: not a verified hit (%s: %s); the pipeline runs", c.node.name, c.status, c.detail)
            return None
        results[c.node.name] = NodeResult(c.node.name, c.ref, Outcome.HIT, c.seconds)
    for r in results.values():
        log.info("%s: cache hit %s (%s)", r.node, r.ref.key[:12], r.ref.path)
    log.debug("verified %d nodes as cache hits in %.2fs", len(results), time.perf_counter() - t0)
    return results
