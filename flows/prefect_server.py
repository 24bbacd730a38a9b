"""Prefect's ephemeral API server dies with the run that started it.

``polysent run`` (Prefect executor) lets Prefect start its API server as a ``uvicorn`` subprocess
(``prefect.server.api.server.SubprocessASGIServer``). Prefect stops it at interpreter exit, which ``kill -9`` of the
run skips: the server stayed alive, holding its port and the API database, after every killed run (issue 21). So the
server is started with a ``preexec_fn`` that arms Linux's parent-death signal in the child between ``fork`` and
``exec`` (``pipelines.worker_lifetime``'s rule: arm, then compare the parent pid, so a parent that died first is
caught too). The signal survives ``exec`` and fires when the thread that started the server exits; Prefect starts it
from its global event-loop thread, which lives as long as the process.

:func:`server_dies_with_this_process` wraps ``SubprocessASGIServer._run_uvicorn_command`` once per process; where
``prctl`` is unavailable (macOS) it does nothing.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
from typing import Any

from pipelines.worker_lifetime import arm_parent_death_signal

_installed = False


def _arm(owner: int) -> None:  # pragma: no cover - runs in the forked child, before exec
    arm_parent_death_signal()
    if os.getppid() != owner:  # the run died before the signal was armed
        os.kill(os.getpid(), signal.SIGKILL)


def server_dies_with_this_process() -> None:
    """Make every ephemeral Prefect API server this process starts die with it (idempotent)."""
    global _installed
    if _installed or not sys.platform.startswith("linux"):
        return
    from prefect.server.api import server as prefect_server

    original = prefect_server.SubprocessASGIServer._run_uvicorn_command

    @functools.wraps(original)
    def run_uvicorn_command(self: Any) -> subprocess.Popen:
        owner = os.getpid()
        popen = subprocess.Popen

        def with_death_signal(*args: Any, **kwargs: Any) -> subprocess.Popen:
            kwargs.setdefault("preexec_fn", functools.partial(_arm, owner))
            return popen(*args, **kwargs)

        prefect_server.subprocess = _Subprocess(with_death_signal)
        try:
            return original(self)
        finally:
            prefect_server.subprocess = subprocess

    prefect_server.SubprocessASGIServer._run_uvicorn_command = run_uvicorn_command
    _installed = True


class _Subprocess:
    """``subprocess`` as Prefect's server module sees it while it starts the server: ``Popen`` arms the signal."""

    def __init__(self, popen: Any) -> None:
        self.Popen = popen

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)
