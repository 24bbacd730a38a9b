"""kill -9 of ``polysent run`` (its whole process group) inside each kind of node, then a rerun.

The fault hook (``POLYSENT_FAULT_PAUSE``, flows/nodes.py) stops the node at a known point of its build, so the kill
lands inside it every time: after an extraction shard has written its Parquet (Prefect executor, with its thread pool
and API server in the killed group), after the XNLI regrouping has written its tables, before pivot sampling has
written anything, after training's first checkpoint (the rerun resumes from it), and after evaluation's first
embedding-cache shard (the rerun reuses it). The rerun must sweep the dead run's temporary folder, mark its run record
``killed``, reuse every node finished before the kill, and end equal to the uninterrupted reference run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from faults.harness import (
    Background,
    Reference,
    assert_same_as_reference,
    contents,
    fault,
    last_run_outcomes,
    manifest_of,
    run_config,
    run_statuses,
    write_fault_config,
)

pytestmark = pytest.mark.faults

CASES = [
    # POLYSENT_FAULT_PAUSE (node pattern @ point), the node's stage (its temporary folder), executor
    pytest.param("wiki_shard.en.0000@written", "wiki_shard", "prefect", id="extraction-prefect"),
    pytest.param("xnli_groups@written", "xnli_groups", "local", id="regrouping-xnli"),
    pytest.param("bitext_pairs@start", "bitext_pairs", "local", id="pivot-sampling"),
    pytest.param("train.tiny@cache/checkpoints/*/step-*", "train", "local", id="training-after-checkpoint"),
    pytest.param("evaluate.tiny@cache/embeddings/*/*.keys.npy", "evaluate", "local", id="evaluation-mid-cache"),
]


@pytest.mark.parametrize(("pause", "stage", "executor"), CASES)
def test_kill9_inside_node_then_rerun(pause: str, stage: str, executor: str, reference: Reference,
                                      env: dict[str, str], tmp_path: Path) -> None:
    config = write_fault_config(tmp_path)
    data_root = config.parent / "data"
    node = pause.split("@")[0]
    with fault(f"kill -9 in {node} ({executor})"):
        run = Background.start(config, env, executor=executor, pause=pause, tag="killed")
        try:
            paused = run.wait_paused(data_root)
        finally:
            run.kill9()
        assert paused["node"] == node
        # the node's own artifact is not visible under its final name; what was published before is complete
        before = contents(data_root)
        assert not [k for k, n in published_nodes(data_root).items() if n == node], f"a partial {node} is visible"
        assert all(reference.contents.get(k) == v for k, v in before.items()), "a published artifact differs"
        assert list((data_root / "tmp").glob(f"{stage}-*")), "the killed node's temporary folder should be there"

        rerun = run_config(config, env, executor=executor)
        assert rerun.rc == 0, rerun.explain()
        log = rerun.log
        assert "left by a run that died" in log, log[-3000:]
        assert "marked 1 earlier run(s) whose process died as 'killed'" in log, log[-3000:]
        by_key, by_node = last_run_outcomes(data_root)
        assert all(by_key[k.split("/")[1]] == "hit" for k in before), "a node finished before the kill was rebuilt"
        assert by_node[node] == "built"
        if stage == "train":  # resumed from the checkpoint the kill left, and still equal to the reference
            assert manifest_of(data_root, "train")["stats"]["resumed_from"] == 5
            assert "resumed from" in log
        if stage == "evaluate":  # the cache shards written before the kill were reused
            assert re.search(r"evaluate tiny: \d+ distinct sentences, \d+ encoded, [1-9]\d* from the embedding cache",
                             log), log[-3000:]
        assert run_statuses(data_root) == ["completed", "killed"]
        assert_same_as_reference(data_root, reference)


def published_nodes(data_root: Path) -> dict[str, str]:
    """stage/key → node of every published artifact."""
    out = {}
    for m in data_root.glob("artifacts/*/*/manifest.json"):
        d = json.loads(m.read_text())
        out[f"{d['stage']}/{d['key']}"] = d["node"]
    return out
