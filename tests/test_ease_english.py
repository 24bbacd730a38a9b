"""EASE's monolingual English setting in the experiments (issue 51, deliverable 6): the English corpus added to a
prepared kit in place (``experiments.kits.add_ease_en``: ``hard_negatives_en``, ``entity_vectors_en`` and the
held-out ``eval_entity_pairs_en``), the witness reading the held-out pairs of the corpus a condition trains on
(``ConditionSpec.witness_table``), and the ``ease`` question's English conditions — whose addition moves no existing
row's hash."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
from conftest import SHARED_DATA
from stand_in_kit import stand_in_kit

from experiments import kits
from experiments.question import ConditionSpec, Question, load_question
from experiments.row_hash import start_hash, trained_hash

ENGLISH = {"hard_negatives": "hard_negatives_en", "entity_vectors": "entity_vectors_en"}

QUESTION = """\
name: q
title: "EASE on the kit's English corpus"
kit: me5_replication
start: null
encoder: {{hidden_size: 32, num_layers: 1, num_heads: 2, intermediate_size: 64, max_length: 16}}
seeds: [13]
scales:
  - {{scale: 1, steps: 3, runs_on: cpu, cpu_seconds: 60}}
evaluation:
  report: [entity_retrieval_balanced_gain]
conditions:
  - {{name: "multi", objectives: [{{kind: ease, batch_size: 4}}]}}
  - name: "en"
    objectives: [{{kind: ease, batch_size: 4, hard_negatives: false, entity_temperature: 100}}]
    corpora: {corpora}
  - {{name: "bitext", objectives: [{{kind: contrastive, batch_size: 8}}], corpora: {{bitext_pairs: bitext_pairs_all}}}}
