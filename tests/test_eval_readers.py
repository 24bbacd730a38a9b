"""Evaluation-set readers (pipelines/eval_sets): the real public files in ../shared/data, the embedded sample, and
purpose-built bad files. Counts and texts are checked against independent computations (plain Python over the raw
bytes, mteb's own descriptive statistics of its hub copies), never against the reader itself."""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from pathlib import Path

import datasets
import polars as pl
import pytest
from conftest import SAMPLE

from pipelines.eval_sets import STAGE_VERSION, EvalSetsSettings, EvalSources, build_eval_sets
from pipelines.eval_sets.bucc import read_bucc
from pipelines.eval_sets.build import read_eval_sets, tables
from pipelines.eval_sets.classification import MTOP_FIELDS, read_mldoc, read_mtop, read_sib200
from pipelines.eval_sets.clustering import read_clustering
from pipelines.eval_sets.hub import HUB_DATASETS, HubLoadError, load_hub
from pipelines.eval_sets.langid import read_langid
from pipelines.eval_sets.lines import EvalFormatError, Skipped, read_text_lines
from pipelines.eval_sets.parallel import read_flores, read_ntrex
from pipelines.eval_sets.sts import read_semeval, read_sick, read_stsb_multi_mt, read_stsbenchmark
from pipelines.eval_sets.tatoeba import XNLI14, XTREME36, read_tatoeba
from pipelines.language_codes import UnknownLanguageError

MTEB = Path(datasets.__file__).resolve().parents[1] / "mteb"
MTEB_STATS = MTEB / "descriptive_stats"
SAMPLE_EVAL = SAMPLE / "eval"


def esc(path: Path | str) -> str:
    return re.escape(str(path))


