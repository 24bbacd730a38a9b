from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample"
SHARED_DATA = Path(os.environ.get("POLYSENT_SHARED_DATA", REPO.parent / "shared" / "data"))

os.environ.setdefault("PREFECT_HOME", str(REPO / ".prefect"))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        pytest.skip(f"real public data not available at {SHARED_DATA} (set POLYSENT_SHARED_DATA)")
    return SHARED_DATA


def tiny_config_dict(data_root: Path, steps: int = 40) -> dict:
    """The default pipeline with a smaller model and fewer steps: the same DAG, seconds instead of a minute."""
    cfg = yaml.safe_load((REPO / "configs" / "default.yaml").read_text())

    def absolutise(obj):
        if isinstance(obj, dict):
            return {k: absolutise(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [absolutise(v) for v in obj]
        if isinstance(obj, str) and obj.startswith("../"):
            return str((REPO / "configs" / obj).resolve())
        return obj

    cfg = absolutise(cfg)
    cfg["name"] = "tiny"
    cfg["data_root"] = str(data_root)
    cfg["tokenizer"]["vocab_size"] = 2000
    cfg["training"].pop("tiny_vmsst", None)  # tests/test_vmsst.py trains VMSST; the DAG tests need one run
    run = cfg["training"].pop("tiny_combined")
    run.update(steps=steps, warmup_steps=5)
    run["dev"]["every"] = max(1, steps // 2)
    run["encoder"].update(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_length=32)
    cfg["training"]["tiny"] = run
    return cfg


def write_config(path: Path, cfg: dict) -> Path:
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture
def tiny_config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "tiny.yaml", tiny_config_dict(tmp_path / "data"))


def contents(data_root: Path) -> dict[str, str]:
    """stage/key → content hash of every published artifact (what a reader of the warehouse sees)."""
    return {f"{d['stage']}/{d['key']}": d["content_hash"]
            for d in (json.loads(m.read_text()) for m in sorted(Path(data_root).glob("artifacts/*/*/manifest.json")))}


def corpus_config_dict(data_root: Path) -> dict:
    """``tiny_config_dict`` without training: the default DAG's corpora, evaluation sets and report (seconds)."""
    cfg = tiny_config_dict(data_root)
    cfg["training"] = {}
    return cfg
