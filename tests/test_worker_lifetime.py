"""Worker processes die with the process that started them (``pipelines/worker_lifetime.py``, issue 21 item 3).

Each test starts an owner process that starts a pool, waits until its workers exist, ``kill -9``s only the owner
(not its process group, as a user's ``kill -9 <pid>`` does) and checks that no worker survives. Without the
protection these workers block on their task pipe for ever (the ``forkserver`` one keeps its server alive, too).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc and prctl")

OWNER = textwrap.dedent("""
    import multiprocessing as mp, os, sys, time
    from concurrent.futures import ProcessPoolExecutor
    from pipelines.worker_lifetime import die_with, fork_children_die_with_me

    def pid(_):
        time.sleep(0.2)  # every worker takes a task
        return os.getpid()

    if __name__ == "__main__":
        kind, method = sys.argv[1], sys.argv[2]
        if kind == "extract":  # the pool of the Wikipedia extraction (method chosen there: fork, single-threaded)
            from pipelines.wikipedia.extract import _pool
            pool = _pool(2)
            pids = set(pool.map(pid, range(4)))
        elif kind == "executor":
            protect = dict(initializer=die_with, initargs=(os.getpid(),)) if sys.argv[3] == "1" else {}
            pool = ProcessPoolExecutor(2, mp_context=mp.get_context(method), **protect)
            pids = set(pool.map(pid, range(4)))
        else:  # a multiprocessing.Pool made by code without an initializer hook (wikipedia2vec's training)
            if sys.argv[3] == "1":
                fork_children_die_with_me()
            pool = mp.get_context(method).Pool(2)
            pids = set(pool.map(pid, range(4)))
            pool.map_async(time.sleep, [120, 120])  # busy: an idle Pool worker would see its task pipe close
            time.sleep(0.5)
        print(" ".join(map(str, sorted(pids))), flush=True)
        time.sleep(120)  # the workers now block on their task pipe, as in a paused or stuck run
""")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            pass
    return out


def kill_owner_and_find_survivors(tmp: Path, *args: str, wait: float = 10.0) -> tuple[list[int], list[int]]:
    """Start the owner, kill -9 it once its workers reported; (its pool's processes, those still alive after
    ``wait`` seconds). Survivors are killed before returning."""
    script = tmp / "owner.py"  # a file, not -c: spawn and forkserver workers import the task function from it
    script.write_text(OWNER, encoding="utf-8")
    owner = subprocess.Popen([sys.executable, str(script), *args], cwd=REPO, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        line = owner.stdout.readline()
        workers = [int(p) for p in line.split()]
        assert len(workers) == 2, line
        helpers = [p for p in _children(owner.pid) if p not in workers]  # forkserver, resource tracker
        spawned = sorted(set(workers + helpers + [c for h in helpers for c in _children(h)]))
    finally:
        owner.kill()  # SIGKILL, the owner only
        owner.wait()
    deadline = time.monotonic() + wait
    while (alive := [p for p in spawned if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    for p in alive:
        os.kill(p, signal.SIGKILL)
    return spawned, alive


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_executor_workers_die_with_their_owner(method: str, tmp_path: Path) -> None:
    spawned, alive = kill_owner_and_find_survivors(tmp_path, "executor", method, "1")
    assert len(spawned) >= 2
    assert not alive, f"{method}: processes of the pool survive their owner's kill -9: {alive}"


def test_without_the_initializer_the_workers_survive(tmp_path: Path) -> None:
    """The failure the protection removes (so the tests above can fail): forkserver workers keep the server alive."""
    spawned, alive = kill_owner_and_find_survivors(tmp_path, "executor", "forkserver", "0", wait=1.5)
    assert set(alive) == set(spawned), (spawned, alive)


def test_extraction_pool_workers_die_with_their_owner(tmp_path: Path) -> None:
    _, alive = kill_owner_and_find_survivors(tmp_path, "extract", "-")
    assert not alive, f"extraction workers survive: {alive}"


def test_forked_pool_without_initializer_hook_dies_with_its_owner(tmp_path: Path) -> None:
    spawned, alive = kill_owner_and_find_survivors(tmp_path, "pool", "fork", "1")
    assert len(spawned) == 2 and not alive, (spawned, alive)


def _exit_of(code: str) -> int:
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                          timeout=60).returncode


def test_a_worker_whose_owner_died_before_it_armed_the_signal_kills_itself() -> None:
    """The race ``die_with`` closes: the owner died between start and ``prctl``; the worker must not live on."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(gone.stdout)
    assert _exit_of(f"from pipelines.worker_lifetime import die_with; die_with({dead}); print('survived')") \
        == -signal.SIGKILL
    assert _exit_of("import os; from pipelines.worker_lifetime import die_with; die_with(os.getppid())") == 0
