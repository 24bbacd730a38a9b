"""Empty corpora (issue 21, item 2): every table of an artifact exists even without rows, as a schema-only Parquet file
with the columns a non-empty build has; every reader handles it; an objective on an empty corpus is refused before
training with the table and the reason."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import polars as pl
import pyarrow.dataset as ds
import pytest

from models.objectives.contrastive import ContrastiveObjective
from models.objectives.mpcl import MpclObjective
from models.objectives.simcse import SimcseObjective
from models.settings import TrainSettings
from models.training.components import EmptyCorpusError, refuse_empty_corpora
from pipelines.bitext.sampling import BitextSettings, build_pairs
from pipelines.bitext.sources import MosesSource
from pipelines.leakage import EvalTextIndex
from pipelines.nli.sources import NliFileSource
from pipelines.nli.triples import NliTripleSettings, build_triples
from pipelines.partitioned import write_partitioned
from pipelines.report.corpora import corpora_section, corpus_counts
from pipelines.wikipedia.hard_negatives import HardNegativeSettings


def columns(folder: Path) -> dict[str, str]:
    """The table as the warehouse views read it: every file below the folder, hive partitions as columns."""
    con = duckdb.connect()
    rows = con.execute(f"DESCRIBE SELECT * FROM read_parquet('{folder}/**/*.parquet', hive_partitioning = true, "
                       "union_by_name = true)").fetchall()
    return {name: kind for name, kind, *_ in rows}


def bitext(tmp_path: Path, name: str, src: list[str], tgt: list[str]) -> MosesSource:
    a, b = tmp_path / f"{name}.en", tmp_path / f"{name}.de"
    a.write_text("".join(f"{s}\n" for s in src), encoding="utf-8")
    b.write_text("".join(f"{t}\n" for t in tgt), encoding="utf-8")
    return MosesSource(src="en", tgt="de", src_file=a, tgt_file=b)


def test_an_empty_partitioned_table_is_one_schema_only_file_with_the_key_last(tmp_path: Path) -> None:
    df = pl.DataFrame({"lang": ["de", "fr"], "text": ["a", "b"], "n": [1, 2]})
    write_partitioned(df, tmp_path / "full", "lang")
    write_partitioned(df.clear(), tmp_path / "empty", "lang")
    assert [p.relative_to(tmp_path / "empty").as_posix() for p in (tmp_path / "empty").rglob("*.parquet")] == [
        "part-00000.parquet"]
    assert columns(tmp_path / "empty") == columns(tmp_path / "full")  # same names, types and order
    assert list(columns(tmp_path / "full")) == ["text", "n", "lang"]
    table = ds.dataset(str(tmp_path / "empty"), format="parquet", partitioning="hive").to_table()
    assert table.num_rows == 0 and set(table.column_names) == {"lang", "text", "n"}


@pytest.mark.parametrize("lines", [([], []), (["", "  "], ["", ""])], ids=["empty files", "blank lines"])
def test_bitext_without_a_surviving_pair_writes_every_table(tmp_path: Path, lines: tuple[list[str], list[str]]) -> None:
    settings = BitextSettings(pivots=["en"])
    full, empty = tmp_path / "full", tmp_path / "empty"
    full.mkdir()
    empty.mkdir()
    build_pairs(settings, [bitext(tmp_path, "ok", ["A cat sleeps.", "The sun is warm."],
                                  ["Eine Katze schläft.", "Die Sonne ist warm."])], EvalTextIndex.empty(), full)
    result = build_pairs(settings, [bitext(tmp_path, "none", *lines)], EvalTextIndex.empty(), empty)
    assert result.stats["kept"] == 0
    for rel in result.tables.values():
        assert (empty / rel).exists(), rel
    assert columns(empty / "bitext_pairs") == columns(full / "bitext_pairs")
    assert duckdb.connect().execute(f"SELECT count(*) FROM read_parquet('{empty}/bitext_pairs/**/*.parquet', "
                                    "hive_partitioning = true)").fetchall() == [(0,)]


def test_nli_triples_without_a_triple_writes_a_schema_only_table(tmp_path: Path) -> None:
    snli = tmp_path / "snli.jsonl"  # a premise with an entailment but no contradiction: no triple
    snli.write_text(json.dumps({"captionID": "c1", "sentence1": "A man plays.", "sentence2": "A person plays.",
                                "gold_label": "entailment", "pairID": "c1-0"}) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    r = build_triples(NliTripleSettings(xnli_split=None), None, [NliFileSource(name="snli", format="jsonl",
                                                                               path=snli)],
                      EvalTextIndex.empty(), out)
    assert r.stats["triples"] == 0
    cols = columns(out / "nli_triples")
    assert cols["line"] == "BIGINT" and cols["strategy"] == "VARCHAR" and list(cols)[-1] == "strategy"


def test_report_counts_an_empty_table_as_zero_rows(tmp_path: Path) -> None:
    write_partitioned(pl.DataFrame(schema={"lang": pl.Utf8, "text": pl.Utf8}), tmp_path / "bitext_pairs", "lang")
    (tmp_path / "nli_triples").mkdir()  # an empty table as older builds left it: a folder without a file
    write_partitioned(pl.DataFrame({"lang": ["de"], "text": ["x"]}), tmp_path / "xnli_groups", "lang")
    corpora = {t: tmp_path / t for t in ("bitext_pairs", "nli_triples", "xnli_groups")}
    counts = corpus_counts(corpora)
    assert counts.rows() == [("bitext_pairs", "all", 0), ("nli_triples", "all", 0), ("xnli_groups", "de", 1)]
    section, _ = corpora_section(corpora)
    assert section.blocks  # renders


def tables_with(tmp_path: Path, bitext_rows: int) -> dict[str, Path]:
    write_partitioned(pl.DataFrame({"lang": ["de"] * bitext_rows, "pair_id": [str(i) for i in range(bitext_rows)],
                                    "pivot_lang": ["en"] * bitext_rows, "pivot_text": ["a"] * bitext_rows,
                                    "text": ["b"] * bitext_rows}, schema_overrides={"lang": pl.Utf8}),
                      tmp_path / "bitext_pairs", "lang")
    write_partitioned(pl.DataFrame({"lang": ["de", "fr"], "group_id": ["g", "g"], "text": ["x", "y"]}),
                      tmp_path / "xnli_groups", "lang")
    write_partitioned(pl.DataFrame({"strategy": ["english"], "sent0": ["a"]}), tmp_path / "nli_triples", "strategy")
    return {t: tmp_path / t for t in ("bitext_pairs", "xnli_groups", "nli_triples")}


def test_an_objective_on_an_empty_corpus_is_refused_naming_run_objective_table_and_reason(tmp_path: Path) -> None:
    tables = tables_with(tmp_path, 0)
    settings = TrainSettings(objectives=(MpclObjective(languages=("de", "fr")), ContrastiveObjective()))
    with pytest.raises(EmptyCorpusError) as err:
        refuse_empty_corpora(settings, tables, "xx")
    assert str(err.value).startswith("training.xx (contrastive): corpus table bitext_pairs has 0 rows: no bitext "
                                     "pair survived")
    assert "bitext_filter_counts" in str(err.value) and "mpcl" not in str(err.value)


def test_a_language_or_strategy_filter_that_leaves_nothing_is_refused(tmp_path: Path) -> None:
    tables = tables_with(tmp_path, 3)
    refuse_empty_corpora(TrainSettings(objectives=(MpclObjective(languages=("de", "sw")), ContrastiveObjective(),
                                                   SimcseObjective(strategy="english_nli"))), tables, "ok")
    settings = TrainSettings(objectives=(MpclObjective(languages=("sw", "ur")),
                                         SimcseObjective(strategy="cross_lingual_nli")))
    with pytest.raises(EmptyCorpusError) as err:
        refuse_empty_corpora(settings, tables, "xx")
    assert str(err.value).splitlines() == [
        m for m in str(err.value).splitlines() if m.startswith(("training.xx (mpcl): corpus table xnli_groups has 0 "
                                                                "rows for lang ['sw', 'ur']: ",
                                                                "training.xx (simcse): corpus table nli_triples has 0 "
                                                                "rows for strategy ['cross_lingual']: "))]
    assert len(str(err.value).splitlines()) == 2


@pytest.mark.parametrize("quota", [-1, 0, {"en": 5, "de": -1}])
def test_a_pair_quota_below_one_is_rejected(quota: int | dict[str, int]) -> None:
    with pytest.raises(ValueError, match=r"out of range \(value .*-?[01]\b.*\); expected a number of pairs ≥ 1"):
        HardNegativeSettings(max_pairs_per_language=quota)
    assert HardNegativeSettings(max_pairs_per_language=1).quota("en") == 1
