"""Offline mode of ``datasets`` / ``huggingface_hub`` (``pipelines/hub.py``, issue 39 item 4): decided once per
process through the libraries' own environment variables, before any node thread starts, and never changed around a
load — the threads runner builds the xnli, nli, bitext and eval_sets nodes at once, and a flag flipped and restored
around one node's load changed what another node's load saw."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO

from pipelines.hub import offline_wanted


def test_offline_is_what_the_environment_says_and_the_hub_is_asked_only_when_it_says_nothing() -> None:
    asked: list[str] = []

    def reachable() -> bool:
        asked.append("asked")
        return True

    assert offline_wanted({"HF_HUB_OFFLINE": "1"}, reachable)
    assert offline_wanted({"HF_DATASETS_OFFLINE": "true", "HF_HUB_OFFLINE": "0"}, reachable)
    assert not offline_wanted({"HF_HUB_OFFLINE": "0"}, reachable)  # the caller asked for the hub
    assert not asked
    assert not offline_wanted({}, lambda: True)
    assert offline_wanted({"HF_HUB_OFFLINE": " "}, lambda: False)  # blank is unset: the hub is unreachable


def test_a_process_settles_once_before_importing_the_libraries_and_they_read_the_decision() -> None:
    """A fresh process with neither variable set and no hub: one probe decides offline, both variables say so, the
    libraries imported afterwards read offline, and a later change of the environment changes no decision."""
    code = ("import os, pipelines.hub as hub\n"
            "hub.HUB_HOST = ('127.0.0.1', 9)\n"  # nothing listens on the discard port: the probe fails at once
            "assert hub.settle_offline_mode() is True\n"
            "print(os.environ['HF_HUB_OFFLINE'], os.environ['HF_DATASETS_OFFLINE'])\n"
            "import datasets.config, huggingface_hub.constants\n"
            "print(datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE)\n"
            "os.environ['HF_HUB_OFFLINE'] = '0'\n"
            "print(hub.settle_offline_mode())\n")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE",
                                                            "TRANSFORMERS_OFFLINE")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**env, "PYTHONPATH": str(REPO), "HF_HOME": "/nonexistent/hf-home"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["1", "1", "True", "True", "True"]


# ---------------------------------------------------------------------------------------------- nodes at once
NODES = ("xnli_groups", "nli_triples", "bitext_pairs", "eval_sets")
XNLI = {"en": ["A man plays a guitar.", "The sky is clear.", "Two dogs run."],
        "de": ["Ein Mann spielt Gitarre.", "Der Himmel ist klar.", "Zwei Hunde rennen."]}


class FakeHub:
    """``datasets.load_dataset`` for the four hub-backed nodes' datasets: it records, inside every load, what the
    environment and the libraries say about offline mode, and holds each first wave of loads until one load of every
    node is in flight, so the loads overlap for certain."""

    def __init__(self, wave: int) -> None:
        self.wave, self.in_flight, self.most = wave, 0, 0
        self.seen: list[tuple[str, tuple[Any, ...]]] = []
        self.released = False
        self.cond = threading.Condition()

    def __call__(self, hub_id: str, config: str | None = None, split: str | None = None, **_kw: Any) -> Any:
        import datasets

        with self.cond:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            self.seen.append((hub_id, offline_state()))
            if self.in_flight >= self.wave:
                self.released = True
                self.cond.notify_all()
            self.cond.wait_for(lambda: self.released, timeout=20)
        time.sleep(0.05)
        self.seen.append((hub_id, offline_state()))
        with self.cond:
            self.in_flight -= 1
        if hub_id == "facebook/xnli":
            rows = XNLI[config or "en"]
            return datasets.Dataset.from_dict({"premise": rows, "hypothesis": [r[::-1] for r in rows],
                                               "label": [0, 1, 2]})
        if hub_id == "sentence-transformers/all-nli":
            return datasets.Dataset.from_dict({"anchor": ["A cat sleeps.", "It rains."],
                                               "positive": ["A cat is asleep.", "Rain falls."],
                                               "negative": ["A cat runs.", "It is dry."]})
        if hub_id == "Helsinki-NLP/opus-100":
            return datasets.Dataset.from_dict({"translation": [{"de": f"Satz Nummer {i}.", "en": f"Sentence {i}."}
                                                               for i in range(5)]})
        if hub_id == "mteb/sts12-sts":
            return datasets.Dataset.from_dict({"sentence1": ["a b", "c d"], "sentence2": ["a c", "e f"],
                                               "score": [4.0, 1.0]})
        raise AssertionError(f"unexpected hub load {hub_id}")


def offline_state() -> tuple[Any, ...]:
    """What a load would go by: the two variables and the flags the libraries read from them at import."""
    import datasets.config
    import huggingface_hub.constants

    return (os.environ.get("HF_HUB_OFFLINE"), os.environ.get("HF_DATASETS_OFFLINE"), datasets.config.HF_HUB_OFFLINE,
            huggingface_hub.constants.HF_HUB_OFFLINE)


def test_the_hub_backed_nodes_built_at_once_all_load_under_one_unchanged_offline_mode(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The four nodes a config with hub sources has (xnli_groups, nli_triples, bitext_pairs, eval_sets) are built by
    ``run_pipeline`` on four threads at once — what Prefect's threads runner does — each through ``datasets``
    (faked: no network here). The libraries' flags are set to a reading no run would choose (online, while the
    environment says offline), so a write by any route shows: every load, at its start and at its end, sees the state
    from before the run, and the state after it is the same."""
    import datasets
    import datasets.config
    import huggingface_hub.constants

    from flows.config import load_config
    from flows.dag import build_dag
    from flows.nodes import execute
    from flows.run import run_pipeline

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    hub = FakeHub(wave=len(NODES))
    monkeypatch.setattr(datasets, "load_dataset", hub)
    config = {"name": "hub-nodes", "data_root": str(tmp_path / "data"),
              "sources": {"xnli": {"format": "hub"},
                          "bitext": [{"format": "hub", "hub_id": "Helsinki-NLP/opus-100", "config": "de-en",
                                      "src": "en", "tgt": "de"}],
                          "nli": [{"name": "allnli", "format": "hub", "hub_id": "sentence-transformers/all-nli",
                                   "config": "triplet"}],
                          "eval": {"hub": ["STS12"]}},
              "corpora": {"xnli_groups": {"languages": ["en", "de"], "splits": ["dev"]},
                          "nli_triples": {"xnli_split": "dev", "languages": ["en", "de"]},
                          "bitext_pairs": {"pivots": ["en"]}}}
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    cfg = load_config(path)
    nodes = {n: node for n, node in build_dag(cfg).items() if n in NODES}
    assert sorted(nodes) == sorted(NODES) and not any(node.deps for node in nodes.values())

    def at_once(todo: dict, ctx: Any) -> dict:
        with ThreadPoolExecutor(max_workers=len(todo)) as pool:
            futures = {name: pool.submit(execute, node, {}, ctx) for name, node in todo.items()}
            return {name: f.result() for name, f in futures.items()}

    summary = run_pipeline(cfg, path, at_once, nodes=nodes)
    assert sorted(summary.results) == sorted(NODES)
    assert hub.most == len(NODES)  # one load of every node in flight at once
    assert {hub_id for hub_id, _ in hub.seen} == {"facebook/xnli", "sentence-transformers/all-nli",
                                                  "Helsinki-NLP/opus-100", "mteb/sts12-sts"}
    states = {state for _, state in hub.seen}
    assert len(states) == 1, states  # every load, at its start and its end, saw one state
    assert states == {offline_state()}  # and the run left it so
    # offline (conftest says so), through both variables; the libraries' readings untouched
    assert offline_state() == ("1", "1", False, False)
