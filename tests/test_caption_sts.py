"""STS17-like decision pairs (``experiments/caption_sts.py``): STS-B multi-mt train captions in all 16 language
pairs of en, de, es, fr; a pair one of whose texts a training table holds is dropped in every language pair; the
figures ``captions_mono`` / ``captions_cross`` read them and nothing else."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from experiments import caption_sts


@pytest.fixture(scope="module")
def stsb() -> Path:
    from conftest import SHARED_DATA

    path = SHARED_DATA / "sts" / "stsb-multi-mt"
    if not (path / "stsb-en-train.csv").is_file():
        pytest.skip(f"STS-B multi-mt not available at {path} (set POLYSENT_SHARED_DATA)")
    return path


def test_caption_pairs_are_every_fourth_caption_in_sixteen_language_pairs(stsb: Path) -> None:
    t = caption_sts.caption_pairs(stsb)
    assert t["dataset"].unique().to_list() == [caption_sts.DATASET]
    per = dict(t.group_by("subset").len().rows())
    assert len(per) == 16 and set(per.values()) == {500}
    assert {"en-en", "de-de", "es-es", "fr-fr", "en-de", "de-en", "fr-es"} <= set(per)
    assert t["idx"].max() == caption_sts.CAPTIONS and (t["idx"] % caption_sts.EVERY == 0).all()
    en = t.filter(pl.col("subset") == "en-en").sort("idx")
    assert en["s1"][0] == "Three men are playing chess."  # line 4 of STS-B's train split
    assert en["s1"][-1].startswith("A young girl dressed in a Minn")  # line 2,000: the last caption pair
    cross = t.filter(pl.col("subset") == "en-de").sort("idx")
    assert cross["s1"].to_list() == en["s1"].to_list()  # s1 in English, s2 in German, the same pairs
    assert cross["score"].to_list() == en["score"].to_list()


def test_a_pair_seen_in_training_in_any_language_is_dropped_in_every_language_pair(stsb: Path,
                                                                                     tmp_path: Path) -> None:
    t = caption_sts.caption_pairs(stsb)
    de = t.filter(pl.col("subset") == "de-de").sort("idx")
    seen_idx, seen_text = int(de["idx"][3]), de["s2"][3]
    # a training table (partitioned folder, as the kit's bitext) that holds the German text, differently spaced/cased
    folder = tmp_path / "bitext_pairs" / "lang=de"
    folder.mkdir(parents=True)
    pl.DataFrame({"pivot_text": ["unrelated"], "text": ["  " + seen_text.upper() + " "], "n": [1]}).write_parquet(
        folder / "part-0.parquet")
    decision = tmp_path / "decision_sts.parquet"
    dev = t.head(3).with_columns(pl.lit("stsb-multi-mt").alias("dataset"))
    dev.write_parquet(decision)
    out = tmp_path / "out.parquet"
    stats = caption_sts.write_caption_sts(stsb, {"bitext_pairs": tmp_path / "bitext_pairs"}, decision, out)
    got = pl.read_parquet(out)
    caps = got.filter(pl.col("dataset") == caption_sts.DATASET)
    assert seen_idx not in caps["idx"].to_list()
    n = t.filter(pl.col("subset") == "en-en").height
    assert stats["dropped_seen_in_training"] >= 1 and stats["pairs_per_language_pair"] == n - stats[
        "dropped_seen_in_training"]
    assert set(caps.group_by("subset").len()["len"].to_list()) == {stats["pairs_per_language_pair"]}
    assert got.filter(pl.col("dataset") == "stsb-multi-mt").equals(dev.select(got.columns).cast(got.schema))
    with pytest.raises(ValueError, match="already holds dataset 'stsb-captions'"):
        caption_sts.write_caption_sts(stsb, {}, out, tmp_path / "again.parquet")


def test_the_caption_figures_read_the_caption_rows_only() -> None:
    from experiments.figures import evaluation_settings
    from pipelines.eval_tasks.sts import _figures

    def row(dataset: str, langs: str, v: float) -> dict:
        return {"task": "sts", "variant": "canonical", "metric": "spearman", "subset": f"{dataset}/{langs}",
                "languages": langs, "value": v}

    rows = [row("stsb-captions", "en-en", 80.0), row("stsb-captions", "de-de", 70.0),
            row("stsb-captions", "en-de", 60.0), row("stsb-multi-mt", "en-en", 10.0)]
    got = _figures(rows, [])
    assert got["captions_mono"] == 75.0 and got["captions_cross"] == 60.0 and got["stsb_mono"] == 10.0
    assert "captions" not in got
    assert evaluation_settings(["decision.captions_mono"], 32).sts.datasets == ("stsb-captions",)
    assert evaluation_settings(["decision.stsb_mono"], 32).sts.datasets == ("stsb-multi-mt",)
    assert caption_sts.uses_caption_sets(["decision.captions_cross"])
    assert not caption_sts.uses_caption_sets(["decision.stsb_cross", "sts17_mono"])



def test_scoring_sets_are_added_to_a_prepared_kit_in_place_without_touching_its_training_hashes(
        stsb: Path, tmp_path: Path) -> None:
    """``kits.add_scoring_sets``: the topic sets and the caption pairs join a prepared kit's manifest (hashes and
    versions), the decision STS table is replaced by one holding the dev rows as they were plus the captions, the
    training hashes stay; a second call changes nothing; a training table is never replaced in place."""
    from experiments import kits, topic_sets
    from pipelines.eval_sets.clustering import read_clustering

    data = stsb.parent.parent
    base = kits.kit_dir("me5_replication", tmp_path)
    for d in ("report", "decision", "train"):
        (base / d).mkdir(parents=True)
    read_clustering(data / "mewsc16", empty_sentences="skip").write_parquet(base / "report" / "eval_clustering.parquet")
    kits.cap_clustering(base / "report" / "eval_clustering.parquet", 500)
    dev = caption_sts.caption_pairs(stsb).head(5).with_columns(pl.lit("stsb-multi-mt").alias("dataset"))
    dev.write_parquet(base / "decision" / "eval_sts.parquet")
    pl.DataFrame({"text": ["a corpus sentence"]}).write_parquet(base / "train" / "bitext_pairs.parquet")
    manifest = {"kit": "me5_replication", "scoring_sets": kits.SCORING_SETS["me5_replication"], "stats": {},
                "tables": {"train": {"bitext_pairs": "train/bitext_pairs.parquet"},
                           "report": {"eval_clustering": "report/eval_clustering.parquet"},
                           "decision": {"eval_sts": "decision/eval_sts.parquet"}},
                "hashes": {"train": {"bitext_pairs": "h"}, "report": {"eval_clustering": "c"},
                           "decision": {"eval_sts": "old"}}}
    (base / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    m = kits.add_scoring_sets(data, tmp_path)
    assert {k: m[k] for k in kits.SCORING_SET_VERSIONS} == kits.SCORING_SET_VERSIONS
    assert m["hashes"]["train"] == {"bitext_pairs": "h"} and m["hashes"]["report"]["eval_clustering"] == "c"
    assert m["hashes"]["decision"]["eval_sts"] != "old"
    decision = kits.tables("me5_replication", "decision", tmp_path)
    assert set(decision) == {"eval_sts", "eval_classification", "eval_clustering"}
    table = pl.read_parquet(decision["eval_sts"])
    assert table.filter(pl.col("dataset") == "stsb-multi-mt").equals(dev.select(table.columns).cast(table.schema))
    assert table.filter(pl.col("dataset") == caption_sts.DATASET).height == 16 * 500
    full = pl.read_parquet(kits.tables("me5_replication", "full", tmp_path)["eval_classification"])
    assert full["dataset"].unique().to_list() == [topic_sets.DATASET] and full.height > 5000
    assert kits.add_scoring_sets(data, tmp_path) == m  # already there: nothing changes
    with pytest.raises(ValueError, match=r"tables\.report\.eval_classification is already in kit"):
        kits.add_tables("me5_replication", {"report": {"eval_classification": base / "x.parquet"}}, {}, tmp_path)
    with pytest.raises(ValueError, match="a training table is never replaced"):
        kits.add_tables("me5_replication", {}, {}, tmp_path, replace=("train.bitext_pairs",))
    assert not list(base.rglob(".*tmp"))
