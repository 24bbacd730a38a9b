from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from conftest import SAMPLE

from pipelines.benchmarks import EvalSetsSettings, build_eval_sets
from pipelines.bitext import BitextSettings, build_pairs, normalise, read_moses
from pipelines.xnli import XnliFormatError, XnliSettings, build_groups

PAIRS = [("en", "de"), ("en", "fr"), ("en", "ru"), ("es", "de"), ("es", "fr"), ("es", "ru")]


def _sources() -> list[dict]:
    return [dict(src=a, tgt=b, src_file=SAMPLE / "bitext" / f"{a}-{b}.{a}", tgt_file=SAMPLE / "bitext" / f"{a}-{b}.{b}")
            for a, b in PAIRS]


def test_xnli_groups_one_per_unique_sentence(tmp_path: Path) -> None:
    build_groups(XnliSettings(), SAMPLE / "xnli", tmp_path)
    g = pl.read_parquet(tmp_path / "xnli_groups")
    en = pl.read_csv(SAMPLE / "xnli" / "dev-en.tsv", separator="\t", has_header=False, quote_char=None,
                     new_columns=["p", "h", "l"])
    n_unique = len(set(en["p"]) | set(en["h"]))
    assert g["group_id"].n_unique() == n_unique
    assert g.group_by("lang").len()["len"].to_list() == [n_unique] * 5
    # a premise with three hypotheses is one group, present once per language
    premise = en["p"][0]
    gid = g.filter((pl.col("lang") == "en") & (pl.col("text") == premise))["group_id"]
    assert len(gid) == 1
    assert g.filter(pl.col("group_id") == gid[0])["role"].unique().to_list() == ["premise"]


def test_xnli_misalignment_is_reported_with_file_and_row(tmp_path: Path) -> None:
    for lang in ("en", "de"):
        (tmp_path / f"dev-{lang}.tsv").write_text((SAMPLE / "xnli" / f"dev-{lang}.tsv").read_text())
    lines = (tmp_path / "dev-de.tsv").read_text().splitlines()
    p, h, label = lines[4].split("\t")
    lines[4] = "\t".join([p, h, "neutral" if label != "neutral" else "entailment"])
    (tmp_path / "dev-de.tsv").write_text("\n".join(lines) + "\n")
    with pytest.raises(XnliFormatError, match=r"dev-de\.tsv: row 5 has label"):
        build_groups(XnliSettings(languages=["en", "de"]), tmp_path, tmp_path)


def test_xnli_bad_line_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "dev-en.tsv").write_text("a\tb\tentailment\nonly two\tfields\n")
    (tmp_path / "dev-de.tsv").write_text("a\tb\tentailment\n")
    with pytest.raises(XnliFormatError, match=r"dev-en\.tsv:2: expected 3 tab-separated fields"):
        build_groups(XnliSettings(languages=["en", "de"]), tmp_path, tmp_path)


def test_bitext_reader_copes_with_crlf_and_bom() -> None:
    en, fr = read_moses(SAMPLE / "bitext" / "en-fr.en", SAMPLE / "bitext" / "en-fr.fr")
    assert len(en) == len(fr) and not any("\r" in x for x in en)
    _es, fr2 = read_moses(SAMPLE / "bitext" / "es-fr.es", SAMPLE / "bitext" / "es-fr.fr")
    assert not fr2[0].startswith("\ufeff")


def test_bitext_unequal_files_are_an_error(tmp_path: Path) -> None:
    (tmp_path / "a.en").write_text("one\ntwo\n")
    (tmp_path / "a.de").write_text("eins\n")
    with pytest.raises(ValueError, match=r"a\.en has 2 lines but .*a\.de has 1"):
        read_moses(tmp_path / "a.en", tmp_path / "a.de")


def test_pivot_sampling_filters_dedups_and_is_deterministic(tmp_path: Path) -> None:
    out1, out2 = tmp_path / "1", tmp_path / "2"
    out1.mkdir()
    out2.mkdir()
    r = build_pairs(BitextSettings(quota_per_language=40), _sources(), out1)
    build_pairs(BitextSettings(quota_per_language=40), list(reversed(_sources())), out2)
    a, b = pl.read_parquet(out1 / "bitext_pairs"), pl.read_parquet(out2 / "bitext_pairs")
    assert a.sort("pair_id").equals(b.sort("pair_id"))  # independent of file order
    assert r.stats["blank"] == 2 and r.stats["dropped_duplicate"] == 5 and r.stats["dropped_length"] == 2
    counts = a.group_by("pivot_lang", "lang").len()
    assert counts["len"].max() == 40 and set(counts["pivot_lang"]) == {"en", "es"}
    assert a.select((pl.col("pivot_text").map_elements(normalise, return_dtype=pl.Utf8)
                     + "|" + pl.col("text").map_elements(normalise, return_dtype=pl.Utf8)).is_unique().all()).item()
    c = tmp_path / "3"
    c.mkdir()
    build_pairs(BitextSettings(quota_per_language=40, seed=14), _sources(), c)
    assert not pl.read_parquet(c / "bitext_pairs").sort("pair_id")["text"].equals(a.sort("pair_id")["text"])


def test_eval_sets_read_all_three_formats(tmp_path: Path) -> None:
    r = build_eval_sets(EvalSetsSettings(), tmp_path, SAMPLE / "eval" / "tatoeba", SAMPLE / "eval" / "sts",
                        SAMPLE / "eval" / "clustering")
    assert r.stats == {"eval_tatoeba": 400, "eval_sts": 120, "eval_clustering": 120}
    sts = pl.read_parquet(tmp_path / "eval_sts.parquet")
    assert sts["score"].min() >= 0 and sts["score"].max() <= 5


def test_eval_sets_language_filter_errors_on_unknown(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no Tatoeba files for \['xho'\]"):
        build_eval_sets(EvalSetsSettings(tatoeba_languages=["xho"]), tmp_path, SAMPLE / "eval" / "tatoeba")
