"""Scheduled reruns through a real Prefect server: ``polysent serve --cron`` fires and leaves a run row in the
warehouse; ``polysent deploy`` registers a deployment on a user's server (and refuses without one)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import duckdb
import pytest
from conftest import REPO, corpus_config_dict, write_config

from flows.schedule import free_port, local_server

pytestmark = [pytest.mark.slow, pytest.mark.schedule]


def corpus_config(tmp: Path) -> Path:
    return write_config(tmp / "corpora.yaml", corpus_config_dict(tmp / "data"))  # a scheduled run takes seconds


def env(tmp: Path, **extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    # the server's scheduler looks for due runs every 5 s instead of 60 s: the first minute boundary fires
    return {**out, "PREFECT_HOME": str(tmp / ".prefect"), "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "5",
            "PREFECT_RUNNER_POLL_FREQUENCY": "2", **extra}


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def test_serve_fires_a_cron_run_that_lands_in_the_warehouse(tmp_path: Path) -> None:
    config = corpus_config(tmp_path)
    port = free_port()
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "flows.cli", "serve", str(config), "--cron", "* * * * *",
                             "--port", str(port)], cwd=tmp_path, env=env(tmp_path), stdout=log,
                            stderr=subprocess.STDOUT)  # a file, not a pipe: nobody reads it while it runs
    runs = tmp_path / "data" / "runs"
    try:
        deadline = time.monotonic() + 240  # server start + the next minute boundary + the run
        while not list(runs.glob("*.run.parquet")) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(2)
        text = (tmp_path / "serve.log").read_text(errors="replace")[-3000:]
        assert proc.poll() is None, f"polysent serve exited early: {text}"
        assert list(runs.glob("*.run.parquet")), f"no scheduled run finished within 240 s: {text}"
        assert answers(f"http://127.0.0.1:{port}/api")  # the local server serve started
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    out = (tmp_path / "serve.log").read_text(errors="replace")
    flat = " ".join(out.split())  # the log is wrapped to the terminal width
    assert "as deployment polysent-pipeline/tiny on cron '* * * * *'" in flat, out[-3000:]
    rows = duckdb.sql(f"select pipeline, status, nodes_total from read_parquet('{runs}/*.run.parquet')").fetchall()
    # a run the SIGTERM cut short may also have left its row; the first scheduled run completed
    assert any(r[:2] == ("tiny", "completed") and r[2] > 0 for r in rows), rows
    time.sleep(1)
    assert not answers(f"http://127.0.0.1:{port}/api"), "the local Prefect server outlived polysent serve"


def test_deploy_registers_on_the_users_server_and_refuses_without_one(tmp_path: Path) -> None:
    config = corpus_config(tmp_path)
    cli = [sys.executable, "-m", "flows.cli", "deploy", str(config), "--pool", "polysent-pool", "--cron", "0 3 * * 0",
           "--name", "weekly"]
    refused = subprocess.run(cli, cwd=REPO, env=env(tmp_path), capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and "set PREFECT_API_URL" in refused.stderr, refused.stderr[-2000:]
    os.environ["PREFECT_HOME"], old = str(tmp_path / ".prefect"), os.environ.get("PREFECT_HOME")
    try:
        with local_server() as api:
            user = env(tmp_path, PREFECT_API_URL=api)
            pool = subprocess.run([sys.executable, "-m", "prefect", "work-pool", "create", "polysent-pool", "--type",
                                   "process"], env=user, capture_output=True, text=True, timeout=120)
            assert pool.returncode == 0, pool.stdout + pool.stderr
            done = subprocess.run(cli, cwd=REPO, env=user, capture_output=True, text=True, timeout=180)
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
            assert "deployment polysent-pipeline/weekly" in done.stdout
            inspect = [sys.executable, "-m", "prefect", "deployment", "inspect", "polysent-pipeline/weekly"]
            shown = subprocess.run(inspect, env=user, capture_output=True, text=True, timeout=120)
            assert shown.returncode == 0, shown.stdout + shown.stderr
            assert "0 3 * * 0" in shown.stdout and "polysent-pool" in shown.stdout
            assert str(config.resolve()) in shown.stdout  # the config the workers will run
    finally:
        if old is None:
            os.environ.pop("PREFECT_HOME", None)
        else:
            os.environ["PREFECT_HOME"] = old
