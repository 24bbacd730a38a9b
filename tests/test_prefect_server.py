"""The Prefect API server that ``polysent run`` starts (``flows/prefect_server.py``) dies with the process that started
it, ``kill -9`` included; started without the parent-death signal, it outlives it (what Prefect's own ephemeral server
did after every killed run). It uses ``PREFECT_HOME``'s database, a server that cannot start fails with its port and
its stderr, and a configured ``PREFECT_API_URL`` starts nothing.

Each behavioural case starts one real server in a child Python process (~4 s on an idle 2-core machine; the first
one also creates the module's API database: ~8 s more).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

from flows.prefect_server import APP

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc, Linux parent-death signal")

# what ``polysent run`` does (flows/cli.py), then wait for the test to kill this process
PROTECTED = """
import sys
from flows.prefect_server import prefect_api
with prefect_api() as url:
    print(url, flush=True)
    sys.stdin.read()
"""
# the same server without the parent-death signal
UNPROTECTED = """
import sys
from flows.prefect_server import ApiServer
print(ApiServer.start(die_with_this_process=False).api_url, flush=True)
sys.stdin.read()
"""


def _state(pid: int) -> tuple[int, str] | None:
    """(parent pid, command line) of a live process; None when it is gone (or a zombie: dead, not reaped)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    return None if fields[0] == "Z" else (int(fields[1]), cmdline)


@pytest.fixture(scope="module")
def prefect_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One Prefect home for the module: the first server creates its database, the next one reuses it."""
    return tmp_path_factory.mktemp("prefect-server") / "prefect"


def _start_owner(prefect_home: Path, code: str) -> tuple[subprocess.Popen, int]:
    """A child Python process that starts the server through the project's functions (``code``); (the child, the
    server's pid, found as the child's child that runs the server app)."""
    env = {**os.environ, "PREFECT_HOME": str(prefect_home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    owner = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 120
    line = b""
    while not line.endswith(b"\n"):
        if owner.poll() is not None or time.monotonic() > deadline:
            owner.kill()
            raise AssertionError(f"the server did not start (owner rc {owner.poll()}); see the captured stderr")
        if select.select([owner.stdout], [], [], 0.5)[0]:
            line += os.read(owner.stdout.fileno(), 4096)
    assert line.startswith(b"http://127.0.0.1:"), line
    servers = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
               if (state := _state(int(p.name))) is not None and state[0] == owner.pid and APP in state[1]]
    assert len(servers) == 1, f"not one server among the owner's children: {servers}"
    return owner, servers[0]


def _kill_owner_and_wait(owner: subprocess.Popen, server: int, seconds: float) -> tuple[int, str] | None:
    """SIGKILL the owner (its pid only); the server's state after it had ``seconds`` to die (None: gone)."""
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait(timeout=30)
    deadline = time.monotonic() + seconds
    while (state := _state(server)) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    return state


def _clean_up(owner: subprocess.Popen, server: int | None) -> None:
    if owner.poll() is None:
        owner.kill()
        owner.wait()
    if server is not None and (state := _state(server)) is not None and APP in state[1]:
        os.kill(server, signal.SIGKILL)


@linux_only
def test_the_server_dies_with_a_kill_9_of_the_process_that_started_it(prefect_home: Path) -> None:
    owner, server = _start_owner(prefect_home, PROTECTED)  # the server itself is the owner's direct child
    try:
        assert (prefect_home / "prefect.db").exists()  # PREFECT_HOME's database, as Prefect's own server
        survivor = _kill_owner_and_wait(owner, server, seconds=5)
        assert survivor is None, f"the Prefect API server outlived its killed owner: {survivor}"
    finally:
        _clean_up(owner, server)


@linux_only
def test_without_the_parent_death_signal_the_server_outlives_it(prefect_home: Path) -> None:
    """The control: what the test above would see if the protection were removed."""
    owner, server = _start_owner(prefect_home, UNPROTECTED)
    try:
        survivor = _kill_owner_and_wait(owner, server, seconds=2)
        assert survivor is not None and APP in survivor[1], "the unprotected server died by itself"
    finally:
        _clean_up(owner, server)


