"""Scheduled reruns: ``polysent serve`` (a long-running process that runs the pipeline on a cron schedule) and
``polysent deploy`` (a deployment on a user's own Prefect server, run by their workers).

Prefect's ephemeral API cannot schedule (``flow.serve(cron=...)`` registers nothing that fires; stack.md), so
``serve`` needs a real API: ``PREFECT_API_URL`` when the user has a server, otherwise a local
``prefect server start --host 127.0.0.1`` that ``serve`` starts, waits for (``/api/health``) and stops on exit; the
server's database lives under ``PREFECT_HOME``. The served deployment runs ``flows.pipeline.polysent_pipeline`` with
the config's absolute path, so every scheduled run is an ordinary pipeline run: cache hits where nothing changed, a
rebuild of what a new dump or config changed, a row in the warehouse's ``runs`` table either way.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from flows.prefect_server import api_healthy, exec_dies_with, free_port, parent_death_signal_available

log = logging.getLogger("polysent.schedule")
REPO = Path(__file__).resolve().parents[1]
ENTRYPOINT = "flows/pipeline.py:polysent_pipeline"


def wait_healthy(api_url: str, timeout: float, proc: subprocess.Popen | None = None) -> None:
    """Poll ``<api_url>/health`` until it answers 200; a RuntimeError naming the URL (and the server's exit code
    when it died) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the local Prefect server exited with code {proc.returncode} before {api_url} "
                               "answered (its log is above)")
        if api_healthy(api_url):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"no Prefect API answered at {api_url}/health within {timeout:.0f} s")
        time.sleep(0.5)


@contextlib.contextmanager
def local_server(port: int | None = None, timeout: float = 120.0) -> Iterator[str]:
    """Start ``prefect server start --host 127.0.0.1`` (its database under ``PREFECT_HOME``); yield its API URL once
    healthy; stop it on exit."""
    port = port or free_port()
    api_url = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    cmd = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    log.info("starting a local Prefect server: %s (PREFECT_HOME=%s)", " ".join(cmd[1:]), env.get("PREFECT_HOME"))
    # dies with ``serve``, kill -9 included, as the API server of ``polysent run`` does (flows/prefect_server.py)
    preexec = functools.partial(exec_dies_with, os.getpid()) if parent_death_signal_available() else None
    proc = subprocess.Popen(cmd, env=env, start_new_session=True, preexec_fn=preexec)
    try:
        wait_healthy(api_url, timeout, proc)
        log.info("Prefect server ready at %s", api_url)
        yield api_url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.info("Prefect server at %s stopped", api_url)


def parameters(config: Path, data_root: Path | None, force: bool) -> dict:
    return {"config_path": str(config.resolve()), "data_root": str(data_root.resolve()) if data_root else None,
            "force": force}


def serve(config: Path, cron: str, *, name: str, data_root: Path | None = None, force: bool = False,
          port: int | None = None) -> None:
    """Serve the pipeline of ``config`` as deployment ``name`` on ``cron`` until interrupted."""
    api_url = os.environ.get("PREFECT_API_URL")
    with contextlib.nullcontext(api_url) if api_url else local_server(port) as url:
        os.environ["PREFECT_API_URL"] = url
        if api_url:
            wait_healthy(url, 30)
        from prefect.settings import PREFECT_API_URL, temporary_settings

        from flows.pipeline import polysent_pipeline

        log.info("serving %s as deployment polysent-pipeline/%s on cron %r (API %s)", config, name, cron, url)
        with temporary_settings({PREFECT_API_URL: url}):
            polysent_pipeline.serve(name=name, cron=cron, parameters=parameters(config, data_root, force),
                                    description=f"polysent pipeline of {config.resolve()}",
                                    print_starting_message=True)


def deploy(config: Path, cron: str | None, *, name: str, work_pool: str, data_root: Path | None = None,
           force: bool = False, source: Path = REPO) -> str:
    """Register the pipeline of ``config`` as deployment ``name`` on the server at ``PREFECT_API_URL``, run by
    workers of ``work_pool`` (``prefect worker start --pool NAME`` on a machine with this checkout at ``source``);
    returns the deployment id."""
    api_url = os.environ.get("PREFECT_API_URL")
    if not api_url:
        raise RuntimeError("polysent deploy registers a deployment on your Prefect server: set PREFECT_API_URL "
                           "(e.g. http://prefect.example:4200/api), or use `polysent serve`, which starts a local "
                           "server itself")
    wait_healthy(api_url, 30)
    from flows.pipeline import polysent_pipeline

    flow = polysent_pipeline.from_source(source=str(source.resolve()), entrypoint=ENTRYPOINT)
    deployment_id = flow.deploy(name=name, work_pool_name=work_pool, cron=cron, build=False, push=False,
                                parameters=parameters(config, data_root, force),
                                description=f"polysent pipeline of {config.resolve()}", print_next_steps=False)
    log.info("deployment polysent-pipeline/%s (%s) registered on %s, pool %s%s", name, deployment_id, api_url,
             work_pool, f", cron {cron!r}" if cron else "")
    return str(deployment_id)
