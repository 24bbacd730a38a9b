"""Issue 21: an artifact is verified whole, the views read the manifest's files, the catalog is relocatable and says
when it is damaged, a dead run's temporary catalog files are swept, and an unfinished run counts the nodes it built."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import tiny_config_dict, write_config

from contract import StageResult
from warehouse.artifacts import ArtifactRef, ArtifactStore, Outcome
from warehouse.catalog import (
    CatalogError,
    RunRecord,
    connect,
    load_current,
    mark_dead_runs,
    record_current,
    view_plan,
)
from warehouse.layout import DataRoot


def _partitioned(out: Path) -> StageResult:
    """A Hive-partitioned table (``hard_negatives/lang=xx/part-0.parquet``) and a one-file table."""
    for lang, n in (("de", 2), ("en", 3)):
        (out / "hard_negatives" / f"lang={lang}").mkdir(parents=True)
        pl.DataFrame({"anchor": [f"{lang}{i}" for i in range(n)], "score": [float(i) for i in range(n)]}).write_parquet(
            out / "hard_negatives" / f"lang={lang}" / "part-0.parquet")
    pl.DataFrame({"x": [1, 2]}).write_parquet(out / "t.parquet")
    return StageResult(tables={"hard_negatives": "hard_negatives", "t": "t.parquet"})


def _build(store: ArtifactStore, build=_partitioned, run_id: str = "", node: str = "hn",
           config: dict | None = None) -> tuple[ArtifactRef, Outcome]:
    ref, outcome, _ = store.materialize(node=node, stage="hn", version="1", config=config or {"a": 1},
                                        inputs={"f": {"kind": "file", "sha256": "abc"}}, build=build, run_id=run_id)
    return ref, outcome


def _count(root: DataRoot, sql: str) -> int:
    con = connect(root)
    try:
        return con.execute(sql).fetchone()[0]
    finally:
        con.close()


@pytest.fixture
def store(tmp_path: Path) -> ArtifactStore:
    return ArtifactStore(DataRoot.at(tmp_path / "data"))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# -- 1. whole artifacts ---------------------------------------------------------------------------------------------
def test_extra_file_in_a_published_artifact_is_named_and_rebuilt(store: ArtifactStore,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    ref, _ = _build(store)
    stray = ref.path / "hard_negatives" / "lang=hy" / "part-99999.parquet"
    stray.parent.mkdir()
    pl.DataFrame({"anchor": ["hy0"], "score": [0.0]}).write_parquet(stray)
    assert store.lookup("hn", ref.key) == (
        None, f"{ref.path}: file hard_negatives/lang=hy/part-99999.parquet is not in the manifest "
              "(written into the artifact after it was published)")
    with caplog.at_level(logging.WARNING, logger="polysent"):
        ref2, outcome = _build(store)
    assert outcome is Outcome.REBUILT
    assert "hard_negatives/lang=hy/part-99999.parquet is not in the manifest" in caplog.text
    assert "rebuilding" in caplog.text
    assert not stray.exists() and ref2.path == ref.path
    assert _build(store)[1] is Outcome.HIT
    (ref.path / "hard_negatives" / "lang=fr").mkdir()  # an empty folder holds no data: still a hit
    assert _build(store)[1] is Outcome.HIT


def test_several_extra_files_and_a_missing_partition_file_are_named(store: ArtifactStore) -> None:
    ref, _ = _build(store)
    for name in ("a.txt", "b.txt", "c.txt", "d.txt"):
        (ref.path / name).write_text("x")
    reason = store.lookup("hn", ref.key)[1]
    assert reason.endswith("files a.txt, b.txt, c.txt and 1 more are not in the manifest "
                           "(written into the artifact after it was published)")
    for name in ("a.txt", "b.txt", "c.txt", "d.txt"):
        (ref.path / name).unlink()
    assert store.lookup("hn", ref.key)[0] is not None
    (ref.path / "hard_negatives" / "lang=en" / "part-0.parquet").unlink()
    assert store.lookup("hn", ref.key)[1] == f"{ref.path}: file hard_negatives/lang=en/part-0.parquet is missing"


def test_views_read_the_manifest_files_so_a_stray_file_neither_doubles_rows_nor_breaks_them(
        store: ArtifactStore) -> None:
    ref, _ = _build(store)
    record_current(store.root, "hn", ref)
    assert _count(store.root, "SELECT count(*) FROM hard_negatives") == 5
    # the same schema in an existing partition (doubles a language under a glob) ...
    shutil.copy(ref.path / "hard_negatives" / "lang=en" / "part-0.parquet",
                ref.path / "hard_negatives" / "lang=en" / "part-99999.parquet")
    # ... and another schema without a Hive partition folder (a glob fails with a Hive partition mismatch)
    pl.DataFrame({"other": ["z"]}).write_parquet(ref.path / "hard_negatives" / "stray.parquet")
    assert _count(store.root, "SELECT count(*) FROM hard_negatives") == 5
    assert _count(store.root, "SELECT count(*) FROM hard_negatives WHERE lang = 'en'") == 3
    assert _count(store.root, "SELECT count(*) FROM hard_negatives_all") == 5
    assert _count(store.root, "SELECT count(*) FROM t") == 2
    statements = "\n".join(view_plan(store.root)[0])
    assert "part-99999" not in statements and "stray" not in statements and "**" not in statements


def _schema_only(out: Path) -> StageResult:
    (out / "pairs").mkdir()
    pq.write_table(pa.table({"src": pa.array([], pa.string()), "tgt": pa.array([], pa.string())}),
                   out / "pairs" / "part-0.parquet")
    return StageResult(tables={"pairs": "pairs"})


def _no_file(out: Path) -> StageResult:
    (out / "pairs").mkdir()  # an older artifact of an empty corpus: a folder and no Parquet file
    return StageResult(tables={"pairs": "pairs"})


def test_a_table_whose_only_file_has_zero_rows_has_a_view_with_its_columns(store: ArtifactStore) -> None:
    ref, _ = _build(store, _schema_only)
    record_current(store.root, "hn", ref)
    con = connect(store.root)
    try:
        assert con.execute("SELECT count(*) FROM pairs").fetchone() == (0,)
        assert [r[0] for r in con.execute("DESCRIBE pairs").fetchall()] == ["src", "tgt"]
    finally:
        con.close()


def test_a_table_with_no_file_at_all_has_no_view_and_says_why(store: ArtifactStore,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    empty, _ = _build(store, _no_file, node="empty", config={"a": 2})
    full, _ = _build(store)
    record_current(store.root, "empty", empty)
    record_current(store.root, "hn", full)
    with caplog.at_level(logging.WARNING, logger="polysent"):
        assert _count(store.root, "SELECT count(*) FROM t") == 2  # the other views are there
    assert "table pairs: no view" in caplog.text and empty.path.relative_to(store.root.root).as_posix() in caplog.text
    views_sql = store.root.views_sql.read_text()
    assert "-- table pairs: no view" in views_sql and "VIEW pairs " not in views_sql


# -- 2. temporary catalog files of dead runs ------------------------------------------------------------------------
def test_sweep_removes_the_catalog_temporary_files_of_dead_runs_only(store: ArtifactStore,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    root, dead, alive = store.root, _dead_pid(), os.getpid()
    doomed = [root.root / f".warehouse.duckdb.tmp-{dead}-0123abcd",
              root.root / f".warehouse.duckdb.tmp-{dead}-0123abcd.wal",
              root.catalog / f".current.json.tmp-{dead}-89abcdef",
              root.runs / f".x.run.parquet.tmp-{dead}-00000000",
              root.reports / f".latest.md.tmp-{dead}-ffffffff"]
    kept = [root.root / f".warehouse.duckdb.tmp-{alive}-0123abcd", root.catalog / f".views.sql.tmp-{alive}-0123abcd",
            root.catalog / "current.json", root.catalog / "current.lock", root.root / "warehouse.duckdb"]
    for p in doomed + kept:
        p.write_text("partial")
    with caplog.at_level(logging.INFO, logger="polysent"):
        store.sweep_tmp()
    assert [p for p in doomed if p.exists()] == []
    assert [p for p in kept if not p.exists()] == []
    assert f"removed temporary file {doomed[0]} left by a run that died" in caplog.text


# -- 3. relocatable data roots, a damaged catalog, the counts of unfinished runs --------------------------------------
def test_current_json_is_relative_and_a_copied_root_reads_its_own_files(tmp_path: Path) -> None:
    original = ArtifactStore(DataRoot.at(tmp_path / "a"))
    ref, _ = _build(original)
    record_current(original.root, "hn", ref)
    entry = json.loads(original.root.current.read_text())["hn"]
    assert entry["path"] == ref.path.relative_to(original.root.root).as_posix()
    assert entry["path"].startswith("artifacts/hn/")
    lineage = pq.read_table(ref.path / "_catalog" / "lineage.parquet").to_pylist()
    assert lineage[0]["input_path"] == ""  # an input without a path stays empty

    shutil.copytree(original.root.root, tmp_path / "b")
    shutil.rmtree(original.root.root)
    copy = DataRoot.at(tmp_path / "b")
    assert _count(copy, "SELECT count(*) FROM hard_negatives") == 5
    con = connect(copy)
    try:
        files = {r[0] for r in con.execute("SELECT DISTINCT filename FROM hard_negatives_all").fetchall()}
    finally:
        con.close()
    assert files and all(f.startswith(str(copy.root) + "/") for f in files)
    assert ArtifactStore(copy).lookup("hn", ref.key)[0] is not None  # still a verified hit where it now lives


def test_absolute_entries_of_an_older_catalog_resolve_inside_the_copy_and_are_rewritten(tmp_path: Path) -> None:
    original = ArtifactStore(DataRoot.at(tmp_path / "a"))
    ref, _ = _build(original)
    other, _ = _build(original, node="t2", config={"a": 3})
    old = {"hn": {"stage": "hn", "key": ref.key, "path": str(ref.path), "tables": ref.tables}}
    original.root.current.write_text(json.dumps(old))
    shutil.copytree(original.root.root, tmp_path / "b")
    shutil.rmtree(original.root.root)
    copy = DataRoot.at(tmp_path / "b")
    assert load_current(copy)["hn"]["path"] == f"artifacts/hn/{ref.key[:20]}"
    assert _count(copy, "SELECT count(*) FROM hard_negatives") == 5
    record_current(copy, "t2", ArtifactRef(other.stage, other.key, copy.artifact_dir("hn", other.key),
                                           other.content_hash, other.tables, other.rows))
    written = json.loads(copy.current.read_text())
    assert {n: e["path"] for n, e in written.items()} == {"hn": f"artifacts/hn/{ref.key[:20]}",
                                                          "t2": f"artifacts/hn/{other.key[:20]}"}


@pytest.mark.parametrize(("text", "what"), [
    ('{"hn": {"stage": "hn", "key": ', "not valid JSON"),
    ("[1, 2]", "a JSON list, expected an object of node → artifact"),
    ('{"hn": 3}', "entry 'hn' is a int"),
    ('{"hn": {"stage": "hn", "key": "k"}}', "entry 'hn' lacks tables"),
    ('{"hn": {"stage": "hn", "key": "k", "tables": ["t"]}}', "entry 'hn' has tables that are not an object"),
])
def test_a_damaged_current_json_is_named_with_what_to_do(store: ArtifactStore, caplog: pytest.LogCaptureFixture,
                                                          text: str, what: str) -> None:
    ref, _ = _build(store)
    record_current(store.root, "hn", ref)
    store.root.current.write_text(text)
    with pytest.raises(CatalogError) as err:
        load_current(store.root)
    msg = str(err.value)
    assert msg.startswith(f"{store.root.current} is damaged: ") and what in msg
    assert "run `polysent run CONFIG` to rewrite it" in msg
    with caplog.at_level(logging.WARNING, logger="polysent"):
        assert _count(store.root, "SELECT count(*) FROM artifacts") == 1  # what does not depend on it still works
    assert f"{store.root.current} is damaged" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="polysent"):
        record_current(store.root, "hn", ref)  # a run heals it, and says so
    assert "this run rewrites it" in caplog.text
    assert _count(store.root, "SELECT count(*) FROM hard_negatives") == 5


def test_a_killed_run_counts_the_nodes_it_built(store: ArtifactStore) -> None:
    import datetime as dt

    rec = RunRecord(run_id="r-killed", pipeline="p", config_path="c.yaml", config_hash="h",
                    started_at=dt.datetime.now(dt.UTC), nodes_total=5, pid=_dead_pid())
    rec.write(store.root)
    _build(store, run_id="r-killed")
    _build(store, run_id="r-killed", node="other", config={"a": 2})
    _build(store, run_id="r-another", node="third", config={"a": 3})
    assert mark_dead_runs(store.root) == 1
    row = pq.read_table(store.root.runs / "r-killed.run.parquet").to_pylist()[0]
    assert (row["status"], row["nodes_built"], row["nodes_total"]) == ("killed", 2, 5)
    nodes = pq.read_table(store.root.runs / "r-killed.nodes.parquet").to_pylist()
    assert sorted((r["node"], r["outcome"]) for r in nodes) == [("hn", "built"), ("other", "built")]
    assert mark_dead_runs(store.root) == 0


def test_a_failed_run_counts_the_nodes_it_built(tmp_path: Path) -> None:
    from flows.config import load_config
    from flows.dag import topological
    from flows.nodes import execute
    from flows.run import run_pipeline

    path = write_config(tmp_path / "tiny.yaml", tiny_config_dict(tmp_path / "data", steps=2))
    seen: dict[str, str] = {}

    def one_then_fail(nodes, ctx):
        first = next(n for n in topological(nodes) if not n.deps)
        execute(first, {}, ctx)
        seen["run_id"] = ctx.run_id
        raise RuntimeError("worker lost")

    with pytest.raises(RuntimeError, match="worker lost"):
        run_pipeline(load_config(path), path, one_then_fail)
    root = DataRoot.at(tmp_path / "data")
    row = pq.read_table(root.runs / f"{seen['run_id']}.run.parquet").to_pylist()[0]
    assert (row["status"], row["nodes_built"]) == ("failed", 1)
