"""Issue 21: files written into a published artifact, a file missing from one, a copied and relocated data root, a
damaged ``catalog/current.json``, temporary catalog files of a run killed while writing the warehouse file, and the
record of a run killed after it built a node.

The next run (or query) must notice, say what it found (the file by name), rebuild only what is damaged, and end equal
to the reference run. All tests share one data root (module fixture), each leaving it equal to the reference.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from conftest import REPO

from faults.harness import (
    Background,
    Finished,
    Reference,
    assert_same_as_reference,
    contents,
    fault,
    last_run_outcomes,
    polysent,
    run_config,
    write_fault_config,
)

pytestmark = pytest.mark.faults


@pytest.fixture(scope="module")
def victim(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str], reference: Reference) -> Path:
    config = write_fault_config(tmp_path_factory.mktemp("whole"))
    done = run_config(config, env)
    assert done.rc == 0, done.explain()
    assert contents(config.parent / "data") == reference.contents
    return config


def rerun(config: Path, env: dict[str, str], reference: Reference, changed: dict[str, str], *phrases: str
          ) -> Finished:
    """Rerun; exactly the ``changed`` nodes are rebuilt/built (the rest hits), the log holds ``phrases``, and the end
    state equals the reference."""
    done = run_config(config, env)
    assert done.rc == 0, done.explain()
    for phrase in phrases:
        assert phrase in done.log, f"the log does not say {phrase!r}:\n{done.log[-4000:]}"
    _, by_node = last_run_outcomes(config.parent / "data")
    assert {n: o for n, o in by_node.items() if o != "hit"} == changed
    assert_same_as_reference(config.parent / "data", reference)
    return done


def artifact(data_root: Path, stage: str) -> Path:
    (folder,) = (data_root / "artifacts" / stage).iterdir()
    return folder


def sql(data_root: Path, query: str, env: dict[str, str]) -> Finished:
    return polysent("sql", "--data-root", str(data_root), "--format", "csv", query, env=env, timeout=120)


def scalar(data_root: Path, query: str, env: dict[str, str]) -> str:
    done = sql(data_root, query, env)
    assert done.rc == 0, done.explain()
    return done.stdout.strip().splitlines()[-1]


def copy_into(source: Path, target: Path) -> None:
    """What a user's ``COPY (SELECT …) TO '<artifact>/…' (FORMAT parquet)`` leaves in an artifact (``polysent sql``
    itself refuses writes since issue 21: a DuckDB of the test's own writes it)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(":memory:")
    try:
        con.execute(f"COPY (SELECT * FROM read_parquet('{source}')) TO '{target}' (FORMAT parquet)")
    finally:
        con.close()


def test_stray_parquet_file_copied_into_an_artifact(victim: Path, env: dict[str, str], reference: Reference) -> None:
    data_root = victim.parent / "data"
    art = artifact(data_root, "hard_negatives")
    part = sorted(art.glob("hard_negatives/lang=*/*.parquet"))[0]
    stray = art / "hard_negatives" / "lang=hy" / "part-99999.parquet"
    rows = len(reference.tables["hard_negatives"])
    with fault("stray Parquet file COPY'd into a published artifact (hard_negatives lang=hy)"):
        copy_into(part, stray)
        # the views read the manifest's files: the stray rows are not there, before the rerun too
        assert scalar(data_root, "SELECT count(*) FROM hard_negatives", env) == str(rows)
        assert scalar(data_root, "SELECT count(*) FROM hard_negatives WHERE lang = 'hy'", env) == "0"
        rerun(victim, env, reference, {"hard_negatives": "rebuilt"}, "hard_negatives: artifact",
              "file hard_negatives/lang=hy/part-99999.parquet is not in the manifest", "rebuilding")
        assert not stray.exists()


def test_stray_file_of_another_schema_in_a_table_folder(victim: Path, env: dict[str, str],
                                                        reference: Reference) -> None:
    """Under a glob this made every view read of the table fail with a DuckDB "Hive partition mismatch"."""
    data_root = victim.parent / "data"
    art = artifact(data_root, "bitext_pairs")
    stray = art / "bitext_pairs" / "notes.parquet"
    with fault("stray Parquet file of another schema in a table folder (bitext_pairs)"):
        copy_into(art / "leakage.parquet", stray)
        assert scalar(data_root, "SELECT count(*) FROM bitext_pairs", env) == str(
            len(reference.tables["bitext_pairs"]))
        rerun(victim, env, reference, {"bitext_pairs": "rebuilt"}, "bitext_pairs: artifact",
              "file bitext_pairs/notes.parquet is not in the manifest", "rebuilding")


def test_missing_file_of_an_artifact(victim: Path, env: dict[str, str], reference: Reference) -> None:
    data_root = victim.parent / "data"
    art = artifact(data_root, "entities")
    with fault("missing file (entities/entity_types.parquet)"):
        (art / "entity_types.parquet").unlink()
        rerun(victim, env, reference, {"entities": "rebuilt"}, "entities: artifact",
              "file entity_types.parquet is missing; rebuilding")


def _relocate(victim: Path, tmp_path: Path, legacy: bool) -> Path:
    """Copy the victim's data root to ``original/``, optionally rewrite its catalog as older versions wrote it
    (absolute paths), copy that to ``moved/`` and delete ``original/``. Returns the config of ``moved/``."""
    original = tmp_path / "original" / "data"
    shutil.copytree(victim.parent / "data", original)
    if legacy:
        current = json.loads((original / "catalog" / "current.json").read_text())
        for entry in current.values():
            entry["path"] = str(original / entry["path"])
        (original / "catalog" / "current.json").write_text(json.dumps(current))
    moved = write_fault_config(tmp_path / "moved")
    shutil.copytree(original, moved.parent / "data")
    shutil.rmtree(tmp_path / "original")
    return moved


