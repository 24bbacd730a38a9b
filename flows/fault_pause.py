"""Fault injection for ``tests/faults``: stop a node's build at a known point so a test can ``kill -9`` the run there.

``POLYSENT_FAULT_PAUSE=<node pattern>[@<point>]`` makes a node that is being *built* (not a cache hit) stop at a
known point inside its build (``flows.nodes.execute`` wraps every build with ``with_fault_pause``).
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
from collections.abc import Callable
from pathlib import Path

from warehouse.artifacts import StageResult

log = logging.getLogger("polysent.flows")

FAULT_PAUSE_ENV = "POLYSENT_FAULT_PAUSE"
FAULT_PAUSE_SECONDS_ENV = "POLYSENT_FAULT_PAUSE_SECONDS"  # a blocked node gives up waiting after this (default 600)
FAULT_MARKER = ".fault-paused"


def with_fault_pause(name: str, build: Callable[[Path], StageResult], data_root: Path
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
