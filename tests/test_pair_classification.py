"""Pair classification (PAWS-X, mteb's PairClassification): the readers of both published PAWS-X layouts and of a
generic TSV, their bad-row accounting, the threshold-search maths, mteb parity and the suite task.

The fixtures are written here in the real formats: Google's ``x-final/{lang}/{dev_2k,test_2k,translated_train}.tsv``
(header ``id  sentence1  sentence2  label``, no quoting; ``en`` has ``train.tsv``) and XTREME's
``{split}-{lang}.tsv`` (no header, ``csv.writer(delimiter="\\t")`` output, test labels removed).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import pytest
from mteb_stub import PrecomputedEncoder

from models.evaluation.pair_classification import (
    best_accuracy_and_threshold,
    best_f1_and_threshold,
    pair_classification_mteb,
)
from pipelines.eval_sets.build import read_eval_sets
from pipelines.eval_sets.lines import EvalFormatError, Skipped
from pipelines.eval_sets.pair_classification import BAD_TABLE, TABLE
from pipelines.eval_sets.settings import EvalSetsSettings, EvalSources

HEADER = "id\tsentence1\tsentence2\tlabel\n"


def _write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _xfinal(root: Path) -> Path:
    """A small x-final tree: de with bad rows of each kind, en with train.tsv, fr with translated_train.tsv."""
    base = root / "x-final"
    _write(base / "de" / "test_2k.tsv", HEADER
           + "1\tDer Zug fährt um acht ab.\tUm acht fährt der Zug ab.\t1\n"
           + '2\t"Faust" wurde 1808 gedruckt.\tGoethe druckte 1808 "Faust".\t0\n'  # bare quotes, no CSV quoting
           + "3\tEin Satz ohne Partner.\t\t1\n"  # line 4: missing sentence2
           + "4\tZwei Sätze.\tMit Label zwei.\t2\n"  # line 5: label not 0/1
           + "5\tNur drei Felder.\t1\n"  # line 6: wrong field count
           + "6\tBerlin liegt an der Spree.\tDie Spree fließt durch Berlin.\t1\r\n"  # CRLF
           + "7\tEr kam spät.\tSie kam früh.\t0\n\n\n")  # trailing blank lines: padding, not rows
    _write(base / "de" / "dev_2k.tsv", HEADER + "1\tJa.\tJawohl.\t1\n2\tNein.\tVielleicht.\t0\n")
    _write(base / "de" / "translated_train.tsv", HEADER + "1\tA.\tB.\t1\n")
    _write(base / "en" / "dev_2k.tsv", HEADER + "1\tThe train leaves at eight.\tAt eight the train leaves.\t1\n"
           + "2\tShe came early.\tShe came late.\t0\n")
    _write(base / "en" / "test_2k.tsv", HEADER + "1\tYes.\tIndeed.\t1\n2\tNo.\tMaybe.\t0\n")
    _write(base / "en" / "train.tsv", HEADER + "1\tOne.\tTwo.\t0\n")
    _write(base / "fr" / "test_2k.tsv", HEADER + "1\tOui.\tBien sûr.\t1\n2\tNon.\tPeut-être.\t0\n")
    return root


def _read(**source: object) -> tuple[dict, Skipped]:
    skipped = Skipped()
    tables = read_eval_sets(EvalSetsSettings(), EvalSources(pair_classification=[source]), skipped)
    return tables, skipped


# -------------------------------------------------------------------------------------------------------- readers


def test_xfinal_layout_rows_splits_and_bad_rows_with_their_lines(tmp_path: Path) -> None:
    tables, skipped = _read(format="pawsx", path=_xfinal(tmp_path))  # the folder holding x-final
    pairs, bad = tables[TABLE], tables[BAD_TABLE]
    # default splits dev + test; the training files are not read
    assert sorted(set(zip(pairs["lang"], pairs["split"], strict=True))) == [
        ("de", "dev"), ("de", "test"), ("en", "dev"), ("en", "test"), ("fr", "test")]
    de = pairs.filter((pairs["lang"] == "de") & (pairs["split"] == "test"))
    assert de["idx"].to_list() == [2, 3, 7, 8]  # file lines (the header is line 1)
    assert de.row(1, named=True) == {"dataset": "pawsx", "lang": "de", "split": "test", "idx": 3,
                                     "s1": '"Faust" wurde 1808 gedruckt.', "s2": 'Goethe druckte 1808 "Faust".',
                                     "label": 0}
    assert de["s2"][2] == "Die Spree fließt durch Berlin."  # the CR of a CRLF line is not part of the label
    assert bad.select("file", "line", "reason").rows() == [
        ("de/test_2k.tsv", 4, "missing sentence2"),
        ("de/test_2k.tsv", 5, "label not 0 or 1 (got '2')"),
        ("de/test_2k.tsv", 6, "expected 4 tab-separated fields (id, sentence1, sentence2, label), found 3")]
    assert bad["text"][1] == "4\tZwei Sätze.\tMit Label zwei.\t2"
    assert skipped.as_dict() == {TABLE: {
        "de/test_2k.tsv: malformed row, expected 4 tab-separated fields (id, sentence1, sentence2, label) (line 6)": 1,
        "de/test_2k.tsv: malformed row, label not 0 or 1 (line 5)": 1,
        "de/test_2k.tsv: malformed row, missing sentence2 (line 4)": 1}}
    # the training split by name: en's train.tsv and the translated_train.tsv files are both "train"
    tables, _ = _read(format="pawsx", path=tmp_path / "x-final", splits=["train"], languages=["de", "en"])
    assert tables[TABLE].select("lang", "split", "s1").rows() == [("de", "train", "A."), ("en", "train", "One.")]


def test_xtreme_flat_layout_csv_quoting_and_unlabelled_test_files(tmp_path: Path) -> None:
    folder = tmp_path / "pawsx"
    folder.mkdir()
    for name, rows in {"dev-de.tsv": [['Er sagte "ja".', "Er stimmte zu.", "1"], ["Ein\tTab?", "Nein.", "0"]],
                       "test-de.tsv": [["Ohne Label.", "Wie bei XTREME."], ['"Zitat"', "Satz."]],
                       "train-en.tsv": [["One.", "Two.", "0"], ["Three.", "Four.", "1"]]}.items():
        with open(folder / name, "w", encoding="utf-8", newline="") as f:
            csv.writer(f, delimiter="\t").writerows(rows)  # what XTREME's pawsx_preprocess writes
    with open(folder / "dev-fr.tsv", "a", encoding="utf-8") as f:  # the HF dataset written with a header
        f.write('id\tsentence1\tsentence2\tlabel\n7\t"Il a dit ""oui""."\tIl a accepté.\t1\n8\tNon.\tPeut-être.\t0\n'
                "9\tOui.\tSi.\t-1\n")
    assert "\"Er sagte \"\"ja\"\".\"" in (folder / "dev-de.tsv").read_text()  # really CSV-quoted on disk
    tables, skipped = _read(format="pawsx", path=folder, splits=[])
    pairs = tables[TABLE]
    assert pairs.select("lang", "split", "idx", "s1", "label").rows() == [
        ("de", "dev", 1, 'Er sagte "ja".', 1), ("de", "dev", 2, "Ein\tTab?", 0),
        ("en", "train", 1, "One.", 0), ("en", "train", 2, "Three.", 1),
        ("fr", "dev", 2, 'Il a dit "oui".', 1), ("fr", "dev", 3, "Non.", 0)]
    assert tables[BAD_TABLE].select("file", "line", "reason").rows() == [("pawsx/dev-fr.tsv", 4,
                                                                         "label not 0 or 1 (got '-1')")]
    # XTREME's test files have no labels: skipped as a whole, counted, not an error
    assert skipped.as_dict()[TABLE]["pawsx/test-de.tsv: unlabelled file (2 rows)"] == 2


def test_generic_tsv_by_header_or_position_and_quoting(tmp_path: Path) -> None:
    by_header = _write(tmp_path / "mrpc-like.tsv", "label\tsentence2\tsentence1\tsource\n"
                       "1\tB one.\tA one.\tx\n0\tB two.\t\ty\n")
    tables, _ = _read(format="tsv", path=by_header, language="en")
    assert tables[TABLE].select("dataset", "lang", "split", "idx", "s1", "s2", "label").rows() == [
        ("mrpc-like", "en", "test", 2, "A one.", "B one.", 1)]
    assert tables[BAD_TABLE].select("line", "reason").rows() == [(3, "missing sentence1")]
    plain = _write(tmp_path / "plain.tsv", '"Quoted at start\tsecond\t1\nthird\tfourth\t0\n')
    tables, _ = _read(format="tsv", path=plain, language="de", quoting="none", name="mine", split="dev")
    assert tables[TABLE].select("dataset", "split", "s1").rows() == [("mine", "dev", '"Quoted at start'),
                                                                    ("mine", "dev", "third")]
    # the same file read as CSV: the quote opened on line 1 is never closed and swallows the rest of the file; that
    # is reported naming the line, never read as one long sentence
    with pytest.raises(EvalFormatError, match=r"plain\.tsv: no readable row \(1 malformed; first .*plain\.tsv:1: a "
                                              r"quote opened here is closed on a later line\)"):
        _read(format="tsv", path=plain, language="de", quoting="csv")


def test_a_wholly_unreadable_file_fails_naming_it(tmp_path: Path) -> None:
    root = _xfinal(tmp_path / "a")
    _write(root / "x-final" / "fr" / "test_2k.tsv", "1\tOui.\tSi.\t1\n")  # the header is missing
    with pytest.raises(EvalFormatError, match=r"x-final/fr/test_2k\.tsv:1: header .* expected \['id', 'sentence1'"):
        _read(format="pawsx", path=root)
    garbage = _write(tmp_path / "b" / "garbage.tsv", b"\xff\xfe\x00\x01\n\x80\x81\x82\n")
    with pytest.raises(EvalFormatError, match=r"garbage\.tsv: no readable row \(2 malformed; first .*garbage\.tsv:1: "
                                              r"invalid UTF-8\)"):
        _read(format="tsv", path=garbage, language="en")
    wrong = _write(tmp_path / "c" / "wrong.tsv", "a\tb\tyes\nc\td\tno\n")
    with pytest.raises(EvalFormatError, match=r"wrong\.tsv: no readable row \(2 malformed; first .*wrong\.tsv:1: "
                                              r"label not 0 or 1\)"):
        _read(format="tsv", path=wrong, language="en")
    # one undecodable line among good ones is a bad row, not a failure
    mixed = _write(tmp_path / "d" / "mixed.tsv", b"a\tb\t1\n\xff\tc\t0\nd\te\t0\n")
    tables, _ = _read(format="tsv", path=mixed, language="en")
    assert tables[TABLE]["idx"].to_list() == [1, 3]
    assert tables[BAD_TABLE].select("line", "reason").rows() == [(2, "invalid UTF-8")]


def test_settings_validate_what_the_user_typed_and_list_the_files(tmp_path: Path) -> None:
    from pydantic import ValidationError

    root = _xfinal(tmp_path)
    with pytest.raises(ValidationError, match="format tsv needs language"):
        EvalSources(pair_classification=[{"format": "tsv", "path": root / "x.tsv"}])
    with pytest.raises(ValidationError, match=r"sources\.eval\.pair_classification\.languages"):
        EvalSources(pair_classification=[{"format": "pawsx", "path": root, "languages": ["xq"]}])
    sources = EvalSources(pair_classification=[{"format": "pawsx", "path": root, "languages": ["fr"]}])
    assert sources.configured()
    assert sources.files() == {"pair_classification/0/x-final/fr/test_2k.tsv": root / "x-final/fr/test_2k.tsv"}
    with pytest.raises(FileNotFoundError, match=r"sources.eval.pair_classification\[0\]: .*no PAWS-X files for "
                                                r"languages \['ko'\]"):
        EvalSources(pair_classification=[{"format": "pawsx", "path": root, "languages": ["ko"]}]).files()
    empty = _write(tmp_path / "e" / "notes.txt", "").parent
    with pytest.raises(FileNotFoundError, match=r"e: no PAWS-X files \(expected x-final"):
        EvalSources(pair_classification=[{"format": "pawsx", "path": empty}]).files()


# ----------------------------------------------------------------------------------------------------------- maths


def test_threshold_search_by_hand_never_splits_ties() -> None:
    # sorted most similar first: .9(1) .8(1) .7(0) .7(1) .6(0) .1(0); cuts between equal .7s are not allowed
    scores = np.array([0.7, 0.9, 0.1, 0.7, 0.8, 0.6])
    labels = np.array([0, 1, 0, 1, 1, 0])
    # cuts: after .9 → 1 + 3 neg = 4/6; after .8 → 2 + 3 = 5/6; after both .7 → 3 + 2 = 5/6 (not better: first kept);
    # after .6 → 3 + 1 = 4/6
    acc, threshold = best_accuracy_and_threshold(scores, labels)
    assert acc == pytest.approx(5 / 6) and threshold == pytest.approx(0.75)
    # F1: after .9 → p 1, r 1/3 (.5); after .8 → p 1, r 2/3 (.8); after the .7s → p 3/4, r 1 (6/7 ≈ .857) ← best
    f1, precision, recall, f1_threshold = best_f1_and_threshold(scores, labels)
    assert (f1, precision, recall) == pytest.approx((6 / 7, 3 / 4, 1.0)) and f1_threshold == pytest.approx(0.65)
    # the same as distances (lower = more similar) with the order reversed
    assert best_accuracy_and_threshold(-scores, labels, higher_is_similar=False) == pytest.approx((5 / 6, -0.75))
    # every score tied: no cut at all (mteb's defaults)
    assert best_accuracy_and_threshold(np.ones(4), np.array([0, 1, 0, 1])) == (0.0, -1.0)
    assert best_f1_and_threshold(np.ones(4), np.array([0, 1, 0, 1])) == (0.0, 0.0, 0.0, 0.0)


def test_pair_classification_scores_and_bad_input() -> None:
    rng = np.random.default_rng(1)
    e1 = rng.normal(size=(60, 8)).astype(np.float32)
    labels = np.arange(60) % 2
    e2 = np.where(labels[:, None] == 1, e1 + 0.1 * rng.normal(size=(60, 8)), rng.normal(size=(60, 8)))
    out = pair_classification_mteb(e1, e2.astype(np.float32), labels)
    assert out["mteb_cosine_accuracy"] == 1.0 and out["cosine_ap"] == pytest.approx(100.0)
    assert out["mteb_main_score"] == out["mteb_max_ap"] and out["max_ap"] == pytest.approx(100 * out["mteb_max_ap"])
    assert 0 < out["cosine_accuracy_threshold"] < 1 and out["n"] == 60
    assert out["max_f1"] >= out["cosine_f1"]
    with pytest.raises(ValueError, match=r"labels must be 0 .* or 1 .*found \[0, 1, 2\]"):
        pair_classification_mteb(e1[:3], e1[:3], [0, 1, 2])
    with pytest.raises(ValueError, match="same shape"):
        pair_classification_mteb(e1[:3], e1[:4], [0, 1, 0])
    with pytest.raises(ValueError, match="at least 2 pairs"):
        pair_classification_mteb(e1[:1], e1[:1], [1])


# ---------------------------------------------------------------------------------------------------- mteb parity


def test_mteb_parity_pawsx_task_on_the_same_embeddings() -> None:
    """mteb's own PawsXPairClassification task (``AbsTask.evaluate``) on precomputed float32 embeddings with many
    tied similarities: every score mteb writes equals ours, main_score (max_ap) included."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    mteb = pytest.importorskip("mteb", reason="mteb (dev extra) is not installed: parity cannot be checked")
    from datasets import Dataset

    rng = np.random.default_rng(5)
    n, d = 400, 16
    # quarter-step coordinates: many exactly tied cosines and distances, so the tie rule of the search matters
    e1 = (rng.integers(-4, 5, size=(n, d)) / 4).astype(np.float32)
    labels = rng.integers(0, 2, size=n)
    noise = (rng.integers(-2, 3, size=(n, d)) / 4).astype(np.float32)
    e2 = np.where(labels[:, None] == 1, e1 + noise, rng.permutation(e1)).astype(np.float32)
    e2[::9] = e1[::9]
    s1, s2 = [f"first {i}" for i in range(n)], [f"second {i}" for i in range(n)]
    table = {**dict(zip(s1, e1, strict=True)), **dict(zip(s2, e2, strict=True))}
    task = mteb.get_task("PawsXPairClassification")
    assert task.metadata.main_score == "max_ap"
    task.dataset = {"x": {"test": Dataset.from_dict({"sentence1": s1, "sentence2": s2, "labels": labels.tolist()})}}
    task.data_loaded = True
    task.hf_subsets = ["x"]
    expected = task.evaluate(PrecomputedEncoder(table), split="test", encode_kwargs={"batch_size": 64})["x"]
    ours = pair_classification_mteb(e1, e2, labels)
    keys = [k for k, v in expected.items() if isinstance(v, float)]
    assert len(keys) >= 31 and "main_score" in keys
    for key in keys:
        assert ours[f"mteb_{key}"] == expected[key], key  # bit for bit
    assert 0.55 < expected["cosine_accuracy"] < 1.0  # neither trivial nor chance