"""


def _question(tmp_path: Path, corpora: str = "{hard_negatives: hard_negatives_en, entity_vectors: entity_vectors_en}"
              ) -> Path:
    folder = tmp_path / "q"
    folder.mkdir(exist_ok=True)
    (folder / "question.yaml").write_text(QUESTION.format(corpora=corpora), encoding="utf-8")
    return folder / "question.yaml"


# ---------------------------------------------------------------------------------------------- the witness's table
def test_the_witness_scores_the_held_out_pairs_of_the_corpus_the_condition_trains_on(tmp_path: Path) -> None:
    q = load_question(_question(tmp_path))
    multi, en, bitext = (q.condition(n) for n in ("multi", "en", "bitext"))
    assert multi.witness_table() == "eval_entity_pairs"  # the kit's own hard_negatives: the kit's own held-out pairs
    assert en.witness_table() == "eval_entity_pairs_en"
    assert bitext.witness_table() == "eval_entity_pairs"  # a mapping of another table leaves it alone
    assert en.kit_tables() == ("entity_vectors_en", "hard_negatives_en")
    assert en.witness_table() == kits.EASE_EN_WITNESS
    assert set(kits.EASE_EN_TABLES) <= set(kits.TRAIN_TABLES["me5_replication"])


@pytest.mark.parametrize(("corpora", "message"), [
    ("{hard_negatives: hard_negatives_en}", r"conditions\.en\.corpora: hard_negatives is fed from 'hard_negatives_en' "
                                            r"but entity_vectors from 'entity_vectors'; the pairs name their entities"),
    ("{entity_vectors: entity_vectors_en}", r"conditions\.en\.corpora: hard_negatives is fed from 'hard_negatives' but "
                                            r"entity_vectors from 'entity_vectors_en'"),
    ("{hard_negatives: hard_negatives_fr, entity_vectors: entity_vectors_en}",
     r"conditions\.en\.corpora\.hard_negatives: kit me5_replication has no training table 'hard_negatives_fr'"),
])
def test_the_english_pairs_and_vectors_are_named_together(tmp_path: Path, corpora: str, message: str) -> None:
    """The pairs name their entities as the vectors' table keys them (QIDs multilingual, ``en:<title>`` English):
    feeding one from the English corpus and the other from the multilingual one is refused on load."""
    with pytest.raises(ValueError, match=message):
        load_question(_question(tmp_path, corpora))


def test_a_kit_without_the_english_corpus_says_how_to_add_it(tmp_path: Path) -> None:
    en = load_question(_question(tmp_path)).condition("en")
    with pytest.raises(FileNotFoundError, match=r"'en'.*entity_vectors_en, hard_negatives_en.*prepare me5_replication "
                                                r"--ease-en`"):
        en.corpus_paths({"hard_negatives": tmp_path / "h", "entity_vectors": tmp_path / "v"})
    fed = en.corpus_paths({"hard_negatives": tmp_path / "h", "entity_vectors": tmp_path / "v",
                           "hard_negatives_en": tmp_path / "h_en", "entity_vectors_en": tmp_path / "v_en"})
    assert fed["hard_negatives"] == tmp_path / "h_en" and fed["entity_vectors"] == tmp_path / "v_en"


def _kit(root: Path) -> Path:
    """A prepared kit ``me5_replication`` under ``root`` with both EASE corpora and both held-out pair tables (tiny
    stand-ins: the trainer and the witness are replaced in the test that reads them)."""
    return stand_in_kit(root, {"hard_negatives": "ease/hard_negatives.parquet",
                               "entity_vectors": "ease/entity_vectors.parquet",
                               "hard_negatives_en": "ease_en/train/hard_negatives.parquet",
                               "entity_vectors_en": "ease_en/train/entity_vectors.parquet"},
                        {"eval_entity_pairs": "report/eval_entity_pairs.parquet",
                         kits.EASE_EN_WITNESS: "ease_en/report/eval_entity_pairs.parquet"})


def test_the_runner_hands_the_witness_the_held_out_pairs_of_the_trained_corpus(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``run_row`` trains on the English tables and scores the witness on ``eval_entity_pairs_en``; a condition on the
    kit's own corpus on ``eval_entity_pairs``. The trainer and the scorers are stand-ins; the witness stops the run."""
    import models.training.train as training
    from experiments import runner

    base = _kit(tmp_path / "kits")
    monkeypatch.setattr(kits, "KITS", tmp_path / "kits")
    q = load_question(_question(tmp_path))
    seen: dict[str, object] = {}

    class Stop(Exception):
        pass

    def train(settings: object, tables: dict[str, Path], out: Path, **_: object) -> SimpleNamespace:
        seen["tables"] = dict(tables)
        out.mkdir(parents=True)
        pl.DataFrame({"step": [1], "loss": [1.0]}).write_parquet(out / "train_steps.parquet")
        return SimpleNamespace(stats={"precision": "fp32", "device": "cpu", "final_loss": 1.0},
                               tables={"train_steps": "train_steps.parquet"})

    def witness(names: object, settings: object, trained: Path, model: Path, pairs: Path | None, *args: object,
                table: str = "eval_entity_pairs") -> dict[str, float]:
        seen["pairs"], seen["table"] = pairs, table
        raise Stop

    monkeypatch.setattr(training, "train", train)
    monkeypatch.setattr(runner, "score_report_and_full", lambda *a, **k: ({}, {}, 0.0))
    monkeypatch.setattr(runner, "score", lambda *a, **k: ({}, 0.0))
    monkeypatch.setattr(runner, "entity_figures", witness)
    for name, fed, pairs, table in (
            ("en", "ease_en/train/hard_negatives.parquet", "ease_en/report/eval_entity_pairs.parquet",
             "eval_entity_pairs_en"),
            ("multi", "ease/hard_negatives.parquet", "report/eval_entity_pairs.parquet", "eval_entity_pairs")):
        seen.clear()
        with pytest.raises(Stop):
            runner.run_row(q, q.condition(name), 13, 1, runs=tmp_path / "runs", results=tmp_path / "results")
        assert seen["tables"]["hard_negatives"] == base / fed  # type: ignore[index]
        assert seen["pairs"] == base / pairs and seen["table"] == table


def test_the_witness_without_its_held_out_pairs_says_how_to_add_them(tmp_path: Path) -> None:
    from experiments.entity_witness import entity_figures

    with pytest.raises(FileNotFoundError, match=r"eval_entity_pairs_en, which this kit does not have; add them: "
                                                r"`python -m experiments prepare me5_replication --ease-en`"):
        entity_figures(["entity_retrieval_balanced_gain"], None, tmp_path, tmp_path, None,  # type: ignore[arg-type]
                       None, "cpu", table="eval_entity_pairs_en")
    assert entity_figures(["sts17"], None, tmp_path, tmp_path, None, None, "cpu",  # type: ignore[arg-type]
                          table="eval_entity_pairs_en") == {}


