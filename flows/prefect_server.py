"""Prefect's API server for a ``polysent run``, started by polysent so that it dies with the run, ``kill -9`` included.

Without an API to talk to (no ``PREFECT_API_URL`` in the environment or the Prefect profile), Prefect starts a
temporary ("ephemeral") API server as a ``uvicorn`` subprocess and stops it at interpreter exit, which ``kill -9`` of
the run skips: the server stayed alive, holding its port and the API database, after every killed run (issue 21).
Prefect has no supported way to change how it starts that process, so :func:`prefect_api` (``polysent run``, in
``flows/cli.py``, around the flow run) starts the same server itself and points Prefect at it:

- the command is Prefect's own for its ephemeral server, with this module's :func:`ephemeral_app` as the factory:
  ``python -m uvicorn --app-dir <repo> --factory flows.prefect_server:ephemeral_app --host 127.0.0.1 --port <free
  port> --log-level error --lifespan on``, i.e. ``prefect.server.api.server.create_app(ephemeral=True, final=True)``
  (public arguments; no UI, the background services Prefect runs in an ephemeral server). uvicorn serves in the
  process it was started as, so the child is the server itself, no wrapper in between (the parent-death signal
  reaches only a direct child);
- the child gets this process's environment plus Prefect's current settings as variables (as Prefect passes them to
  its own server), so it opens the same database: ``PREFECT_HOME``'s ``prefect.db`` unless configured otherwise.
  ``prefect flow-run ls`` and ``prefect server start`` see the runs, as before;
- it is started by our own ``subprocess.Popen`` with a ``preexec_fn`` that arms Linux's parent-death signal in the
  child between ``fork`` and ``exec``, then compares the parent pid with ours (``pipelines.worker_lifetime``'s rule:
  a run that died before the signal was armed is caught too). The signal survives ``exec``; it fires when the
  *thread* that started the server exits, so start it from a thread that outlives the run (``polysent run``: the
  main thread);
- start-up waits for ``/api/health`` for ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS`` (the Makefile and the
  CLI set 90 s) stretched by the machine's load: × max(1, 1-minute load average ÷ cores), re-read while it waits,
  at most ``MAX_STARTUP_WAIT`` s — a server that is only slow because the machine is busy is waited for (and the
  log says so every 30 s); a timeout or an early exit raises :class:`ServerStartError` naming the port and the tail
  of the server's stderr (which is otherwise passed through to ours, as Prefect's server writes there), on which
  ``polysent run`` runs the same DAG in-process without Prefect and says so (``flows/cli.py``);
- Prefect is pointed at it with its public settings API (``prefect.settings.temporary_settings`` with
  ``PREFECT_API_URL``, which Prefect also hands to Dask workers with the rest of its settings context) and the
  ``PREFECT_API_URL`` environment variable for child processes, both for the duration of the ``with`` block;
- it is stopped (terminate, wait, kill) when this process exits normally, as Prefect stops its own: at ``atexit``,
  which runs after Prefect's log and event workers have sent what they queued at the end of the run (stopped at the
  end of the ``with`` block instead, the flow run's logs never reached the database).

Where an API is configured (``PREFECT_API_URL``: the user's Prefect server or Prefect Cloud), nothing is started:
Prefect talks to it as always (likewise where ``PREFECT_SERVER_EPHEMERAL_ENABLED`` is false: Prefect then refuses to
run without an API URL, as it always did). Where ``prctl`` is unavailable (macOS, Windows), the server is started
without the parent-death signal: stopped at a normal exit, left running by a ``kill -9`` of the run (as Prefect's own
server is).
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import functools
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from pipelines.worker_lifetime import arm_parent_death_signal

APP = "flows.prefect_server:ephemeral_app"  # the uvicorn factory the server process runs (its command line names it)
APP_DIR = Path(__file__).resolve().parents[1]  # where ``flows`` is importable from, whatever the working directory
DEFAULT_STARTUP_TIMEOUT = 90.0
MAX_STARTUP_WAIT = 900.0  # seconds: the longest a start-up is waited for, however busy the machine
_PROGRESS_EVERY = 30.0  # seconds between "still starting" log lines
log = logging.getLogger("polysent")
UVICORN_STARTUP_FAILURE = 3  # uvicorn's exit code when it cannot start (a port taken meanwhile among the causes)
_STDERR_LINES = 25  # the tail of the server's stderr a start-up error quotes


def ephemeral_app() -> Any:
    """The ASGI app of Prefect's ephemeral API server (uvicorn factory; runs in the server process)."""
    from prefect.server.api.server import create_app

    return create_app(ephemeral=True, final=True)


