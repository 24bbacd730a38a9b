"""The real command line through Prefect: run, no-op rerun, SQL, and a run killed during training."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, contents, tiny_config_dict, write_config

pytestmark = pytest.mark.slow


# a guard against a hang, not a speed check: the tiny pipeline takes ~100 s on 2 quiet cores and passed 400 s with the
# machine loaded to 3× its cores (a training row and a test run beside it)
def polysent(*args: str, timeout: int = 1200) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flows.cli", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=timeout)




@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("e2e")
    path = write_config(tmp / "tiny.yaml", tiny_config_dict(tmp / "data", steps=150))
    proc = polysent("run", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "report:" in proc.stdout and "warehouse:" in proc.stdout
    return path, tmp / "data"


def test_noop_rerun_executes_no_node_and_starts_no_prefect(reference: tuple[Path, Path]) -> None:
    """The default executor's no-op: every node a verified hit, so Prefect is not started (flows/run.py)."""
    path, _ = reference
    proc = polysent("run", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "executed 0 node(s) (all cache hits)" in proc.stdout
    assert "Prefect was not started" in " ".join(proc.stdout.split()), proc.stdout


def test_sql_returns_one_row_per_sample_language(reference: tuple[Path, Path]) -> None:
    _, data_root = reference
    proc = polysent("sql", "--data-root", str(data_root), "--format", "csv",
                    "select lang, count(*) as n from xnli_groups group by 1 order by 1")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == "lang,n" and [ln.split(",")[0] for ln in lines[1:]] == ["de", "en", "es", "fr", "ru"]
    bad = polysent("sql", "--data-root", str(data_root), "select * from no_such_table")
    assert bad.returncode == 2 and "no_such_table" in bad.stderr


def test_report_lists_corpora_and_metrics(reference: tuple[Path, Path]) -> None:
    _, data_root = reference
    report = (data_root / "reports" / "latest.md").read_text()
    assert "xnli_groups" in report and "tatoeba" in report and "| tiny |" in report


def test_kill_during_training_then_rerun(reference: tuple[Path, Path], tmp_path: Path) -> None:
    _ref_path, ref_root = reference
    data_root = tmp_path / "data"
    path = write_config(tmp_path / "tiny.yaml", tiny_config_dict(data_root, steps=150))
    proc = subprocess.Popen([sys.executable, "-m", "flows.cli", "run", str(path)], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 300
    try:
        while time.time() < deadline and not list((data_root / "tmp").glob("train-*")):
            assert proc.poll() is None, "run ended before training started"
            time.sleep(0.1)
        assert list((data_root / "tmp").glob("train-*")), "training never started"
        # the warehouse answers while the pipeline is running (no DuckDB lock)
        during = polysent("sql", "--data-root", str(data_root), "--format", "csv",
                          "select count(distinct lang) as n from xnli_groups")
        assert during.returncode == 0 and during.stdout.split() == ["n", "5"], during.stderr
        assert proc.poll() is None, "the run should still be training"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not (data_root / "artifacts" / "train").exists(), "a partial training artifact is visible"
    done_before = contents(data_root)
    assert done_before and all(not k.startswith(("train/", "evaluate", "report")) for k in done_before)

    rerun = polysent("run", str(path))
    assert rerun.returncode == 0, rerun.stderr
    import pyarrow.parquet as pq

    nodes = pq.read_table(sorted((data_root / "runs").glob("*.nodes.parquet"))[-1]).to_pylist()
    outcome = {r["artifact_key"]: r["outcome"] for r in nodes}
    for stage_key in done_before:
        assert outcome[stage_key.split("/")[1]] == "hit", stage_key
    assert not [p for p in (data_root / "tmp").iterdir() if p.name != "trash"]
    # the final warehouse equals that of the uninterrupted run
    assert contents(data_root) == contents(ref_root)
    runs = pq.read_table(list((data_root / "runs").glob("*.run.parquet"))).to_pylist()
    assert sorted(r["status"] for r in runs) == ["completed", "killed"]


def test_interactive_shell_reads_statements_and_meta_commands(reference: tuple[Path, Path]) -> None:
    _, data_root = reference
    proc = subprocess.run([sys.executable, "-m", "flows.cli", "sql", "--data-root", str(data_root)], cwd=REPO,
                          input=".tables\nselect count(*) as groups\n  from xnli_groups where lang = 'en';\n.quit\n",
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "wiki_links" in proc.stdout and "groups" in proc.stdout and "288" in proc.stdout
