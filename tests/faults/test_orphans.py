"""kill -9 of the run's main process only — a user's ``kill -9 <pid>``, not the process group — while worker processes
exist: none of them survives it, and a rerun ends equal to an uninterrupted run (issue 21 item 3).

Before ``pipelines/worker_lifetime.py`` the extraction workers of a killed run stayed blocked on their task pipe for
ever (~190 MB each, ``processes`` of them per run); under ``forkserver`` they also kept the server and multiprocessing's
resource tracker alive. The kill lands at a moment the test sees on /proc (no fault hook: its watcher thread would
change the start method that the extraction picks): while the extraction pool of the English dump runs (``fork``
with the local executor, ``forkserver`` on Prefect's threads), while the Wikipedia2Vec training child runs, and on a
Dask LocalCluster (the nannies live in the killed process; the extraction pool inside a Dask worker).

Prefect's API server (the ``uvicorn`` subprocess that ``--executor prefect`` needs when no ``PREFECT_API_URL`` is
set) is in the check too: ``flows/prefect_server.py`` starts it itself, with the parent-death signal armed, instead of
letting Prefect start its ephemeral server (which only an orderly exit stops).
"""

from __future__ import annotations

import bz2
import contextlib
import os
import re
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO, contents, corpus_config_dict, write_config
from wiki_chain import split_dump_xml, write_dump

from faults.harness import (
    Background,
    Reference,
    assert_same_as_reference,
    fault,
    run_config,
    run_statuses,
    snapshot,
)
from flows.prefect_server import APP as PREFECT_SERVER_APP

pytestmark = [pytest.mark.faults,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc, Linux parent-death signal")]

SURVIVAL_WAIT = 15.0  # seconds a killed run's processes get to die
PREFECT_SERVER = PREFECT_SERVER_APP  # in the command line of the API server flows/prefect_server.py starts


COPIES = 40  # the sample's pages this many times (renamed): the extraction pool lives long enough to be caught


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The English sample dump's pages ``COPIES`` times (titles and ids made unique), as a multistream bz2 of one
    page per stream; one file for every run of the module (lineage records input paths)."""
    head, pages, tail = split_dump_xml(bz2.decompress(
        (REPO / "sample" / "wikipedia" / "enwiki-sample.xml.bz2").read_bytes()))
    copies = [re.sub(rb"<id>(\d+)</id>", lambda m, k=k: b"<id>%d</id>" % (int(m.group(1)) + k * 10_000_000),
                     re.sub(rb"<title>([^<]*)</title>", rb"<title>\1 %d</title>" % k, page) if k else page)
              for k in range(COPIES) for page in pages]
    xml = tmp_path_factory.mktemp("orphan-dump") / "enwiki-pages-articles-multistream.xml.bz2"
    write_dump(head + b"".join(copies) + tail, xml, multistream=True, pages_per_stream=1)
    return xml


def orphan_config(folder: Path, dump: Path, dask: bool = False) -> Path:
    """The default DAG's corpora (no training: seconds) with ``dump`` as the English dump, cut into 4 KiB work items
    for 2 extraction processes, so that the shard node runs a process pool."""
    folder.mkdir(parents=True, exist_ok=True)
    cfg = corpus_config_dict(folder / "data")
    cfg["name"] = "orphans"
    cfg["sources"]["wikipedia"]["dumps"]["en"] = str(dump)
    cfg["corpora"]["wiki"].update(processes=2, range_bytes=4096)
    if dask:
        cfg["execution"] = {"runner": "dask", "workers": 2}
    return write_config(folder / "orphans.yaml", cfg)


@pytest.fixture(scope="module")
def orphan_reference(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str], dump: Path) -> Reference:
    config = orphan_config(tmp_path_factory.mktemp("orphan-reference"), dump)
    t0 = time.perf_counter()
    done = run_config(config, env)
    assert done.rc == 0, done.explain()
    data_root = config.parent / "data"
    return Reference(config, data_root, contents(data_root), snapshot(data_root), time.perf_counter() - t0)


# -- the process tree -----------------------------------------------------------------------------------------------
Proc = tuple[int, int, str, int]  # pid, ppid, command line, start time (clock ticks: tells a reused pid apart)


def _stats() -> dict[int, tuple[int, int]]:
    """pid → (parent pid, start time) of every live process: one read of /proc/<pid>/stat each (cheap enough to
    poll every few milliseconds, which catching an extraction pool of ~0.1 s needs)."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[0] != "Z":
                found[int(stat.parent.name)] = (int(fields[1]), int(fields[19]))
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants(root: int) -> list[Proc]:
    stats = _stats()
    tree, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, start) in stats.items():
            if ppid == parent:
                tree.append((pid, ppid, _cmdline(pid), start))
                frontier.append(pid)
    return tree


def _still_alive(p: Proc) -> bool:
    now = _stats().get(p[0])
    return now is not None and now[1] == p[3]


def _is_fork_worker(p: Proc, tree: list[Proc], main_cmd: str) -> bool:
    return p[2] == main_cmd


def _is_forkserver_worker(p: Proc, tree: list[Proc], main_cmd: str) -> bool:
    servers = {q[0] for q in tree if "multiprocessing.forkserver" in q[2]}
    return p[1] in servers


def _is_training_child(p: Proc, tree: list[Proc], main_cmd: str) -> bool:
    """The Wikipedia2Vec training child once it runs a pool (so it is past its start, where it arms its signal)."""
    return "_train_child" in p[2] and any(q[1] == p[0] for q in tree)


