"""Artifacts on an object store through fsspec (``polysent push`` / ``pull``), tested on fsspec's local file system
(``file://``) and its in-memory one: a pulled data root runs as all cache hits; a damaged or half-uploaded remote
artifact is never taken for a complete one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import fsspec
import pytest
from conftest import contents, corpus_config_dict, write_config

from flows.config import load_config
from flows.nodes import execute_local
from flows.run import run_pipeline
from warehouse import remote


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("remote")
    cfg = corpus_config_dict(tmp / "a")
    path = write_config(tmp / "corpora.yaml", cfg)
    run_pipeline(load_config(path), path, execute_local)
    return path, tmp / "a"


def test_push_then_pull_gives_a_data_root_that_runs_as_all_cache_hits(built: tuple[Path, Path],
                                                                        tmp_path: Path) -> None:
    config, root_a = built
    url = (tmp_path / "store").as_uri()  # file:///…: fsspec's LocalFileSystem
    first = remote.push(root_a, url)
    assert len(first.copied) == len(contents(root_a)) > 5 and not first.skipped
    again = remote.push(root_a, url)
    assert again.copied == [] and again.present == len(first.copied)
    # an interrupted upload (files there, manifest not yet): not an artifact for readers; the next push finishes it
    victim = sorted((tmp_path / "store" / "artifacts").glob("*/*/manifest.json"))[0]
    victim.unlink()
    assert remote.push(root_a, url).copied == [f"{victim.parent.parent.name}/{victim.parent.name}"]

    root_b = tmp_path / "b"
    pulled = remote.pull(url, root_b)
    assert len(pulled.copied) == len(first.copied)
    assert contents(root_b) == contents(root_a)
    assert not any((root_b / "tmp").iterdir())
    summary = run_pipeline(load_config(config, root_b), config, execute_local)
    assert summary.executed == []  # every node a cache hit on the pulled artifacts
    assert remote.pull(url, root_b).copied == []


def test_a_corrupt_remote_artifact_is_refused_and_nothing_is_published(built: tuple[Path, Path],
                                                                      tmp_path: Path) -> None:
    _, root_a = built
    store = tmp_path / "store"
    remote.push(root_a, store.as_uri())
    parquet = sorted(store.glob("artifacts/bitext_pairs/*/**/*.parquet"))[0]
    data = bytearray(parquet.read_bytes())
    data[len(data) // 2] ^= 0xFF
    parquet.write_bytes(bytes(data))
    root_c = tmp_path / "c"
    with pytest.raises(ValueError, match=r"bitext_pairs/.*\.parquet does not match the sha256 in its manifest"):
        remote.pull(store.as_uri(), root_c)
    assert not list(root_c.glob("artifacts/bitext_pairs/*"))  # nothing half-published
    assert not any((root_c / "tmp").iterdir())  # the download folder is gone


def test_push_skips_a_damaged_local_artifact_and_works_on_memory_fs(built: tuple[Path, Path],
                                                                    tmp_path: Path) -> None:
    _, root_a = built
    copy = tmp_path / "copy"
    shutil.copytree(root_a / "artifacts", copy / "artifacts")
    manifest = sorted((copy / "artifacts").glob("xnli_groups/*/manifest.json"))[0]
    listed = next(iter(json.loads(manifest.read_text())["files"]))
    (manifest.parent / listed).unlink()
    counts = remote.push(copy, "memory://polysent-test")
    assert any(s.startswith("xnli_groups/") and "missing" in s for s in counts.skipped)
    fs = fsspec.filesystem("memory")
    assert not fs.glob("/polysent-test/artifacts/xnli_groups/*/manifest.json")
    assert len(counts.copied) == len(contents(root_a)) - 1
    fs.rm("/polysent-test", recursive=True)