def test_prepare_ease_en_adds_the_english_corpus_to_the_prepared_kit(monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """``polysent experiment prepare me5_replication --ease-en`` calls ``kits.add_ease_en`` alone (no rebuild of the
    kit) and prints what it added; the other kit has no EASE corpus."""
    from experiments import cli

    calls: list[Path] = []
    stats = {"held_out": {"train": {"rows": 156}, "held_out": {"rows": 44}, "held_out_entities": 11}, "seconds": 101.0}

    def add(data: Path) -> dict:
        calls.append(data)
        return stats

    monkeypatch.setattr(kits, "add_ease_en", add)
    monkeypatch.setattr(kits, "prepare", lambda *a, **k: pytest.fail("--ease-en rebuilt the kit"))
    assert cli.main(["prepare", "me5_replication", "--ease-en", "--data", "/nowhere"]) == 0
    assert calls == [Path("/nowhere")]
    assert "156 training pairs, 44 held-out pairs over 11 entities" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="only kit me5_replication"):
        cli.main(["prepare", "random_init_bitext", "--ease-en"])


# ---------------------------------------------------------------------------------------------- the ease question
# Each existing condition's hash at seed 13 (and the start's) before the English conditions were added, for these
# stand-in table hashes: adding conditions, corpora or witness tables must not move them
TABLES = {"hard_negatives": "a1" * 32, "entity_vectors": "b2" * 32}
BEFORE = {
    ("ease+simcse", 1): "55daebc17bf8d1b1690928fefbbe512900b50789fd2dd287f44c30e1a9f54dcc",
    ("simcse", 1): "450ecac173819314903188c3965dc05776f252ee88b84bf2722f1f88d22efd28",
    ("ease+simcse[bias]", 1): "279abcc2a7c416b6d7aa657521a0bb9459751c89a71cf7c1fbd774d1ae66ab5c",
    ("entity only", 1): "2db047848c246b82158a566647c17d66b0e096bf4aadd699900705957d544d11",
    ("ease+simcse[strong]", 1): "75f26baecbad22c93a9a74c3da5bced20a9c986acb36b2c407e5e37cce9e2d42",
    ("ease+simcse[64]", 10): "749b9cfb8badc78383209510964708d360389cc115b2790213147a974ba30012",
    ("simcse[64]", 10): "b8778c5d35231712d18c7e65f49f83e7f551873431f2467d444a9ca870e8aad4",
    ("ease+simcse[256]", 10): "410b789cbdc6afffdfffe3522a9f2a6dd26afb62b579401decc6d1f632ee70b9",
    ("simcse[256]", 10): "30019f46ca9e7cb9bc1f34bf3dfa8ccc71e3d0a6e83f9a0442a82b04d7024885",
    ("ease+simcse[8x32]", 10): "8dd2ee9ea616f60e7f0e630c726dd60ce4cea8bb3ed9a031d583bdfab1530a08",
    ("simcse[8x32]", 10): "0de06ceaf3a480497973638d6edefa92f11815461c426249ac96dbd6c92f1bb0",
}
START_BEFORE = "17e9c09d801ac659bae48986e4f03b426fc881fcc6d4e923ce0fabb7fea172c9"


def test_the_existing_ease_conditions_keep_their_hashes() -> None:
    q = load_question("ease")
    assert {(c.name, sc): trained_hash(q, c, 13, sc, TABLES) for c, seed, sc in q.planned()
            if seed == 13 and not c.name.endswith(("[en]", "[en,strong]"))} == BEFORE
    assert start_hash(q) == START_BEFORE
    # their hashes read the kit's own EASE tables, whatever the English ones hold
    c = q.condition("ease+simcse")
    assert trained_hash(q, c, 13, 1, {**TABLES, "hard_negatives_en": "00" * 32}) == BEFORE[("ease+simcse", 1)]


def _english(q: Question) -> list[ConditionSpec]:
    return [q.condition(n) for n in ("ease+simcse[en]", "simcse[en]", "ease+simcse[en,strong]")]


