"""NLI readers on tiny files in the real SNLI / MultiNLI / SimCSE formats."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import polars as pl
import pytest

from pipelines.hub import HubUnavailableError
from pipelines.nli.readers import (
    NliFormatError,
    pairs_frame_from_hub_table,
    pairs_to_triples,
    read_nli_pairs,
    read_nli_triplets,
    triplets_frame_from_hub_table,
)
from pipelines.nli.sources import NliFileSource

PA = "Two women are embracing while holding to go packages."
PB = 'A man says "hello, world" to a dog.'
PC = "A soccer game with multiple males playing."
# (captionID, sentence2, gold_label) in file order; line i + 1 of the jsonl file
SNLI_ROWS = [
    ("c1#0", "The sisters are hugging goodbye.", "neutral"),
    ("c1#0", "Two woman are holding packages.", "entailment"),
    ("c1#0", "The men are fighting outside a deli.", "contradiction"),
    ("c2#1", 'A man speaks to a "dog".', "-"),                       # no consensus: dropped
    ("c1#0", "Two women hold packages while hugging.", "entailment"),  # second entailment of PA
    ("c2#1", "A person talks to an animal.", "entailment"),           # PB: no contradiction → no triple
    ("c3#2", "Some men are playing a sport.", "entailment"),
    ("c3#2", "Nobody is playing.", "contradiction"),
    ("c3#2", "Men play soccer.", "entailment"),
    ("c3#2", "The men are asleep.", "contradiction"),
    ("c3#2", "A game is on.", "entailment"),
]
PREMISES = {"c1#0": PA, "c2#1": PB, "c3#2": PC}


def snli_record(caption: str, hypothesis: str, label: str) -> dict:
    premise = PREMISES[caption]
    return {"annotator_labels": [label if label != "-" else "neutral", "entailment"], "captionID": caption,
            "gold_label": label, "pairID": caption + "r" + label[0],
            "sentence1": premise, "sentence1_binary_parse": "( " + premise + " )",
            "sentence1_parse": "(ROOT (S " + premise + "))", "sentence2": hypothesis,
            "sentence2_binary_parse": "( " + hypothesis + " )", "sentence2_parse": "(ROOT (S " + hypothesis + "))"}


@pytest.fixture
def snli_jsonl(tmp_path: Path) -> Path:
    path = tmp_path / "snli_1.0_dev.jsonl"
    path.write_text("".join(json.dumps(snli_record(*row)) + "\n" for row in SNLI_ROWS), encoding="utf-8")
    return path


def expected_pairs(origin: str, line_offset: int = 0) -> list[tuple]:
    return [(PREMISES[c], h, lab, c, origin, i + 1 + line_offset)
            for i, (c, h, lab) in enumerate(SNLI_ROWS) if lab != "-"]


EXPECTED_TRIPLES = [
    (PA, "Two woman are holding packages.", "The men are fighting outside a deli.", 2),
    (PA, "Two women hold packages while hugging.", "The men are fighting outside a deli.", 5),  # 1 mod 1 = 0
    (PC, "Some men are playing a sport.", "Nobody is playing.", 7),
    (PC, "Men play soccer.", "The men are asleep.", 9),
    (PC, "A game is on.", "Nobody is playing.", 11),  # 2 mod 2 = 0
]


def test_snli_jsonl_pairs(snli_jsonl: Path) -> None:
    pairs = read_nli_pairs(NliFileSource(name="snli", format="jsonl", path=snli_jsonl))
    assert pairs.schema == pl.Schema({"premise": pl.String, "hypothesis": pl.String, "label": pl.String,
                                      "premise_id": pl.String, "origin": pl.String, "line": pl.Int64})
    assert pairs.rows() == expected_pairs(str(snli_jsonl))
    assert "-" not in pairs["label"].to_list() and pairs.height == 10


def test_mnli_jsonl_prompt_id_and_blank_line(tmp_path: Path) -> None:
    recs = [{"promptID": 31193, "pairID": "31193n", "genre": "government", "gold_label": "neutral",
             "sentence1": "Conceptually cream skimming has two basic dimensions - product and geography.",
             "sentence2": "Product and geography are what make cream skimming work. ", "annotator_labels": ["neutral"]},
            {"promptID": 101457, "pairID": "101457e", "genre": "telephone", "gold_label": "entailment",
             "sentence1": "you know during the season and i guess at at your level uh you lose them",
             "sentence2": "You lose the things to the following level if the people recall."}]
    path = tmp_path / "multinli_1.0_train.jsonl"
    path.write_text(json.dumps(recs[0]) + "\n\n" + json.dumps(recs[1]) + "\n", encoding="utf-8")
    pairs = read_nli_pairs(NliFileSource(name="mnli", format="jsonl", path=path))
    assert pairs["premise_id"].to_list() == ["31193", "101457"]
    assert pairs["line"].to_list() == [1, 3]  # the blank line 2 is skipped but counted
    assert pairs["label"].to_list() == ["neutral", "entailment"]


@pytest.mark.parametrize("bad,message", [
    ('{"sentence1": "a", "sentence2": "b", "gold_label": "neutral"', r":3: invalid JSON"),
    ('["a", "b", "neutral"]', r":3: expected a JSON object, found list"),
    ('{"sentence1": "a", "gold_label": "neutral"}', r":3: missing field 'sentence2'"),
    ('{"sentence1": "a", "sentence2": "b", "gold_label": "maybe"}', r":3: gold_label 'maybe', expected one of"),
])
def test_bad_jsonl_line_names_file_and_line(snli_jsonl: Path, bad: str, message: str) -> None:
    lines = snli_jsonl.read_text(encoding="utf-8").split("\n")
    lines[2] = bad
    snli_jsonl.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(NliFormatError, match=f"^{re.escape(str(snli_jsonl))}{message}"):
        read_nli_pairs(NliFileSource(name="snli", format="jsonl", path=snli_jsonl))


def test_snli_txt_reads_like_jsonl(tmp_path: Path) -> None:
    header = ["gold_label", "sentence1_binary_parse", "sentence2_binary_parse", "sentence1_parse", "sentence2_parse",
              "sentence1", "sentence2", "captionID", "pairID", "label1", "label2", "label3", "label4", "label5"]
    lines = ["\t".join(header)]
    for caption, hyp, label in SNLI_ROWS:
        rec = snli_record(caption, hyp, label)
        rec.update(label1=label, label2="", label3="", label4="", label5="")  # train rows: one annotator label
        lines.append("\t".join(str(rec[c]) for c in header))
    path = tmp_path / "snli_1.0_train.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    pairs = read_nli_pairs(NliFileSource(name="snli", format="tsv", path=path))
    assert pairs.rows() == expected_pairs(str(path), line_offset=1)  # bare quotes in PB kept; header is line 1
    assert pairs_to_triples(pairs).drop("origin").with_columns(pl.col("line") - 1).rows() == EXPECTED_TRIPLES

    lines[4] = "\t".join(lines[4].split("\t")[:6])  # a short row
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    where = re.escape(str(path))
    with pytest.raises(NliFormatError, match=rf"^{where}:5: expected 14 tab-separated fields \(as in the header\), "
                                             "found 6"):
        read_nli_pairs(NliFileSource(name="snli", format="tsv", path=path))


def test_pairs_to_triples_simcse_construction(snli_jsonl: Path) -> None:
    pairs = read_nli_pairs(NliFileSource(name="snli", format="jsonl", path=snli_jsonl))
    triples = pairs_to_triples(pairs)
    assert triples.columns == ["premise", "entailment", "contradiction", "origin", "line"]
    assert triples.drop("origin").rows() == EXPECTED_TRIPLES
    assert set(triples["origin"]) == {str(snli_jsonl)}
    assert PB not in triples["premise"].to_list()  # entailment without contradiction: dropped
    # deterministic: the same input gives the same triples, whatever the row order of other premises
    assert pairs_to_triples(pairs).equals(triples)

    # read_nli_triplets on a pair source builds the same triples under SimCSE's column names
    trip = read_nli_triplets(NliFileSource(name="snli", format="jsonl", path=snli_jsonl))
    assert trip.columns == ["sent0", "sent1", "hard_neg", "origin", "line"]
    assert trip.drop("origin").rows() == EXPECTED_TRIPLES


def test_pairs_to_triples_groups_by_text_without_ids() -> None:
    pairs = pl.DataFrame({
        "premise": ["p", "q", "p", "p", "q"],
        "hypothesis": ["p-c", "q-e", "p-e1", "p-e2", "q-n"],
        "label": ["contradiction", "entailment", "entailment", "entailment", "neutral"],
        "premise_id": [None] * 5, "origin": ["f"] * 5, "line": [1, 2, 3, 4, 5],
    }, schema_overrides={"premise_id": pl.String})
    assert pairs_to_triples(pairs).rows() == [("p", "p-e1", "p-c", "f", 3), ("p", "p-e2", "p-c", "f", 4)]
    # the same id in two files is two premises
    two = pl.DataFrame({"premise": ["p", "p"], "hypothesis": ["e", "c"], "label": ["entailment", "contradiction"],
                        "premise_id": ["7", "7"], "origin": ["a", "b"], "line": [1, 1]})
    assert pairs_to_triples(two).height == 0


def test_simcse_csv_with_quoting(tmp_path: Path) -> None:
    path = tmp_path / "nli_for_simcse.csv"
    path.write_text(
        "sent0,sent1,hard_neg\n"
        'you know during the season and i guess at at your level uh you lose them to the next level if if they '
        'decide to recall the the parent team the Braves decide to call to recall a guy from triple A then a double '
        'A guy goes up to replace him and a single A guy goes up to replace him,You lose the things to the following '
        'level if the people recall.,They never perform recalls on anything.\n'
        '"One of our number will carry out your instructions minutely.","A member of my team will execute your '
        'orders with immense precision.","We have no one free at the moment, so you have to take action yourself."\n'
        '"He said ""hi, there"" twice.",He greeted them.,He was silent.\n',
        encoding="utf-8")
    trip = read_nli_triplets(NliFileSource(name="simcse", format="simcse_csv", path=path))
    assert trip.columns == ["sent0", "sent1", "hard_neg", "origin", "line"]
    assert trip["line"].to_list() == [2, 3, 4]
    assert trip.row(1)[:3] == ("One of our number will carry out your instructions minutely.",
                               "A member of my team will execute your orders with immense precision.",
                               "We have no one free at the moment, so you have to take action yourself.")
    assert trip.row(2)[:3] == ('He said "hi, there" twice.', "He greeted them.", "He was silent.")
    assert trip["origin"].to_list() == [str(path)] * 3
    with pytest.raises(ValueError, match="use read_nli_triplets"):
        read_nli_pairs(NliFileSource(name="simcse", format="simcse_csv", path=path))


def test_simcse_csv_multiline_record_and_short_row(tmp_path: Path) -> None:
    path = tmp_path / "nli_for_simcse.csv"
    path.write_text('sent0,sent1,hard_neg\n"a\nb",c,d\n\ne,f,g\n', encoding="utf-8")
    trip = read_nli_triplets(NliFileSource(name="s", format="simcse_csv", path=path))
    assert trip.select("sent0", "line").rows() == [("a\nb", 2), ("e", 5)]  # record 2 spans lines 2–3; 4 is blank
    path.write_text('sent0,sent1,hard_neg\na,b,c\n"d, e",f\n', encoding="utf-8")
    where = re.escape(str(path))
    with pytest.raises(NliFormatError, match=rf"^{where}:3: expected 3 comma-separated fields .* found 2"):
        read_nli_triplets(NliFileSource(name="s", format="simcse_csv", path=path))


def test_hub_tables() -> None:
    import datasets

    pairs_ds = datasets.Dataset.from_dict({"premise": ["p", "p", "q"], "hypothesis": ["a", "b", "c"],
                                           "label": [0, -1, 2]})
    pairs = pairs_frame_from_hub_table(pairs_ds.with_format("arrow")[:], "hub:stanfordnlp/snli:train")
    assert pairs.rows() == [("p", "a", "entailment", None, "hub:stanfordnlp/snli:train", None),
                            ("q", "c", "contradiction", None, "hub:stanfordnlp/snli:train", None)]
    mnli = datasets.Dataset.from_dict({"promptID": [5, 5], "premise": ["p", "p"], "hypothesis": ["a", "b"],
                                       "label": [0, 2]})
    assert pairs_frame_from_hub_table(mnli.with_format("arrow")[:], "h")["premise_id"].to_list() == ["5", "5"]
    bad = datasets.Dataset.from_dict({"premise": ["p"], "hypothesis": ["a"], "label": [4]})
    with pytest.raises(NliFormatError, match=r"^h: row 0 \(0-based\): label 4"):
        pairs_frame_from_hub_table(bad.with_format("arrow")[:], "h")
    trip = datasets.Dataset.from_dict({"anchor": ["x"], "positive": ["y"], "negative": ["z"]})
    assert triplets_frame_from_hub_table(trip.with_format("arrow")[:], "h").rows() == [("x", "y", "z", "h", None)]


def test_hub_offline_fails_fast_naming_local_formats(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    start = time.perf_counter()
    with pytest.raises(HubUnavailableError, match=r"format 'jsonl'.*'simcse_csv'"):
        read_nli_triplets(NliFileSource(name="allnli", format="hub", hub_id="sentence-transformers/all-nli",
                                        config="triplet"))
    assert time.perf_counter() - start < 5


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.jsonl"):
        read_nli_pairs(NliFileSource(name="x", format="jsonl", path=tmp_path / "nope.jsonl"))
