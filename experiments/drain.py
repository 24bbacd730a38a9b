"""The GPU drain: every pending GPU row of every question, run on a lent GPU machine in one call, and the merge of
what it returns into the ledger here.

On the GPU machine (a copy of this working tree; torch, transformers, numpy, pyarrow, pyyaml; no polars, duckdb or
Prefect; the kits carried under ``data/experiments/kits``), ``python -m experiments gpu-drain --out $OUT`` runs the
pending rows whose scale says ``runs_on: gpu`` as separate processes, ``--workers`` at a time on the one GPU (a model of
multilingual-e5-small's size leaves most of an H100 idle), smallest estimate first, so that a call ends with as many
finished rows as it can hold. A row's estimate (``experiments.plan``) is its share of the machine when rows run
``--workers`` at a time, so its expected wall time is the estimate × the workers: the drain starts no row whose expected
wall time would pass ``--deadline`` seconds, and stops those still running at the deadline (their rows are lost, not
half-written). Estimates of rows never run on a GPU come from the scale's stated guess and can be far off (the first
H200 drain: ×1 rows expected at 512 s took 41–53 s), so once :data:`CALIBRATE_AFTER` rows have finished the drain scales
every expectation by the median ratio of their wall times to their expectations (:func:`calibration`), and a row that
did not fit is tried again whenever a row finishes. The start model is converted once, before any row starts
(``experiments.kits.start_model`` also holds a lock for the rows that would otherwise race to convert it). Every
finished row is added to ``$OUT/rows.jsonl`` at once (the file is rewritten whole under a temporary name), so whatever
the machine returns holds only complete rows; the log is ``$OUT/drain.log``. Two files: the machine hands back at most
eight.

Here, ``python -m experiments merge DIR_OR_FILE`` writes each returned row into its question's ledger (one atomic file
each), and refuses a row of an unknown question or a malformed one, naming the line.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from experiments import kits
from experiments.ledger import read_rows, row_key, write_row
from experiments.paths import REPO, RUNS
from experiments.plan import PlannedRow, plan
from experiments.question import load_question, questions

CALIBRATE_AFTER = 3  # finished rows before their wall times rescale the expectations of the rows not started
CALIBRATION_RANGE = (0.05, 4.0)  # the ratio is clipped to this range: one odd row cannot start everything at once
DEFAULT_DEADLINE = 560.0  # seconds: inside the device tool's 600 s command limit, with room to copy $OUT back
# (the CLI's --deadline default; tests/test_experiments.py checks that the two agree)


def pending_gpu_rows(names: list[str] | None = None, *, include_cpu: bool = False) -> list[PlannedRow]:
    """Pending or stale rows that run on the GPU (and, with ``include_cpu``, the CPU rows too, trained there at the
    scale's precision), largest estimate first."""
    out = []
    for name in names or questions():
        q = load_question(name)
        out += [p for p in plan(q) if p.state != "done" and p.key.condition != "start" and
                (p.runs_on == "gpu" or include_cpu)]
    return sorted(out, key=lambda p: (p.gpu_seconds or 0, p.question, p.key.seed))


def calibration(finished: list[tuple[float, float]]) -> float:
    """The factor by which this machine's wall times differ from the estimates: the median of actual / expected over
    the rows finished so far (``(actual_seconds, expected_seconds)``, rows without an estimate left out), clipped to
    :data:`CALIBRATION_RANGE`; 1 until :data:`CALIBRATE_AFTER` rows have finished."""
    ratios = [actual / expected for actual, expected in finished if expected > 0]
    if len(ratios) < CALIBRATE_AFTER:
        return 1.0
    lo, hi = CALIBRATION_RANGE
    return min(hi, max(lo, statistics.median(ratios)))


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in rows), encoding="utf-8")
    os.replace(tmp, path)