def test_the_ease_question_plans_the_english_setting() -> None:
    """τ_e 100 and the paper's λ 0.01 (studio-ousia/ease train_monolingual_ease.sh), its SimCSE-only twin and the strong
    diagnostic, on the English corpus without hard negatives, ×1 at the ×1 rows' 150 updates of 32 pairs, scored by
    the English witness with its own threshold; the two claims judge them on the English-fitting figures."""
    q = load_question("ease")
    ease, simcse, strong = _english(q)
    for c in (ease, simcse, strong):
        (o,) = c.objectives
        assert o.kind == "ease" and o.batch_size == 32 and o.hard_negatives is False
        assert c.corpora == ENGLISH and c.witness_table() == "eval_entity_pairs_en"
        assert (c.scales or q.default_scales) == (1,) and c.steps is None
        s = q.train_settings(c, 13, 1, start=q.start, device="cpu")
        assert s.steps == 150 and s.objectives[0].batch_size == 32
    assert (ease.objectives[0].entity_temperature, ease.objectives[0].entity_weight) == (100.0, 0.01)
    assert (simcse.objectives[0].entity_temperature, simcse.objectives[0].entity_weight) == (100.0, 0.0)
    assert (strong.objectives[0].entity_temperature, strong.objectives[0].entity_weight) == (0.1, 0.1)
    assert simcse.mechanism is None  # a baseline: its witness measures encoder drift alone
    for c in (ease, strong):
        assert c.mechanism is not None and c.mechanism.figure == "entity_retrieval_balanced_gain"
        assert c.mechanism.threshold == 15.0
    planned = [(c.name, seed, sc) for c, seed, sc in q.planned() if c.corpora == ENGLISH]
    assert sorted(planned) == sorted((c.name, seed, 1) for c in (ease, simcse, strong) for seed in q.seeds)
    claims = {(x.a, x.b): x for x in q.comparisons}
    for a in ("ease+simcse[en]", "ease+simcse[en,strong]"):
        x = claims[(a, "simcse[en]")]
        assert x.figures == ("sts17_mono", "mewsc_accuracy") and x.scale == 1
    assert "77.0" in claims[("ease+simcse[en]", "simcse[en]")].paper
    # an English row's hash names the English tables' bytes, not the multilingual ones'
    en_tables = {**TABLES, "hard_negatives_en": "c3" * 32, "entity_vectors_en": "d4" * 32}
    h = trained_hash(q, ease, 13, 1, en_tables)
    assert h == trained_hash(q, ease, 13, 1, {**en_tables, "hard_negatives": "00" * 32})
    assert h != trained_hash(q, ease, 13, 1, {**en_tables, "hard_negatives_en": "00" * 32})
    assert h != trained_hash(q, simcse, 13, 1, en_tables)


