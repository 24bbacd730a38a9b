"""A run on a busy machine builds the same bytes as the reference run on a quiet one (issue 21 item 6), and a
``polysent run`` on a machine loaded to 4× its cores (CPU and I/O burners) succeeds: Prefect's API server is waited
for as long as the load stretches its start-up, or the run goes on in-process and says which.

The fault is load: two CPU-burning processes beside a Prefect-executed run (threads, Prefect's event client and its
run-name generator all live in that process). Before ``entity_vectors`` trained in a child process of its own, other
threads' draws from Python's and numpy's process-wide generators could land between Wikipedia2Vec's seeding and its
use, and the artifact's content hash then differed from the reference's (the scale-out test's flake).
``bench/entity_vectors_determinism.py`` repeats the comparison many times; this is its one-shot member of the suite.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from faults.harness import Reference, assert_same_as_reference, fault, polysent, run_config, write_fault_config

pytestmark = pytest.mark.faults

BURN = "import time\nend = time.monotonic() + 900\nwhile time.monotonic() < end:\n    sum(i * i for i in range(10_000))"
# writes and fsyncs 8 MiB at a time into a scratch file, over and over (the I/O half of the load)
IO_BURN = ("import os, sys, time\nend = time.monotonic() + 900\nblock = os.urandom(8 << 20)\n"
           "while time.monotonic() < end:\n    with open(sys.argv[1], 'wb') as f:\n"
           "        for _ in range(8):\n            f.write(block)\n            f.flush()\n"
           "            os.fsync(f.fileno())\n")


@contextlib.contextmanager
def cpu_burners(n: int = 2, io: int = 0, scratch: Path | None = None) -> Iterator[list[subprocess.Popen]]:
    procs = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(n)]
    procs += [subprocess.Popen([sys.executable, "-c", IO_BURN, str((scratch or Path("/tmp")) / f"io-burn-{i}")])
              for i in range(io)]
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


def test_a_prefect_run_on_a_machine_loaded_to_four_times_its_cores_succeeds(env: dict[str, str],
                                                                            tmp_path: Path) -> None:
    cores = os.cpu_count() or 1
    config = write_fault_config(tmp_path / "loaded")
    with fault(f"a machine loaded to 4× its {cores} cores ({3 * cores} CPU and {cores} I/O burners) during a "
               "Prefect-executed run"), cpu_burners(3 * cores, io=cores, scratch=tmp_path) as burners:
        time.sleep(20)  # let the load average climb before the orchestrator starts
        # a run 4× as slow as on a quiet machine: the harness's usual limit is for quiet runs
        done = polysent("run", str(config), "--executor", "prefect", env=env, timeout=1800)
        assert done.rc == 0, done.explain()
        assert all(p.poll() is None for p in burners), "the load ended before the run did"
    log = done.log
    assert "Traceback" not in log and "executed" in log
    if "running the same DAG in-process without Prefect instead" in log:
        print("orchestrator: fell back to the in-process run")
    elif "Prefect's API server answered after" in log:
        print("orchestrator: waited for Prefect's API server beyond its quiet-machine timeout")