def test_a_server_that_does_not_answer_in_time_is_stopped_with_its_port_named(tmp_path: Path) -> None:
    from prefect.settings import temporary_settings

    from flows.prefect_server import ApiServer

    with temporary_settings(updates={"home": tmp_path}), \
            pytest.raises(RuntimeError, match=r"127\.0\.0\.1:\d+ .*did not start: no answer from .* within") as err:
        ApiServer.start(timeout=0.2)
    pid = int(str(err.value).split("(pid ", 1)[1].split(")", 1)[0])
    if sys.platform.startswith("linux"):
        assert _state(pid) is None  # stopped, not left running


def test_a_server_that_exits_at_start_up_fails_with_its_stderr(tmp_path: Path) -> None:
    from prefect.settings import temporary_settings

    from flows.prefect_server import ApiServer

    unopenable = f"sqlite+aiosqlite:///{tmp_path / 'no-such-folder' / 'prefect.db'}"
    with temporary_settings(updates={"server.database.connection_url": unopenable}), \
            pytest.raises(RuntimeError, match=r"127\.0\.0\.1:\d+ .*exited with code \d+") as err:
        ApiServer.start()
    assert "unable to open database file" in str(err.value)


def test_a_configured_api_url_starts_nothing() -> None:
    from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

    from flows.prefect_server import prefect_api

    before = os.environ.get("PREFECT_API_URL")
    with temporary_settings(updates={PREFECT_API_URL: "http://127.0.0.1:9/api"}), prefect_api() as url:
        assert url is None  # the user's server: left alone
        assert get_current_settings().api.url == "http://127.0.0.1:9/api"
        assert os.environ.get("PREFECT_API_URL") == before


def test_the_start_up_wait_is_stretched_by_the_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a machine busy many times over its cores the server is waited for (0.2 s × the load factor), not failed at
    the quiet machine's timeout."""
    from prefect.settings import temporary_settings

    import flows.prefect_server as ps

    monkeypatch.setattr(ps, "load_factor", lambda: 10_000.0)  # capped at MAX_STARTUP_WAIT
    with temporary_settings(updates={"home": tmp_path}):
        server = ps.ApiServer.start(timeout=0.2)
    try:
        assert ps.api_healthy(server.api_url)
    finally:
        server.stop()


def test_a_run_whose_prefect_server_does_not_start_runs_in_process_and_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import flows.prefect_server as ps
    from flows.cli import main

    xnli = Path(__file__).resolve().parents[2] / "shared" / "data" / "xnli"
    if not xnli.is_dir():
        pytest.skip(f"needs the shared XNLI files ({xnli})")
    config = tmp_path / "c.yaml"
    config.write_text(f"name: t\ndata_root: {tmp_path / 'data'}\nsources:\n  xnli:\n    dir: {xnli}\n"
                      "corpora:\n  xnli_groups:\n    languages: [en, de]\n    splits: [dev]\n", encoding="utf-8")

    def no_server(*_a, **_k):
        raise ps.ServerStartError("Prefect's API server on 127.0.0.1:1 (pid 1) did not start: no answer from "
                                  "http://127.0.0.1:1/api/health within 360 s\nIts stderr ends:\n(nothing)")

    monkeypatch.setattr(ps.ApiServer, "start", no_server)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    assert main(["run", str(config), "--always-flow"]) == 0
    out = capsys.readouterr()
    flat = " ".join((out.out + out.err).split())
    assert "did not start: no answer from http://127.0.0.1:1/api/health within 360 s" in flat
    assert "running the same DAG in-process without Prefect instead (as --executor local)" in flat
    assert "xnli_groups" in flat and (tmp_path / "data" / "warehouse.duckdb").exists()
