"""The GPU drain's carry (``experiments/carry.py``): the manifest verbatim, the packed start, the tokenizer, every
scoring table and only the training tables the pending rows read, under the device tool's 64 MiB."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments import carry as carry_module
from experiments import kits


def _kit(root: Path) -> Path:
    base = kits.kit_dir("me5_replication", root)
    files = {"report/eval_tatoeba.parquet": b"t" * 100, "decision/eval_sts.parquet": b"s" * 50,
             "bitext/bitext_pairs/lang=de/part-0.parquet": b"b" * 300, "xnli/xnli_groups.parquet": b"x" * 200,
             "all_languages/bitext_all/part-0.parquet": b"a" * 5000, "start/packed.json": b"{}",
             "start/e5-small-q4-packed.bin.xz": b"p" * 400}
    for rel, data in files.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_bytes(data)
    manifest = {"kit": "me5_replication", "tables": {
        "train": {"bitext_pairs": "bitext/bitext_pairs", "xnli_groups": "xnli/xnli_groups.parquet",
                  "bitext_pairs_all": "all_languages/bitext_all"},
        "report": {"eval_tatoeba": "report/eval_tatoeba.parquet"},
        "full": {"eval_tatoeba": "report/eval_tatoeba.parquet"},
        "decision": {"eval_sts": "decision/eval_sts.parquet"}}, "hashes": {"train": {}}}
    (base / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return base


def test_the_carry_holds_what_the_pending_rows_read_and_the_manifest_as_it_is(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    base = _kit(tmp_path / "work")
    monkeypatch.setattr(carry_module, "needed_tables",
                        lambda names=None, include_cpu=False: {"me5_replication": {"xnli_groups", "bitext_pairs"}})
    out = tmp_path / "carry"
    r = carry_module.carry(out, root=tmp_path / "work")
    got = out / "kits" / "me5_replication"
    assert (got / "manifest.json").read_bytes() == (base / "manifest.json").read_bytes()
    for rel in ("report/eval_tatoeba.parquet", "decision/eval_sts.parquet", "xnli/xnli_groups.parquet",
                "bitext/bitext_pairs/lang=de/part-0.parquet", "start/e5-small-q4-packed.bin.xz", "start/packed.json"):
        assert (got / rel).read_bytes() == (base / rel).read_bytes(), rel
    assert not (got / "all_languages").exists()
    assert r["kits"]["me5_replication"] == {"train_carried": ["bitext_pairs", "xnli_groups"],
                                            "train_left": ["bitext_pairs_all"]}
    assert r["bytes"] == 100 + 50 + 300 + 200 + 400 + 2 + (base / "manifest.json").stat().st_size
    assert (out / "kits" / "COMMIT").read_text().strip()
    assert not list(tmp_path.glob(".carry*"))  # built under a temporary name, renamed whole
    # over the limit: an error naming the largest tables, and no folder half-written
    monkeypatch.setattr(carry_module, "needed_tables",
                        lambda names=None, include_cpu=False: {"me5_replication": {"bitext_pairs_all"}})
    with pytest.raises(ValueError, match=r"over the device tool's 0 MiB \(largest: me5_replication/all_languages"):
        carry_module.carry(tmp_path / "carry2", root=tmp_path / "work", limit=1000)
    assert not (tmp_path / "carry2").exists() and not list(tmp_path.glob(".carry2*"))


def test_the_pending_rows_name_the_tables_their_objectives_read() -> None:
    from experiments.drain import pending_gpu_rows

    need = carry_module.needed_tables()
    questions = {p.question for p in pending_gpu_rows()}
    if "ease" in questions:
        assert {"hard_negatives", "entity_vectors"} <= need["me5_replication"]
    for kit, tables in need.items():
        assert tables <= set(kits.TRAIN_TABLES[kit]), (kit, tables)