Ready = Callable[[Proc, list[Proc], str], bool]


class MissedWindow(Exception):
    """The run's workers ended before the main process could be frozen with them alive; nothing was killed."""


ATTEMPTS = 6  # runs started before a missed window fails the test (3 were all missed once on a loaded machine)


def kill_main_when(run: Background, is_worker: Ready, count: int, freeze: bool = True,
                   freeze_workers: bool = False) -> tuple[list[Proc], list[Proc]]:
    """Wait until ``count`` processes of the run's tree are workers, freeze the main process (SIGSTOP, so nothing
    shuts the pool down), SIGKILL the main pid alone, wait; (the tree at the kill, its survivors).

    ``freeze_workers`` stops the workers and their children too: a stand-in for a worker that is still busy (the
    sample's Wikipedia2Vec training ends in a second by itself; a real one takes hours). Only the kernel's
    parent-death signal can end a stopped process, so this checks that it was armed."""
    main = run.proc.pid
    main_cmd = Path(f"/proc/{main}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")

    def workers() -> list[Proc]:
        tree = descendants(main)
        return [p for p in tree if is_worker(p, tree, main_cmd)]

    deadline = time.monotonic() + 300
    while len(workers()) < count:  # every few ms: the extraction pool of the dump lives ~0.5 s
        if run.proc.poll() == 0:  # the pool came and went between two polls (a loaded machine): run afresh
            raise MissedWindow(f"the run ended before {count} worker processes were seen at once")
        if run.proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"the run ended (rc {run.proc.returncode}) or timed out before {count} worker "
                                 f"processes were seen:\n{run.log()[-3000:]}")
        time.sleep(0.002)
    if freeze:
        os.kill(main, signal.SIGSTOP)
    tree = descendants(main)
    if len([p for p in tree if is_worker(p, tree, main_cmd)]) < count:
        # the pool ended between the poll that saw it and the freeze (a loaded machine): nothing was killed yet, so
        # the caller starts the run afresh
        if freeze:
            os.kill(main, signal.SIGCONT)
        raise MissedWindow(f"the workers were gone by the freeze: {tree}")
    if freeze_workers:
        busy = {p[0] for p in tree if is_worker(p, tree, main_cmd)}
        for p in tree:
            if p[0] in busy or p[1] in busy:
                os.kill(p[0], signal.SIGSTOP)
                busy.add(p[0])
    os.kill(main, signal.SIGKILL)  # the main pid only: the workers are not in the signal's reach
    run.proc.wait(timeout=30)
    ours = tree  # every process of the run, Prefect's API server included
    deadline = time.monotonic() + SURVIVAL_WAIT
    while (alive := [p for p in ours if _still_alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return tree, alive


def _clean_up(run: Background, tree: list[Proc]) -> None:
    """Kill whatever of the run is left (the Prefect server, survivors of a failing check)."""
    for p in tree:
        if _still_alive(p):
            with contextlib.suppress(ProcessLookupError):
                os.kill(p[0], signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(run.proc.pid, signal.SIGKILL)


CASES = [
    # executor, dask, what a worker is, how many must exist at the kill, stop them (busy stand-in)
    pytest.param("local", False, _is_fork_worker, 2, False, id="extraction-fork"),
    pytest.param("prefect", False, _is_forkserver_worker, 1, False, id="extraction-forkserver"),
    pytest.param("local", False, _is_training_child, 1, True, id="entity-vectors-training"),
    pytest.param("prefect", True, _is_forkserver_worker, 1, False, id="extraction-in-dask-worker"),
]


@pytest.mark.parametrize(("executor", "dask", "is_worker", "count", "busy"), CASES)
def test_kill9_of_the_main_pid_leaves_no_worker_alive(executor: str, dask: bool, is_worker: Ready, count: int,
                                                     busy: bool,
                                                     orphan_reference: Reference, env: dict[str, str],
                                                     dump: Path, tmp_path: Path, request: pytest.FixtureRequest
                                                     ) -> None:
    if dask:
        pytest.importorskip("prefect_dask", reason="the extra 'dask' (prefect-dask) is not installed")
    missed = []
    with fault(f"kill -9 of the main pid only: {request.node.callspec.id}"):
        for attempt in range(ATTEMPTS):  # each attempt in a fresh data root: the rerun below reads its run history
            config = orphan_config(tmp_path / f"attempt{attempt}", dump, dask=dask)
            data_root = config.parent / "data"
            run = Background.start(config, env, executor=executor, tag="killed")
            tree: list[Proc] = []
            try:
                tree, alive = kill_main_when(run, is_worker, count, freeze=not dask, freeze_workers=busy)
                break
            except MissedWindow as exc:
                missed.append(str(exc))
                tree = descendants(run.proc.pid)
            finally:
                _clean_up(run, tree)
        else:
            pytest.fail(f"{ATTEMPTS} runs ended their workers before the freeze:\n" + "\n".join(missed))
        if executor == "prefect":  # the API server was there to survive: the check covers it
            assert any(PREFECT_SERVER in p[2] for p in tree), f"no Prefect API server in the run's tree: {tree}"
        assert not alive, "processes of the killed run survive it:\n" + "\n".join(
            f"  {p[0]} (parent {p[1]}): {p[2][:160]}" for p in alive)

        rerun = run_config(config, env, executor=executor)
        assert rerun.rc == 0, rerun.explain()
        assert run_statuses(data_root) == ["completed", "killed"]
        assert_same_as_reference(data_root, orphan_reference)
