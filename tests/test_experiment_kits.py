"""experiments/kits.py and experiments/figures.py: the held-out NTREX documents, the clustering cap, the figures a
verdict reads from an ``eval_results`` table, and (with the shared data) a kit's decision sets disjoint from its report
sets."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.figures import evaluation_settings, figures, scored_by_suite, tables_of
from experiments.kits import HELD_OUT_EVERY, NTREX_CODES, _write_ntrex, cap_clustering
from models.evaluation.results import Results

CODES = {"en": "eng", **NTREX_CODES}


def _ntrex(root: Path, docs: list[str]) -> Path:
    folder = root / "ntrex128"
    folder.mkdir(parents=True)
    (folder / "DOCUMENT_IDS.tsv").write_text("\n".join(docs) + "\n", encoding="utf-8")
    names = ["newstest2019-src.eng.txt"] + [f"newstest2019-ref.{c}.txt" for c in NTREX_CODES.values()]
    for name in names:
        (folder / name).write_text("\n".join(f"{name}:{i}:{d}" for i, d in enumerate(docs)) + "\n",
                                   encoding="utf-8")
    return folder


def test_every_fifth_document_is_held_out_whole(tmp_path: Path) -> None:
    docs = [f"doc{k}" for k in range(12) for _ in range(k % 3 + 1)]  # documents of 1–3 lines
    folder = _ntrex(tmp_path / "data", docs)
    train = _write_ntrex(folder, CODES, HELD_OUT_EVERY, tmp_path / "train", tmp_path / "held")
    held_docs = {f"doc{k}" for k in range(12)[HELD_OUT_EVERY - 1::HELD_OUT_EVERY]}
    en_train = train["en"].read_text(encoding="utf-8").splitlines()
    en_held = (tmp_path / "held" / "newstest2019-src.eng.txt").read_text(encoding="utf-8").splitlines()
    assert {x.rsplit(":", 1)[1] for x in en_held} == held_docs
    assert not {x.rsplit(":", 1)[1] for x in en_train} & held_docs
    assert len(en_train) + len(en_held) == len(docs)
    for lang in NTREX_CODES:  # line-aligned across languages
        other = train[lang].read_text(encoding="utf-8").splitlines()
        assert [x.split(":", 1)[1] for x in other] == [x.split(":", 1)[1] for x in en_train]


def test_a_file_shorter_than_the_document_ids_is_refused_by_name(tmp_path: Path) -> None:
    folder = _ntrex(tmp_path / "data", ["a", "a", "b"])
    (folder / "newstest2019-ref.deu.txt").write_text("x\ny\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"newstest2019-ref\.deu\.txt: 2 lines, fewer than DOCUMENT_IDS"):
        _write_ntrex(folder, CODES, HELD_OUT_EVERY, tmp_path / "train", tmp_path / "held")


def test_figures_split_trained_and_never_trained_languages_and_sts_by_language(tmp_path: Path) -> None:
    r = Results("run", "model")
    for lang, acc in (("deu", 90.0), ("fra", 80.0), ("ita", 70.0), ("jpn", 50.0)):
        r.add("tatoeba", "canonical", lang, f"{lang}-eng", {"accuracy_mean": acc, "accuracy_xx_en": 0.0}, 300)
    r.add("tatoeba", "canonical", "all", "4 languages", {"accuracy_mean": 72.5}, 4)
    r.add("bucc", "oracle", "zh-en/sample", "zh-en", {"f1": 88.0, "precision": 1.0}, 257)
    r.add("sts", "canonical", "sts17/en-en", "en-en", {"spearman": 80.0}, 250)
    r.add("sts", "canonical", "sts17/es-es", "es-es", {"spearman": 70.0}, 250)
    r.add("sts", "canonical", "sts17/en-de", "en-de", {"spearman": 40.0}, 250)
    r.add("sts", "canonical", "stsb-multi-mt/de-de", "de-de", {"spearman": 77.0}, 500)
    r.add("sts", "canonical", "stsb-multi-mt/de-fr", "de-fr", {"spearman": 66.0}, 500)
    r.add("xsim", "laser", "ntrex_heldout/deu-eng", "deu-eng", {"error_rate": 1.0}, 400)
    r.add("xsim", "laser", "ntrex_heldout/mean", "5 pairs", {"error_rate": 0.5}, 5)
    r.write(tmp_path / "eval_results.parquet")
    got = figures(tmp_path / "eval_results.parquet", ("deu", "fra"))
    assert got["tatoeba_trained"] == pytest.approx(85.0)
    assert got["tatoeba_untrained"] == pytest.approx(60.0)  # ita, jpn; the "all" subset row is not a language
    assert got["tatoeba.jpn"] == 50.0
    assert got["sts17"] == pytest.approx((80 + 70 + 40) / 3)
    assert (got["bucc_f1"], got["sts17_mono"], got["sts17_cross"]) == (88.0, 75.0, 40.0)
    assert (got["stsb_mono"], got["stsb_cross"], got["xsim_error"]) == (77.0, 66.0, 0.5)


def test_evaluation_settings_run_only_the_tasks_the_figures_need() -> None:
    s = evaluation_settings(["tatoeba_trained", "decision.stsb_mono", "entity_retrieval_gain", "train.loss"], 64)
    assert s.tatoeba is not None and s.sts is not None and s.sts.datasets == ("stsb-multi-mt",)
    assert s.bucc is None and s.xsim is None and s.clustering is None and s.geometry is None
    assert s.batch_size == 64


def test_the_entity_witness_figures_are_not_the_suites_and_read_the_held_out_pairs() -> None:
    """EASE's retrieval witness (``experiments.entity_witness``) is computed from the run's entity head, not by the
    evaluation suite; its figures name the kit's held-out pairs as their table."""
    from experiments.figures import ENTITY_FIGURES

    assert not any(scored_by_suite(f) for f in (*ENTITY_FIGURES, "train.loss"))
    assert all(scored_by_suite(f) for f in ("sts17", "decision.tatoeba_trained", "final.bucc_f1"))
    assert {tables_of(f) for f in ENTITY_FIGURES} == {("eval_entity_pairs",)}