# ---------------------------------------------------------------------------------------------- the English tables
@pytest.fixture(scope="module")
def english_kit(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, dict, dict]:
    """A prepared kit stand-in (one training table) with the English corpus added from the shared sample: the root,
    the manifest before and after, and ``add_ease_en``'s stats (~2 min: it trains Wikipedia2Vec, ~5.4 GB)."""
    dump = SHARED_DATA / "wikipedia" / "enwiki-sample.xml.bz2"
    if not dump.is_file():
        pytest.skip(f"the English Wikipedia sample is not available at {dump} (set POLYSENT_SHARED_DATA)")
    if importlib.util.find_spec("wikipedia2vec") is None:
        pytest.skip("wikipedia2vec is not installed (the English corpus trains its entity vectors)")
    root = tmp_path_factory.mktemp("kits")
    base = kits.kit_dir("me5_replication", root)
    (base / "ease").mkdir(parents=True)
    pl.DataFrame({"entity": ["Q1"]}).write_parquet(base / "ease" / "entity_vectors.parquet")
    train = {"entity_vectors": "ease/entity_vectors.parquet"}
    manifest = {"kit": "me5_replication", "scoring_sets": kits.SCORING_SETS["me5_replication"],
                "tables": {"train": train, "report": {}},
                "hashes": {"train": kits.table_hashes({k: base / v for k, v in train.items()})}, "stats": {}}
    (base / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    stats = kits.add_ease_en(root, SHARED_DATA)
    return root, manifest, kits.load_manifest("me5_replication", root), stats


@pytest.mark.slow
def test_the_english_corpus_joins_a_prepared_kit_in_place(english_kit: tuple[Path, dict, dict, dict]) -> None:
    """From the English sample: 200 pairs over 15 entities, none with a hard negative, every 5th page held out whole
    (156 training pairs, 44 held-out pairs over 11 entities, every one of them trained on); 15 vectors of 768
    dimensions; the kit's other tables and hashes untouched; adding it twice is refused."""
    from models.training.corpus_tables import CorpusError, load_entity_pairs

    root, before, m, stats = english_kit
    base = kits.kit_dir("me5_replication", root)
    assert m["hashes"]["train"]["entity_vectors"] == before["hashes"]["train"]["entity_vectors"]
    assert m["tables"]["train"]["entity_vectors"] == before["tables"]["train"]["entity_vectors"]
    train = kits.tables("me5_replication", "train", root)
    report = kits.tables("me5_replication", "report", root)
    assert set(kits.EASE_EN_TABLES) <= set(train) and set(report) == {kits.EASE_EN_WITNESS}
    assert m["hashes"]["train"] == {**before["hashes"]["train"], **kits.table_hashes(
        {k: train[k] for k in kits.EASE_EN_TABLES})}
    assert m["hashes"]["report"] == kits.table_hashes(report)
    assert m["stats"]["ease_en"] == stats and stats["config"] == "configs/examples/shared-data-ease-en.yaml"
    held = stats["held_out"]
    assert (held["train"]["rows"], held["held_out"]["rows"], held["held_out_entities"]) == (156, 44, 11)
    assert held["held_out_entities_without_training_pair"] == []
    pairs = pl.read_parquet(train["hard_negatives_en"] / "**/*.parquet", hive_partitioning=True)
    held_out = pl.read_parquet(report[kits.EASE_EN_WITNESS])
    assert pairs.height == 156 and held_out.height == 44 and set(pairs["lang"]) == set(held_out["lang"]) == {"en"}
    assert pairs["negative"].null_count() == pairs.height  # no hard negative anywhere: hard_negatives: false
    assert not set(pairs["text"]) & set(held_out["text"])  # no sentence on both sides
    assert not set(pairs["page_id"]) & set(held_out["page_id"])  # whole pages held out
    assert {e.split(":", 1)[0] for e in pairs["entity"]} == {"en"}  # link targets keyed by their title
    vectors = pl.read_parquet(train["entity_vectors_en"])
    assert vectors.height == 15 and {len(v) for v in vectors["vector"]} == {768}
    # the trainer's reader takes them as an ease objective with hard_negatives: false does, and refuses them with true
    data = load_entity_pairs(train["hard_negatives_en"], train["entity_vectors_en"], require_negative=False)
    assert len(data) == 156 and len(data.entities) == 15 and not np.isnan(data.vectors).any()
    assert set(held_out["entity"]) <= set(data.entities)  # the witness's head knows every held-out entity
    with pytest.raises(CorpusError, match="no row has a hard negative"):
        load_entity_pairs(train["hard_negatives_en"], train["entity_vectors_en"], require_negative=True)
    assert not (base / ".ease_en.building").exists()
    with pytest.raises(ValueError, match="already holds entity_vectors_en, eval_entity_pairs_en, hard_negatives_en"):
        kits.add_ease_en(root)


@pytest.mark.slow
def test_the_english_witness_threshold_is_about_two_standard_errors_of_its_held_out_pairs(
        english_kit: tuple[Path, dict, dict, dict]) -> None:
    """The English conditions' mechanism threshold (15 points, question.yaml) against the held-out pairs it is read
    on: two independent chance-level rankings of those pairs (random sentence and entity vectors) differ in the
    per-entity top-1 with a standard error of about 7 points (the witness's own clustered estimate), so 15 is about 2
    of them, and a gain of 15 by chance is rare; the multilingual threshold, 5, is under one."""
    from models.evaluation.entity_retrieval import _clustered_se, rank_entities

    root = english_kit[0]
    held = pl.read_parquet(kits.tables("me5_replication", "report", root)[kits.EASE_EN_WITNESS])
    texts, entities = list(dict.fromkeys(held["text"])), sorted(set(held["entity"]))
    ps = np.array([texts.index(t) for t in held["text"]])
    pe = np.array([entities.index(e) for e in held["entity"]])
    rng = np.random.default_rng(0)
    gains, ses = [], []
    for _ in range(500):
        a, b = (rank_entities(rng.standard_normal((len(texts), 16)), rng.standard_normal((len(entities), 16)), ps, pe)
                for _ in range(2))
        diff = a.per_pair - b.per_pair
        gains.append(100 * float(a.weights @ diff))
        ses.append(100 * _clustered_se(diff, a.weights, [texts[i] for i in ps]))
    threshold = load_question("ease").condition("ease+simcse[en]").mechanism.threshold  # type: ignore[union-attr]
    se = float(np.mean(ses))
    assert 6.0 < se < 8.5 and 1.8 < threshold / se < 2.5 and 5.0 / se < 1
    assert np.mean(np.array(gains) >= threshold) < 0.05
