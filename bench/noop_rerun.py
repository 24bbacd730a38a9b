"""Benchmark: wall time of a no-op rerun (every node a verified cache hit) as a user runs it — a whole process.

What is timed is what ``make pipeline`` runs the second time: ``.venv/bin/polysent run CONFIG`` with the environment
the Makefile exports (``PREFECT_HOME``, analytics off, start-up timeout, logging level, offline Hugging Face), from
process start to exit. Since issue 22 such a run is recorded without starting Prefect (``flows/run.py:
run_if_unchanged``); the target is a median under 5 s on the 2-core development machine. Measured in the same rounds,
interleaved so that load from other processes falls on all of them alike:

- ``local``: the same no-op with ``--executor local`` (no Prefect at all: the floor of config loading, DAG
  construction, input hashing, artifact verification, run records and the warehouse rebuild);
- ``flow``: ``--always-flow`` — the no-op through the Prefect flow, i.e. what every no-op cost before (ephemeral API
  server start-up, flow and subflow runs, a task per node, artifacts);
- ``before`` (with ``--before DIR``): the same command in another checkout, e.g. a clone at the commit before the
  change (``git clone -q . /tmp/noop_before && git -C /tmp/noop_before checkout <commit>`` and a link to this
  ``.venv``); it runs ``python -m flows.cli`` there, since ``.venv/bin/polysent`` imports this checkout's code.

    python -m bench.noop_rerun [--config configs/default.yaml] [--data-root DIR] [--repeat 5] [--before DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.shared_data import REPO

TARGET_SECONDS = 5.0
MAKEFILE_ENV = {  # what the Makefile exports for `make pipeline`
    "PREFECT_HOME": str(REPO / ".prefect"),
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def polysent_command(checkout: Path) -> list[str]:
    """``.venv/bin/polysent`` (what ``make pipeline`` runs) for this checkout; ``python -m flows.cli`` in another one
    (the editable install's entry point would import this checkout's modules)."""
    entry = REPO / ".venv" / "bin" / "polysent"
    if checkout.resolve() == REPO and entry.exists():
        where = subprocess.run([sys.executable, "-c", "import flows; print(flows.__file__)"], cwd="/",
                               capture_output=True, text=True).stdout.strip()
        if where and Path(where).resolve().is_relative_to(REPO):  # the install is this checkout's
            return [str(entry)]
    return [sys.executable, "-m", "flows.cli"]


def run_once(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"benchmark command failed in {cwd}: {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    if "executed 0 node(s)" not in proc.stdout:
        raise SystemExit(f"not a no-op: {' '.join(cmd)} built nodes (warm-up should have built them)\n"
                         f"{proc.stdout[-3000:]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="configs/default.yaml")
    p.add_argument("--data-root", default=None, help="override the config's data root (e.g. a scratch folder)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--before", type=Path, default=None, help="another checkout to time the same command in")
    a = p.parse_args(argv)
    env = dict(os.environ)
    for k, v in MAKEFILE_ENV.items():
        env.setdefault(k, v)
    config = str((REPO / a.config).resolve())
    extra = ["--data-root", str(Path(a.data_root).resolve())] if a.data_root else []
    run = [*polysent_command(REPO), "run", config, *extra]
    variants: dict[str, tuple[list[str], Path]] = {
        "polysent": (run, REPO),
        "local": ([*run, "--executor", "local"], REPO),
        "flow": ([*run, "--always-flow"], REPO),
    }
    if a.before is not None:
        variants["before"] = ([*polysent_command(a.before), "run", config, *extra], a.before.resolve())

    print("warming up: every variant once (builds what is missing, e.g. a checkout with other stage versions)",
          flush=True)
    for cmd, cwd in variants.values():
        subprocess.run(cmd, cwd=cwd, env=env, check=True, capture_output=True)
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(a.repeat):  # interleaved rounds
        for name, (cmd, cwd) in variants.items():
            times[name].append(run_once(cmd, cwd, env))
    med = {name: statistics.median(v) for name, v in times.items()}
    print(f"no-op rerun, whole process, median of {a.repeat} (PREFECT_HOME={env['PREFECT_HOME']}):")
    for name, (cmd, cwd) in variants.items():
        shown = " ".join(cmd).replace(str(REPO) + "/", "")
        print(f"  {name:8s} {med[name]:6.2f}s  (runs: {', '.join(f'{t:.2f}' for t in times[name])})  "
              f"[{shown}{'' if cwd == REPO else f' in {cwd}'}]")
    verdict = "meets" if med["polysent"] < TARGET_SECONDS else "MISSES"
    print(f"polysent run {med['polysent']:.2f}s {verdict} the {TARGET_SECONDS:.0f} s target; "
          f"{med['polysent'] / med['local']:.2f}× the local executor, {med['flow'] / med['polysent']:.1f}× faster "
          "than through the Prefect flow")

    from bench.results import append_results
    from flows.config import load_config
    from warehouse.layout import DataRoot

    data_root = Path(a.data_root) if a.data_root else load_config(REPO / a.config).data_root
    append_results(DataRoot.at(data_root).root, "noop_rerun", [
        {"benchmark": f"noop_rerun_{name}", "anchor": "noop_rerun_local", "anchor_seconds": med["local"],
         "polysent_seconds": med[name], "ratio": med[name] / med["local"], "repeat": a.repeat}
        for name in variants])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
