"""N-way groups, +Single pairs, contradiction negatives and NLI triples, on the sample and on the real XNLI."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from conftest import SAMPLE

from pipelines.leakage import EvalSetSpec, EvalTextIndex, LeakageSettings
from pipelines.nli.sources import NliFileSource
from pipelines.nli.triples import NliTripleSettings, build_triples
from pipelines.xnli.groups import XnliSettings, build_groups
from pipelines.xnli.languages import LANGUAGE_PRESETS
from pipelines.xnli.sources import XNLI_LANGUAGES, XnliSource

SAMPLE_XNLI = XnliSource(dir=SAMPLE / "xnli")
SAMPLE_LANGS = ["en", "de", "fr", "es", "ru"]


def _tsv(path: Path) -> pl.DataFrame:
    return pl.read_csv(path, separator="\t", has_header=False, quote_char=None, new_columns=["p", "h", "l"])


def test_groups_one_per_unique_sentence_with_negatives_and_single_pairs(tmp_path: Path) -> None:
    r = build_groups(XnliSettings(languages=SAMPLE_LANGS), SAMPLE_XNLI, EvalTextIndex.empty(), tmp_path)
    g = pl.read_parquet(tmp_path / "xnli_groups")
    en = _tsv(SAMPLE / "xnli" / "dev-en.tsv")
    n_unique = len(set(en["p"]) | set(en["h"]))
    assert r.stats["groups"] == g["group_id"].n_unique() == n_unique
    assert g.group_by("lang").len()["len"].to_list() == [n_unique] * 5
    # a premise with three hypotheses is one group, whose negative is its contradiction hypothesis's group
    row = en.filter(pl.col("l") == "contradiction").row(0, named=True)
    prem = g.filter((pl.col("lang") == "en") & (pl.col("text") == row["p"]))
    assert prem.height == 1 and prem["role"][0] == "premise"
    neg = g.filter((pl.col("group_id") == prem["negative_group_id"][0]) & (pl.col("lang") == "en"))
    assert neg["text"].to_list() == [row["h"]]
    assert g.filter(pl.col("role") == "hypothesis")["negative_group_id"].null_count() == g.filter(
        pl.col("role") == "hypothesis").height
    # members of a group are the same row in every language
    de = _tsv(SAMPLE / "xnli" / "dev-de.tsv")
    src_row = prem["source_row"][0]
    assert g.filter((pl.col("group_id") == prem["group_id"][0]) & (pl.col("lang") == "de"))["text"][0] == \
        de["p"][src_row - 1]
    # +Single: floor(5/2) = 2 disjoint pairs per group, no language used twice in a group
    sp = pl.read_parquet(tmp_path / "xnli_single_pairs.parquet")
    assert sp.height == 2 * n_unique
    langs = (pl.concat([sp.select("group_id", pl.col("lang_a").alias("l")), sp.select("group_id", pl.col("lang_b")
                                                                                     .alias("l"))])
             .group_by("group_id").agg(pl.len().alias("n"), pl.col("l").n_unique().alias("u")))
    assert (langs["n"] == 4).all() and (langs["u"] == 4).all()
    assert sp["lang_a"].n_unique() == 5  # the random order really varies across groups
    assert sp.columns == ["group_id", "split", "pair_index", "lang_a", "lang_b"]


def test_single_pairs_depend_on_the_seed_only(tmp_path: Path) -> None:
    outs = []
    for i, seed in enumerate((13, 13, 14)):
        d = tmp_path / str(i)
        d.mkdir()
        build_groups(XnliSettings(languages=SAMPLE_LANGS, seed=seed), SAMPLE_XNLI, EvalTextIndex.empty(), d)
        outs.append(pl.read_parquet(d / "xnli_single_pairs.parquet"))
    assert outs[0].equals(outs[1]) and not outs[0].equals(outs[2])


def test_leaked_groups_are_removed_and_counted(tmp_path: Path) -> None:
    de = _tsv(SAMPLE / "xnli" / "dev-de.tsv")
    (tmp_path / "eval.txt").write_text(de["h"][0].upper() + " !\n", encoding="utf-8")
    index = EvalTextIndex.from_settings(LeakageSettings(eval_sets=[EvalSetSpec(name="probe", path=tmp_path
                                                                               / "eval.txt")]))
    out = tmp_path / "o"
    out.mkdir()
    r = build_groups(XnliSettings(languages=SAMPLE_LANGS), SAMPLE_XNLI, index, out)
    assert r.stats["groups_leaked"] == 1
    g = pl.read_parquet(out / "xnli_groups")
    assert de["h"][0] not in set(g["text"])
    assert pl.read_parquet(out / "leakage.parquet").rows() == [("xnli_groups", "probe", "de", 1)]


def test_presets_and_bad_languages() -> None:
    assert XnliSettings(languages="mpcl").languages == ["en", "de", "fr", "es", "ru", "zh"]
    assert XnliSettings(languages="unseen").read_languages() == ["en", "bg", "el", "vi", "sw"]
    with pytest.raises(ValueError, match="unknown language preset"):
        XnliSettings(languages="most")
    with pytest.raises(ValueError, match="unknown language code 'xx'"):
        XnliSettings(languages=["en", "xx"])
    with pytest.raises(ValueError, match="not an XNLI language"):
        XnliSettings(languages=["en", "ja"])


def test_nli_triples_paper_and_code_modes(tmp_path: Path) -> None:
    en = _tsv(SAMPLE / "xnli" / "dev-en.tsv").with_row_index("row")
    contra = en.filter(pl.col("l") == "contradiction").group_by("p").agg(pl.col("h").first())
    ent = en.filter(pl.col("l") == "entailment").join(contra, on="p", how="inner", suffix="_c")
    outs = {}
    for mode in ("paper", "code"):
        d = tmp_path / mode
        d.mkdir()
        r = build_triples(NliTripleSettings(languages=SAMPLE_LANGS, cross_lingual=mode), SAMPLE_XNLI, [],
                          EvalTextIndex.empty(), d)
        outs[mode] = t = pl.read_parquet(d / "nli_triples")
        assert r.stats["triples_english"] == ent.height
        english = t.filter(pl.col("strategy") == "english")
        assert set(english.select("sent0", "sent1", "hard_neg").iter_rows()) == set(ent.select("p", "h", "h_c")
                                                                                     .iter_rows())
    paper, code = outs["paper"], outs["code"]
    xl = paper.filter(pl.col("strategy") == "cross_lingual")
    assert xl.height == paper.filter(pl.col("strategy") == "english").height
    assert set(xl["sent1_lang"]) == set(SAMPLE_LANGS) and (xl["sent0_lang"] != "en").any()
    # every cross-lingual row shares its meaning id with its English row
    assert set(xl["meaning_id"]) == set(paper.filter(pl.col("strategy") == "english")["meaning_id"])
    code_xl = code.filter(pl.col("strategy") == "cross_lingual")
    assert code_xl.height == 5 * ent.height
    assert (code_xl.group_by("meaning_id").agg(pl.col("sent0_lang").n_unique())["sent0_lang"] == 5).all()
    # a German premise really is the German row
    de = _tsv(SAMPLE / "xnli" / "dev-de.tsv")
    one = code_xl.filter(pl.col("sent0_lang") == "de").row(0, named=True)
    assert one["sent0"] in set(de["p"])


def test_real_xnli_all_15_languages(tmp_path: Path, shared_data: Path) -> None:
    src = XnliSource(dir=shared_data / "xnli")
    s = XnliSettings(languages="all", splits=["dev", "test"])
    r = build_groups(s, src, EvalTextIndex.empty(), tmp_path)
    g = pl.read_parquet(tmp_path / "xnli_groups")
    assert sorted(g["lang"].unique()) == sorted(XNLI_LANGUAGES) == sorted(LANGUAGE_PRESETS["all"])
    for split, rows in (("dev", 2490), ("test", 5010)):
        en = _tsv(shared_data / "xnli" / f"{split}-en.tsv")
        assert en.height == rows
        assert g.filter((pl.col("split") == split) & (pl.col("lang") == "en")).height == len(set(en["p"])
                                                                                             | set(en["h"]))
    sp = pl.read_parquet(tmp_path / "xnli_single_pairs.parquet")
    assert sp.height == 7 * r.stats["groups"]


def test_nli_triples_from_english_files_share_meaning_ids(tmp_path: Path) -> None:
    snli = tmp_path / "snli_1.0_dev.jsonl"
    rows = [("c1", "A man plays a guitar on stage.", "A man is making music.", "entailment"),
            ("c1", "A man plays a guitar on stage.", "A person performs.", "entailment"),
            ("c1", "A man plays a guitar on stage.", "A man is sleeping at home.", "contradiction"),
            ("c1", "A man plays a guitar on stage.", "The man is famous.", "neutral"),
            ("c2", "Two dogs run in the snow.", "Animals are outside.", "entailment"),
            ("c2", "Two dogs run in the snow.", "Nobody is outside.", "-")]
    snli.write_text("".join(json.dumps({"captionID": c, "sentence1": p, "sentence2": h, "gold_label": lab,
                                        "pairID": f"{c}-{i}"}) + "\n" for i, (c, p, h, lab) in enumerate(rows)),
                    encoding="utf-8")
    csv = tmp_path / "nli_for_simcse.csv"
    csv.write_text('sent0,sent1,hard_neg\n"A man plays a guitar on stage!",A man is making music.,"No, he is not."\n',
                   encoding="utf-8")
    files = [NliFileSource(name="snli", format="jsonl", path=snli),
             NliFileSource(name="simcse", format="simcse_csv", path=csv)]
    r = build_triples(NliTripleSettings(xnli_split=None), None, files, EvalTextIndex.empty(), tmp_path)
    t = pl.read_parquet(tmp_path / "nli_triples").sort("triple_id")
    assert r.stats == {"snli_triples": 2, "simcse_triples": 1, "triples": 3, "triples_leaked": 0,
                       "triples_english": 3}
    assert t.filter(pl.col("source") == "snli")["hard_neg"].to_list() == ["A man is sleeping at home."] * 2
    # both SNLI hypotheses of caption c1 and the SimCSE row with the same premise (after normalising) share a meaning
    assert t["meaning_id"].n_unique() == 1
