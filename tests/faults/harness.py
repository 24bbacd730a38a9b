"""What the fault tests share: the small config, running ``polysent`` as a real process, pausing and killing it inside a
node, comparing an end state with the reference run, and the session tally."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conftest import REPO, contents, tiny_config_dict, write_config

from flows.fault_pause import FAULT_MARKER, FAULT_PAUSE_ENV

STEPS = 10  # training steps of the fault config: a checkpoint at step 5 (checkpoint_every), dev at 5 and 10
RUN_TIMEOUT = 420


# -- the config ---------------------------------------------------------------------------------------------------
def fault_config_dict(data_root: Path) -> dict[str, Any]:
    """``configs/default.yaml`` trimmed to seconds (tests/conftest.py's tiny DAG: every corpus node, one tiny training
    run, evaluation, report) with a resumable checkpoint half-way through training."""
    cfg = tiny_config_dict(data_root, steps=STEPS)
    cfg["name"] = "faults"
    cfg["training"]["tiny"]["checkpoint_every"] = STEPS // 2
    return cfg


def write_fault_config(folder: Path, **changes: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    cfg = fault_config_dict(folder / "data")
    cfg.update(changes)
    return write_config(folder / "faults.yaml", cfg)


def data_root_of(config: Path) -> Path:
    return config.parent / "data"


# -- running polysent ---------------------------------------------------------------------------------------------
def base_env(prefect_home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != FAULT_PAUSE_ENV}
    env.update({"PREFECT_HOME": str(prefect_home), "COLUMNS": "400", "PYTHONUNBUFFERED": "1",
                "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                "TOKENIZERS_PARALLELISM": "false"})
    env.update(extra)
    return env


def flat(text: str) -> str:
    """Log text with rich's line wrapping and padding undone (one space between words)."""
    return re.sub(r"\s+", " ", text)


@dataclass
class Finished:
    rc: int
    stdout: str
    stderr: str

    @property
    def log(self) -> str:
        return flat(self.stdout + "\n" + self.stderr)

    def explain(self) -> str:
        return f"rc={self.rc}\n--- stdout ---\n{self.stdout[-4000:]}\n--- stderr ---\n{self.stderr[-8000:]}"