# ------------------------------------------------------------------------------------------------------ the task


def test_suite_task_writes_per_language_rows_and_their_mean(tmp_path: Path) -> None:
    from models.evaluation.results import Results
    from models.evaluation.task_registry import Vectors
    from models.evaluation.tasks.pair_classification import PairClassification, PairClassificationSettings
    from pipelines.eval_sets.build import build_eval_sets

    root = _xfinal(tmp_path / "data")
    result = build_eval_sets(EvalSetsSettings(), EvalSources(pair_classification=[{"format": "pawsx", "path": root}]),
                             tmp_path)
    assert set(result.tables) == {TABLE, BAD_TABLE} and result.stats["rows"][BAD_TABLE] == 3
    tables = {t: tmp_path / rel for t, rel in result.tables.items()}
    task = PairClassification(PairClassificationSettings(splits=("test",)), tables)
    texts = list(dict.fromkeys(task.texts()))
    rng = np.random.default_rng(0)
    vec = Vectors({t: i for i, t in enumerate(texts)}, rng.normal(size=(len(texts), 6)).astype(np.float32))
    out = Results("run", "model")
    task.score(vec, out)
    rows = {(r[1], r[2], r[4]): (r[5], r[6]) for r in out.rows}
    assert {s for _, s, _ in rows} == {"pawsx/test/de", "pawsx/test/en", "pawsx/test/fr", "pawsx/test/mean"}
    import polars as pl

    de = pl.read_parquet(tables[TABLE]).filter((pl.col("lang") == "de") & (pl.col("split") == "test"))
    ref = pair_classification_mteb(vec(de["s1"].to_list()), vec(de["s2"].to_list()), de["label"].to_list())
    assert rows[("mteb", "pawsx/test/de", "max_ap")] == (ref["max_ap"], 4)
    assert rows[("mteb", "pawsx/test/de", "cosine_f1_threshold")] == (ref["cosine_f1_threshold"], 4)
    mean = np.mean([rows[("mteb", f"pawsx/test/{lang}", "max_ap")][0] for lang in ("de", "en", "fr")])
    assert rows[("mteb", "pawsx/test/mean", "max_ap")] == (pytest.approx(mean), 3)
    assert ("mteb", "pawsx/test/mean", "cosine_f1_threshold") not in rows  # a mean of thresholds means nothing
    assert {r[3] for r in out.rows if r[2] == "pawsx/test/mean"} == {"3 languages"}
