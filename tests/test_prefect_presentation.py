"""What a Prefect user sees of polysent, read back through Prefect's client (``flows/pipeline.py``): flow runs named
after the config and time, verified cache hits in the state ``Cached``, and the report's headline table and HTML path
as artifacts of the flow run.

The Prefect part builds the tiny DAG (the headline table needs its training and evaluation) while a temporary Prefect
server starts (``prefect_test_harness``), then runs the flow twice in this process: once rebuilding the report (every
other node a verified hit), once with every node a hit (as a scheduled run with nothing to do). Marked ``slow``.
"""

from __future__ import annotations

import re
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from conftest import tiny_config_dict, write_config

from flows.run import report_headlines

if TYPE_CHECKING:
    from prefect.client.schemas.objects import Artifact, FlowRun
    from prefect.states import State

REPORT_EXCERPT = """# polysent

## Evaluation

Runs (2), with the content id of each evaluated model:

| run | model | tasks | rows | role |
|---|---|---|---|---|
| a | 1234 | tatoeba | 3 | trained from scratch |

Headline numbers (runs as columns; Δ = trained run − its start model). Values in points (×100).

| task | variant | subset | languages | metric | a | Δ (a − b) |
|---|---|---|---|---|---|---|
| tatoeba | canonical | all | 4 languages | accuracy_mean | 11.88 | +1.50 |
| `sts` | x\\|y | all | – | spearman | 55.26 | – |

Variants: `canonical` — the project's recommended protocol.
"""


def test_headline_table_is_the_table_under_its_paragraph() -> None:
    rows = report_headlines(REPORT_EXCERPT)
    assert [r["task"] for r in rows] == ["tatoeba", "sts"]  # not the runs table above it
    assert rows[0] == {"task": "tatoeba", "variant": "canonical", "subset": "all", "languages": "4 languages",
                       "metric": "accuracy_mean", "a": "11.88", "Δ (a − b)": "+1.50"}
    assert (rows[1]["task"], rows[1]["variant"]) == ("sts", "x|y")  # inline code unwrapped, an escaped pipe kept
    assert report_headlines("# polysent\n\n## Evaluation\n\nNo evaluation results.\n") == []
    assert report_headlines("Headline numbers.\n\nNo table here.\n\n| a |\n|---|\n| 1 |\n") == []


def _build_in_background(path: Path) -> Callable[[], None]:
    """Build the config with the in-process executor on a thread (while the Prefect server starts on the other core);
    returns the join, which re-raises what the build raised."""
    from flows.config import load_config
    from flows.nodes import execute_local
    from flows.run import run_pipeline

    failed: list[BaseException] = []

    def build() -> None:
        try:
            run_pipeline(load_config(path), path, execute_local)
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=build, name="build-tiny")
    thread.start()

    def join() -> None:
        thread.join()
        if failed:
            raise failed[0]
    return join


@pytest.mark.slow
def test_flow_runs_states_and_artifacts_in_prefect(tmp_path: Path) -> None:
    """A run that rebuilds the report (every other node a verified hit), then one with nothing to build."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        FlowRunFilter,
        FlowRunFilterId,
        FlowRunFilterParentFlowRunId,
    )
    from prefect.testing.utilities import prefect_test_harness

    from flows.pipeline import polysent_pipeline

    cfg = tiny_config_dict(tmp_path / "data", steps=2)
    cfg["training"]["tiny"]["dev"]["every"] = 2
    path = write_config(tmp_path / "tiny.yaml", cfg)
    join = _build_in_background(path)
    with prefect_test_harness(server_startup_timeout=90):
        join()
        (report,) = (tmp_path / "data" / "artifacts" / "report").iterdir()
        shutil.rmtree(report)
        mixed = polysent_pipeline(str(path), return_state=True)
        noop = polysent_pipeline(str(path), return_state=True)
        assert mixed.is_completed() and noop.is_completed()
        assert mixed.result()["executed"] == ["report"] and noop.result()["executed"] == []
        with get_client(sync_client=True) as client:
            def flow_runs(state: State) -> tuple[FlowRun, FlowRun, dict[str, str], dict[str, Artifact]]:
                parent = client.read_flow_run(state.state_details.flow_run_id)
                (nodes,) = client.read_flow_runs(flow_run_filter=FlowRunFilter(
                    parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[parent.id])))
                tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[nodes.id])))
                arts = client.read_artifacts(artifact_filter=ArtifactFilter(
                    flow_run_id=ArtifactFilterFlowRunId(any_=[parent.id])))
                return parent, nodes, {t.name: t.state.name for t in tasks}, {a.key: a for a in arts}

            parent, nodes, tasks, arts = flow_runs(mixed)
            assert re.fullmatch(r"tiny \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", parent.name), parent.name
            assert re.fullmatch(r"tiny \d{4}-\d\d-\d\d \d\d:\d\d:\d\d nodes", nodes.name), nodes.name
            assert parent.state.name == nodes.state.name == "Completed"  # a node was built
            assert tasks.pop("report") == "Completed"
            assert tasks and set(tasks.values()) == {"Cached"}, tasks
            assert set(arts) == {"tiny-headline", "tiny-report", "tiny-run"}, sorted(arts)
            headline = arts["tiny-headline"]
            assert headline.type == "table" and '"tatoeba"' in str(headline.data) and '"tiny"' in str(headline.data)
            html = Path(mixed.result()["nodes"]["report"]["path"]) / "report.html"
            assert html.exists() and html.as_uri() in str(arts["tiny-report"].data)
            assert mixed.result()["run_id"] in str(arts["tiny-run"].data)

            parent, nodes, tasks, arts = flow_runs(noop)
            assert parent.state.name == nodes.state.name == "Cached"  # nothing was built: the UI says so
            assert parent.state.type.value == "COMPLETED"
            assert set(tasks.values()) == {"Cached"} and len(tasks) == len(noop.result()["nodes"]), tasks
            assert set(arts) == {"tiny-headline", "tiny-report", "tiny-run"}