def exec_dies_with(owner: int) -> None:  # pragma: no cover - runs in the forked child, before exec
    """``preexec_fn`` of a server process: it dies with ``owner`` (parent-death signal, then the owner check); no
    thread, as a ``preexec_fn`` must (``pipelines.worker_lifetime.die_with`` may start a watcher thread)."""
    arm_parent_death_signal()
    if os.getppid() != owner:  # the run died before the signal was armed
        os.kill(os.getpid(), signal.SIGKILL)


def parent_death_signal_available() -> bool:
    return sys.platform.startswith("linux")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (a server started on it may still lose it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def api_healthy(api_url: str) -> bool:
    """Whether a Prefect API answers 200 at ``<api_url>/health`` (within 2 s)."""
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def _port_taken(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def load_factor() -> float:
    """How many times over the machine's cores are busy (1-minute load average ÷ cores; 1 where unknown)."""
    try:
        return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
    except OSError:  # pragma: no cover - no load average on this platform
        return 1.0


def startup_timeout() -> float:
    """``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS`` as Prefect reads it (environment or profile)."""
    from prefect.settings import get_current_settings

    return float(get_current_settings().server.ephemeral.startup_timeout_seconds or DEFAULT_STARTUP_TIMEOUT)


class ApiServer:
    """One Prefect API server process (see the module docstring); :meth:`start` it, :meth:`stop` it."""

    def __init__(self, port: int, proc: subprocess.Popen) -> None:
        self.port = port
        self.proc = proc
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=_STDERR_LINES)
        self._stderr_reader = threading.Thread(target=_pass_through, args=(proc.stderr, self._stderr_tail),
                                               name=f"prefect-server-{port}-stderr", daemon=True)
        self._stderr_reader.start()

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    @property
    def pid(self) -> int:
        return self.proc.pid

    @classmethod
    def start(cls, timeout: float | None = None, die_with_this_process: bool = True,
              attempts: int = 3) -> ApiServer:
        """Start a server on a free port and wait until it answers; a RuntimeError (server stopped) if it does not.

        ``die_with_this_process=False`` leaves the parent-death signal out (for tests that show what it does)."""
        timeout = startup_timeout() if timeout is None else timeout
        deadline = time.monotonic() + timeout
        for attempt in range(attempts):
            server = cls._launch(free_port(), die_with_this_process)
            try:
                server._wait_healthy(deadline, timeout)
            except _PortTaken:  # another process bound the port between free_port() and uvicorn's bind
                if attempt + 1 == attempts:
                    raise ServerStartError(server._failure(f"port {server.port} was taken {attempts} times")) from None
                continue
            except BaseException:
                server.stop()
                raise
            return server
        raise AssertionError("unreachable")

    @classmethod
    def _launch(cls, port: int, die_with_this_process: bool) -> ApiServer:
        from prefect.settings import get_current_settings

        cmd = [sys.executable, "-m", "uvicorn", "--app-dir", str(APP_DIR), "--factory", APP, "--host", "127.0.0.1",
               "--port", str(port), "--log-level", "error", "--lifespan", "on"]
        env = {**os.environ, **get_current_settings().to_environment_variables(exclude_unset=True)}
        env.pop("PREFECT_API_URL", None)  # the server is the API; it must not look for another one
        preexec = None
        if die_with_this_process and parent_death_signal_available():
            preexec = functools.partial(exec_dies_with, os.getpid())
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                preexec_fn=preexec)
        return cls(port, proc)

    def _wait_healthy(self, deadline: float, timeout: float) -> None:
        """Until the server answers. ``deadline`` is the quiet machine's (``timeout`` after the first launch); it is
        stretched by the load factor while waiting, up to ``MAX_STARTUP_WAIT``."""
        url = f"{self.api_url}/health"
        began = deadline - timeout
        next_note = time.monotonic() + _PROGRESS_EVERY
        while True:
            code = self.proc.poll()
            if code is not None:
                if code == UVICORN_STARTUP_FAILURE and _port_taken(self.port):
                    raise _PortTaken
                raise ServerStartError(self._failure(f"the server exited with code {code} before it answered"))
            if api_healthy(self.api_url):
                waited = time.monotonic() - began
                if waited > timeout:
                    log.info("Prefect's API server answered after %.0f s (the machine is busy: load %.1f× its cores)",
                             waited, load_factor())
                return
            now = time.monotonic()
            allowed = min(MAX_STARTUP_WAIT, timeout * load_factor())
            if now - began > allowed:
                raise ServerStartError(self._failure(
                    f"no answer from {url} within {allowed:.0f} s (PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS "
                    f"{timeout:g} s × the load factor {load_factor():.1f}, at most {MAX_STARTUP_WAIT:.0f} s)"))
            if now > next_note:
                log.info("Prefect's API server is still starting (%.0f s; load %.1f× the %d cores; waiting up to "
                         "%.0f s)", now - began, load_factor(), os.cpu_count() or 1, allowed)
                next_note = now + _PROGRESS_EVERY
            time.sleep(0.1)

    def _failure(self, what: str) -> str:
        if self.proc.poll() is not None:
            self._stderr_reader.join(timeout=2)  # a server that exited: its stderr up to the end
        tail = "".join(self._stderr_tail).rstrip() or "(nothing)"
        return (f"Prefect's API server on 127.0.0.1:{self.port} (pid {self.pid}) did not start: {what}. "
                f"Its stderr ends:\n{tail}")

    def stop(self, timeout: float = 5.0) -> None:
        """Terminate the server, wait ``timeout`` s, kill it if it is still there (idempotent)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class _PortTaken(Exception):
    pass


class ServerStartError(RuntimeError):
    """Prefect's API server did not answer: it exited, or the (load-stretched) start-up time passed."""


