"""A run on a busy machine builds the same bytes as the reference run on a quiet one (issue 21 item 6).

The fault is load: two CPU-burning processes beside a Prefect-executed run (threads, Prefect's event client and its
run-name generator all live in that process). Before ``entity_vectors`` trained in a child process of its own, other
threads' draws from Python's and numpy's process-wide generators could land between Wikipedia2Vec's seeding and its
use, and the artifact's content hash then differed from the reference's (the scale-out test's flake).
``bench/entity_vectors_determinism.py`` repeats the comparison many times; this is its one-shot member of the suite.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from faults.harness import Reference, assert_same_as_reference, fault, run_config, write_fault_config

pytestmark = pytest.mark.faults

BURN = "import time\nend = time.monotonic() + 900\nwhile time.monotonic() < end:\n    sum(i * i for i in range(10_000))"


@contextlib.contextmanager
def cpu_burners(n: int = 2) -> Iterator[list[subprocess.Popen]]:
    procs = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(n)]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=30)


def test_a_prefect_run_beside_cpu_burners_equals_the_quiet_reference(reference: Reference, env: dict[str, str],
                                                                     tmp_path: Path) -> None:
    assert any(key.startswith("entity_vectors") for key in reference.contents), sorted(reference.contents)
    config = write_fault_config(tmp_path / "busy")
    with fault("a busy machine (2 CPU burners beside a Prefect-executed run)"), cpu_burners(2) as burners:
        done = run_config(config, env, executor="prefect")
        assert done.rc == 0, done.explain()
        assert all(p.poll() is None for p in burners), "the load ended before the run did"
        assert_same_as_reference(config.parent / "data", reference)
