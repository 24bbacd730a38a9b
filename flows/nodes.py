"""Executing one node under the content-hash contract, and planning without executing.

``execute`` turns a ``Node`` plus its upstream artifacts into the input descriptions that enter the cache key
(upstream content hashes; external files' sha256 via the size+mtime hash cache), asks the ``ArtifactStore`` to
materialise it, and points the warehouse views at the result.

Fault injection (``tests/faults``): ``POLYSENT_FAULT_PAUSE=<node pattern>[@<point>]`` makes a node that is being
*built* (not a cache hit) stop at a known point inside its build, so that a test can ``kill -9`` the run exactly there.
The pattern is an ``fnmatch`` pattern on node names (``train.*``, ``wiki_shard.en.0000``); the point is

- ``written`` (default): the stage function has written all its files into its temporary folder; manifest and
  publication have not happened yet;
- ``start``: the temporary folder exists, the stage function has not started;
- any other value is a glob relative to the data root (``cache/checkpoints/*/step-*``): a watcher thread stops the
  whole process (``SIGSTOP``) as soon as a matching path exists while the stage function runs — a point inside the
  stage's own code (after its first checkpoint, after its first embedding-cache shard).

When paused, the node writes ``<its temporary folder>/.fault-paused`` (JSON: node, point, pid) and logs it; a blocked
node continues when that file is deleted (``start``/``written``), a stopped process when the file is deleted and it
gets ``SIGCONT``. The marker is gone before the build continues, so it never reaches an artifact. Unset (always,
outside tests), the hook does nothing.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flows.dag import Node, topological
from warehouse.artifacts import ArtifactRef, ArtifactStore, Outcome, StageResult, cache_key
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


def execute(node: Node, upstream: Mapping[str, ArtifactRef], ctx: RunContext) -> NodeResult:
    inputs = describe_inputs(node, upstream, ctx.hashes)
    by_input = {name: upstream[dep] for name, dep in node.deps.items()}

    def build(out: Path) -> StageResult:
        return node.run(out, by_input, {"run_id": ctx.run_id, "node": node.name})

    ref, outcome, seconds = ctx.store.materialize(
        node=node.name, stage=node.stage, version=node.version, config=node.config, inputs=inputs,
        build=_with_fault_pause(node.name, build, ctx.store.root.root), run_id=ctx.run_id, force=ctx.force,
    )
    record_current(ctx.store.root, node.name, ref)
    return NodeResult(node.name, ref, outcome, seconds)


# -- fault injection (see the module docstring) ----------------------------------------------------------------------
FAULT_PAUSE_ENV = "POLYSENT_FAULT_PAUSE"
FAULT_PAUSE_SECONDS_ENV = "POLYSENT_FAULT_PAUSE_SECONDS"  # a blocked node gives up waiting after this (default 600)
FAULT_MARKER = ".fault-paused"


def _with_fault_pause(name: str, build: Callable[[Path], StageResult], data_root: Path
                      ) -> Callable[[Path], StageResult]:
    spec = os.environ.get(FAULT_PAUSE_ENV, "")
    pattern, _, point = spec.partition("@")
    if not pattern or not fnmatch.fnmatchcase(name, pattern):
        return build
    point = point or "written"

    def paused(out: Path) -> StageResult:
        if point == "start":
            _block(out, name, point)
            return build(out)
        if point == "written":
            result = build(out)
            _block(out, name, point)
            return result
        done = threading.Event()
        watcher = threading.Thread(target=_stop_when_exists, args=(data_root, point, out, name, done),
                                   name=f"fault-pause-{name}", daemon=True)
        watcher.start()
        try:
            return build(out)
        finally:
            done.set()
            watcher.join()

    return paused


def _mark(out: Path, name: str, point: str) -> Path:
    marker = out / FAULT_MARKER
    marker.write_text(json.dumps({"node": name, "point": point, "pid": os.getpid()}), encoding="utf-8")
    log.warning("fault hook: %s paused at %s (pid %d); marker %s", name, point, os.getpid(), marker)
    return marker


def _block(out: Path, name: str, point: str) -> None:
    """Wait until the test deletes the marker (or kills this process)."""
    marker = _mark(out, name, point)
    deadline = time.monotonic() + float(os.environ.get(FAULT_PAUSE_SECONDS_ENV, "600"))
    while marker.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    marker.unlink(missing_ok=True)
    log.warning("fault hook: %s continues", name)


def _stop_when_exists(data_root: Path, pattern: str, out: Path, name: str, done: threading.Event) -> None:
    """Stop this process (SIGSTOP) once ``data_root/pattern`` matches while the stage function still runs."""
    while not done.wait(0.01):
        if next(iter(data_root.glob(pattern)), None) is not None and not done.is_set():
            marker = _mark(out, name, pattern)
            os.kill(os.getpid(), signal.SIGSTOP)
            # this thread may run on for a moment before the stop takes hold: the marker stays until the test
            # releases the process (deletes the marker, then sends SIGCONT)
            while marker.exists():
                time.sleep(0.01)
            log.warning("fault hook: %s continues", name)
            return


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
        key = cache_key(node.stage, node.version, node.config,
                        {k: v.get("content_hash") or v["sha256"] for k, v in inputs.items()})
        ref, reason = store.lookup(node.stage, key)
        if ref is not None:
            known[node.name] = ref
            rows.append(PlanRow(node.name, node.stage, key, "hit", str(ref.path)))
        elif reason:
            rows.append(PlanRow(node.name, node.stage, key, "rebuild", reason))
        else:
            rows.append(PlanRow(node.name, node.stage, key, "miss", str(store.root.artifact_dir(node.stage, key))))
    return rows
