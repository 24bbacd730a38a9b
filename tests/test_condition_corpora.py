"""A condition names the kit table that feeds an objective (``corpora`` of ``experiments.question.ConditionSpec``):
checked on load, read by the runner, named by its rows' hashes (and only theirs); and kit ``me5_replication``'s
all-language corpora that it names (``experiments.kits.all_language_corpora``), added in place to a prepared kit."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from stand_in_kit import stand_in_kit

from experiments import kits
from experiments.question import ConditionSpec, Question, load_question
from experiments.row_hash import trained_hash
from experiments.shared_training import training_key

QUESTION = """\
name: q
title: "corpora: which kit table feeds an objective"
kit: me5_replication
start: null
encoder: {{hidden_size: 32, num_layers: 1, num_heads: 2, intermediate_size: 64, max_length: 16}}
seeds: [13]
scales:
  - {{scale: 1, steps: 3, runs_on: cpu, cpu_seconds: 60}}
evaluation:
  report: [tatoeba_mean]
conditions:
  - {{name: "six", objectives: [{{kind: contrastive, batch_size: 8}}]}}
  - {{name: "all", objectives: [{{kind: contrastive, batch_size: 8}}], corpora: {{bitext_pairs: bitext_pairs_all}}}}
  - name: "mpcl_all"
    objectives: [{{kind: mpcl, batch_size: 4, group_members: 2}}, {{kind: contrastive, batch_size: 8}}]
    corpora: {corpora}
