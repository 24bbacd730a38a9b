"""XNLI readers on the real XNLI 1.0 files (../shared/data/xnli), and the other formats built from their rows."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import polars as pl
import pytest

from pipelines.hub import HubUnavailableError
from pipelines.language_codes import UnknownLanguageError
from pipelines.xnli.readers import (
    XnliFormatError,
    XnliLanguage,
    _read_tab_separated_exact,
    frame_from_hub_dataset,
    read_tab_separated,
    read_xnli,
    verify_alignment,
)
from pipelines.xnli.sources import XNLI_LANGUAGES, XnliSource

EN_DEV_1 = ("And he said, Mama, I'm home.", "He called his mom as soon as the school bus dropped him off.", "neutral")
DE_DEV_1 = ("und er hat gesagt, Mama ich bin daheim.", "Er rief seine Mutter an, sobald er aus dem Schulbus stieg.",
            "neutral")
XNLI10_HEADER = ["language", "gold_label", "sentence1_binary_parse", "sentence2_binary_parse", "sentence1_parse",
                 "sentence2_parse", "sentence1", "sentence2", "promptID", "pairID", "genre", "label1", "label2",
                 "label3", "label4", "label5", "sentence1_tokenized", "sentence2_tokenized", "match"]


@pytest.fixture
def xnli_dir(shared_data: Path) -> Path:
    return shared_data / "xnli"


def esc(path: Path | str) -> str:
    return re.escape(str(path))


def copy_split(xnli_dir: Path, dest: Path, langs: list[str], split: str = "dev") -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for lang in langs:
        shutil.copy(xnli_dir / f"{split}-{lang}.tsv", dest / f"{split}-{lang}.tsv")
    return dest


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def texts(tables: dict[str, XnliLanguage]) -> dict[str, list[tuple]]:
    return {lang: t.frame.select("premise", "hypothesis", "label").rows() for lang, t in tables.items()}


# ---------------------------------------------------------------------------------------------------------- xtreme


def test_xtreme_real_rows_by_hand(xnli_dir: Path) -> None:
    tables = read_xnli(XnliSource(dir=xnli_dir), "dev", ["en", "de"])
    assert list(tables) == ["en", "de"]
    en, de = tables["en"], tables["de"]
    assert en.origin == str(xnli_dir / "dev-en.tsv")
    assert en.frame.schema == pl.Schema({"premise": pl.String, "hypothesis": pl.String, "label": pl.String,
                                         "line": pl.Int64, "pair_id": pl.String})
    assert en.frame.height == de.frame.height == 2490
    assert en.frame.row(0) == (*EN_DEV_1, 1, None)
    assert de.frame.row(0) == (*DE_DEV_1, 1, None)
    assert en.frame.row(2489) == ("While statement is better, answer gives the mental picture of completion.",
                                  "Statement is preferable.", "entailment", 2490, None)
    assert en.frame["label"].head(3).to_list() == ["neutral", "contradiction", "entailment"]
    assert en.frame["line"].to_list() == list(range(1, 2491))
    test = read_xnli(XnliSource(dir=xnli_dir), "test", ["en"])["en"].frame
    assert test.height == 5010
    assert test.row(0)[:3] == ("Well, I wasn't even thinking about that, but I was so frustrated, and, I ended up "
                               "talking to him again.", "I havent spoken to him again.", "contradiction")


@pytest.mark.parametrize("split,rows,premises", [("dev", 2490, 830), ("test", 5010, 1670)])
def test_all_15_languages_align_on_the_real_data(xnli_dir: Path, split: str, rows: int, premises: int) -> None:
    tables = read_xnli(XnliSource(dir=xnli_dir), split, list(XNLI_LANGUAGES))
    assert set(tables) == set(XNLI_LANGUAGES)
    verify_alignment(tables, "en")  # counts, labels and premise boundaries agree in all 15 languages
    for t in tables.values():
        assert t.frame.height == rows
        starts = t.frame["premise"] != t.frame["premise"].shift(1)
        assert int(starts.fill_null(True).sum()) == premises  # 3 hypotheses per premise, in every language


def test_fast_path_and_exact_pass_agree_on_a_real_file(xnli_dir: Path) -> None:
    data = (xnli_dir / "dev-zh.tsv").read_bytes()
    names = ("premise", "hypothesis", "label")
    fast = read_tab_separated(data, "zh", names)
    exact = _read_tab_separated_exact(data, "zh", names, XnliFormatError)
    assert fast.equals(exact)
    assert fast.height == 2490


def test_bare_quotes_crlf_and_blank_lines(xnli_dir: Path, tmp_path: Path) -> None:
    lines = lines_of(xnli_dir / "dev-en.tsv")[:9]
    lines[3] = 'He said "no\tShe said "yes" twice\tneutral'  # unbalanced quotes: the format is not CSV-quoted
    with_blanks = ["", *lines[:5], "", "", *lines[5:], ""]
    d = tmp_path / "x"
    d.mkdir()
    (d / "dev-en.tsv").write_bytes("".join(line + "\r\n" for line in with_blanks).encode())
    frame = read_xnli(XnliSource(dir=d), "dev", ["en"])["en"].frame
    assert frame.height == 9
    assert frame.row(3)[:2] == ('He said "no', 'She said "yes" twice')
    assert frame["line"].to_list() == [2, 3, 4, 5, 6, 9, 10, 11, 12]  # blank lines 1, 7, 8, 13 skipped but counted
    assert frame.row(5)[:3] == tuple(lines[5].split("\t"))


def test_reader_speed_at_xnli_mt_scale(xnli_dir: Path, tmp_path: Path) -> None:
    rows = (xnli_dir / "dev-en.tsv").read_bytes().splitlines(keepends=True)
    n = 392_702
    (tmp_path / "train-en.tsv").write_bytes(b"".join(rows) * (n // len(rows)) + b"".join(rows[: n % len(rows)]))
    best = float("inf")
    for _ in range(2):
        start = time.perf_counter()
        frame = read_xnli(XnliSource(dir=tmp_path), "train", ["en"])["en"].frame
        best = min(best, time.perf_counter() - start)
    assert frame.height == n
    assert frame["line"][-1] == n
    assert best < 1.0, f"{n} rows took {best:.2f} s (the exact fallback pass takes ~1.5 s; the fast path ~0.15 s)"


# ---------------------------------------------------------------------------------------------------------- xnli10


def write_xnli10(xnli_dir: Path, langs: list[str], split: str, header: list[str]) -> tuple[str, dict]:
    """One XNLI-1.0-style file from the real rows: rows interleaved by language; returns text and expected lines."""
    per_lang = {lang: [line.split("\t") for line in lines_of(xnli_dir / f"{split}-{lang}.tsv")] for lang in langs}
    out = ["\t".join(header)]
    expected_lines: dict[str, list[int]] = {lang: [] for lang in langs}
    prompt = 0
    for i in range(len(per_lang["en"])):
        if i == 0 or per_lang["en"][i][0] != per_lang["en"][i - 1][0]:
            prompt += 1
        for lang in langs:
            premise, hypothesis, label = per_lang[lang][i]
            values = {"language": lang, "gold_label": label, "sentence1": premise, "sentence2": hypothesis,
                      "promptID": str(prompt), "pairID": str(i + 1), "genre": "fiction", "label1": label,
                      "sentence1_tokenized": premise.lower(), "sentence2_tokenized": hypothesis.lower(),
                      "match": "True"}
            out.append("\t".join(values.get(col, "") for col in header))
            expected_lines[lang].append(len(out))
    return "".join(line + "\n" for line in out), expected_lines


def test_xnli10_zip_folder_and_file_read_like_xtreme(xnli_dir: Path, tmp_path: Path) -> None:
    langs = ["en", "de", "sw", "zh"]
    xtreme = read_xnli(XnliSource(dir=xnli_dir), "dev", langs)
    text, expected_lines = write_xnli10(xnli_dir, langs, "dev", XNLI10_HEADER)
    zpath = tmp_path / "XNLI-1.0.zip"
    with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("XNLI-1.0/xnli.dev.tsv", text)
        zf.writestr("__MACOSX/XNLI-1.0/._xnli.dev.tsv", b"\x00\x05\x16\x07")
        zf.writestr("XNLI-1.0/xnli.test.tsv", "\t".join(XNLI10_HEADER) + "\n")
    got = read_xnli(XnliSource(format="xnli10", path=zpath), "dev", langs)
    assert texts(got) == texts(xtreme)
    assert got["de"].origin == f"{zpath}:XNLI-1.0/xnli.dev.tsv"
    for lang in langs:
        assert got[lang].frame["line"].to_list() == expected_lines[lang]
        assert got[lang].frame["pair_id"].to_list() == [str(i) for i in range(1, 2491)]
    assert got["sw"].frame["line"][0] == 4  # header, en, de, sw
    verify_alignment(got, "en")

    folder = tmp_path / "unpacked" / "XNLI-1.0"
    folder.mkdir(parents=True)
    (folder / "xnli.dev.tsv").write_text(text, encoding="utf-8")
    assert texts(read_xnli(XnliSource(format="xnli10", path=folder.parent), "dev", langs)) == texts(xtreme)

    # columns are found by header name, not position
    shuffled = [*XNLI10_HEADER[2:], "gold_label", "language"][::-1]
    text2, _ = write_xnli10(xnli_dir, ["en", "fr"], "dev", shuffled)
    single = tmp_path / "xnli.dev.tsv"
    single.write_text(text2, encoding="utf-8")
    got2 = read_xnli(XnliSource(format="xnli10", path=single), "dev", ["fr", "en"])
    assert texts(got2) == texts(read_xnli(XnliSource(dir=xnli_dir), "dev", ["fr", "en"]))

    with pytest.raises(ValueError, match="dev/test only"):
        read_xnli(XnliSource(format="xnli10", path=zpath), "train", ["en"])
    with pytest.raises(XnliFormatError, match=r"no rows for language 'ar'.*\['de', 'en', 'sw', 'zh'\]"):
        read_xnli(XnliSource(format="xnli10", path=zpath), "dev", ["en", "ar"])
    with pytest.raises(ValueError, match="not the test split"):
        read_xnli(XnliSource(format="xnli10", path=folder / "xnli.dev.tsv"), "test", ["en"])


def test_xnli10_pair_id_disagreement(xnli_dir: Path, tmp_path: Path) -> None:
    text, lines = write_xnli10(xnli_dir, ["en", "de"], "dev", XNLI10_HEADER)
    rows = text.split("\n")
    de_row = rows[lines["de"][100] - 1].split("\t")
    de_row[XNLI10_HEADER.index("pairID")] = "99999"
    rows[lines["de"][100] - 1] = "\t".join(de_row)
    path = tmp_path / "xnli.dev.tsv"
    path.write_text("\n".join(rows), encoding="utf-8")
    tables = read_xnli(XnliSource(format="xnli10", path=path), "dev", ["en", "de"])
    with pytest.raises(XnliFormatError, match=rf"{esc(path)}:{lines['de'][100]}: pair_id '99999' but {esc(path)}:"
                                              rf"{lines['en'][100]} has '101'"):
        verify_alignment(tables, "en")


# ---------------------------------------------------------------------------------------------------------- xnli_mt


def test_xnli_mt_zip_and_folder_read_like_xtreme(xnli_dir: Path, tmp_path: Path) -> None:
    langs = ["en", "de", "ar"]
    xtreme = read_xnli(XnliSource(dir=xnli_dir), "dev", langs)
    zpath = tmp_path / "XNLI-MT-1.0.zip"
    with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as zf:
        for lang in langs:
            body = (xnli_dir / f"dev-{lang}.tsv").read_text(encoding="utf-8").replace("\tcontradiction\n",
                                                                                       "\tcontradictory\n")
            assert "contradictory" in body
            zf.writestr(f"XNLI-MT-1.0/multinli/multinli.train.{lang}.tsv", "premise\thypo\tlabel\n" + body)
            zf.writestr(f"__MACOSX/XNLI-MT-1.0/multinli/._multinli.train.{lang}.tsv", b"\x00")
        zf.writestr("XNLI-MT-1.0/xnli/xnli.dev.en.tsv", "premise\thypo\tlabel\n")
    got = read_xnli(XnliSource(format="xnli_mt", path=zpath), "train", langs)
    assert texts(got) == texts(xtreme)
    assert got["de"].origin == f"{zpath}:XNLI-MT-1.0/multinli/multinli.train.de.tsv"
    assert got["de"].frame["line"].to_list() == list(range(2, 2492))  # header is line 1
    assert got["en"].frame.row(0) == (*EN_DEV_1, 2, None)
    verify_alignment(got, "en")

    with zipfile.ZipFile(zpath) as zf:
        zf.extractall(tmp_path / "unpacked")
    folder = read_xnli(XnliSource(format="xnli_mt", path=tmp_path / "unpacked"), "train", ["ar", "en"])
    assert texts(folder) == texts({k: got[k] for k in ["ar", "en"]})
    assert folder["ar"].origin == str(tmp_path / "unpacked/XNLI-MT-1.0/multinli/multinli.train.ar.tsv")

    # a header file with leading blank lines (polars would skip them silently): line numbers stay true
    odd = tmp_path / "odd" / "multinli"
    odd.mkdir(parents=True)
    (odd / "multinli.train.en.tsv").write_text("\n\npremise\thypo\tlabel\np\th\tcontradictory\nq\ti\tneutral\n")
    frame = read_xnli(XnliSource(format="xnli_mt", path=odd.parent), "train", ["en"])["en"].frame
    assert frame.select("premise", "label", "line").rows() == [("p", "contradiction", 4), ("q", "neutral", 5)]

    with pytest.raises(ValueError, match="train split only"):
        read_xnli(XnliSource(format="xnli_mt", path=zpath), "dev", ["en"])
    with pytest.raises(FileNotFoundError, match=r"multinli\.train\.fr\.tsv"):
        read_xnli(XnliSource(format="xnli_mt", path=zpath), "train", ["fr"])


# ---------------------------------------------------------------------------------------------------------- errors


def test_deleted_row_is_found(xnli_dir: Path, tmp_path: Path) -> None:
    d = copy_split(xnli_dir, tmp_path / "x", ["en", "de"])
    de_path = d / "dev-de.tsv"
    lines = lines_of(de_path)
    labels = [line.rsplit("\t", 1)[1] for line in lines]
    k = next(i for i in range(1200, 2000) if labels[i] != labels[i + 1])  # labels shift visibly after row k
    del lines[k]
    write_lines(de_path, lines)
    tables = read_xnli(XnliSource(dir=d), "dev", ["en", "de"])
    with pytest.raises(XnliFormatError) as err:
        verify_alignment(tables, "en")
    msg = str(err.value)
    assert msg.startswith(f"{de_path}: 2489 rows but {d / 'dev-en.tsv'} has 2490")
    assert f"{de_path}:{k + 1} ({labels[k + 1]!r}) vs {d / 'dev-en.tsv'}:{k + 1} ({labels[k]!r})" in msg

    # same count (a row added at the end): the label disagreement names the line and both labels
    write_lines(de_path, [*lines, lines[-1]])
    tables = read_xnli(XnliSource(dir=d), "dev", ["en", "de"])
    with pytest.raises(XnliFormatError, match=rf"^{esc(de_path)}:{k + 1}: label '{labels[k + 1]}' but "
                                              rf"{esc(d / 'dev-en.tsv')}:{k + 1} has '{labels[k]}'"):
        verify_alignment(tables, "en")


def test_premise_boundary_mismatch(xnli_dir: Path, tmp_path: Path) -> None:
    d = copy_split(xnli_dir, tmp_path / "x", ["en", "fr"])
    fr_path = d / "dev-fr.tsv"
    lines = lines_of(fr_path)
    premise, hypothesis, label = lines[100].split("\t")  # row 101: the second hypothesis of premise 34
    assert lines[99].split("\t")[0] == premise
    lines[100] = "\t".join([premise + " (autre)", hypothesis, label])
    write_lines(fr_path, lines)
    tables = read_xnli(XnliSource(dir=d), "dev", ["en", "fr"])
    with pytest.raises(XnliFormatError, match=rf"^{esc(fr_path)}:101 starts a new premise but "
                                              rf"{esc(d / 'dev-en.tsv')}:101 does not; "
                                              r"2 of 2490 rows \(0.08%\) disagree"):
        verify_alignment(tables, "en")
    verify_alignment(tables, "en", max_boundary_mismatch=0.001)  # tolerated: 2 / 2490 < 0.1 %
    with pytest.raises(ValueError, match="anchor language 'de'"):
        verify_alignment(tables, "de")


@pytest.mark.parametrize("bad,message", [
    ("only two\tfields", r":7: expected 3 tab-separated fields \(premise, hypothesis, label\), found 2$"),
    ("one\ttoo\tmany\tfields", r":7: expected 3 tab-separated fields \(premise, hypothesis, label\), found 4$"),
    ("a premise\ta hypothesis\tmaybe", r":7: label 'maybe', expected one of \['entailment', 'neutral', "),
    ("a premise\ta hypothesis\t", r":7: label '', expected one of"),
])
def test_malformed_line_names_file_and_line(xnli_dir: Path, tmp_path: Path, bad: str, message: str) -> None:
    d = copy_split(xnli_dir, tmp_path / "x", ["en"])
    lines = lines_of(d / "dev-en.tsv")
    lines[6] = bad
    write_lines(d / "dev-en.tsv", lines)
    with pytest.raises(XnliFormatError, match=f"^{esc(d / 'dev-en.tsv')}{message}"):
        read_xnli(XnliSource(dir=d), "dev", ["en"])


def test_invalid_utf8_names_the_line(xnli_dir: Path, tmp_path: Path) -> None:
    d = copy_split(xnli_dir, tmp_path / "x", ["de"])
    lines = (d / "dev-de.tsv").read_bytes().split(b"\n")
    lines[19] = lines[19].replace(b"e", b"\xff", 1)
    (d / "dev-de.tsv").write_bytes(b"\n".join(lines))
    with pytest.raises(XnliFormatError, match=rf"^{esc(d / 'dev-de.tsv')}:20: invalid UTF-8"):
        read_xnli(XnliSource(dir=d), "dev", ["de"])


def test_languages_and_missing_files(xnli_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(UnknownLanguageError, match="'xx'"):
        read_xnli(XnliSource(dir=xnli_dir), "dev", ["en", "xx"])
    with pytest.raises(ValueError, match=r"XNLI has no language 'ja'; its 15 languages are ar, bg, de, .*, zh"):
        read_xnli(XnliSource(dir=xnli_dir), "dev", ["ja"])
    with pytest.raises(ValueError, match="split 'validation'"):
        read_xnli(XnliSource(dir=xnli_dir), "validation", ["en"])
    with pytest.raises(FileNotFoundError, match=r"train-en\.tsv"):
        read_xnli(XnliSource(dir=xnli_dir), "train", ["en"])
    with pytest.raises(FileNotFoundError, match=r"XNLI-1\.0 not found"):
        read_xnli(XnliSource(format="xnli10", path=tmp_path / "XNLI-1.0.zip"), "dev", ["en"])


# ---------------------------------------------------------------------------------------------------------- hub


def test_frame_from_hub_dataset() -> None:
    import datasets

    features = datasets.Features({"premise": datasets.Value("string"), "hypothesis": datasets.Value("string"),
                                  "label": datasets.ClassLabel(names=["entailment", "neutral", "contradiction"])})
    ds = datasets.Dataset.from_dict({"premise": ["p1", "p1", "p2"], "hypothesis": ["h1", "h2", "h3"],
                                     "label": [2, 0, 1]}, features=features)
    frame = frame_from_hub_dataset(ds, "hub:facebook/xnli/de:validation")
    assert frame.rows() == [("p1", "h1", "contradiction", None, None), ("p1", "h2", "entailment", None, None),
                            ("p2", "h3", "neutral", None, None)]
    assert frame.schema == pl.Schema({"premise": pl.String, "hypothesis": pl.String, "label": pl.String,
                                      "line": pl.Int64, "pair_id": pl.String})
    assert frame_from_hub_dataset(ds.select([2])).rows() == [("p2", "h3", "neutral", None, None)]
    bad = datasets.Dataset.from_dict({"premise": ["p", "q"], "hypothesis": ["h", "i"], "label": [1, 3]})
    with pytest.raises(XnliFormatError, match=r"^hub:x: row 1 \(0-based\): label 3"):
        frame_from_hub_dataset(bad, "hub:x")


def test_hub_offline_fails_fast_naming_local_formats(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    start = time.perf_counter()
    with pytest.raises(HubUnavailableError) as err:
        read_xnli(XnliSource(format="hub"), "dev", ["de"])
    assert time.perf_counter() - start < 5
    assert "facebook/xnli (config 'de', split 'validation')" in str(err.value)
    for fmt in ("'xtreme'", "'xnli10'", "'xnli_mt'"):
        assert fmt in str(err.value)


def test_readers_import_neither_torch_nor_prefect() -> None:
    code = ("import sys, pipelines.xnli.readers, pipelines.nli.readers; "
            "print(sorted(m for m in ('torch', 'prefect') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.strip() == "[]"
