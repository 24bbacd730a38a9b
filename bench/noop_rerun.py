"""Benchmark: wall time of a no-op rerun (every node a verified cache hit), as a whole process.

Anchor, measured in the same run: a bare Prefect 3 flow in a fresh process that submits the same number of no-op
tasks — the floor that Prefect orchestration alone costs on this machine. polysent's figure adds config validation,
DAG construction, input hashing (size+mtime fast path), artifact verification, run records and the warehouse rebuild.
Also measured: the same no-op through ``--executor local`` (no Prefect).

    python -m bench.noop_rerun [--config configs/default.yaml] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

ANCHOR = """
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

@task(cache_policy=NO_CACHE, persist_result=False)
def noop(i: int) -> int:
    return i

@flow(persist_result=False)
def anchor(n: int) -> None:
    futures = [noop.submit(i) for i in range(n)]
    [f.result() for f in futures]

anchor({n})
"""


def _time(cmd: list[str], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        out.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise SystemExit(f"benchmark command failed: {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="configs/default.yaml")
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args(argv)
    os.environ.setdefault("PREFECT_HOME", str(REPO / ".prefect"))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")

    from flows.config import load_config
    from flows.dag import build_dag

    cfg = load_config(REPO / a.config)
    n_nodes = len(build_dag(cfg))
    polysent = [sys.executable, "-m", "flows.cli", "run", a.config]
    print(f"warming up: building {a.config} once (no-op when already cached)", flush=True)
    subprocess.run(polysent, cwd=REPO, check=True, capture_output=True)

    anchor = _time([sys.executable, "-c", ANCHOR.format(n=n_nodes)], a.repeat)
    ours = _time(polysent, a.repeat)
    local = _time([*polysent, "--executor", "local"], a.repeat)
    med = {k: statistics.median(v) for k, v in (("anchor", anchor), ("prefect", ours), ("local", local))}
    rows = [
        ("noop_rerun_prefect", "bare Prefect flow, same task count", med["anchor"], med["prefect"]),
        ("noop_rerun_local", "bare Prefect flow, same task count", med["anchor"], med["local"]),
    ]
    for name, anchor_name, anc, val in rows:
        print(f"{name}: anchor ({anchor_name}, {n_nodes} tasks) {anc:.2f}s | polysent {val:.2f}s | "
              f"ratio {val / anc:.2f} (median of {a.repeat})")

    from bench.results import append_results
    from warehouse.layout import DataRoot

    append_results(DataRoot.at(cfg.data_root).root, "noop_rerun", [
        {"benchmark": name, "anchor": anchor_name, "anchor_seconds": anc, "polysent_seconds": val, "ratio": val / anc,
         "repeat": a.repeat} for name, anchor_name, anc, val in rows])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