@pytest.mark.parametrize("legacy", [False, True], ids=["relative-catalog", "older-absolute-catalog"])
def test_copied_data_root_whose_original_is_deleted(victim: Path, env: dict[str, str], reference: Reference,
                                                    tmp_path: Path, legacy: bool) -> None:
    name = "older catalog (absolute paths) of a" if legacy else "a"
    with fault(f"{name} copied data root, original deleted"):
        moved = _relocate(victim, tmp_path, legacy)
        data_root = moved.parent / "data"
        # before any run there: its own files answer (what polysent sql shows)
        assert scalar(data_root, "SELECT count(*) FROM wiki_sentences", env) == str(
            len(reference.tables["wiki_sentences"]))
        files = sql(data_root, "SELECT DISTINCT filename FROM hard_negatives_all", env)
        assert files.rc == 0 and str(data_root) in files.stdout, files.explain()
        assert str(tmp_path / "original") not in files.stdout, files.explain()
        done = rerun(moved, env, reference, {})
        assert "executed 0 node(s) (all cache hits)" in done.log
        current = json.loads((data_root / "catalog" / "current.json").read_text())
        assert all(e["path"].startswith("artifacts/") for e in current.values()), current
        con = duckdb.connect(str(data_root / "warehouse.duckdb"), read_only=True)
        try:
            assert con.execute("SELECT count(*) FROM wiki_sentences").fetchone()[0] == len(
                reference.tables["wiki_sentences"])
        finally:
            con.close()


@pytest.mark.parametrize(("damage", "what"), [
    ('{"wiki_sentences": {"stage": ', "not valid JSON"),
    ('["wiki_sentences"]', "a JSON list, expected an object of node → artifact"),
], ids=["invalid-json", "wrong-shape"])
def test_damaged_current_json(victim: Path, env: dict[str, str], reference: Reference, damage: str,
                              what: str) -> None:
    data_root = victim.parent / "data"
    current = data_root / "catalog" / "current.json"
    with fault(f"damaged catalog/current.json ({what.split(',')[0]})"):
        current.write_text(damage)
        done = sql(data_root, "SELECT count(*) FROM wiki_sentences", env)
        assert done.rc != 0
        assert f"{current} is damaged: {what}" in done.log, done.explain()
        assert "run `polysent run CONFIG` to rewrite it" in done.log, done.explain()
        assert scalar(data_root, "SELECT count(*) > 0 FROM artifacts", env) == "true"  # the rest still answers
        rerun(victim, env, reference, {}, f"{current} is damaged: {what}", "this run rewrites it")


_KILLED_WHILE_WRITING = """
import os, signal, sys
from pathlib import Path
import duckdb
from warehouse.atomic import atomic_path
root = Path(sys.argv[1])
with atomic_path(root / "catalog" / "views.sql") as views:
    views.write_text("-- half")
    with atomic_path(root / "warehouse.duckdb") as tmp:
        con = duckdb.connect(str(tmp))
        con.execute("CREATE TABLE t AS SELECT range AS x FROM range(100000)")
        print(tmp, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
"""


def test_catalog_temporary_files_of_a_run_killed_while_writing_them(victim: Path, env: dict[str, str],
                                                                    reference: Reference) -> None:
    data_root = victim.parent / "data"
    with fault("kill -9 while writing warehouse.duckdb and views.sql (temporary files and .wal)"):
        proc = subprocess.run([sys.executable, "-c", _KILLED_WHILE_WRITING, str(data_root)], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == -9, proc.stderr
        left = sorted(p.name for p in [*data_root.glob(".warehouse.duckdb.tmp-*"), *data_root.glob("catalog/.*.tmp-*")])
        assert len(left) == 3 and any(n.endswith(".wal") for n in left), left
        done = rerun(victim, env, reference, {})
        for name in left:
            assert f"removed temporary file {data_root}" in done.log and name in done.log, (name, done.log[-3000:])


def test_record_of_a_run_killed_after_building_a_node(victim: Path, env: dict[str, str],
                                                      reference: Reference) -> None:
    """nli_triples and report are deleted; the run rebuilds nli_triples, then is killed as report starts. Its record
    says killed with one node built (it said ``nodes_built 0``), and lists that node."""
    data_root = victim.parent / "data"
    with fault("kill -9 after one node was built: the run record counts it"):
        for stage in ("nli_triples", "report"):
            shutil.rmtree(artifact(data_root, stage))
        before = {p.name for p in (data_root / "runs").glob("*.run.parquet")}
        run = Background.start(victim, env, pause="report@start", tag="killed-count")
        try:
            run.wait_paused(data_root)
        finally:
            run.kill9()
        (killed,) = {p.name for p in (data_root / "runs").glob("*.run.parquet")} - before
        done = rerun(victim, env, reference, {"report": "built"}, "marked 1 earlier run(s) whose process died")
        assert "left by a run that died" in done.log
        record = pq.read_table(data_root / "runs" / killed).to_pylist()[0]
        assert (record["status"], record["nodes_built"]) == ("killed", 1), record
        nodes = pq.read_table(data_root / "runs" / killed.replace(".run.", ".nodes.")).to_pylist()
        assert [(r["node"], r["outcome"]) for r in nodes] == [("nli_triples", "built")]