def test_clustering_cap_keeps_the_same_hash_chosen_rows_per_language(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"dataset": "m", "lang": lang, "idx": i, "text": f"{lang} text {i}", "label": i % 3}
            for lang, n in (("en", 10), ("fr", 4)) for i in range(n)]
    for name in ("a", "b"):
        pq.write_table(pa.Table.from_pylist(rows if name == "a" else rows[::-1]), tmp_path / f"{name}.parquet")
        assert cap_clustering(tmp_path / f"{name}.parquet", 6) == {"en": 6, "fr": 4}
    a, b = (pq.read_table(tmp_path / f"{n}.parquet").to_pylist() for n in ("a", "b"))
    assert sorted(r["text"] for r in a) == sorted(r["text"] for r in b)  # chosen by content, not by file order
    assert {r["text"] for r in a} >= {f"fr text {i}" for i in range(4)}


def test_every_figure_a_question_asks_is_computed_from_its_kits_tables(tmp_path: Path, shared_data: Path) -> None:
    """The whole scoring path on the real evaluation readers at a tiny size: the eval_sets stage's tables (the dataset
    names it writes), the evaluation suite and ``figures`` — a tiny random encoder scored on a slice of STS17,
    STS-B multi-mt dev, Tatoeba and NTREX gives every figure the questions name."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from experiments.question import load_question, questions
    from models.encoder import SentenceEncoder
    from models.evaluation.suite import evaluate_model
    from models.settings import EncoderSettings, TokenizerSettings
    from models.training.tokenizer import train_tokenizer
    from pipelines.eval_sets import EvalSetsSettings, EvalSources, build_eval_sets
    from pipelines.eval_sets.parallel import ParallelSource
    from pipelines.eval_sets.sts import StsbMultiMtSts

    (tmp_path / "eval").mkdir()
    res = build_eval_sets(
        EvalSetsSettings(tatoeba_languages=["deu", "ita"]),
        EvalSources(tatoeba=shared_data / "tatoeba", sts=[
            {"format": "semeval", "path": shared_data / "sts" / "sts17", "dataset": "sts17"},
            StsbMultiMtSts(format="stsb_multi_mt", path=shared_data / "sts" / "stsb-multi-mt", languages=["en", "de"],
                           split="dev")],
            parallel=[ParallelSource(format="ntrex", path=shared_data / "parallel" / "ntrex128", languages=["deu"])]),
        tmp_path / "eval")
    tables = {k: tmp_path / "eval" / v for k, v in res.tables.items()}
    for name in ("eval_tatoeba", "eval_sts", "eval_parallel"):  # a slice: the plumbing, not the numbers
        t = pq.read_table(tables[name])
        pq.write_table(t.filter(pc.less(t.column("idx"), 40)), tables[name])
    # the sets added to the kit later: STS-B's caption pairs beside the dev pairs, MewsC-16's topic probe
    import polars as pl

    from experiments import caption_sts, topic_sets
    from pipelines.eval_sets.clustering import read_clustering

    captions = caption_sts.caption_pairs(shared_data / "sts" / "stsb-multi-mt", ("en", "de")).filter(
        pl.col("idx") <= 80)
    sts = pl.read_parquet(tables["eval_sts"])
    pl.concat([sts, captions.select(sts.columns).cast(sts.schema)]).write_parquet(tables["eval_sts"])
    mewsc = read_clustering(shared_data / "mewsc16", ["en", "de"], empty_sentences="skip")
    tables["eval_classification"] = tmp_path / "eval" / "eval_classification.parquet"
    topic_sets.probe_set(topic_sets.ranked(mewsc, mewsc.head(0)), (0, 60)).write_parquet(
        tables["eval_classification"])
    texts = pq.read_table(tables["eval_sts"], columns=["s1"]).rename_columns(["text"])
    pq.write_table(texts, tmp_path / "texts.parquet")
    train_tokenizer(TokenizerSettings(vocab_size=300, min_frequency=1), {"t": tmp_path / "texts.parquet"}, tmp_path)
    enc = SentenceEncoder.from_settings(EncoderSettings(hidden_size=16, num_layers=1, num_heads=2,
                                                        intermediate_size=32, max_length=16), tmp_path / "tokenizer")
    enc.save(tmp_path / "model")
    wanted = {f.removeprefix("decision.").removeprefix("final.") for q in map(load_question, questions())
              for f in (*q.evaluation.report, *q.evaluation.decision, *q.evaluation.final)}
    wanted = {f for f in wanted if scored_by_suite(f) and f not in ("bucc_f1", "mewsc_accuracy")}
    out = tmp_path / "scores"
    out.mkdir()
    r = evaluate_model(evaluation_settings(sorted(wanted), 32), tmp_path / "model", tables, out, run="t",
                       progress=False)
    got = figures(out / r.tables["eval_results"], ("deu",))
    assert wanted <= set(got), sorted(wanted - set(got))


def test_stsb_decision_pairs_sample_the_whole_dev_file_and_the_full_sets_hold_the_rest(tmp_path: Path) -> None:
    """Every third dev pair is a decision pair (the file runs by genre, so a range would select on captions alone);
    the full sets hold STS17 and exactly the other pairs."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from experiments.kits import _full_sts, stsb_decision_mask

    schema = {"dataset": pa.string(), "lang": pa.string(), "idx": pa.int32(), "s1": pa.string(), "s2": pa.string(),
              "score": pa.float64()}

    def table(dataset: str, n: int) -> pa.Table:
        return pa.table({"dataset": [dataset] * n, "lang": ["en-en"] * n, "idx": list(range(n)),
                         "s1": [f"a{i}" for i in range(n)], "s2": [f"b{i}" for i in range(n)],
                         "score": [float(i % 5) for i in range(n)]}, schema=pa.schema(schema))

    pq.write_table(table("sts17", 10), tmp_path / "sts17.parquet")
    pq.write_table(table("stsb-multi-mt", 1500), tmp_path / "dev.parquet")
    decision = [i for i, keep in enumerate(stsb_decision_mask(list(range(1500))).to_pylist()) if keep]
    assert len(decision) == 500 and decision[0] == 0 and decision[-1] >= 1497  # from the first genre to the last
    assert sum(i < 625 for i in decision) == 209  # the captions' share of the file (625 of 1,500), not all 500
    n = _full_sts(tmp_path / "sts17.parquet", tmp_path / "dev.parquet", tmp_path / "full.parquet")
    full = pq.read_table(tmp_path / "full.parquet").to_pydict()
    stsb = [i for d, i in zip(full["dataset"], full["idx"], strict=True) if d == "stsb-multi-mt"]
    assert n == 10 + 1000 and sorted(stsb + decision) == list(range(1500))