def write(path: Path, lines: list[str], end: str = "\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + end for line in lines), encoding="utf-8")
    return path


def raw_lines(path: Path) -> list[str]:
    """Independent reference: the file split at \\n only, no final empty line, \\r removed."""
    text = path.read_bytes().decode("utf-8-sig")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [ln.removesuffix("\r") for ln in lines]


def mteb_stats(kind: str, task: str) -> dict:
    path = MTEB_STATS / kind / f"{task}.json"
    if not path.is_file():
        pytest.skip(f"mteb descriptive statistics not installed ({path})")
    return json.loads(path.read_text())


# =====================================================================================================================
# real data


@pytest.mark.shared_data
def test_tatoeba_real_36_languages_match_the_files_and_mteb(shared_data: Path) -> None:
    folder = shared_data / "tatoeba"
    df = read_tatoeba(folder)
    assert set(XNLI14) < set(XTREME36) and len(set(XTREME36)) == 36
    assert sorted(df["lang"].unique()) == sorted(XTREME36)
    assert df.schema == pl.Schema({"lang": pl.String, "idx": pl.Int32, "text": pl.String, "eng": pl.String})
    counts = dict(df.group_by("lang").len().iter_rows())
    assert counts["jav"] == 205 and counts["tel"] == 234 and counts["kat"] == 746 and counts["deu"] == 1000
    stats = mteb_stats("BitextMining", "Tatoeba")["test"]["hf_subset_descriptive_stats"]
    for lang in XTREME36:
        src, eng = raw_lines(folder / f"tatoeba.{lang}-eng.{lang}"), raw_lines(folder / f"tatoeba.{lang}-eng.eng")
        part = df.filter(pl.col("lang") == lang)
        assert part["text"].to_list() == [s.strip() for s in src]
        assert part["eng"].to_list() == [s.strip() for s in eng]
        assert part["idx"].to_list() == list(range(len(src)))
        # mteb's hub copy keeps one line break per sentence: its totals are ours + the number of rows
        s = stats[f"{lang}-eng"]
        assert s["num_samples"] == part.height
        assert s["sentence1_statistics"]["total_text_length"] == part["text"].str.len_chars().sum() + part.height
        assert s["sentence2_statistics"]["total_text_length"] == part["eng"].str.len_chars().sum() + part.height
    sub = read_tatoeba(folder, ["jav", "deu"])
    assert sub["lang"].unique(maintain_order=True).to_list() == ["jav", "deu"] and sub.height == 1205


@pytest.mark.shared_data
def test_bucc_real_zh_en_sample(shared_data: Path) -> None:
    folder = shared_data / "bucc2018"
    sk = Skipped()
    sents, gold = read_bucc(folder, skipped=sk)
    counts = dict(sents.group_by("lang").len().iter_rows())
    assert counts == {"zh": 8624, "en": 13589}
    assert gold.height == 257 and gold.unique().height == 257 and sk.as_dict() == {}
    zh = raw_lines(folder / "zh-en.sample.zh")
    zh_rows = sents.filter(pl.col("lang") == "zh").sort("line")
    assert zh_rows["id"].to_list() == [ln.split("\t")[0] for ln in zh]
    assert zh_rows["text"].to_list() == [ln.split("\t", 1)[1].strip() for ln in zh]
    # duplicated texts are kept: as many zh rows share a text as the raw file says
    dup_raw = sum(n for n in Counter(ln.split("\t", 1)[1].strip() for ln in zh).values() if n > 1)
    assert dup_raw > 0 and zh_rows.filter(pl.col("text").is_duplicated()).height == dup_raw
    raw_gold = [tuple(ln.split("\t")) for ln in raw_lines(folder / "zh-en.sample.gold")]
    assert list(zip(gold["src_id"], gold["tgt_id"], strict=True)) == raw_gold
    assert set(gold["pair"]) == {"zh-en"} and set(gold["split"]) == {"sample"}


def _semeval_counts(folder: Path) -> tuple[int, int, float]:
    """(scored pairs, blank gold lines, mean score) computed straight from the files."""
    scored, blank, total = 0, 0, 0.0
    for gs in sorted(folder.glob("STS.gs.*.txt")):
        if not (folder / gs.name.replace("STS.gs.", "STS.input.")).exists():
            continue
        for g in raw_lines(gs):
            if g.strip():
                scored, total = scored + 1, total + float(g)
            else:
                blank += 1
    return scored, blank, total / scored


@pytest.mark.shared_data
def test_senteval_sts12_16_counts_blank_gold_and_mteb(shared_data: Path) -> None:
    sk = Skipped()
    for year in range(12, 17):
        folder = shared_data / "sts" / f"STS{year}-en-test"
        df = read_semeval(folder, skipped=sk)
        scored, blank, mean = _semeval_counts(folder)
        assert set(df["dataset"]) == {f"sts{year}"} and set(df["lang1"]) == set(df["lang2"]) == {"en"}
        assert df.height == scored and df["score"].mean() == pytest.approx(mean, abs=1e-12)
        stats = mteb_stats("STS", f"STS{year}")["test"]
        assert stats["num_samples"] == df.height
        assert stats["label_statistics"]["avg_score"] == pytest.approx(df["score"].mean(), abs=1e-9)
        skipped_blank = sum(n for r, n in sk.counts["eval_sts"].items()
                            if r.startswith(f"STS{year}-en-test/") and "blank gold line" in r)
        assert skipped_blank == blank
        assert (blank > 0) == (year in (15, 16))
    assert df.height == 1186  # STS16
    assert sk.counts["eval_sts"]["STS12-en-test/STS.gs.ALL.txt: gold file without STS.input.ALL.txt"] == 3108
    assert sk.counts["eval_sts"]["STS15-en-test/STS.gs.images.txt: blank gold line (pair not scored)"] == 750
    msr = read_semeval(shared_data / "sts" / "STS12-en-test").filter(pl.col("subset") == "MSRpar").sort("idx")
    first = raw_lines(shared_data / "sts" / "STS12-en-test" / "STS.input.MSRpar.txt")[0].split("\t")
    assert msr.row(0, named=True)["s1"] == first[0].strip() and msr["idx"][0] == 1


@pytest.mark.shared_data
def test_sts17_tracks_track6_alignment_and_column_languages(shared_data: Path) -> None:
    folder = shared_data / "sts" / "sts17"
    sk = Skipped()
    df = read_semeval(folder, "sts17", sk)
    assert dict(df.group_by("subset").len().iter_rows()) == {
        t: 250 for t in ("track1.ar-ar", "track2.ar-en", "track3.es-es", "track4a.es-en", "track4b.es-en",
                         "track5.en-en", "track6.tr-en")}
    assert sk.as_dict() == {"eval_sts": {"sts17/STS.input.track6.tr-en.txt: input lines 251–500 have no gold score "
                                         "(only the first 250 lines are scored)": 250}}
    inp = raw_lines(folder / "STS.input.track6.tr-en.txt")
    gold = [float(g) for g in raw_lines(folder / "STS.gs.track6.tr-en.txt")]
    t6 = df.filter(pl.col("subset") == "track6.tr-en").sort("idx")
    assert len(inp) == 500 and t6["s1"].to_list() == [ln.split("\t")[0].strip() for ln in inp[:250]]
    assert t6["score"].to_list() == gold
    # mteb's STS17 subsets name the languages in column order; their character totals identify the rows
    stats = mteb_stats("STS", "STS17")["test"]["hf_subset_descriptive_stats"]
    for subset, track in (("en-tr", "track6.tr-en"), ("en-ar", "track2.ar-en"), ("es-en", "track4a.es-en"),
                          ("en-en", "track5.en-en"), ("es-es", "track3.es-es")):
        rows = df.filter(pl.col("subset") == track)
        assert "-".join(rows.row(0, named=True)[k] for k in ("lang1", "lang2")) == subset
        assert stats[subset]["text1_statistics"]["total_text_length"] == rows["s1"].str.len_chars().sum()
        assert stats[subset]["label_statistics"]["avg_score"] == pytest.approx(rows["score"].mean(), abs=1e-9)
    arabic = re.compile("[\u0600-\u06ff]")
    t2 = df.filter(pl.col("subset") == "track2.ar-en")
    assert not any(arabic.search(s) for s in t2["s1"]) and all(arabic.search(s) for s in t2["s2"])
    assert t2.row(0, named=True)["lang1"] == "en" and t2.row(0, named=True)["lang2"] == "ar"


@pytest.mark.shared_data
def test_stsbenchmark_sick_and_stsb_multi_mt(shared_data: Path) -> None:
    sts = shared_data / "sts"
    stsb = read_stsbenchmark(sts / "stsbenchmark", ["train", "dev", "test"])
    assert dict(stsb.group_by("subset").len().iter_rows()) == {"train": 5749, "dev": 1500, "test": 1379}
    raw = [ln.split("\t") for ln in raw_lines(sts / "stsbenchmark" / "sts-test.csv")]
    extra = next(i for i, f in enumerate(raw) if len(f) > 7)
    row = stsb.filter((pl.col("subset") == "test") & (pl.col("idx") == extra + 1)).row(0, named=True)
    assert (row["score"], row["s1"], row["s2"]) == (float(raw[extra][4]), raw[extra][5].strip(), raw[extra][6].strip())
    test = stsb.filter(pl.col("subset") == "test")
    assert mteb_stats("STS", "STSBenchmark")["test"]["label_statistics"]["avg_score"] == pytest.approx(
        test["score"].mean(), abs=1e-9)

    sick = read_sick(sts / "sick" / "SICK_test_annotated.txt")
    raw = [ln.split("\t") for ln in raw_lines(sts / "sick" / "SICK_test_annotated.txt")[1:]]
    assert sick.height == len(raw) == 4927 and set(sick["subset"]) == {"test"} and set(sick["dataset"]) == {"sick-r"}
    assert sick["score"].to_list() == [float(f[3]) for f in raw] and sick["s2"][0] == raw[0][2]

    mt = read_stsb_multi_mt(sts / "stsb-multi-mt", ["en", "de", "fr"], "test")
    assert dict(mt.group_by("subset").len().iter_rows()) == {
        s: 1379 for s in ("en-en", "de-de", "fr-fr", "en-de", "en-fr", "de-en", "de-fr", "fr-en", "fr-de")}
    rows = {lang: list(csv.reader((sts / "stsb-multi-mt" / f"stsb-{lang}-test.csv").open(encoding="utf-8",
                                                                                           newline="")))
            for lang in ("en", "de")}
    de_en = mt.filter(pl.col("subset") == "de-en").sort("idx")
    assert de_en["s1"].to_list() == [r[0] for r in rows["de"]]
    assert de_en["s2"].to_list() == [r[1] for r in rows["en"]]
    assert de_en["score"].to_list() == [float(r[2]) for r in rows["en"]]
    assert (de_en["lang1"][0], de_en["lang2"][0]) == ("de", "en")
    stats = mteb_stats("STS", "STSBenchmarkMultilingualSTS")["test"]["hf_subset_descriptive_stats"]
    de = mt.filter(pl.col("subset") == "de-de")
    assert stats["de"]["text1_statistics"]["total_text_length"] == de["s1"].str.len_chars().sum()
    assert read_stsb_multi_mt(sts / "stsb-multi-mt", ["es", "fr"], "dev", cross=False).height == 3000


@pytest.mark.shared_data
def test_mewsc16_real_eight_languages_and_its_empty_sentence(shared_data: Path) -> None:
    folder = shared_data / "mewsc16"
    with pytest.raises(EvalFormatError, match=esc(folder / "de_sentences.txt") + r":3128: empty sentence"):
        read_clustering(folder)
    sk = Skipped()
    df = read_clustering(folder, empty_sentences="skip", skipped=sk)
    assert sorted(df["lang"].unique()) == ["ar", "de", "en", "es", "fr", "ja", "ru", "tr"]
    assert sk.as_dict() == {"eval_clustering": {"mewsc16/de_sentences.txt: empty sentence": 1}}
    for lang in ("ar", "de", "en", "ja", "tr"):
        sents, cats = raw_lines(folder / f"{lang}_sentences.txt"), raw_lines(folder / f"{lang}_categories.txt")
        keep = [i for i, s in enumerate(sents) if s.strip()]
        part = df.filter(pl.col("lang") == lang)
        assert part["idx"].to_list() == keep
        assert part["label"].to_list() == [cats[i].strip() for i in keep]
        assert part["label"].n_unique() == len({c.strip() for c in cats})
    assert df.filter(pl.col("lang") == "de").height == len(raw_lines(folder / "de_sentences.txt")) - 1
    assert read_clustering(folder, ["tr", "ja"])["lang"].unique(maintain_order=True).to_list() == ["tr", "ja"]


@pytest.mark.shared_data
def test_ntrex_real_128_languages(shared_data: Path) -> None:
    folder = shared_data / "parallel" / "ntrex128"
    sk = Skipped()
    df = read_ntrex(folder, skipped=sk)
    refs = [p for p in folder.glob("newstest2019-ref.*.txt")]
    assert df["lang"].n_unique() == len(refs) + 1 == 128
    assert set(dict(df.group_by("lang").len().iter_rows()).values()) == {1997}
    assert sk.as_dict() == {"eval_parallel": {
        "ntrex128/newstest2019-ref-2.spa.txt: line of a second reference (one translation per language is read)":
        1997}}
    # mey (Hassaniya Arabic) is unknown to ICU but listed in LANGUAGES.tsv
    sub = read_ntrex(folder, ["deu", "mey", "zho-CN"])
    assert sub["lang"].unique(maintain_order=True).to_list() == ["eng", "deu", "mey", "zho-CN"]
    deu = sub.filter(pl.col("lang") == "deu")
    assert deu["text"].to_list() == [ln.strip() for ln in raw_lines(folder / "newstest2019-ref.deu.txt")]


@pytest.mark.shared_data
def test_langid_real_xnli_distinct_premises(shared_data: Path) -> None:
    folder = shared_data / "xnli"
    df = read_langid(folder, ["en", "el"], max_per_language=1000)
    for lang in ("en", "el"):
        for xnli_split, split in (("dev", "train"), ("test", "test")):
            premises = list(dict.fromkeys(ln.split("\t")[0].strip() for ln in raw_lines(folder / f"{xnli_split}-"
                                                                                            f"{lang}.tsv")))
            part = df.filter((pl.col("lang") == lang) & (pl.col("split") == split)).sort("idx")
            assert part["text"].to_list() == premises[:1000]
    # test-el.tsv holds \x1d characters: str.splitlines would have broken lines there
    assert "\x1d" in (folder / "test-el.tsv").read_text(encoding="utf-8")
    assert df.filter(pl.col("split") == "train").height == 2 * 830


# =====================================================================================================================
# the embedded sample (the default pipeline reads it)


def test_sample_eval_sets_build(tmp_path: Path) -> None:
    sources = EvalSources.model_validate({
        "tatoeba": SAMPLE_EVAL / "tatoeba", "sts": SAMPLE_EVAL / "sts", "clustering": SAMPLE_EVAL / "clustering",
        "bucc": SAMPLE_EVAL / "bucc", "parallel": [{"format": "ntrex", "path": SAMPLE_EVAL / "parallel"}]})
    result = build_eval_sets(EvalSetsSettings(), sources, tmp_path)
    assert STAGE_VERSION == "3"
    assert result.stats["rows"] == {"eval_tatoeba": 400, "eval_bucc": 165, "eval_bucc_gold": 40, "eval_sts": 120,
                                    "eval_clustering": 120, "eval_parallel": 200}
    assert result.stats["skipped"] == {}
    for name, rel in result.tables.items():
        df = pl.read_parquet(tmp_path / rel)
        assert df.schema == pl.Schema(tables()[name].schema)
        assert df.equals(df.sort(tables()[name].keys))
    sts = pl.read_parquet(tmp_path / "eval_sts.parquet")
    assert sts["score"].min() >= 0 and sts["score"].max() <= 5
    assert dict(sts.group_by("subset").agg(pl.col("lang1").first()).iter_rows()) == {"track5.en-en": "en",
                                                                                     "track4a.es-en": "es"}


def test_sample_bucc_and_parallel_are_what_the_readme_says() -> None:
    sents, gold = read_bucc(SAMPLE_EVAL / "bucc")
    assert (sents["pair"].unique().to_list(), sents["split"].unique().to_list()) == (["de-en"], ["sample"])
    de, en = sents.filter(pl.col("lang") == "de"), sents.filter(pl.col("lang") == "en")
    assert (de.height, en.height, gold.height) == (83, 82, 40)
    # 2 + 1 duplicated de texts, 2 duplicated en texts; one gold pair's de text also occurs under another id
    assert de.filter(pl.col("text").is_duplicated()).height == 6
    assert en.filter(pl.col("text").is_duplicated()).height == 4
    de_text = dict(zip(de["id"], de["text"], strict=True))
    en_text = dict(zip(en["id"], en["text"], strict=True))
    dup_de = set(de.filter(pl.col("text").is_duplicated())["text"])
    assert sum(de_text[s] in dup_de for s in gold["src_id"]) == 1
    par = read_ntrex(SAMPLE_EVAL / "parallel")
    assert sorted(par["lang"].unique()) == ["deu", "eng", "fra", "rus", "spa"] and par.height == 200
    # the gold pairs are the parallel set's en/de lines
    pairs = set(zip(par.filter(pl.col("lang") == "deu")["text"], par.filter(pl.col("lang") == "eng")["text"],
                    strict=True))
    assert {(de_text[s], en_text[t]) for s, t in zip(gold["src_id"], gold["tgt_id"], strict=True)} == pairs


# =====================================================================================================================
# purpose-built files: Tatoeba


def test_tatoeba_errors_name_files_and_lines(tmp_path: Path) -> None:
    write(tmp_path / "tatoeba.deu-eng.deu", ["Hallo.", "Danke.", "", ""])
    write(tmp_path / "tatoeba.deu-eng.eng", ["Hello.", "Thanks.", "  "])
    df = read_tatoeba(tmp_path)  # trailing blank lines ignored, in either file
    assert df.rows() == [("deu", 0, "Hallo.", "Hello."), ("deu", 1, "Danke.", "Thanks.")]
    write(tmp_path / "tatoeba.deu-eng.eng", ["Hello.", "Thanks.", "Bye."])
    # a blank line within the other file's extent is a row: a malformed pair (dropped), not a count mismatch
    sk = Skipped()
    assert read_tatoeba(tmp_path, skipped=sk)["idx"].to_list() == [0, 1]
    assert sk.total("eval_tatoeba") == 2  # line 3 of each file
    write(tmp_path / "tatoeba.deu-eng.deu", ["Hallo.", "Danke."])
    with pytest.raises(EvalFormatError, match=rf"{esc(tmp_path / 'tatoeba.deu-eng.deu')} has 2, "
                                              rf"{esc(tmp_path / 'tatoeba.deu-eng.eng')} has 3"):
        read_tatoeba(tmp_path)
    write(tmp_path / "tatoeba.deu-eng.deu", ["Hallo.", "Danke.", "Tschüss."])
    with pytest.raises(FileNotFoundError, match=r"no Tatoeba files for \['fra'\] \(found: \['deu'\]\)"):
        read_tatoeba(tmp_path, ["fra"])
    write(tmp_path / "tatoeba.xqz-eng.xqz", ["a"])
    write(tmp_path / "tatoeba.xqz-eng.eng", ["b"])
    # a code the files carry is data, known to ICU or not; a name that is no language tag is an error
    assert read_tatoeba(tmp_path).filter(pl.col("lang") == "xqz").rows() == [("xqz", 0, "a", "b")]
    write(tmp_path / "tatoeba.x y-eng.x y", ["a"])
    write(tmp_path / "tatoeba.x y-eng.eng", ["b"])
    with pytest.raises(UnknownLanguageError, match=esc(tmp_path / "tatoeba.x y-eng.x y") + r": 'x y' is not a "
                                                   r"language code"):
        read_tatoeba(tmp_path)
    assert read_tatoeba(tmp_path, ["deu"]).height == 3
    (tmp_path / "tatoeba.x y-eng.x y").unlink()
    (tmp_path / "tatoeba.x y-eng.eng").unlink()
    (tmp_path / "tatoeba.xqz-eng.eng").unlink()
    with pytest.raises(FileNotFoundError, match=r"tatoeba\.xqz-eng\.eng is missing"):
        read_tatoeba(tmp_path)


def test_lines_split_only_at_newline(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    path.write_bytes("\ufeffa\u2028b\x1dc\r\nd\x85e\n".encode())
    assert read_text_lines(path) == ["a\u2028b\x1dc", "d\x85e"]
    path.write_bytes(b"ok\n\xff\n")
    with pytest.raises(EvalFormatError, match=esc(path) + r":2: invalid UTF-8"):
        read_text_lines(path)


# =====================================================================================================================
# BUCC


def _bucc(folder: Path, de: list[str], en: list[str], gold: list[str] | None) -> Path:
    write(folder / "de-en.sample.de", de)
    write(folder / "de-en.sample.en", en)
    if gold is not None:
        write(folder / "de-en.sample.gold", gold)
    return folder


def test_bucc_reads_duplicated_texts_and_skips_duplicated_gold(tmp_path: Path) -> None:
    _bucc(tmp_path, ["de-1\tEin Satz.", "de-2\tNoch einer.", "de-3\tEin Satz."],
          ["en-1\tOne sentence.", "en-2\tAnother one."],
          ["de-1\ten-1", "de-2\ten-2", "de-1\ten-1"])
    write(tmp_path / "de-en.test.de", ["de-9\tOhne Gold."])
    write(tmp_path / "de-en.test.en", ["en-9\tNo gold."])
    sk = Skipped()
    sents, gold = read_bucc(tmp_path, skipped=sk)
    assert sents.filter(pl.col("split") == "sample").select("lang", "id", "text", "line").rows() == [
        ("de", "de-1", "Ein Satz.", 1), ("de", "de-2", "Noch einer.", 2), ("de", "de-3", "Ein Satz.", 3),
        ("en", "en-1", "One sentence.", 1), ("en", "en-2", "Another one.", 2)]
    assert gold.rows() == [("de-en", "sample", "de-1", "en-1"), ("de-en", "sample", "de-2", "en-2")]
    assert sk.as_dict() == {"eval_bucc_gold": {f"{tmp_path.name}/de-en.sample.gold: duplicated gold line": 1}}
    assert sents.filter(pl.col("split") == "test").height == 2  # the test split has no gold: read all the same
    assert read_bucc(tmp_path, splits=["test"])[1].height == 0


def test_bucc_repeated_id_drops_every_line_of_it_and_its_gold(tmp_path: Path) -> None:
    # de-1 twice with different sentences (ambiguous: lines 1 and 3 dropped, and the gold line citing it);
    # de-2 twice with the same sentence (a duplicate: the later line skipped, nothing lost)
    _bucc(tmp_path, ["de-1\tA.", "de-2\tB.", "de-1\tC.", "de-3\tD.", "de-2\tB."], ["en-1\tA.", "en-2\tB.", "en-3\tD."],
          ["de-1\ten-1", "de-2\ten-2", "de-3\ten-3"])
    sk = Skipped()
    sents, gold = read_bucc(tmp_path, skipped=sk)
    assert sents.filter(pl.col("lang") == "de").select("id", "text", "line").rows() == [("de-2", "B.", 2),
                                                                                       ("de-3", "D.", 4)]
    assert gold.select("src_id", "tgt_id").rows() == [("de-2", "en-2"), ("de-3", "en-3")]
    n = tmp_path.name
    assert sk.as_dict() == {
        "eval_bucc": {f"{n}/de-en.sample.de: malformed row, ID repeated with a different sentence; expected each ID "
                      "once in a file (lines 1, 3)": 2,
                      f"{n}/de-en.sample.de: duplicated line, the ID and sentence of an earlier line (line 5)": 1},
        "eval_bucc_gold": {f"{n}/de-en.sample.gold: malformed row, ID dropped from de-en.sample.de (repeated there "
                           "with different sentences) (line 1)": 1}}
    # nothing left once the clashing lines go: the file fails, named
    _bucc(tmp_path, ["de-1\tA.", "de-1\tC."], ["en-1\tA."], None)
    with pytest.raises(EvalFormatError, match=esc(tmp_path / "de-en.sample.de") + r": no readable row \(2 malformed; "
                       r"first .*de-en\.sample\.de:1: ID repeated with a different sentence"):
        read_bucc(tmp_path)


@pytest.mark.parametrize(("de", "en", "gold", "bad", "table", "reason", "kept"), [
    (["de-1\tA.", "de-2 B."], ["en-1\tA."], None, "de", "eval_bucc", "no tab; expected ID<TAB>sentence (line 2)", 2),
    (["de-1\tA.", "de-2\t  ", "de-3\t"], ["en-1\tA."], None, "de", "eval_bucc",
     "empty sentence; expected ID<TAB>sentence (lines 2, 3)", 2),
    (["de-1\tA."], ["\tA.", "en-2\tB."], None, "en", "eval_bucc", "empty ID; expected ID<TAB>sentence (line 1)", 2),
    (["de-1\tA."], ["en-1\tA."], ["de-1\ten-1", "de-7\ten-1"], "gold", "eval_bucc_gold",
     "ID not in de-en.sample.de (line 2)", 1),
    (["de-1\tA."], ["en-1\tA."], ["de-1\ten-1", "de-1\ten-4"], "gold", "eval_bucc_gold",
     "ID not in de-en.sample.en (line 2)", 1),
    (["de-1\tA."], ["en-1\tA."], ["de-1\ten-1\tx", "de-1\ten-1"], "gold", "eval_bucc_gold",
     "expected srcID<TAB>enID (two non-empty fields) (line 1)", 1),
])
def test_bucc_malformed_rows_are_skipped_counted_with_file_and_line(
        tmp_path: Path, de: list[str], en: list[str], gold: list[str] | None, bad: str, table: str, reason: str,
        kept: int) -> None:
    _bucc(tmp_path, de, en, gold)
    sk = Skipped()
    sentences, gold_rows = read_bucc(tmp_path, skipped=sk)
    assert sk.as_dict() == {table: {f"{tmp_path.name}/de-en.sample.{bad}: malformed row, {reason}":
                                    reason.count(",") + 1}}
    assert (sentences if table == "eval_bucc" else gold_rows).height == kept
    # a file none of whose rows is readable fails naming it
    path = tmp_path / f"de-en.sample.{bad}"
    write(path, ["x"] if bad != "gold" else ["de-9\ten-9"])
    with pytest.raises(EvalFormatError, match=esc(path) + r": no readable row \(1 malformed; first "
                                              + esc(path) + r":1: "):
        read_bucc(tmp_path)


def test_bucc_unknown_language_and_missing_files(tmp_path: Path) -> None:
    write(tmp_path / "qx-en.sample.qx", ["qx-1\tA."])
    write(tmp_path / "qx-en.sample.en", ["en-1\tA."])
    sentences, _ = read_bucc(tmp_path)  # qx: unknown to ICU, but the files' own code
    assert sentences.select("pair", "lang", "id").rows() == [("qx-en", "qx", "qx-1"), ("qx-en", "en", "en-1")]
    write(tmp_path / "q-en.sample.q", ["q-1\tA."])
    write(tmp_path / "q-en.sample.en", ["en-1\tA."])
    with pytest.raises(UnknownLanguageError, match=esc(tmp_path / "q-en.sample.q") + r": 'q' is not a language"):
        read_bucc(tmp_path)
    (tmp_path / "qx-en.sample.en").unlink()
    with pytest.raises(FileNotFoundError, match=r"qx-en\.sample\.en is missing"):
        read_bucc(tmp_path)


# =====================================================================================================================
# STS


def test_semeval_blank_gold_skipped_and_counted(tmp_path: Path) -> None:
    write(tmp_path / "STS.input.track9.es-en.txt", ["Uno.\tOne.", "Dos.\tTwo.", "Tres.\tThree.", "x\ty"])
    write(tmp_path / "STS.gs.track9.es-en.txt", ["4.2", "", "0", ""])
    write(tmp_path / "STS.gs.ALL.txt", ["1", "2"])
    sk = Skipped()
    df = read_semeval(tmp_path, "sts17", sk)
    assert df.rows() == [("sts17", "track9.es-en", "es", "en", 1, "Uno.", "One.", 4.2),
                         ("sts17", "track9.es-en", "es", "en", 3, "Tres.", "Three.", 0.0)]
    assert sk.counts["eval_sts"] == {f"{tmp_path.name}/STS.gs.track9.es-en.txt: blank gold line (pair not scored)": 2,
                                     f"{tmp_path.name}/STS.gs.ALL.txt: gold file without STS.input.ALL.txt": 2}


@pytest.mark.parametrize(("inp", "gold", "where", "reason", "kept"), [
    (["a\tb", "c\td"], ["1.0", "x"], "gs", "score is not a number; expected a similarity score in [0, 5] (line 2)",
     [1]),
    (["a\tb", "c\td", "e\tf"], ["5.5", "1", "-1"], "gs", "score outside [0, 5] (lines 1, 3)", [2]),
    (["a\tb", "c\td"], ["nan", "1"], "gs", "score outside [0, 5] (line 1)", [2]),
    (["a\tb", "c\t "], ["1", "2"], "input", "empty second sentence; expected s1<TAB>s2 (line 2)", [1]),
    (["a\tb", "c d"], ["1", "2"], "input", "expected s1<TAB>s2 (line 2)", [1]),
])
def test_semeval_malformed_rows_skipped_and_counted(tmp_path: Path, inp: list[str], gold: list[str], where: str,
                                                    reason: str, kept: list[int]) -> None:
    write(tmp_path / "STS.input.t.en-en.txt", inp)
    write(tmp_path / "STS.gs.t.en-en.txt", gold)
    sk = Skipped()
    assert read_semeval(tmp_path, "x", sk)["idx"].to_list() == kept
    assert sk.as_dict() == {"eval_sts": {f"{tmp_path.name}/STS.{where}.t.en-en.txt: malformed row, {reason}":
                                         len(inp) - len(kept)}}
    for name in ("STS.gs.t.en-en.txt", "STS.input.t.en-en.txt"):  # nothing readable: the file fails, named
        write(tmp_path / name, ["x"] * len(inp))
        with pytest.raises(EvalFormatError, match=esc(tmp_path / name) + r": no readable row \(\d malformed; first "
                                                  + esc(tmp_path / name) + ":1: "):
            read_semeval(tmp_path, "x")


@pytest.mark.parametrize(("inp", "gold", "message"), [
    (["a\tb", "c\td", "e\tf"], ["1", "2"], r" has 3 lines but .*STS\.gs\.t\.en-en\.txt has 2"),
    (["a\tb"], ["1", "2"], r" has 1 lines but .* has 2"),
])
def test_semeval_misaligned_files_fail(tmp_path: Path, inp: list[str], gold: list[str], message: str) -> None:
    write(tmp_path / "STS.input.t.en-en.txt", inp)
    write(tmp_path / "STS.gs.t.en-en.txt", gold)
    with pytest.raises(EvalFormatError, match=esc(tmp_path / "STS.input.t.en-en.txt") + message):
        read_semeval(tmp_path, "x")


def test_sts17_surplus_lines_only_for_track6_shape(tmp_path: Path) -> None:
    write(tmp_path / "STS.input.track6.tr-en.txt", [f"s{i}\tt{i}" for i in range(500)])
    write(tmp_path / "STS.gs.track6.tr-en.txt", ["1"] * 250)
    df = read_semeval(tmp_path, "sts17")
    assert df.height == 250 and df["s1"][-1] == "s249" and (df["lang1"][0], df["lang2"][0]) == ("en", "tr")
    write(tmp_path / "STS.gs.track6.tr-en.txt", ["1"] * 249)
    with pytest.raises(EvalFormatError, match=r"has 500 lines but .* has 249"):
        read_semeval(tmp_path, "sts17")


def test_stsbenchmark_and_sick_errors(tmp_path: Path) -> None:
    write(tmp_path / "sts-test.csv", ['main\tMSRvid\t2012\t1\t2.5\tA "quoted" one.\tB.\textra\tfields',
                                      "main\tMSRvid\t2012\t2\t1.0\tC."])
    sk = Skipped()
    assert read_stsbenchmark(tmp_path, ["test"], sk).height == 1
    assert sk.as_dict() == {"eval_sts": {f"{tmp_path.name}/sts-test.csv: malformed row, expected at least 7 "
                                         "tab-separated fields (genre, file, year, id, score, s1, s2) (line 2)": 1}}
    write(tmp_path / "sts-test.csv", ['main\tMSRvid\t2012\t1\t2.5\tA "quoted" one.\tB.\textra\tfields'])
    assert read_stsbenchmark(tmp_path, ["test"]).select("s1", "s2", "score").rows() == [('A "quoted" one.', "B.", 2.5)]
    sick = write(tmp_path / "SICK.txt", ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment",
                                         "1\tA.\tB.\t4.5\tNEUTRAL", "2\tC.\tD.\tseven\tNEUTRAL"])
    sk = Skipped()
    assert read_sick(sick, sk)["idx"].to_list() == [2]
    assert sk.as_dict() == {"eval_sts": {f"{tmp_path.name}/SICK.txt: malformed row, score is not a number; expected a "
                                         "similarity score in [0, 5] (line 3)": 1}}
    write(sick, ["pair_ID\tsentence_A\trelatedness_score", "1\tA.\t4.5"])
    with pytest.raises(EvalFormatError, match=esc(sick) + r":1: header lacks \['sentence_B'\]"):
        read_sick(sick)


def test_stsb_multi_mt_cross_pairs_and_misalignment(tmp_path: Path) -> None:
    write(tmp_path / "stsb-en-test.csv", ['"A man, running.",B.,2.5', "C.,D.,5.0"], end="\r\n")
    write(tmp_path / "stsb-de-test.csv", ['"Ein Mann, rennend.",B-de.,2.5', "C-de.,D-de.,5"])
    df = read_stsb_multi_mt(tmp_path, ["en", "de"], "test")
    assert df.filter(pl.col("subset") == "en-de").select("idx", "s1", "s2", "score").rows() == [
        (1, "A man, running.", "B-de.", 2.5), (2, "C.", "D-de.", 5.0)]
    assert df.filter(pl.col("subset") == "de-en").select("s1", "s2").rows() == [("Ein Mann, rennend.", "B."),
                                                                               ("C-de.", "D.")]
    assert sorted(df["subset"].unique()) == ["de-de", "de-en", "en-de", "en-en"]
    write(tmp_path / "stsb-de-test.csv", ["A.,B.,2.5", "C.,D.,4.0"])
    with pytest.raises(EvalFormatError, match=esc(tmp_path / "stsb-de-test.csv") + r" \(2 rows\) and "
                       + esc(tmp_path / "stsb-en-test.csv") + r" \(2 rows\) are not row-parallel; first differing "
                       r"row 2: .*stsb-de-test\.csv:2 score 4 vs .*stsb-en-test\.csv:2 score 5"):
        read_stsb_multi_mt(tmp_path, ["en", "de"], "test")
    write(tmp_path / "stsb-de-test.csv", ["A.,B.,2.5"])
    with pytest.raises(EvalFormatError, match=r"\(1 rows\) and .* \(2 rows\) are not row-parallel"):
        read_stsb_multi_mt(tmp_path, ["en", "de"], "test")
    write(tmp_path / "stsb-de-test.csv", ["A.,B.,2.5", "C.,D.,five"])
    assert read_stsb_multi_mt(tmp_path, ["en", "de"], "test")["idx"].unique().to_list() == [1]  # row 2 dropped
    with pytest.raises(FileNotFoundError, match=r"no stsb-multi-mt test file for \['fr'\] \(languages present: "
                                                r"\['de', 'en'\]\)"):
        read_stsb_multi_mt(tmp_path, ["en", "fr"], "test")


# =====================================================================================================================
# clustering, classification, parallel, langid


def test_clustering_errors(tmp_path: Path) -> None:
    write(tmp_path / "de_sentences.txt", ["Ein Satz.", "", "Noch einer."])
    write(tmp_path / "de_categories.txt", ["Sport", "Politik", "Sport"])
    with pytest.raises(EvalFormatError, match=esc(tmp_path / "de_sentences.txt") + r":2: empty sentence"):
        read_clustering(tmp_path)
    df = read_clustering(tmp_path, empty_sentences="skip", dataset="mine")
    assert df.rows() == [("mine", "de", 0, "Ein Satz.", "Sport"), ("mine", "de", 2, "Noch einer.", "Sport")]
    write(tmp_path / "de_categories.txt", ["Sport", "", "Sport"])  # line 2: no label (its sentence is empty too)
    assert read_clustering(tmp_path)["idx"].to_list() == [0, 2]  # a dropped row needs no empty_sentences: skip
    write(tmp_path / "de_categories.txt", ["Sport", "Politik"])
    with pytest.raises(EvalFormatError, match=r"de_sentences\.txt has 3, .*de_categories\.txt has 2"):
        read_clustering(tmp_path, empty_sentences="skip")
    write(tmp_path / "de_categories.txt", ["Sport", "Politik", "Sport"])
    write(tmp_path / "zz_sentences.txt", ["x"])
    write(tmp_path / "zz_categories.txt", ["y"])
    assert read_clustering(tmp_path, ["zz"]).rows() == [("mewsc16", "zz", 0, "x", "y")]  # the file's own code
    write(tmp_path / "z-z_sentences.txt", ["x"])
    write(tmp_path / "z-z_categories.txt", ["y"])
    with pytest.raises(UnknownLanguageError, match=esc(tmp_path / "z-z_sentences.txt") + r": 'z-z' is not a"):
        read_clustering(tmp_path, empty_sentences="skip")


def test_mtop_both_layouts_and_errors(tmp_path: Path) -> None:
    tokens = '{"tokens": ["wake", "me"]}'
    write(tmp_path / "de" / "test.txt", [
        f"3981\tIN:CREATE_ALARM\t\tweck mich um sieben\talarm\tde_DE\t[IN:CREATE_ALARM ]\t{tokens}",
        f"IN:GET_WEATHER\t\twie wird das Wetter\tweather\tde_DE\t[IN:GET_WEATHER ]\t{tokens}"])
    df = read_mtop(tmp_path)
    assert df.rows() == [("mtop_domain", "de", "test", 1, "weck mich um sieben", "alarm"),
                         ("mtop_domain", "de", "test", 2, "wie wird das Wetter", "weather"),
                         ("mtop_intent", "de", "test", 1, "weck mich um sieben", "IN:CREATE_ALARM"),
                         ("mtop_intent", "de", "test", 2, "wie wird das Wetter", "IN:GET_WEATHER")]
    good = f"2\tIN:X\t\tHallo\tnews\tde_DE\t[IN:X ]\t{tokens}"
    write(tmp_path / "de" / "test.txt", [f"1\tIN:X\t\tHallo\tnews\ten_XX\t[IN:X ]\t{tokens}", good,
                                         "1\tIN:X\tHallo\tnews", f"3\tIN:X\t\t \tnews\tde_DE\t[IN:X ]\t{tokens}"])
    sk = Skipped()
    assert read_mtop(tmp_path, skipped=sk)["idx"].to_list() == [2, 2]
    where = "de/test.txt"
    assert sk.as_dict() == {"eval_classification": {
        f"{where}: malformed row, locale is not the folder's language 'de' (line 1)": 1,
        f"{where}: malformed row, expected 8 tab-separated fields ({', '.join(MTOP_FIELDS)}) (line 3)": 1,
        f"{where}: malformed row, empty utterance (line 4)": 1}}
    write(tmp_path / "de" / "test.txt", ["1\tIN:X\tHallo\tnews"])
    with pytest.raises(EvalFormatError, match=esc(tmp_path / "de" / "test.txt") + r": no readable row \(1 malformed; "
                                              r"first .*test\.txt:1: expected 8 tab-separated"):
        read_mtop(tmp_path)
    write(tmp_path / "xq" / "test.txt", [f"1\tIN:X\t\tHallo\tnews\txq_XQ\t[IN:X ]\t{tokens}"])
    assert read_mtop(tmp_path, ["xq"])["lang"].unique().to_list() == ["xq"]  # the folder's own code
    write(tmp_path / "x.q" / "test.txt", ["x"])
    with pytest.raises(UnknownLanguageError, match=esc(tmp_path / "x.q") + r": 'x\.q' is not a language code"):
        read_mtop(tmp_path, ["x.q"])


def test_mldoc_and_sib200(tmp_path: Path) -> None:
    mldoc = tmp_path / "mldoc"
    write(mldoc / "english.train.1000", ["CCAT\tShares rose.", "GCAT\tThe vote is on Sunday."])
    write(mldoc / "german.test", ["ECAT\tDie Inflation stieg."])
    df = read_mldoc(mldoc)
    assert df.select("lang", "split", "idx", "label").rows() == [("de", "test", 1, "ECAT"),
                                                                 ("en", "train.1000", 1, "CCAT"),
                                                                 ("en", "train.1000", 2, "GCAT")]
    assert read_mldoc(mldoc, ["german"]).height == 1
    write(mldoc / "german.test", ["ECAT\tDie Inflation stieg.", "XCAT\tFalsch.", "CCAT Kein Tab."])
    sk = Skipped()
    assert read_mldoc(mldoc, ["de"], skipped=sk)["idx"].to_list() == [1]
    assert sk.as_dict() == {"eval_classification": {
        "mldoc/german.test: malformed row, label not one of ['CCAT', 'ECAT', 'GCAT', 'MCAT'] (line 2)": 1,
        "mldoc/german.test: malformed row, no tab; expected LABEL<TAB>text (line 3)": 1}}
    write(mldoc / "german.test", ["XCAT\tFalsch."])
    with pytest.raises(EvalFormatError, match=esc(mldoc / "german.test") + r": no readable row"):
        read_mldoc(mldoc)
    write(mldoc / "klingon.test", ["CCAT\tx"])
    with pytest.raises(EvalFormatError, match=r"unknown MLDoc language 'klingon'"):
        read_mldoc(mldoc)

    sib = tmp_path / "sib"
    write(sib / "deu_Latn" / "dev.tsv", ["index_id\tcategory\ttext", '7\tsports\t"Er sagte ""Tor"", dann ging er."',
                                         "9\tpolitics\tDie Wahl."])
    df = read_sib200(sib)
    assert df.rows() == [("sib200", "deu_Latn", "dev", 2, 'Er sagte "Tor", dann ging er.', "sports"),
                         ("sib200", "deu_Latn", "dev", 3, "Die Wahl.", "politics")]
    write(sib / "deu_Latn" / "dev.tsv", ["index_id\tcategory\ttext", "7\tsports\tx", "8\t\ty", "9\tz"])
    sk = Skipped()
    assert read_sib200(sib, skipped=sk)["idx"].to_list() == [2]
    assert sk.as_dict() == {"eval_classification": {
        "deu_Latn/dev.tsv: malformed row, empty category (line 3)": 1,
        "deu_Latn/dev.tsv: malformed row, expected 3 tab-separated fields (index_id, category, text) (line 4)": 1}}
    write(sib / "deu_Latn" / "dev.tsv", ["index_id\tlabel\ttext", "7\tsports\tx"])
    with pytest.raises(EvalFormatError, match=esc(sib / "deu_Latn" / "dev.tsv") + r":1: header"):
        read_sib200(sib)


def test_parallel_ntrex_and_flores(tmp_path: Path) -> None:
    ntrex = tmp_path / "ntrex"
    write(ntrex / "newstest2019-src.eng.txt", ["One.", "Two."])
    write(ntrex / "newstest2019-ref.deu.txt", ["Eins.", "Zwei."])
    write(ntrex / "newstest2019-ref.qqa.txt", ["?", "?"])
    write(ntrex / "LANGUAGES.tsv", ["deu German", "qqa  Made-up language"])
    assert read_ntrex(ntrex, ["deu"]).rows() == [("ntrex128", "eng", 0, "One."), ("ntrex128", "eng", 1, "Two."),
                                                 ("ntrex128", "deu", 0, "Eins."), ("ntrex128", "deu", 1, "Zwei.")]
    assert read_ntrex(ntrex)["lang"].n_unique() == 3  # qqa: not ICU-known, but listed in LANGUAGES.tsv
    write(ntrex / "LANGUAGES.tsv", ["deu German"])
    assert read_ntrex(ntrex)["lang"].n_unique() == 3  # and unlisted: still the file's own code
    (ntrex / "newstest2019-ref.qqa.txt").rename(ntrex / "newstest2019-ref.q9.txt")
    with pytest.raises(UnknownLanguageError, match=esc(ntrex / "newstest2019-ref.q9.txt") + r": 'q9' is not a"):
        read_ntrex(ntrex)
    (ntrex / "newstest2019-ref.q9.txt").unlink()
    write(ntrex / "newstest2019-ref.deu.txt", ["Eins.", "Zwei.", "Drei."])
    with pytest.raises(EvalFormatError, match=esc(ntrex / "newstest2019-src.eng.txt") + " has 2, "
                       + esc(ntrex / "newstest2019-ref.deu.txt") + " has 3"):
        read_ntrex(ntrex)
    write(ntrex / "newstest2019-ref.deu.txt", ["", "Zwei."])
    assert read_ntrex(ntrex).select("lang", "idx", "text").rows() == [("eng", 1, "Two."), ("deu", 1, "Zwei.")]
    with pytest.raises(FileNotFoundError, match=r"no file for languages \['fra'\]"):
        read_ntrex(ntrex, ["fra"])

    flores = tmp_path / "flores200"
    write(flores / "devtest" / "eng_Latn.devtest", ["a", "b"])
    write(flores / "devtest" / "deu_Latn.devtest", ["A", "B"])
    write(flores / "dev" / "eng_Latn.dev", ["c"])
    df = read_flores(flores)
    assert sorted(df["lang"].unique()) == ["deu_Latn", "eng_Latn"] and df.height == 4
    assert read_flores(flores / "dev", split="dev", dataset="f").rows() == [("f", "eng_Latn", 0, "c")]


def test_langid_unique_premises_capped(tmp_path: Path) -> None:
    for split in ("dev", "test"):
        for lang, p in (("en", "P"), ("de", "Q")):
            write(tmp_path / f"{split}-{lang}.tsv", [f"{p}1\th\tneutral", f"{p}1\th\tentailment", f"{p}2\th\tneutral",
                                                     f"{p}3\th\tcontradiction"])
    df = read_langid(tmp_path, ["en", "de"], max_per_language=2)
    assert df.filter(pl.col("split") == "train").sort("lang", "idx").rows() == [
        ("de", "train", 0, "Q1"), ("de", "train", 1, "Q2"), ("en", "train", 0, "P1"), ("en", "train", 1, "P2")]
    assert df.filter(pl.col("split") == "test").height == 4


# =====================================================================================================================
# line-aligned sets: a bad row is dropped from every aligned file at once, counted with its file and line

DROPPED = "row dropped from all {n} aligned files"
PARTNER = "line dropped with its row, malformed in another aligned file"


def test_tatoeba_blank_lines_drop_the_pair_from_both_files_and_reach_the_stage_stats(tmp_path: Path) -> None:
    folder = tmp_path / "tatoeba"
    write(folder / "tatoeba.deu-eng.deu", ["Eins.", "", "Drei.", "Vier.", "Fünf.", "  ", "Sieben."])
    write(folder / "tatoeba.deu-eng.eng", ["One.", "Two.", "Three.", "", "Five.", "\t", "Seven."])
    df = read_tatoeba(folder)
    # every surviving pair is still a translation pair, at its own line
    assert df.select("idx", "text", "eng").rows() == [(0, "Eins.", "One."), (2, "Drei.", "Three."),
                                                      (4, "Fünf.", "Five."), (6, "Sieben.", "Seven.")]
    (tmp_path / "out").mkdir()
    result = build_eval_sets(EvalSetsSettings(), EvalSources(tatoeba=folder), tmp_path / "out")
    assert result.stats["rows"] == {"eval_tatoeba": 4}
    d = DROPPED.format(n=2)
    assert result.stats["skipped"] == {"eval_tatoeba": {
        f"tatoeba/tatoeba.deu-eng.deu: malformed row, empty line; expected a deu sentence (line i translates line i "
        f"of tatoeba.deu-eng.eng); {d} (lines 2, 6)": 2,
        f"tatoeba/tatoeba.deu-eng.eng: malformed row, empty line; expected an English sentence (line i translates "
        f"line i of tatoeba.deu-eng.deu); {d} (lines 4, 6)": 2,
        f"tatoeba/tatoeba.deu-eng.{{deu,eng}}: {PARTNER} (lines 2, 4)": 2}}
    assert pl.read_parquet(tmp_path / "out" / result.tables["eval_tatoeba"]).equals(df)


def test_ntrex_blank_line_in_one_language_drops_that_row_in_every_language(tmp_path: Path) -> None:
    words = {"eng": ["One.", "Two.", "Three.", "Four.", "Five."], "deu": ["Eins.", "Zwei.", "Drei.", "Vier.", "Fünf."],
             "fra": ["Un.", "Deux.", "Trois.", "Quatre.", "Cinq."]}
    write(tmp_path / "newstest2019-src.eng.txt", words["eng"])
    write(tmp_path / "newstest2019-ref.deu.txt", [w if i != 1 else " " for i, w in enumerate(words["deu"])])
    write(tmp_path / "newstest2019-ref.fra.txt", [w if i != 3 else "" for i, w in enumerate(words["fra"])])
    sk = Skipped()
    df = read_ntrex(tmp_path, skipped=sk)
    kept = [0, 2, 4]
    for lang in ("eng", "deu", "fra"):
        part = df.filter(pl.col("lang") == lang).sort("idx")
        assert part["idx"].to_list() == kept and part["text"].to_list() == [words[lang][i] for i in kept]
    # xSIM's pairing (position after sorting on idx) still gives translations
    by_lang = {lang: df.filter(pl.col("lang") == lang).sort("idx")["text"].to_list() for lang in ("eng", "deu", "fra")}
    assert list(zip(*by_lang.values(), strict=True)) == [("One.", "Eins.", "Un."), ("Three.", "Drei.", "Trois."),
                                                         ("Five.", "Fünf.", "Cinq.")]
    d, n = DROPPED.format(n=3), tmp_path.name
    assert sk.as_dict() == {"eval_parallel": {
        f"{n}/newstest2019-ref.deu.txt: malformed row, empty line; expected the deu translation of line i of every "
        f"other language's file; {d} (line 2)": 1,
        f"{n}/newstest2019-ref.fra.txt: malformed row, empty line; expected the fra translation of line i of every "
        f"other language's file; {d} (line 4)": 1,
        f"ntrex128 (3 languages): {PARTNER} (lines 2, 4)": 4}}  # eng and fra lose line 2, eng and deu line 4
    # only the languages read are aligned: without fra, its blank line costs nothing
    assert read_ntrex(tmp_path, ["deu"]).filter(pl.col("lang") == "eng")["idx"].to_list() == [0, 2, 3, 4]


def test_flores_blank_line_drops_the_row_in_every_language_and_misalignment_fails(tmp_path: Path) -> None:
    dev = tmp_path / "devtest"
    write(dev / "eng_Latn.devtest", ["a", "b", "c"])
    write(dev / "deu_Latn.devtest", ["A", "B", "C"])
    write(dev / "ber_Tfng.devtest", ["ⴰ", "", "ⵛ"])  # a code ICU lacks: the file's own
    sk = Skipped()
    df = read_flores(tmp_path, skipped=sk)
    assert df.sort("lang", "idx").select("lang", "idx", "text").rows() == [
        ("ber_Tfng", 0, "ⴰ"), ("ber_Tfng", 2, "ⵛ"), ("deu_Latn", 0, "A"), ("deu_Latn", 2, "C"), ("eng_Latn", 0, "a"),
        ("eng_Latn", 2, "c")]
    assert sk.total("eval_parallel") == 3  # the blank line, and line 2 of the two other files
    assert sk.as_dict()["eval_parallel"][f"flores200 (3 languages): {PARTNER} (line 2)"] == 2
    # files of different lengths stay a whole-file error naming every file and its count
    write(dev / "deu_Latn.devtest", ["A", "B"])
    with pytest.raises(EvalFormatError, match=r"line counts differ: .*ber_Tfng\.devtest has 3, .*deu_Latn\.devtest "
                                              r"has 2, .*eng_Latn\.devtest has 3"):
        read_flores(tmp_path)


def test_clustering_empty_label_drops_the_row_from_both_files(tmp_path: Path) -> None:
    write(tmp_path / "de_sentences.txt", ["Ein Satz.", "Zwei.", "Drei.", "", "Fünf."])
    write(tmp_path / "de_categories.txt", ["Sport", "", "Politik", "Sport", "Politik"])
    sk = Skipped()
    # line 4's empty sentence is still the setting's business
    with pytest.raises(EvalFormatError, match=esc(tmp_path / "de_sentences.txt") + r":4: empty sentence"):
        read_clustering(tmp_path, skipped=sk)
    sk = Skipped()
    df = read_clustering(tmp_path, empty_sentences="skip", skipped=sk)
    assert df.select("idx", "text", "label").rows() == [(0, "Ein Satz.", "Sport"), (2, "Drei.", "Politik"),
                                                        (4, "Fünf.", "Politik")]
    n = tmp_path.name
    assert sk.as_dict() == {"eval_clustering": {
        f"{n}/de_categories.txt: malformed row, empty line; expected the category of line i of de_sentences.txt; "
        f"{DROPPED.format(n=2)} (line 2)": 1,
        f"{n}/de_{{sentences,categories}}.txt: {PARTNER} (line 2)": 1,
        f"{n}/de_sentences.txt: empty sentence": 1}}


def test_stsb_multi_mt_bad_row_dropped_from_every_language(tmp_path: Path) -> None:
    write(tmp_path / "stsb-en-test.csv", ["A.,B.,1.0", "C.,D.,2.0", "E.,F.,3.0", "G.,H.,4.0", "I.,J.,5.0"])
    write(tmp_path / "stsb-de-test.csv", ["A-de.,B-de.,1.0", "C-de.,,2.0", "E-de.,F-de.,3.0", "", "I-de.,J-de.,5.0"])
    write(tmp_path / "stsb-fr-test.csv", ["A-fr.,B-fr.,1.0", "C-fr.,D-fr.,2.0", "E-fr.,F-fr.,3.0", "G-fr.,H-fr.,4.0",
                                          "I-fr.,J-fr.,five"])
    sk = Skipped()
    df = read_stsb_multi_mt(tmp_path, ["en", "de", "fr"], "test", skipped=sk)
    assert df.filter(pl.col("subset") == "de-fr").select("idx", "s1", "s2", "score").rows() == [
        (1, "A-de.", "B-fr.", 1.0), (3, "E-de.", "F-fr.", 3.0)]
    assert df.filter(pl.col("subset") == "en-en").select("idx", "s1", "s2").rows() == [(1, "A.", "B."),
                                                                                       (3, "E.", "F.")]
    assert set(df.group_by("subset").len()["len"]) == {2} and df["subset"].n_unique() == 9
    n, d = tmp_path.name, DROPPED.format(n=3)
    assert sk.as_dict() == {"eval_sts": {
        f"{n}/stsb-de-test.csv: malformed row, empty second sentence; expected s1,s2,score; {d} (line 2)": 1,
        f"{n}/stsb-de-test.csv: malformed row, empty line; expected s1,s2,score; {d} (line 4)": 1,
        f"{n}/stsb-fr-test.csv: malformed row, score is not a number; expected a similarity score in [0, 5]; {d} "
        "(line 5)": 1,
        f"{n}/stsb-{{en,de,fr}}-test.csv: {PARTNER} (rows 2, 4, 5)": 6}}
    # a file whose every row is bad fails naming it; an empty one too
    write(tmp_path / "stsb-fr-test.csv", ["x"] * 5)
    with pytest.raises(EvalFormatError, match=esc(tmp_path / "stsb-fr-test.csv") + r": no readable row \(5 malformed"):
        read_stsb_multi_mt(tmp_path, ["en", "fr"], "test")
    write(tmp_path / "stsb-fr-test.csv", ["", ""])
    with pytest.raises(EvalFormatError, match=esc(tmp_path / "stsb-fr-test.csv") + r": no readable row \(the file is "
                                              "empty or blank\\)"):
        read_stsb_multi_mt(tmp_path, ["en", "fr"], "test")
    (tmp_path / "stsb-fr-test.csv").write_bytes(b"A.,B.,1.0\n\xe9,x,2.0\n")
    with pytest.raises(EvalFormatError, match=esc(tmp_path / "stsb-fr-test.csv") + r":2: invalid UTF-8"):
        read_stsb_multi_mt(tmp_path, ["en", "fr"], "test")


@pytest.mark.parametrize("reader", ["tatoeba", "ntrex", "clustering"])
@pytest.mark.parametrize("content", [b"", b"\n  \n", b"\xff\xfeH\x00i\x00\n", b"\n\n\n"])
def test_an_unreadable_aligned_file_fails_naming_it(tmp_path: Path, reader: str, content: bytes) -> None:
    good = ["One.", "Two.", "Three."]
    if reader == "tatoeba":
        write(tmp_path / "tatoeba.deu-eng.eng", good)
        bad = tmp_path / "tatoeba.deu-eng.deu"
        read = lambda: read_tatoeba(tmp_path)  # noqa: E731
    elif reader == "ntrex":
        write(tmp_path / "newstest2019-src.eng.txt", good)
        bad = tmp_path / "newstest2019-ref.deu.txt"
        read = lambda: read_ntrex(tmp_path)  # noqa: E731
    else:
        write(tmp_path / "de_categories.txt", good)
        bad = tmp_path / "de_sentences.txt"
        read = lambda: read_clustering(tmp_path, empty_sentences="skip")  # noqa: E731
    bad.write_bytes(content)
    # UTF-16 (a BOM, then NULs) is no UTF-8: named with its line; an empty or all-blank file: named as such
    why = r":1: invalid UTF-8" if content.startswith(b"\xff") else r": no readable row \(the file is empty or blank\)"
    with pytest.raises(EvalFormatError, match=esc(bad) + why):
        read()


def test_aligned_rows_all_dropped_fails_naming_the_files(tmp_path: Path) -> None:
    write(tmp_path / "tatoeba.deu-eng.deu", ["", "Zwei."])
    write(tmp_path / "tatoeba.deu-eng.eng", ["One.", ""])
    with pytest.raises(EvalFormatError, match=r"tatoeba\.deu-eng\.\{deu,eng\}: no row is readable in every aligned "
                                              r"file \(2 rows, each malformed in one of .*tatoeba\.deu-eng\.deu, "
                                              r".*tatoeba\.deu-eng\.eng\)"):
        read_tatoeba(tmp_path)


# =====================================================================================================================
# settings and the stage


def test_settings_old_form_files_and_bad_codes(tmp_path: Path) -> None:
    sources = EvalSources.model_validate({"tatoeba": SAMPLE_EVAL / "tatoeba", "sts": SAMPLE_EVAL / "sts",
                                          "clustering": SAMPLE_EVAL / "clustering"})
    assert len(sources.sts) == 1 and sources.sts[0].format == "semeval" and sources.sts[0].dataset == "sts17"
    files = sources.files()
    assert set(files) == ({f"tatoeba/{p.name}" for p in (SAMPLE_EVAL / "tatoeba").iterdir()}
                          | {f"sts/0/{p.name}" for p in (SAMPLE_EVAL / "sts").iterdir()}
                          | {f"clustering/{p.name}" for p in (SAMPLE_EVAL / "clustering").iterdir()})
    assert all(p.is_file() for p in files.values())
    entries = EvalSources.model_validate({"sts": [
        {"path": "x/STS12-en-test"}, {"format": "stsb_multi_mt", "path": "y", "languages": ["en", "de"]}]}).sts
    assert entries[0].dataset is None and entries[1].cross
    with pytest.raises(ValueError, match=r"sources\.eval\.sts\.languages: unknown language code 'xx'"):
        EvalSources.model_validate({"sts": [{"format": "stsb_multi_mt", "path": "y", "languages": ["xx"]}]})
    with pytest.raises(ValueError, match=r"give dataset"):
        EvalSources.model_validate({"sts": [{"format": "semeval", "path": "somewhere"}]})
    with pytest.raises(ValueError, match=r"corpora\.eval_sets\.tatoeba_languages: unknown language code 'qqq'"):
        EvalSetsSettings(tatoeba_languages=["deu", "qqq"])
    with pytest.raises(ValueError, match=r"unknown mteb datasets \['Nope'\]"):
        EvalSources(hub=["Nope"])
    with pytest.raises(FileNotFoundError, match=r"sources\.eval\.bucc: BUCC folder not found"):
        EvalSources(bucc=tmp_path / "absent").files()
    ntrex = EvalSources.model_validate({"parallel": [{"format": "ntrex", "path": SAMPLE_EVAL / "parallel",
                                                      "languages": ["deu"]}]}).files()
    assert sorted(ntrex) == ["parallel/0/LANGUAGES.tsv", "parallel/0/newstest2019-ref.deu.txt",
                             "parallel/0/newstest2019-src.eng.txt"]


def test_build_rejects_a_set_given_twice(tmp_path: Path) -> None:
    def loader(hub_id: str, config: str | None, split: str, revision: str) -> datasets.Dataset:
        return datasets.Dataset.from_dict({"sentence1": ["Ich bin heute sehr müde.\n"], "sentence2": ["x\n"],
                                           "lang": ["deu-eng"]})

    sources = EvalSources(tatoeba=SAMPLE_EVAL / "tatoeba", hub=["Tatoeba"])
    with pytest.raises(ValueError, match=r"eval_tatoeba: more than one row for \{'lang': 'deu', 'idx': 0\}"):
        read_eval_sets(EvalSetsSettings(), sources, loader=loader)
    twice = EvalSources.model_validate({"sts": [{"path": SAMPLE_EVAL / "sts", "dataset": "sts17"},
                                                {"path": SAMPLE_EVAL / "sts", "dataset": "sts17"}]})
    with pytest.raises(ValueError, match=r"eval_sts: two sources give dataset 'sts17' subset 'track4a\.es-en'"):
        read_eval_sets(EvalSetsSettings(), twice)
    empty = build_eval_sets(EvalSetsSettings(), EvalSources(), tmp_path)
    assert empty.tables == {} and empty.stats == {"rows": {}, "skipped": {}}


# =====================================================================================================================
# hub conversions (fake datasets injected; the real hub is offline here)


def test_hub_ids_and_revisions_are_mtebs() -> None:
    tasks = MTEB / "tasks"
    if not tasks.is_dir():
        pytest.skip("mteb not installed")
    sources = [p.read_text(encoding="utf-8") for p in tasks.rglob("*.py")]
    for name, spec in HUB_DATASETS.items():
        pattern = re.compile(rf'"path": "{re.escape(spec.hub_id)}",\s*"revision": "{spec.revision}"')
        assert any(pattern.search(s) for s in sources), name
        assert any(f'name="{name}"' in s and spec.hub_id in s for s in sources), name


def test_hub_conversions_with_fake_datasets() -> None:
    calls = []

    def loader(hub_id: str, config: str | None, split: str, revision: str) -> datasets.Dataset:
        calls.append((hub_id, config, split, revision))
        if hub_id == "mteb/tatoeba-bitext-mining":
            return datasets.Dataset.from_dict({"sentence1": ["Hallo.\n", "Danke.\n", "Salut.\n"],
                                               "sentence2": ["Hello.\n", "Thanks.\n", "Hi.\n"],
                                               "lang": ["deu-eng", "deu-eng", "fra-eng"]})
        if hub_id == "mteb/bucc-bitext-mining":
            return datasets.Dataset.from_dict({"sentence1": ["Ein Satz.", "Zwei."],
                                               "sentence2": ["A sentence.", "Two."], "lang": ["de-en", "de-en"]})
        if hub_id == "mteb/sts17-crosslingual-sts":
            return datasets.Dataset.from_dict({"sentence1": ["A dog.", "Un gato."], "sentence2": ["كلب", "A cat."],
                                               "score": [4.5, 3.0], "lang": ["en-ar", "es-en"]})
        if hub_id == "mteb/MTOPDomainClassification":
            features = datasets.Features({"text": datasets.Value("string"),
                                          "label": datasets.ClassLabel(names=["alarm", "weather"])})
            return datasets.Dataset.from_dict({"text": [f"{config} {split}"], "label": [1]}, features=features)
        if hub_id == "mteb/sib200":
            return datasets.Dataset.from_dict({"index_id": [5], "category": ["sports"], "text": [f" {config} "]})
        if hub_id == "mteb/FloresBitextMining":
            return datasets.Dataset.from_dict({"eng_Latn": ["a", "b"], "deu_Latn": ["A", "B"], "id": [1, 2]})
        if hub_id == "mteb/MewsC16JaClustering":
            return datasets.Dataset.from_dict({"sentences": ["文1", "文2"], "labels": ["経済", "政治"]})
        raise AssertionError(hub_id)

    t = load_hub("Tatoeba", ["deu"], loader)["eval_tatoeba"]
    assert t.rows() == [("deu", 0, "Hallo.", "Hello."), ("deu", 1, "Danke.", "Thanks.")]
    assert calls[-1] == ("mteb/tatoeba-bitext-mining", None, "test", HUB_DATASETS["Tatoeba"].revision)
    b = load_hub("BUCC.v2", [], loader)
    assert b["eval_bucc"].filter(pl.col("lang") == "de").rows() == [
        ("de-en", "training-gold", "de", "de-000000001", "Ein Satz.", 1),
        ("de-en", "training-gold", "de", "de-000000002", "Zwei.", 2)]
    assert b["eval_bucc_gold"].rows() == [("de-en", "training-gold", "de-000000001", "en-000000001"),
                                          ("de-en", "training-gold", "de-000000002", "en-000000002")]
    s = load_hub("STS17", ["en-ar"], loader)["eval_sts"]
    assert s.rows() == [("sts17", "en-ar", "en", "ar", 1, "A dog.", "كلب", 4.5)]
    c = load_hub("MTOPDomainClassification", ["de"], loader)["eval_classification"]
    assert c.rows() == [("mtop_domain", "de", "train", 1, "de train", "weather"),
                        ("mtop_domain", "de", "validation", 1, "de validation", "weather"),
                        ("mtop_domain", "de", "test", 1, "de test", "weather")]
    assert load_hub("SIB200Classification", ["deu_Latn"], loader)["eval_classification"].rows()[-1] == (
        "sib200", "deu_Latn", "test", 1, "deu_Latn", "sports")
    p = load_hub("FloresBitextMining", [], loader)["eval_parallel"]
    assert p.rows() == [("flores200", "eng_Latn", 0, "a"), ("flores200", "eng_Latn", 1, "b"),
                        ("flores200", "deu_Latn", 0, "A"), ("flores200", "deu_Latn", 1, "B")]
    m = load_hub("MewsC16JaClustering", [], loader)["eval_clustering"]
    assert m.rows() == [("MewsC16JaClustering", "ja", 0, "文1", "経済"),
                        ("MewsC16JaClustering", "ja", 1, "文2", "政治")]
    with pytest.raises(HubLoadError, match=r"no rows for subsets \['kor-eng'\]"):
        load_hub("Tatoeba", ["kor"], loader)


def test_hub_offline_error_names_id_reason_and_local_format() -> None:
    def offline(hub_id: str, config: str | None, split: str, revision: str) -> datasets.Dataset:
        raise ConnectionError("Couldn't reach the Hub (OfflineModeIsEnabled)")

    with pytest.raises(HubLoadError, match=r"mteb dataset STS12: mteb/sts12-sts \(revision a0d554a64d88156834ff5ae"
                                           r"9920b964011b16384.*OfflineModeIsEnabled.*HF_HUB_OFFLINE=.*Use the local "
                                           r"format instead: sources\.eval\.sts"):
        load_hub("STS12", [], offline)
    # the real loader, offline (conftest sets HF_HUB_OFFLINE=1): fails at once with the same kind of message
    with pytest.raises(HubLoadError, match=r"mteb/sickr-sts .*HF_HUB_OFFLINE=1.*sources\.eval\.sts"):
        load_hub("SICK-R")


def test_clustering_cap_keeps_the_same_hash_chosen_rows_per_language(tmp_path: Path) -> None:
    """``clustering_max_per_language``: at most N texts a language, chosen by the text's hash — the same rows
    whatever the file order, the rest counted as skipped."""
    from pipelines.eval_sets.clustering import read_clustering
    from pipelines.eval_sets.lines import Skipped

    texts = [f"Nachricht Nummer {i} über das Wetter." for i in range(40)]
    labels = [f"c{i % 4}" for i in range(40)]
    for name, order in (("a", list(range(40))), ("b", list(range(39, -1, -1)))):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "de_sentences.txt").write_text("\n".join(texts[i] for i in order) + "\n", encoding="utf-8")
        (folder / "de_categories.txt").write_text("\n".join(labels[i] for i in order) + "\n", encoding="utf-8")
    sk = Skipped()
    a = read_clustering(tmp_path / "a", max_per_language=10, skipped=sk)
    b = read_clustering(tmp_path / "b", max_per_language=10)
    assert a.height == 10 and set(a["text"]) == set(b["text"])
    assert sum(sk.as_dict()["eval_clustering"].values()) == 30
    assert read_clustering(tmp_path / "a").height == 40
