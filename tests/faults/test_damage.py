"""Damage between runs: a deleted artifact file, flipped bytes, an unreadable manifest, a deleted catalog, and a damaged
or deleted Prefect store. The next run must notice (and say so in its log), rebuild only what is damaged, and end
equal to the reference run.

All tests share one data root, built once (module fixture); each leaves it equal to the reference for the next.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from faults.harness import (
    Finished,
    Reference,
    assert_same_as_reference,
    contents,
    fault,
    flat,
    last_run_outcomes,
    run_config,
    write_fault_config,
)

pytestmark = pytest.mark.faults


@pytest.fixture(scope="module")
def victim(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str], reference: Reference) -> Path:
    config = write_fault_config(tmp_path_factory.mktemp("damage"))
    done = run_config(config, env)
    assert done.rc == 0, done.explain()
    assert contents(config.parent / "data") == reference.contents
    return config


def rerun(config: Path, env: dict[str, str], reference: Reference, rebuilt: set[str], *phrases: str,
          executor: str = "local") -> Finished:
    """Rerun; exactly the ``rebuilt`` nodes are rebuilt (the rest hits), the log holds ``phrases``, and the end
    state equals the reference."""
    done = run_config(config, env, executor=executor)
    assert done.rc == 0, done.explain()
    for phrase in phrases:
        assert phrase in done.log, f"the log does not say {phrase!r}:\n{done.log[-4000:]}"
    _, by_node = last_run_outcomes(config.parent / "data")
    assert {n: o for n, o in by_node.items() if o != "hit"} == dict.fromkeys(rebuilt, "rebuilt")
    assert_same_as_reference(config.parent / "data", reference)
    return done


def only(paths: list[Path]) -> Path:
    assert paths, "nothing matched"
    return sorted(paths)[0]


def test_deleted_artifact_file_is_detected_and_rebuilt(victim: Path, env: dict[str, str],
                                                       reference: Reference) -> None:
    art = only(list((victim.parent / "data" / "artifacts" / "bitext_pairs").iterdir()))
    part = only(list(art.glob("bitext_pairs/**/*.parquet")))
    with fault("deleted artifact file (bitext_pairs part)"):
        part.unlink()
        rerun(victim, env, reference, {"bitext_pairs"}, "bitext_pairs: artifact",
              f"file {part.relative_to(art).as_posix()} is missing; rebuilding")


def test_flipped_bytes_are_detected_and_rebuilt(victim: Path, env: dict[str, str], reference: Reference) -> None:
    """Same size, other bytes (the mtime changes with the write): the sha256 check catches it; training reruns and
    reproduces the same model, so evaluation and report stay cached."""
    art = only(list((victim.parent / "data" / "artifacts" / "train").iterdir()))
    weights = max((p for p in art.glob("model/**/*") if p.is_file()), key=lambda p: p.stat().st_size)
    with fault("flipped bytes (model weights)"):
        data = bytearray(weights.read_bytes())
        mid = len(data) // 2
        data[mid:mid + 64] = bytes(b ^ 0xFF for b in data[mid:mid + 64])
        weights.write_bytes(bytes(data))
        rerun(victim, env, reference, {"train.tiny"}, "train.tiny: artifact",
              f"file {weights.relative_to(art).as_posix()} does not match its sha256 in the manifest; rebuilding")


def test_unreadable_manifest_is_detected_and_rebuilt(victim: Path, env: dict[str, str],
                                                     reference: Reference) -> None:
    manifest = only(list((victim.parent / "data" / "artifacts" / "evaluate").glob("*/manifest.json")))
    with fault("truncated manifest (evaluate)"):
        manifest.write_bytes(manifest.read_bytes()[: manifest.stat().st_size // 2])
        rerun(victim, env, reference, {"evaluate.tiny"}, "evaluate.tiny: artifact", "manifest.json is unreadable")


def test_deleted_catalog_and_warehouse_file_are_rewritten(victim: Path, env: dict[str, str],
                                                          reference: Reference) -> None:
    data_root = victim.parent / "data"
    with fault("deleted catalog (current.json, views.sql, warehouse.duckdb)"):
        for p in (data_root / "catalog" / "current.json", data_root / "catalog" / "views.sql",
                  data_root / "warehouse.duckdb"):
            p.unlink()
        done = rerun(victim, env, reference, set())
        assert "executed 0 node(s) (all cache hits)" in done.log


def preflight(env: dict[str, str]) -> str:
    """What ``polysent run`` does before starting Prefect (flows/prefect_db.py, called by flows/cli.py's
    ``cmd_run``), alone in a process of its own so that PREFECT_HOME is read as a run reads it."""
    code = ("import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stdout);"
            "from flows.prefect_db import quarantine_corrupt_database as q; print('moved:', q())")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return flat(proc.stdout)


def test_damaged_or_deleted_prefect_store(victim: Path, env: dict[str, str], reference: Reference,
                                          tmp_path: Path) -> None:
    """Nothing a run needs is in Prefect's store (no persisted task results; artifacts verify themselves): with it
    damaged or gone, a Prefect-executed run is all cache hits and the warehouse is unchanged. A damaged API database
    is detected and moved aside before Prefect starts (without that, the run fails after Prefect's 90 s start-up
    timeout)."""
    home = tmp_path / "prefect-home"  # its own, so the damage cannot reach other tests
    # a no-op run is recorded without starting Prefect (flows/run.py:run_if_unchanged): this test needs it started
    penv = {**env, "PREFECT_HOME": str(home), "POLYSENT_ALWAYS_FLOW": "1"}
    first = run_config(victim, penv, executor="prefect")
    assert first.rc == 0 and "executed 0 node(s) (all cache hits)" in first.log, first.explain()
    db = home / "prefect.db"
    assert db.exists() and not (home / "storage").exists(), sorted(p.name for p in home.iterdir())
    assert "moved: None" in preflight(penv)  # an intact database is left alone

    with fault("corrupted Prefect API database"):
        data = bytearray(db.read_bytes())
        for i in range(0, len(data), 997):
            data[i] ^= 0xFF
        db.write_bytes(bytes(data))
        # polysent run itself detects it and moves it aside before Prefect starts (flows/cli.py → flows/prefect_db.py)
        done = rerun(victim, penv, reference, set(), executor="prefect")
        assert "executed 0 node(s) (all cache hits)" in done.log
        assert "is damaged" in done.log and "prefect.db.corrupt-" in done.log, done.log[-3000:]
        assert list(home.glob("prefect.db.corrupt-*"))

    with fault("deleted Prefect home (database, memo store)"):
        shutil.rmtree(home)
        done = rerun(victim, penv, reference, set(), executor="prefect")
        assert "executed 0 node(s) (all cache hits)" in done.log