def test_a_row_scored_on_older_decision_sets_is_stale_and_an_old_kit_is_refused(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """``kits.SCORING_SETS``: its version enters the hash of every row scored on a kit's decision or full sets (and of
    no other row), and a kit prepared with another version refuses to hand those sets out."""
    import json

    from experiments import kits, row_hash
    from experiments.question import load_question

    recipes, random_init = load_question("me5_recipes"), load_question("vmsst_random_init")
    c, r = recipes.conditions[0], random_init.conditions[0]
    rs = (r.scales or random_init.default_scales)[0]
    before = (row_hash.trained_hash(recipes, c, 13, 1, {}), row_hash.start_hash(recipes),
              row_hash.trained_hash(random_init, r, 13, rs, {}), row_hash.start_hash(random_init))
    monkeypatch.setitem(kits.SCORING_SETS, "me5_replication", kits.SCORING_SETS["me5_replication"] + 1)
    monkeypatch.setitem(kits.SCORING_SETS, "random_init_bitext", kits.SCORING_SETS["random_init_bitext"] + 1)
    after = (row_hash.trained_hash(recipes, c, 13, 1, {}), row_hash.start_hash(recipes),
             row_hash.trained_hash(random_init, r, 13, rs, {}), row_hash.start_hash(random_init))
    assert before[0] != after[0] and before[1] != after[1]  # decision sets: stale
    assert before[2:] == after[2:]  # no decision or full sets: unchanged
    folder = tmp_path / "me5_replication"
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"tables": {"decision": {"eval_sts": "d/eval_sts.parquet"},
                                                                 "report": {"eval_sts": "r/eval_sts.parquet"}},
                                                      "scoring_sets": 1}), encoding="utf-8")
    assert kits.tables("me5_replication", "report", tmp_path)  # the report sets are not versioned
    with pytest.raises(ValueError, match=r"holds version 1 of its decision and full sets, the code draws version \d; "
                                         r"rebuild it: `python -m experiments prepare me5_replication`"):
        kits.tables("me5_replication", "decision", tmp_path)
