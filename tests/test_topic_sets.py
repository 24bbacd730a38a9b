"""MewsC-16's topic sets (``experiments/topic_sets.py``): drawn outside the report's clustering texts, decision
disjoint from report and full, report inside full, every third text of a set trains the probe; the probe's figure
(``topic_accuracy``) and zero-shot transfer that skips languages whose labels it never saw."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from experiments import topic_sets
from experiments.kits import cap_clustering


@pytest.fixture(scope="module")
def sets(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from conftest import SHARED_DATA

    from pipelines.eval_sets.clustering import read_clustering

    if not (SHARED_DATA / "mewsc16").is_dir():
        pytest.skip(f"MewsC-16 not available at {SHARED_DATA / 'mewsc16'} (set POLYSENT_SHARED_DATA)")
    data = SHARED_DATA
    work = tmp_path_factory.mktemp("topic")
    report = work / "report_clustering.parquet"
    read_clustering(data / "mewsc16", empty_sentences="skip").write_parquet(report)
    cap_clustering(report, 500)  # the kit's report clustering
    out = topic_sets.files(work / "topic")
    stats = topic_sets.write_topic_sets(data / "mewsc16", report, out)
    return {"stats": stats, "report_clustering": pl.read_parquet(report),
            **{k: pl.read_parquet(p) for k, p in out.items()}}


def test_the_topic_sets_leave_the_report_clustering_texts_out_and_keep_decision_apart(sets: dict) -> None:
    report_texts = set(sets["report_clustering"].select("lang", "text").rows())
    keys = {w: set(sets[w].select("lang", "text").rows()) for w in ("decision", "report", "full")}
    for which, k in keys.items():
        assert not k & report_texts, f"{which}: a report clustering text in the topic set"
        assert len(k) == sets[which].height, f"{which}: a text twice"
    assert not keys["decision"] & keys["full"]
    assert keys["report"] <= keys["full"] and len(keys["full"]) > len(keys["report"])
    # the decision clustering is the decision probe's texts, train and test
    assert set(sets["decision_clustering"].select("lang", "text").rows()) == keys["decision"]
    per = sets["stats"]["decision"]
    assert per["en"] == per["de"] == 600 and "tr" not in per  # Turkish's 458 texts are all in the report's 500
    assert sets["stats"]["report"]["en"] == 600 and sets["stats"]["full"]["en"] == 1500


def test_every_third_text_of_a_set_trains_the_probe(sets: dict) -> None:
    for which in ("decision", "report", "full"):
        t = sets[which]
        assert set(t["split"].unique()) == {"train", "test"}
        for lang, n in sets["stats"][which].items():
            train = t.filter((pl.col("lang") == lang) & (pl.col("split") == "train")).height
            assert train == (n + topic_sets.TRAIN_EVERY - 1) // topic_sets.TRAIN_EVERY, (which, lang)
    en = sets["decision"].filter(pl.col("lang") == "en")
    assert en["label"].n_unique() >= 8  # the probe sees the categories, not one class
    assert en.filter(pl.col("split") == "train")["label"].n_unique() >= 8


def test_the_sets_are_drawn_the_same_on_every_run(sets: dict, tmp_path: Path, shared_data: Path) -> None:
    report = tmp_path / "report.parquet"
    sets["report_clustering"].write_parquet(report)
    out = topic_sets.files(tmp_path / "again")
    topic_sets.write_topic_sets(shared_data / "mewsc16", report, out)
    assert pl.read_parquet(out["decision"]).equals(sets["decision"])


def test_topic_accuracy_is_the_in_language_probe_mean_and_rows_that_read_it_name_the_version() -> None:
    from experiments.figures import evaluation_settings, family, tables_of
    from pipelines.eval_tasks.classification import _figures

    rows = [{"task": "classification", "variant": "mteb", "metric": "accuracy", "value": v} for v in (60.0, 70.0)]
    rows += [{"task": "classification", "variant": "zero_shot", "metric": "accuracy", "value": 5.0},
             {"task": "classification", "variant": "mteb", "metric": "f1", "value": 1.0}]
    assert _figures(rows, []) == {"topic_accuracy": 65.0}
    assert family("decision.topic_accuracy") == "topic" and tables_of("topic_accuracy") == ("eval_classification",)
    s = evaluation_settings(["topic_accuracy"], 32)
    assert s.classification.samples_per_label is None and s.classification.n_experiments == 1
    assert s.clustering is None and s.tatoeba is None
    assert topic_sets.uses_topic_sets(["tatoeba_trained", "decision.mewsc_accuracy"])
    assert topic_sets.uses_topic_sets(["final.topic_accuracy"])
    assert not topic_sets.uses_topic_sets(["mewsc_accuracy", "decision.stsb_mono"])


def test_zero_shot_transfer_skips_languages_whose_labels_the_probe_never_saw(tmp_path: Path) -> None:
    from models.evaluation.results import Results
    from models.evaluation.tasks.classification import Classification, ClassificationSettings

    rng = np.random.default_rng(0)
    rows = []
    for lang, labels in (("en", ["Sports", "Politics"]), ("fr", ["Sports", "Politics"]),
                         ("de", ["Themenportal Sport", "Themenportal Politik"])):
        for split in ("train", "test"):
            for i in range(20):
                rows.append({"dataset": "d", "lang": lang, "split": split, "idx": i, "text": f"{lang}{split}{i}",
                             "label": labels[i % 2]})
    path = tmp_path / "eval_classification.parquet"
    pl.DataFrame(rows).write_parquet(path)
    centres = {"Sports": 0, "Politics": 1, "Themenportal Sport": 0, "Themenportal Politik": 1}
    by_text = {r["text"]: np.eye(4)[centres[r["label"]]] + 0.1 * rng.standard_normal(4) for r in rows}

    def vec(texts: list[str]) -> np.ndarray:
        return np.stack([by_text[t] for t in texts]).astype(np.float32)

    out = Results(run="r", model="m")
    Classification(ClassificationSettings(n_experiments=1, samples_per_label=None),
                   {"eval_classification": path}).score(vec, out)
    scored = {(variant, langs) for _, variant, _, langs, metric, *_ in out.rows if metric == "accuracy"}
    assert {("mteb", "en"), ("mteb", "fr"), ("mteb", "de"), ("zero_shot", "en-en"), ("zero_shot", "en-fr")} == scored

