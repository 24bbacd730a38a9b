"""Scale-out of corpus building: the pipeline on a 2-worker Dask LocalCluster (prefect-dask) builds the same
artifacts — the same content hash for every node — as Prefect's default thread pool; the runner is a config choice
that no cache key sees."""

from __future__ import annotations

import bz2
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, contents, corpus_config_dict, write_config
from wiki_chain import write_dump

from flows.config import ConfigError, load_config


def corpus_config(tmp: Path, name: str, execution: dict | None) -> Path:
    """The default DAG's corpora without training: the English dump rewritten as a multistream bz2 (as Wikipedia
    publishes it) cut into 4 KiB shards (several ``wiki_shard.en.*`` nodes), German and Russian as single-stream bz2
    (one shard each: other languages, other tasks)."""
    xml = tmp / "enwiki-pages-articles-multistream.xml.bz2"
    if not xml.exists():
        write_dump(bz2.decompress((REPO / "sample" / "wikipedia" / "enwiki-sample.xml.bz2").read_bytes()), xml,
                   multistream=True)
    cfg = corpus_config_dict(tmp / name)
    cfg["sources"]["wikipedia"]["dumps"]["en"] = str(xml)
    cfg["corpora"]["wiki"].update(shard_bytes=4096, processes=1)
    if execution is not None:
        cfg["execution"] = execution
    return write_config(tmp / f"{name}.yaml", cfg)


def polysent_run(config: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flows.cli", "run", str(config)], capture_output=True, text=True,
                          cwd=REPO, timeout=600)


@pytest.mark.slow
def test_dask_local_cluster_builds_the_same_artifacts_as_the_thread_pool(tmp_path: Path) -> None:
    pytest.importorskip("prefect_dask", reason="the extra 'dask' (prefect-dask) is not installed")
    threads = polysent_run(corpus_config(tmp_path, "threads", None))
    assert threads.returncode == 0, threads.stdout[-3000:] + threads.stderr[-3000:]
    dask = polysent_run(corpus_config(tmp_path, "dask", {"runner": "dask", "workers": 2}))
    assert dask.returncode == 0, dask.stdout[-3000:] + dask.stderr[-3000:]
    ref, got = contents(tmp_path / "threads"), contents(tmp_path / "dask")
    shards = [k for k in ref if k.startswith("wiki_shard/")]
    assert len(shards) >= 5, shards  # the English dump really was cut into several shard tasks
    assert got == ref  # same nodes, same cache keys, byte-identical artifacts
    assert "distributed.scheduler" in dask.stdout + dask.stderr  # the nodes ran through a Dask scheduler


def test_execution_section_is_checked_and_stays_out_of_cache_keys(tmp_path: Path) -> None:
    from flows.dag import build_dag

    keys = {}
    for name, execution in (("a", None), ("b", {"runner": "dask", "workers": 4, "address": "tcp://10.0.0.1:8786"})):
        cfg = load_config(corpus_config(tmp_path, name, execution))
        cfg = cfg.model_copy(update={"data_root": tmp_path / "same"})
        keys[name] = {n: node.config for n, node in build_dag(cfg).items()}
    assert keys["a"] == keys["b"]
    bad = corpus_config(tmp_path, "bad", {"runner": "threads", "address": "tcp://x:8786"})
    with pytest.raises(ConfigError, match="set runner: dask"):
        load_config(bad)
    data = yaml.safe_load(bad.read_text())
    data["execution"] = {"runner": "ray"}
    with pytest.raises(ConfigError, match=r"execution\.runner"):
        load_config(write_config(bad, data))