"""
MPCL_ALL = "{xnli_groups: xnli_groups_all}"
# the kit's training hashes: the six-language tables and the all-language ones
HASHES = {"bitext_pairs": "b6" * 32, "xnli_groups": "x6" * 32, "bitext_pairs_all": "ba" * 32,
          "xnli_groups_all": "xa" * 32}


def _question(tmp_path: Path, corpora: str = MPCL_ALL) -> Path:
    folder = tmp_path / "q"
    folder.mkdir(exist_ok=True)
    (folder / "question.yaml").write_text(QUESTION.format(corpora=corpora), encoding="utf-8")
    return folder / "question.yaml"


def test_a_condition_reads_the_kit_tables_its_corpora_name(tmp_path: Path) -> None:
    q = load_question(_question(tmp_path))
    six, every, mpcl = (q.condition(n) for n in ("six", "all", "mpcl_all"))
    assert six.corpora is None and six.kit_tables() == six.objective_table_names() == ("bitext_pairs",)
    assert every.corpora == {"bitext_pairs": "bitext_pairs_all"} and every.kit_tables() == ("bitext_pairs_all",)
    assert mpcl.objective_table_names() == ("bitext_pairs", "xnli_groups")
    assert mpcl.kit_tables() == ("bitext_pairs", "xnli_groups_all")
    paths = {name: tmp_path / name for name in ("bitext_pairs", "bitext_pairs_all", "xnli_groups", "xnli_groups_all")}
    fed = mpcl.corpus_paths(paths)
    assert fed["xnli_groups"] == tmp_path / "xnli_groups_all" and fed["bitext_pairs"] == tmp_path / "bitext_pairs"
    assert every.corpus_paths(paths)["bitext_pairs"] == tmp_path / "bitext_pairs_all"
    with pytest.raises(FileNotFoundError, match=r"'all'.*bitext_pairs_all.*--all-languages"):
        every.corpus_paths({"bitext_pairs": tmp_path / "bitext_pairs"})  # a kit prepared without them
    assert {six, every, mpcl} and hash(every) == hash(every)  # conditions stay hashable with a mapping


@pytest.mark.parametrize(("corpora", "message"), [
    ("{xnli_groups: xnli_groups_everything}", r"conditions\.mpcl_all\.corpora\.xnli_groups: kit me5_replication has "
                                              r"no training table 'xnli_groups_everything'; expected one of .*"
                                              r"xnli_groups_all"),
    ("{nli_triples: nli_triples}", r"conditions\.mpcl_all\.corpora\.nli_triples: no objective of the condition reads "
                                   r"table 'nli_triples'; its objectives read bitext_pairs, xnli_groups"),
    ("{bitext_pairs: xnli_groups_all}", r"conditions\.mpcl_all\.corpora\.bitext_pairs: 'xnli_groups_all' holds other "
                                        r"rows than 'bitext_pairs'; expected 'bitext_pairs' or one of its variants "
                                        r"\(bitext_pairs_all\)"),
    ("[bitext_pairs_all]", r"conditions\.2\.corpora: .*expected a mapping"),
])
def test_a_corpora_mapping_the_kit_cannot_serve_is_refused_on_load_naming_the_key(tmp_path: Path, corpora: str,
                                                                                   message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        load_question(_question(tmp_path, corpora))
    assert "question.yaml" in str(err.value)


def test_xnli_single_pairs_come_from_the_same_variant_as_their_groups(tmp_path: Path) -> None:
    path = _question(tmp_path)
    text = path.read_text(encoding="utf-8").replace(
        '"all", objectives: [{kind: contrastive, batch_size: 8}]',
        '"all", objectives: [{kind: contrastive, batch_size: 8, data: xnli_single_pairs}]').replace(
        "corpora: {bitext_pairs: bitext_pairs_all}", "corpora: {xnli_single_pairs: xnli_single_pairs_all}")
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=r"conditions\.all\.corpora: xnli_groups is fed from 'xnli_groups' but "
                                         r"xnli_single_pairs from 'xnli_single_pairs_all'"):
        load_question(path)
    path.write_text(text.replace("{xnli_single_pairs: xnli_single_pairs_all}", "{xnli_single_pairs: "
                                 "xnli_single_pairs_all, xnli_groups: xnli_groups_all}"), encoding="utf-8")
    both = load_question(path).condition("all")
    assert both.kit_tables() == ("xnli_groups_all", "xnli_single_pairs_all")


def test_a_rows_hash_names_the_mapped_table_and_only_when_the_condition_maps_one(tmp_path: Path) -> None:
    q = load_question(_question(tmp_path))
    six, every, mpcl = (q.condition(n) for n in ("six", "all", "mpcl_all"))

    def h(c: ConditionSpec, **changed: str) -> str:
        return trained_hash(q, c, 13, 1, {**HASHES, **changed})

    # a row without corpora: the all-language tables' bytes (or their absence) do not reach its hash, and the view
    # it hashes is the one before corpora existed (the objective table's own hash, no mapping named)
    assert h(six) == h(six, bitext_pairs_all="00" * 32) == trained_hash(q, six, 13, 1, {"bitext_pairs": HASHES[
        "bitext_pairs"]})
    assert h(six) != h(six, bitext_pairs="00" * 32)
    # a row with corpora: the mapped table's hash counts, the table it replaces does not
    assert h(every) != h(every, bitext_pairs_all="00" * 32)
    assert h(every) == h(every, bitext_pairs="00" * 32)
    assert h(mpcl) != h(mpcl, xnli_groups_all="00" * 32) and h(mpcl) != h(mpcl, bitext_pairs="00" * 32)
    assert h(mpcl) == h(mpcl, xnli_groups="00" * 32)
    # the mapping itself is named: same bytes under both names still hash apart, and never share a training
    same = {**HASHES, "bitext_pairs_all": HASHES["bitext_pairs"]}
    assert trained_hash(q, six, 13, 1, same) != trained_hash(q, every, 13, 1, same)
    assert training_key(q, six, 13, 1, same) != training_key(q, every, 13, 1, same)



def test_the_runner_trains_on_the_mapped_tables_and_records_their_hashes(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``run_row`` hands the trainer the mapped table under the objective's name, and keys the shared training by the
    kit tables the condition reads (the mapped one's hash); the trainer is a stand-in that stops the run."""
    import models.training.train as training
    from experiments import runner, shared_training

    base = stand_in_kit(tmp_path / "kits", {"bitext_pairs": "bitext/bitext_pairs.parquet",
                                    "bitext_pairs_all": "all_languages/bitext_pairs.parquet",
                                    "xnli_groups": "xnli/xnli_groups.parquet"})
    monkeypatch.setattr(kits, "KITS", tmp_path / "kits")
    q = load_question(_question(tmp_path))
    seen: dict[str, object] = {}

    class Stop(Exception):
        pass

    def train(settings: object, tables: dict[str, Path], out: Path, **_: object) -> None:
        seen["tables"] = dict(tables)
        raise Stop

    key = shared_training.training_key

    def training_key(q: Question, c: ConditionSpec, seed: int, scale: int, tables: dict[str, str]) -> str:
        seen["hashes"] = dict(tables)
        return key(q, c, seed, scale, tables)

    monkeypatch.setattr(training, "train", train)
    monkeypatch.setattr(shared_training, "training_key", training_key)
    for name, fed, hashed in (("all", base / "all_languages/bitext_pairs.parquet", ["bitext_pairs_all"]),
                              ("six", base / "bitext/bitext_pairs.parquet", ["bitext_pairs"])):
        seen.clear()
        with pytest.raises(Stop):
            runner.run_row(q, q.condition(name), 13, 1, runs=tmp_path / "runs", results=tmp_path / "results")
        assert seen["tables"]["bitext_pairs"] == fed
        manifest = kits.load_manifest("me5_replication")
        assert seen["hashes"] == {k: manifest["hashes"]["train"][k] for k in hashed}