def polysent(*args: str, env: dict[str, str], timeout: int = RUN_TIMEOUT) -> Finished:
    proc = subprocess.run([sys.executable, "-m", "flows.cli", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)
    return Finished(proc.returncode, proc.stdout, proc.stderr)


def run_config(config: Path, env: dict[str, str], executor: str = "local") -> Finished:
    return polysent("run", str(config), "--executor", executor, env=env)


@dataclass
class Background:
    """A ``polysent run`` in its own process group (so that kill -9 takes its workers and Prefect's server too)."""

    proc: subprocess.Popen
    out: Path
    err: Path

    @classmethod
    def start(cls, config: Path, env: dict[str, str], executor: str = "local", pause: str | None = None,
              tag: str = "run") -> Background:
        out, err = config.parent / f"{tag}.stdout", config.parent / f"{tag}.stderr"
        if pause is not None:
            env = {**env, FAULT_PAUSE_ENV: pause}
        with open(out, "w") as fo, open(err, "w") as fe:
            proc = subprocess.Popen([sys.executable, "-m", "flows.cli", "run", str(config), "--executor", executor],
                                    cwd=REPO, env=env, stdout=fo, stderr=fe, start_new_session=True)
        return cls(proc, out, err)

    def log(self) -> str:
        return flat(self.out.read_text(errors="replace") + "\n" + self.err.read_text(errors="replace"))

    def wait_until(self, what: str, ready: Callable[[], Any], timeout: float = RUN_TIMEOUT) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = ready()
            if got:
                return got
            if self.proc.poll() is not None:
                raise AssertionError(f"the run ended (rc {self.proc.returncode}) before {what}:\n{self.log()[-6000:]}")
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}:\n{self.log()[-6000:]}")

    def wait_paused(self, data_root: Path) -> dict[str, Any]:
        """Block until a node of this run reports that the fault hook paused it; its marker's content."""
        marker = self.wait_until("the fault hook paused a node",
                                 lambda: next(iter(data_root.glob(f"tmp/*/{FAULT_MARKER}")), None))
        for _ in range(100):  # written, then read: a partly written marker reads as empty
            with contextlib.suppress(ValueError):
                return {**json.loads(marker.read_text()), "marker": marker}
            time.sleep(0.02)
        raise AssertionError(f"unreadable marker {marker}")

    def kill9(self) -> None:
        """SIGKILL the whole process group, reap the leader, and check that nothing of it survives."""
        pgid = self.proc.pid
        os.killpg(pgid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        deadline = time.monotonic() + 15
        while (alive := group_members(pgid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive, f"processes of the killed run survive: {alive}"

    def finish(self, timeout: float = RUN_TIMEOUT) -> Finished:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise
        return Finished(rc, self.out.read_text(errors="replace"), self.err.read_text(errors="replace"))


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, from /proc (empty where /proc is not available)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(stat.parent.name))
    return found


# -- end state ----------------------------------------------------------------------------------------------------


def manifest_of(data_root: Path, stage: str) -> dict[str, Any]:
    (m,) = data_root.glob(f"artifacts/{stage}/*/manifest.json")
    return json.loads(m.read_text())


def last_run_outcomes(data_root: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Outcomes (hit / built / rebuilt) of the most recent completed run: by artifact key, and by node."""
    import pyarrow.parquet as pq

    runs = pq.read_table(sorted(data_root.glob("runs/*.run.parquet"))).to_pylist()
    latest = max((r for r in runs if r["status"] == "completed"), key=lambda r: r["finished_at"])
    rows = pq.read_table(data_root / "runs" / f"{latest['run_id']}.nodes.parquet").to_pylist()
    return {r["artifact_key"]: r["outcome"] for r in rows}, {r["node"]: r["outcome"] for r in rows}


def run_statuses(data_root: Path) -> list[str]:
    import pyarrow.parquet as pq

    return sorted(r["status"] for r in pq.read_table(sorted(data_root.glob("runs/*.run.parquet"))).to_pylist())


def leftovers(data_root: Path) -> list[str]:
    """Anything half-done a run could leave: temporary artifact folders, temp files of the atomic writer, markers."""
    found = [str(p) for p in (data_root / "tmp").iterdir() if p.name != "trash"] if (data_root / "tmp").exists() else []
    trash = data_root / "tmp" / "trash"
    if trash.exists():
        found += [str(p) for p in trash.iterdir()]
    for pattern in ("artifacts/**/.*.tmp-*", "catalog/.*.tmp-*", "runs/.*.tmp-*", "reports/.*.tmp-*",
                    ".warehouse.duckdb.tmp-*", f"**/{FAULT_MARKER}"):
        found += [str(p) for p in data_root.glob(pattern)]
    return found


# views whose rows describe a run, not data: compared as statuses elsewhere
RUN_VIEWS = {"runs", "run_nodes"}
# columns that measure how a build went (timestamps, wall times, run ids): not data. The project keeps the per-step
# training timings under ``_timings/`` outside the content hash for the same reason.
VOLATILE = {"artifacts": {"created_at", "seconds", "run_id"},
            "train_steps": {"seconds", "sentences_per_second"}}
PATH_COLUMNS = {"filename", "input_path"}  # absolute paths: compared relative to the data root


def snapshot(data_root: Path) -> dict[str, list[tuple]]:
    """Every warehouse view as ``polysent sql`` defines it (in-memory DuckDB over the catalog), rows sorted."""
    from warehouse.catalog import connect
    from warehouse.layout import DataRoot

    root = DataRoot.at(data_root)
    con = connect(root)
    try:
        views = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        out = {}
        for view in sorted(set(views) - RUN_VIEWS):
            base = view.removesuffix("_all")
            cols = []
            for name, *_ in con.execute(f"DESCRIBE {view}").fetchall():
                if name in VOLATILE.get(base, ()):
                    continue
                quoted = '"' + name.replace('"', '""') + '"'
                if name in PATH_COLUMNS:
                    cols.append(f"replace({quoted}, '{root.root}', '<root>') AS {quoted}")
                else:
                    cols.append(quoted)
            out[view] = con.execute(f"SELECT {', '.join(cols)} FROM {view} ORDER BY ALL").fetchall()
        return out
    finally:
        con.close()


@dataclass
class Reference:
    config: Path
    data_root: Path
    contents: dict[str, str]
    tables: dict[str, list[tuple]]
    seconds: float

    @property
    def rows(self) -> int:
        return sum(len(v) for v in self.tables.values())


# -- the session tally --------------------------------------------------------------------------------------------
@dataclass
class Tally:
    injected: list[str] = field(default_factory=list)
    survived: list[str] = field(default_factory=list)
    rows_lost: int = 0
    rows_compared: int = 0
    states_compared: int = 0

    def line(self) -> str:
        return (f"faults injected {len(self.injected)} / survived {len(self.survived)} / rows lost {self.rows_lost}"
                f" ({self.states_compared} end states × every warehouse view compared with the reference, "
                f"{self.rows_compared} rows)")


TALLY = Tally()


@contextlib.contextmanager
def fault(name: str) -> Iterator[None]:
    """Count an injected fault; it survived when the block (its checks included) finishes without an error."""
    TALLY.injected.append(name)
    yield
    TALLY.survived.append(name)


def assert_same_as_reference(data_root: Path, ref: Reference) -> None:
    """Artifacts (content hashes) and every warehouse view equal the reference run's; rows lost are tallied."""
    got = snapshot(data_root)
    lost = sum(max(0, len(rows) - len(got.get(view, []))) for view, rows in ref.tables.items())
    TALLY.rows_lost += lost
    TALLY.rows_compared += sum(len(v) for v in got.values())
    TALLY.states_compared += 1
    assert contents(data_root) == ref.contents, "artifacts differ from the reference run"
    missing = sorted(set(ref.tables) - set(got))
    extra = sorted(set(got) - set(ref.tables))
    differ = sorted(v for v in set(ref.tables) & set(got) if ref.tables[v] != got[v])
    assert not (missing or extra or differ), (f"warehouse differs from the reference: missing views {missing}, "
                                              f"extra {extra}, different rows in {differ}; rows lost {lost}")
    assert (data_root / "warehouse.duckdb").exists()
    assert not leftovers(data_root), leftovers(data_root)
