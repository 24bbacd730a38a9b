"""Two runs of the same config on the same data root at the same time.

The node contract takes a per-key file lock: the second run waits for the node the first is building and then finds
a hit, so each node is built exactly once and both runs end with the reference's warehouse. The overlap is made
certain with the fault hook: run A is held at the start of ``xnli_groups`` (lock taken) until run B is seen waiting
for it. A second test interleaves, in one process, a run starting up (it sweeps ``tmp/``) with another run replacing
a damaged artifact (it parks the old folder in ``tmp/trash`` while renaming the new one into place).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from contract import StageResult
from faults.harness import Background, Reference, assert_same_as_reference, fault, run_statuses, write_fault_config
from warehouse.artifacts import ArtifactStore, Outcome
from warehouse.layout import DataRoot

pytestmark = pytest.mark.faults


def test_two_concurrent_runs_build_each_node_once(reference: Reference, env: dict[str, str], tmp_path: Path) -> None:
    config = write_fault_config(tmp_path)
    data_root = config.parent / "data"
    with fault("two concurrent runs on one data root"):
        a = Background.start(config, env, pause="xnli_groups@start", tag="a")
        b = None
        try:
            paused = a.wait_paused(data_root)
            b = Background.start(config, env, tag="b")
            b.wait_until("run B waits for run A's lock", lambda: "another run is building" in b.log())
            paused["marker"].unlink()  # release A
            done_a, done_b = a.finish(), b.finish()
        finally:
            for run in (a, b):
                if run is not None and run.proc.poll() is None:
                    run.kill9()
        assert done_a.rc == 0, done_a.explain()
        assert done_b.rc == 0, done_b.explain()
        assert "xnli_groups: built meanwhile by another run, cache hit" in b.log()
        rows = pq.read_table(sorted(data_root.glob("runs/*.nodes.parquet"))).to_pylist()
        per_node: dict[str, list[str]] = {}
        for r in rows:
            per_node.setdefault(r["node"], []).append(r["outcome"])
        assert len(per_node) == 18
        assert {n: sorted(o) for n, o in per_node.items() if sorted(o) != ["built", "hit"]} == {}, \
            "a node was built twice (or by neither run)"
        assert run_statuses(data_root) == ["completed", "completed"]
        assert_same_as_reference(data_root, reference)


def test_startup_sweep_during_an_artifact_replacement(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run A replaces a damaged artifact: ``publish_dir`` makes a folder in ``tmp/trash`` and moves the old artifact
    into it. Run B starting at that moment sweeps ``tmp/``; it must leave a live run's trash alone, or A's rename fails
    and its rebuild is lost."""
    root = DataRoot.at(tmp_path / "data")
    store = ArtifactStore(root)

    def build(out: Path) -> StageResult:
        pq.write_table(pa.table({"x": list(range(100))}), out / "t.parquet")
        return StageResult(tables={"t": "t.parquet"})

    args = {"node": "n", "stage": "s", "version": "1", "config": {}, "inputs": {}, "build": build}
    ref, _, _ = store.materialize(**args)
    (ref.path / "t.parquet").write_bytes(b"damaged")

    import warehouse.atomic as atomic

    real_mkdtemp = atomic.tempfile.mkdtemp
    swept: list[Path] = []

    def mkdtemp_then_other_run_starts(*a: Any, **k: Any) -> str:
        made = real_mkdtemp(*a, **k)
        swept.extend(ArtifactStore(root).sweep_tmp())  # run B's start-up, between A's two steps
        return made

    with fault("start-up sweep during an artifact replacement"):
        monkeypatch.setattr(atomic.tempfile, "mkdtemp", mkdtemp_then_other_run_starts)
        rebuilt, outcome, _ = store.materialize(**args)
        monkeypatch.undo()
        assert outcome is Outcome.REBUILT and pq.read_table(rebuilt.path / "t.parquet").num_rows == 100
        assert store.lookup("s", rebuilt.key)[0] is not None
        assert not swept and not any(root.trash.iterdir())