def _pass_through(stream: IO[bytes], tail: collections.deque[str]) -> None:
    """Copy the server's stderr to ours line by line, keeping the last lines for a start-up error."""
    out = sys.stderr
    with contextlib.suppress(ValueError, OSError):
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace")
            tail.append(line)
            with contextlib.suppress(ValueError, OSError):
                out.write(line)
                out.flush()


def would_start_ephemeral_server() -> bool:
    """Whether Prefect would start its own ephemeral server: no API URL (environment or profile) and ephemeral servers
    enabled (``PREFECT_SERVER_EPHEMERAL_ENABLED``; where disabled, Prefect's own error asks for ``PREFECT_API_URL``)."""
    from prefect.settings import get_current_settings

    settings = get_current_settings()
    return not settings.api.url and bool(settings.server.ephemeral.enabled)


@contextlib.contextmanager
def prefect_api() -> Iterator[str | None]:
    """Within the block, Prefect talks to an API server that dies with this process; yields its URL, or None where
    Prefect would not start an ephemeral server (``PREFECT_API_URL`` configured: nothing is started, the user's server
    is used). The server stops at this process's exit. Enter it on a thread that outlives the run (the main thread):
    the parent-death signal fires when the thread that started the server exits."""
    if not would_start_ephemeral_server():
        yield None
        return
    from prefect.settings import PREFECT_API_URL, temporary_settings

    server = ApiServer.start()
    atexit.register(server.stop)  # after Prefect's log and event workers drained (they do at threading shutdown)
    old = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = server.api_url  # for child processes of the run
    try:
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            yield server.api_url
    finally:
        if old is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = old