def drain(out: Path, *, deadline: float = DEFAULT_DEADLINE, workers: int = 8, names: list[str] | None = None,
          include_cpu: bool = False, device: str = "auto", dry_run: bool = False) -> list[dict[str, Any]]:
    """Run the pending GPU rows of ``names`` (every question by default; with ``include_cpu`` the CPU rows too)
    ``workers`` at a time within ``deadline`` seconds, as the module docstring describes; every finished row is added
    to ``out/rows.jsonl`` at once and the log is ``out/drain.log``. The rows that finished (none with ``dry_run``,
    which only lists what would run)."""
    out.mkdir(parents=True, exist_ok=True)
    log = (out / "drain.log").open("a", encoding="utf-8")

    def say(msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()

    todo = pending_gpu_rows(names, include_cpu=include_cpu)
    say(f"drain: {len(todo)} pending rows; deadline {deadline:.0f} s, {workers} at a time, device {device}")
    if dry_run:
        for p in todo:
            say(f"  would run {p.question}: {p.key} (~{(p.gpu_seconds or 0) * workers:.0f} s at {workers} at once)")
        return []
    _prepare_start_models(todo, say)
    run = _Drain(out, deadline, workers, device, say)
    while True:
        run.collect()
        run.start_fitting(todo)
        if not run.running:
            break
        time.sleep(0.5)
    run.report(todo)
    return run.rows


def _prepare_start_models(todo: list[PlannedRow], say: Callable[[str], None]) -> None:
    """Convert the start model of every question with a row to run, once, before any row starts."""
    for name in sorted({p.question for p in todo}):
        q = load_question(name)
        if q.start is not None:
            t = time.perf_counter()
            kits.start_model(q.start, q.kit, RUNS / "start-models")
            say(f"start model of {name} ({q.start}) ready in {time.perf_counter() - t:.0f} s")


class _Drain:
    """The state of one drain: the rows' processes running, the rows finished and their wall times, the clock."""

    def __init__(self, out: Path, deadline: float, workers: int, device: str, say: Callable[[str], None]) -> None:
        self.out, self.deadline, self.workers, self.device, self.say = out, deadline, workers, device, say
        self.scratch = Path(tempfile.mkdtemp(prefix="polysent-drain-"))
        self.env = {**os.environ, "POLYSENT_EXPERIMENT_WORKERS": str(workers), "TOKENIZERS_PARALLELISM": "false",
                    "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
        threads = max(1, (os.cpu_count() or 2) // max(1, workers))
        self.env.setdefault("OMP_NUM_THREADS", str(threads))
        self.t0 = time.perf_counter()
        self.running: list[tuple[subprocess.Popen, PlannedRow, float, Path]] = []
        self.rows: list[dict[str, Any]] = []
        self.finished: list[tuple[float, float]] = []  # (wall seconds, expected wall seconds) of the rows that gave one

    def expected(self, p: PlannedRow) -> float | None:
        """A row's expected wall time when rows run ``workers`` at a time (None without an estimate)."""
        return None if p.gpu_seconds is None else p.gpu_seconds * self.workers

    def left(self) -> float:
        return self.deadline - (time.perf_counter() - self.t0)

    def collect(self) -> None:
        """Take the rows of the processes that ended (each written to ``rows.jsonl`` at once); stop those still
        running past the deadline (their rows are lost)."""
        for proc, p, started, folder in list(self.running):
            if proc.poll() is None:
                if time.perf_counter() - self.t0 > self.deadline:
                    proc.kill()
                    proc.wait()
                    self.say(f"stopped at the deadline: {p.question} {p.key} (no row)")
                else:
                    continue
            self.running.remove((proc, p, started, folder))
            got = read_rows(folder / p.question)
            if proc.returncode == 0 and got:
                self.rows += got
                _write_jsonl(self.out / "rows.jsonl", self.rows)
                wall = time.perf_counter() - started
                self.finished.append((wall, self.expected(p) or 0.0))
                self.say(f"finished {p.question} {p.key} in {wall:.0f} s")
            elif proc.returncode is not None and proc.returncode != -9:
                self.say(f"FAILED {p.question} {p.key} (rc {proc.returncode}); its log: "
                         f"{(folder / 'log.txt').read_text(encoding='utf-8')[-3000:]}")

    def start_fitting(self, todo: list[PlannedRow]) -> None:
        """Start rows of ``todo`` (taking them out of it) while a worker is free, skipping a row whose expected wall
        time, scaled by the calibration so far, passes the time left (a later calibration may fit it)."""
        left = self.left()
        factor = calibration(self.finished)
        for p in list(todo):
            if len(self.running) >= self.workers:
                break
            wall = self.expected(p)
            if wall is not None and wall * factor > left:
                continue  # kept: a later calibration may fit it
            todo.remove(p)
            folder = self.scratch / f"job{len(self.rows)}-{len(todo)}"
            folder.mkdir(parents=True)
            cmd = [sys.executable, "-m", "experiments", "run-row", p.question, p.key.condition, str(p.key.seed),
                   str(p.key.scale), "--results", str(folder / p.question), "--device", self.device, "--origin",
                   "gpu-drain"]
            fh = (folder / "log.txt").open("w", encoding="utf-8")
            self.running.append((subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=self.env, cwd=REPO),
                                 p, time.perf_counter(), folder))
            scaled = f" (expected {wall * factor:.0f} s: estimate × {factor:.2f}, this machine's measured ratio)"
            self.say(f"started {p.question} {p.key}" + (scaled if factor != 1.0 and wall else ""))

    def report(self, todo: list[PlannedRow]) -> None:
        """Log the rows never started, and the drain's total."""
        left = self.left()
        factor = calibration(self.finished)
        for p in todo:
            wall = (self.expected(p) or 0.0) * factor
            self.say(f"not started (expected {wall:.0f} s at {self.workers} at once > {left:.0f} s left"
                     + (f", estimate × {factor:.2f}" if factor != 1.0 else "") + f"): {p.question} {p.key}")
        self.say(f"drain: {len(self.rows)} rows in {time.perf_counter() - self.t0:.0f} s → {self.out / 'rows.jsonl'}")


def merge(source: Path) -> dict[str, int]:
    """Rows returned by a drain (a ``rows.jsonl`` or a folder holding them) → the questions' ledgers."""
    files = [source] if source.is_file() else sorted(source.rglob("rows.jsonl"))
    if not files:
        raise FileNotFoundError(f"{source}: no rows.jsonl (the drain's output)")
    known = set(questions())
    counts: dict[str, int] = {}
    for f in files:
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                key = row_key(row)
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
                raise ValueError(f"{f}:{n}: not a ledger row ({e})") from None
            if row.get("question") not in known:
                raise ValueError(f"{f}:{n}: unknown question {row.get('question')!r}; known: "
                                 f"{', '.join(sorted(known))}")
            q = load_question(row["question"])
            write_row(q.results, row)
            counts[q.name] = counts.get(q.name, 0) + 1
            print(f"merged {q.name}: {key}")
    return counts
