"""The node contract on purpose-built stages: hits, verification, rebuilds, force, and the per-key lock."""

from __future__ import annotations

import logging
import multiprocessing as mp
import time
from pathlib import Path

import polars as pl
import pytest

from contract import StageResult
from warehouse.artifacts import ArtifactStore, Outcome
from warehouse.layout import DataRoot
from warehouse.manifest import Manifest


def _stage(calls: list[int], value: int = 1):
    def build(out: Path) -> StageResult:
        calls.append(value)
        pl.DataFrame({"x": [value] * 3}).write_parquet(out / "t.parquet")
        return StageResult(tables={"t": "t.parquet"}, stats={"value": value})

    return build


def _materialize(store: ArtifactStore, build, config=None, force=False):
    return store.materialize(node="n", stage="s", version="1", config=config or {"a": 1},
                             inputs={"f": {"kind": "file", "sha256": "abc"}}, build=build, force=force)


@pytest.fixture
def store(tmp_path: Path) -> ArtifactStore:
    return ArtifactStore(DataRoot.at(tmp_path / "data"))


def test_second_materialize_is_a_hit_without_building(store: ArtifactStore) -> None:
    calls: list[int] = []
    ref1, out1, _ = _materialize(store, _stage(calls))
    ref2, out2, _ = _materialize(store, _stage(calls))
    assert (out1, out2) == (Outcome.BUILT, Outcome.HIT)
    assert calls == [1]
    assert ref1 == ref2
    assert ref1.rows == {"t": 3}
    m = Manifest.load(ref1.path / "manifest.json")
    assert m.files["t.parquet"]["size"] > 0 and m.stats == {"value": 1}
    assert not any(store.root.tmp.iterdir())


def test_key_changes_with_config_version_and_inputs(store: ArtifactStore) -> None:
    calls: list[int] = []
    a, _, _ = _materialize(store, _stage(calls), {"a": 1})
    b, _, _ = _materialize(store, _stage(calls), {"a": 2})
    c, _, _ = store.materialize(node="n", stage="s", version="2", config={"a": 1},
                                inputs={"f": {"sha256": "abc"}}, build=_stage(calls))
    d, _, _ = store.materialize(node="n", stage="s", version="1", config={"a": 1},
                                inputs={"f": {"sha256": "abd"}}, build=_stage(calls))
    assert len({a.key, b.key, c.key, d.key}) == 4
    assert len(calls) == 4


def test_corrupted_file_is_detected_and_rebuilt(store: ArtifactStore, caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []
    ref, _, _ = _materialize(store, _stage(calls))
    data = ref.path / "t.parquet"
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # same size, different bytes
    data.write_bytes(bytes(raw))
    with caplog.at_level(logging.WARNING, logger="polysent"):
        ref2, outcome, _ = _materialize(store, _stage(calls))
    assert outcome is Outcome.REBUILT
    assert "does not match its sha256" in caplog.text and "rebuilding" in caplog.text
    assert calls == [1, 1]
    assert pl.read_parquet(ref2.path / "t.parquet")["x"].to_list() == [1, 1, 1]


def test_deleted_file_and_missing_manifest_are_rebuilt(store: ArtifactStore) -> None:
    calls: list[int] = []
    ref, _, _ = _materialize(store, _stage(calls))
    (ref.path / "t.parquet").unlink()
    assert store.lookup("s", ref.key)[1] == f"{ref.path}: file t.parquet is missing"
    _, outcome, _ = _materialize(store, _stage(calls))
    assert outcome is Outcome.REBUILT
    (ref.path / "manifest.json").unlink()
    _, outcome, _ = _materialize(store, _stage(calls))
    assert outcome is Outcome.REBUILT
    assert len(calls) == 3


def test_touched_but_identical_file_is_still_a_hit(store: ArtifactStore) -> None:
    calls: list[int] = []
    ref, _, _ = _materialize(store, _stage(calls))
    f = ref.path / "t.parquet"
    f.write_bytes(f.read_bytes())  # new mtime, same content: falls back to the sha256
    _, outcome, _ = _materialize(store, _stage(calls))
    assert outcome is Outcome.HIT


def test_force_rebuilds(store: ArtifactStore) -> None:
    calls: list[int] = []
    _materialize(store, _stage(calls))
    _, outcome, _ = _materialize(store, _stage(calls), force=True)
    assert outcome is Outcome.REBUILT and calls == [1, 1]


def test_failing_stage_leaves_nothing_visible(store: ArtifactStore) -> None:
    def broken(out: Path) -> StageResult:
        (out / "t.parquet").write_text("half")
        raise RuntimeError("stage crashed")

    with pytest.raises(RuntimeError, match="stage crashed"):
        _materialize(store, broken)
    assert not (store.root.artifacts / "s").exists()
    assert not [p for p in store.root.tmp.iterdir() if p.name != "trash"]


def test_declared_but_unwritten_table_is_an_error(store: ArtifactStore) -> None:
    def liar(out: Path) -> StageResult:
        return StageResult(tables={"t": "t.parquet"})

    with pytest.raises(RuntimeError, match="declared table t"):
        _materialize(store, liar)


def _slow_build_in_process(root: str, log_file: str) -> str:
    store = ArtifactStore(DataRoot.at(root))

    def build(out: Path) -> StageResult:
        with open(log_file, "a") as fh:
            fh.write("built\n")
        time.sleep(1.5)
        pl.DataFrame({"x": [1]}).write_parquet(out / "t.parquet")
        return StageResult(tables={"t": "t.parquet"})

    _, outcome, _ = _materialize(store, build)
    return outcome.value


def test_overlapping_runs_build_a_node_once(tmp_path: Path) -> None:
    root, log_file = str(tmp_path / "data"), str(tmp_path / "builds.log")
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        outcomes = pool.starmap(_slow_build_in_process, [(root, log_file), (root, log_file)])
    assert sorted(outcomes) == ["built", "hit"]
    assert Path(log_file).read_text() == "built\n"


def test_sweep_removes_partial_folders_of_dead_runs(store: ArtifactStore) -> None:
    dead = store.root.tmp / "train-abc123abc123-999999-aaaaaa"
    dead.mkdir(parents=True)
    (dead / "model.safetensors").write_text("partial")
    assert store.sweep_tmp() == [dead]
    assert not dead.exists()


def test_concurrent_catalog_updates_lose_no_node(tmp_path: Path) -> None:
    """Nodes finishing at once (Prefect worker threads) must all end up in the views."""
    from concurrent.futures import ThreadPoolExecutor

    from warehouse.catalog import load_current, record_current

    store = ArtifactStore(DataRoot.at(tmp_path / "data"))
    refs = []
    for i in range(12):
        ref, _, _ = store.materialize(node=f"n{i}", stage="s", version="1", config={"i": i},
                                      inputs={"f": {"sha256": "abc"}}, build=_stage([], i))
        refs.append(ref)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda i: record_current(store.root, f"n{i}", refs[i]), range(12)))
    assert sorted(load_current(store.root)) == sorted(f"n{i}" for i in range(12))