@pytest.mark.slow
def test_all_language_corpora_join_a_prepared_kit_in_place(tmp_path: Path, shared_data: Path) -> None:
    """From the shared data: every NTREX-128 language's training documents (no held-out line), 3,000 pairs a (pivot,
    language) at most, XNLI's groups in its 15 languages in the six-language schema; the kit's other tables and their
    hashes untouched, the manifest naming the new ones by their bytes; adding them twice is refused (~15 s)."""
    base = stand_in_kit(tmp_path, {"bitext_pairs": "bitext/bitext_pairs.parquet",
                                   "xnli_groups": "xnli/xnli_groups.parquet"})
    before = json.loads((base / "manifest.json").read_text(encoding="utf-8"))
    stats = kits.add_all_language_corpora(tmp_path, shared_data)
    m = kits.load_manifest("me5_replication", tmp_path)
    assert {k: m["hashes"]["train"][k] for k in before["hashes"]["train"]} == before["hashes"]["train"]
    new = {k: base / v for k, v in m["tables"]["train"].items() if k in kits.ALL_LANGUAGE_TABLES}
    assert sorted(new) == sorted(kits.ALL_LANGUAGE_TABLES)
    assert {k: m["hashes"]["train"][k] for k in new} == kits.table_hashes(new)
    assert m["stats"]["all_languages"]["bitext_all"]["kept"] == stats["bitext_all"]["kept"] == 423_534
    pairs = pl.read_parquet(new["bitext_pairs_all"] / "**/*.parquet", hive_partitioning=True)
    per = pairs.group_by("pivot_lang", "lang").len()
    ntrex = shared_data / "parallel" / "ntrex128"
    assert pairs["lang"].n_unique() == len(kits.ntrex_all_languages(ntrex)) - 1 == 127  # every language but en
    assert per["len"].max() == kits.BITEXT_QUOTA and set(per["pivot_lang"]) == {"en", "es"}
    train, held, _ = kits.ntrex_split(ntrex, kits.HELD_OUT_EVERY)
    afr = (ntrex / "newstest2019-ref.afr.txt").read_text(encoding="utf-8").splitlines()
    held_only = {afr[i] for i in held} - {afr[i] for i in train}
    got = set(pairs.filter(pl.col("lang") == "afr")["text"])
    assert got and got <= {afr[i] for i in train} and not got & held_only
    groups = pl.read_parquet(new["xnli_groups_all"] / "**/*.parquet", hive_partitioning=True)
    assert groups["lang"].n_unique() == 15 and groups["group_id"].n_unique() == 9_989
    assert groups.columns == ["group_id", "split", "text", "role", "source_row", "negative_group_id", "lang"]
    assert pl.read_parquet(new["xnli_single_pairs_all"]).height == stats["xnli_all"]["single_pairs"] > 0
    assert not (base / ".all_languages.building").exists()
    with pytest.raises(ValueError, match="already holds bitext_pairs_all"):
        kits.add_all_language_corpora(tmp_path, shared_data)
