"""A run with nothing to do is recorded without starting Prefect (``flows/run.py:run_if_unchanged``).

The DAG's corpora, evaluation sets and report (``corpus_config_dict``: seconds, no training) are built once with the
in-process executor; the shortcut must then find every node with the key the real run gave it, record the run like any
other (``runs``, ``run_nodes``), never import Prefect, and step aside (writing no run) as soon as one node is not a
verified hit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import REPO, corpus_config_dict, write_config

from flows.config import load_config
from flows.dag import build_dag
from flows.nodes import execute_local, verified_hits
from flows.run import run_if_unchanged, run_pipeline
from warehouse.artifacts import ArtifactStore, Outcome
from warehouse.hashing import FileHashCache
from warehouse.layout import DataRoot


def _runs(data_root: Path) -> list[dict]:
    return pq.read_table(sorted(data_root.glob("runs/*.run.parquet"))).to_pylist()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The built config and the artifact key of every node as the real run recorded it."""
    tmp = tmp_path_factory.mktemp("noop")
    path = write_config(tmp / "corpus.yaml", corpus_config_dict(tmp / "data"))
    first = run_pipeline(load_config(path), path, execute_local)
    assert sorted(first.executed) == sorted(first.results)
    nodes = pq.read_table(tmp / "data" / "runs" / f"{first.run_id}.nodes.parquet").to_pylist()
    return path, {r["node"]: r["artifact_key"] for r in nodes}


def test_the_check_finds_every_node_under_the_key_the_run_gave_it(built: tuple[Path, dict[str, str]]) -> None:
    path, keys = built
    cfg = load_config(path)
    root = DataRoot.at(cfg.data_root)
    hits = verified_hits(build_dag(cfg), ArtifactStore(root), FileHashCache(root.file_hashes))
    assert hits is not None
    assert {n: r.ref.key for n, r in hits.items()} == keys  # keys chain through upstream content hashes
    assert {r.outcome for r in hits.values()} == {Outcome.HIT}


def test_a_noop_run_is_recorded_without_importing_prefect(built: tuple[Path, dict[str, str]]) -> None:
    """The real command line (default executor: prefect), in a fresh process: recorded, summarised, Prefect unused."""
    path, keys = built
    data_root = load_config(path).data_root
    before = {r["run_id"] for r in _runs(data_root)}
    code = ("import sys; from flows.cli import main; rc = main(['run', sys.argv[1]]); "
            "print('PREFECT_IMPORTED' if any(m.split('.')[0] == 'prefect' for m in sys.modules) else 'NO_PREFECT'); "
            "sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, str(path)], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "300"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NO_PREFECT" in proc.stdout, proc.stdout
    assert "executed 0 node(s) (all cache hits)" in proc.stdout
    assert "Prefect was not started" in proc.stdout
    (new,) = [r for r in _runs(data_root) if r["run_id"] not in before]
    assert new["status"] == "completed" and new["run_id"] in proc.stdout
    assert (new["nodes_total"], new["nodes_hit"], new["nodes_built"]) == (len(keys), len(keys), 0)
    rows = pq.read_table(data_root / "runs" / f"{new['run_id']}.nodes.parquet").to_pylist()
    assert {r["node"]: (r["artifact_key"], r["outcome"]) for r in rows} == {n: (k, "hit") for n, k in keys.items()}


def test_one_damaged_artifact_means_no_shortcut_and_nothing_recorded(built: tuple[Path, dict[str, str]],
                                                                      tmp_path: Path) -> None:
    """A file added to a published artifact (the whole-artifact check): not a hit, so the run must go to the
    orchestrator, and the check leaves no run record behind."""
    path, _ = built
    copy = tmp_path / "copy"
    shutil.copytree(load_config(path).data_root, copy / "data")
    cfg = load_config(path, copy / "data")
    (victim,) = (copy / "data" / "artifacts" / "xnli_groups").iterdir()
    (victim / "stray.txt").write_text("not in the manifest")
    before = len(_runs(copy / "data"))
    assert run_if_unchanged(cfg, path) is None
    assert len(_runs(copy / "data")) == before

    (victim / "stray.txt").unlink()  # whole again: the shortcut takes it
    summary = run_if_unchanged(cfg, path, build_dag(cfg))
    assert summary is not None and summary.unchanged and summary.executed == []
    assert len(_runs(copy / "data")) == before + 1


def test_the_warehouse_file_is_rewritten_only_when_its_views_changed(built: tuple[Path, dict[str, str]],
                                                                     tmp_path: Path) -> None:
    """The DuckDB file holds views, and ``runs`` reads its folder: a no-op keeps the file (same inode) and its
    ``runs`` view still shows the new run; changed views (a copied data root's paths), a file older than ``views.sql``
    (a run that died before rewriting it) or a missing file are written."""
    import duckdb

    path, _ = built
    shutil.copytree(load_config(path).data_root, tmp_path / "data")
    cfg = load_config(path, tmp_path / "data")
    db = tmp_path / "data" / "warehouse.duckdb"
    inode = db.stat().st_ino
    assert run_if_unchanged(cfg, path) is not None and db.stat().st_ino != inode  # a copy: its own absolute paths
    inode = db.stat().st_ino
    first = run_if_unchanged(cfg, path)
    assert first is not None and db.stat().st_ino == inode
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM runs WHERE run_id = ?", [first.run_id]).fetchone() == (1,)
    finally:
        con.close()
    assert run_if_unchanged(cfg, path) is not None and db.stat().st_ino == inode  # the touch keeps it current

    views = tmp_path / "data" / "catalog" / "views.sql"
    os.utime(db, ns=(views.stat().st_mtime_ns - 10**9,) * 2)  # as if the run died after its views, before the file
    assert run_if_unchanged(cfg, path) is not None and db.stat().st_ino != inode
    db.unlink()
    assert run_if_unchanged(cfg, path) is not None and db.exists()
