"""Pivot sampling (``bitext_pairs``): the streaming bottom-k equals a brute-force reference, whatever the chunking or
file order; filters, quotas, de-duplication, leakage guard and language identification are counted."""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest
from conftest import SAMPLE

from pipelines.bitext.sampling import BitextSettings, BottomK, build_pairs, orient, quotas, select_pairs
from pipelines.bitext.sources import MosesSource
from pipelines.leakage import EvalSetSpec, EvalTextIndex, LeakageSettings
from pipelines.text_normalise import normalise, normalise_series

PAIRS = [("en", "de"), ("en", "fr"), ("en", "ru"), ("es", "de"), ("es", "fr"), ("es", "ru")]


def _sample_sources() -> list[MosesSource]:
    return [MosesSource(src=a, tgt=b, src_file=SAMPLE / "bitext" / f"{a}-{b}.{a}",
                        tgt_file=SAMPLE / "bitext" / f"{a}-{b}.{b}") for a, b in PAIRS]


def _write(folder: Path, name: str, src: str, tgt: str, pairs: list[tuple[str, str]]) -> MosesSource:
    folder.mkdir(parents=True, exist_ok=True)
    a, b = folder / f"{name}.{src}", folder / f"{name}.{tgt}"
    a.write_text("".join(p[0] + "\n" for p in pairs), encoding="utf-8")
    b.write_text("".join(p[1] + "\n" for p in pairs), encoding="utf-8")
    return MosesSource(src=src, tgt=tgt, src_file=a, tgt_file=b)


def _messy_pairs(n: int, seed: int) -> list[tuple[str, str]]:
    """Pairs with exact and normalised duplicates, blanks, short, long and unbalanced pairs."""
    rnd = random.Random(seed)
    words = [
        "alpha", "beta", "gamma", "delta", "house", "river", "city", "music", "light", "tree", "road", "night",
        "window"
    ]
    base = []
    for i in range(n // 3):
        k = rnd.randint(3, 9)
        base.append((" ".join(rnd.choice(words) for _ in range(k)) + f" {i}.",
                     "das " + " ".join(rnd.choice(words).upper() for _ in range(k)) + f" {i}"))
    out = []
    for i in range(n):
        en, de = base[i % len(base)]  # every pair three times: exact duplicates
        r = rnd.random()
        if r < 0.1:
            en = en.upper().replace(".", "!!")  # a normalised duplicate of another line (same i % (n // 3))
        elif r < 0.13:
            de = ""
        elif r < 0.15:
            en = "ab"
        elif r < 0.17:
            de = de * 40
        out.append((en, de))
    return out


def _reference(pairs: list[tuple[str, str]], s: BitextSettings, quota: int) -> set[tuple[str, str]]:
    """Brute force: filter everything, key every pair, keep the min-key member per normalised group, k smallest."""
    df = pl.DataFrame({"pivot_text": [p[0] for p in pairs], "text": [p[1] for p in pairs]}, orient="col")
    a, b = pl.col("pivot_text").str.len_chars(), pl.col("text").str.len_chars()
    df = df.filter((a > 0) & (b > 0) & (pl.min_horizontal(a, b) >= s.min_chars) & (pl.max_horizontal(a, b)
                   <= s.max_chars) & (pl.max_horizontal(a, b) <= s.max_length_ratio * pl.min_horizontal(a, b)))
    df = df.with_columns(df.select("pivot_text", "text").hash_rows(seed=s.seed).alias("key"),
                         normalise_series(df["pivot_text"]).alias("pn"), normalise_series(df["text"]).alias("n"))
    best = df.sort("key").unique(subset=["pn", "n"], keep="first").sort("key").head(quota)
    return set(best.select("pivot_text", "text").iter_rows())


def test_streaming_selection_equals_brute_force_for_any_chunking_and_order(tmp_path: Path) -> None:
    pairs = _messy_pairs(6000, seed=1)
    s = BitextSettings(pivots=["en"], quota_per_language=300, chunk_rows=1000)
    expected = _reference(pairs, s, 300)
    got_small, counts, _, _ = select_pairs(s, [_write(tmp_path / "a", "c", "en", "de", pairs)], progress=False)
    shuffled = pairs[:]
    random.Random(7).shuffle(shuffled)
    big = s.model_copy(update={"chunk_rows": 1_000_000})
    got_big, _, _, _ = select_pairs(big, [_write(tmp_path / "b", "c", "en", "de", shuffled)], progress=False)
    assert set(got_small.select("pivot_text", "text").iter_rows()) == expected
    assert got_small.drop("origin", "line").equals(got_big.drop("origin", "line"))
    # no two selected pairs normalise alike, and every filter's count adds up to what was read
    norm = got_small.select(normalise_series(got_small["pivot_text"]) + "|" + normalise_series(got_small["text"]))
    assert norm.to_series().is_unique().all()
    row = counts.row(0, named=True)
    assert row["read"] == 6000 and row["kept"] == 300 and row["duplicate"] > 0 and row["blank"] > 0
    assert row["too_short"] > 0 and row["too_long"] > 0
    assert sum(row[c] for c in ("blank", "too_short", "too_long", "length_ratio", "leaked", "wrong_language",
                                "duplicate", "not_selected", "kept")) == row["read"]


def test_reserve_exhausted_by_normalised_duplicates_falls_back_to_exact(tmp_path: Path, monkeypatch,
                                                                       caplog) -> None:
    base = [(f"the river number {i} flows.", f"der Fluss Nummer {i} fließt.") for i in range(400)]
    forms = (str, str.upper, str.title, lambda t: t.replace(".", "!"), lambda t: t.replace(" ", "  "))
    variants = [(f(en), de) for f in forms for en, de in base]  # 5 raw forms of each pair, one normalised form
    s = BitextSettings(pivots=["en"], quota_per_language=350)
    monkeypatch.setattr(BottomK, "RESERVE_MIN", 0)  # reserve 525 raw keys: ~310 distinct pairs after normalising
    with caplog.at_level("WARNING", logger="polysent.pipelines.bitext"):
        got, counts, _, _ = select_pairs(s, [_write(tmp_path, "c", "en", "de", variants)], progress=False)
    assert "reading again with exact streaming refinement" in caplog.text
    assert set(got.select("pivot_text", "text").iter_rows()) == _reference(variants, s, 350)
    assert got.height == 350 and counts["duplicate"].sum() > 0


def _chunk(rows: list[tuple[str, str, str, str, int]]) -> pl.DataFrame:
    """A reader chunk from (src_lang, tgt_lang, src_text, tgt_text, line) rows."""
    return pl.DataFrame({"src_lang": [r[0] for r in rows], "tgt_lang": [r[1] for r in rows],
                         "src_text": [r[2] for r in rows], "tgt_text": [r[3] for r in rows],
                         "origin": [f"{r[0]}-{r[1]}" for r in rows], "line": [r[4] for r in rows]})


def _selection(sel: BottomK) -> tuple[pl.DataFrame, pl.DataFrame]:
    sel.finish()
    return sel.result(), sel.count_table()


def test_a_chunk_of_many_language_pairs_selects_as_one_chunk_a_pair(tmp_path: Path) -> None:
    """An N-way chunk (NTREX-128 read at once: every pivot × every language, rows interleaved) is split by language
    pair in one pass: the selection and its counts are those of the same pairs fed one pair a chunk (in the same order
    within each pair), and of exact duplicates the one first in the chunk stands for them (its ``line``), so the
    split kept each pair's reading order."""
    rnd = random.Random(3)
    pairs = [("en", "de"), ("de", "es"), ("en", "es"), ("fr", "en"), ("es", "fr"), ("en", "sw")]
    per_pair = {}
    for a, b in pairs:
        msgs = _messy_pairs(900, seed=len(per_pair))  # exact and normalised duplicates, blanks, short, long
        per_pair[(a, b)] = [(a, b, f"{a}: {x}", f"{b}: {y}", i) for i, (x, y) in enumerate(msgs)]
    mixed = [r for rows in per_pair.values() for r in rows]
    rnd.shuffle(mixed)
    order = {id(r): i for i, r in enumerate(mixed)}  # each pair's rows in the order the mixed chunk holds them
    s = BitextSettings(pivots=["en", "es"], quota_per_language=120)
    one = BottomK(s, None, EvalTextIndex.empty())
    one.add(_chunk(mixed))
    apart = BottomK(s, None, EvalTextIndex.empty())
    for rows in per_pair.values():
        apart.add(_chunk(sorted(rows, key=lambda r: order[id(r)])))
    (got, counts), (want, want_counts) = _selection(one), _selection(apart)
    assert got.equals(want) and counts.equals(want_counts)
    assert sorted(set(got.select("pivot_lang", "lang").iter_rows())) == [
        ("en", "de"), ("en", "es"), ("en", "fr"), ("en", "sw"), ("es", "de"), ("es", "fr")]
    assert (counts["kept"] == 120).all() and (counts["duplicate"] > 0).all()
    # of exact duplicates the one first in the mixed chunk stands for them (the split kept the reading order)
    first: dict[tuple[str, str, str], int] = {}
    for r in mixed:
        first.setdefault((f"{r[0]}-{r[1]}", r[2], r[3]), r[4])
    for origin, pivot_text, text, line in got.select("origin", "pivot_text", "text", "line").iter_rows():
        src = origin.split("-")[0]  # the source side's text starts with its language: "de: …"
        src_text, tgt_text = (pivot_text, text) if pivot_text.startswith(f"{src}: ") else (text, pivot_text)
        assert first[(origin, src_text, tgt_text)] == line, (origin, src_text)
    assert len(first) < len(mixed)


def test_sample_bitext_pivots_quotas_and_seed(tmp_path: Path) -> None:
    out = tmp_path / "o"
    out.mkdir()
    r = build_pairs(BitextSettings(quota_per_language=40), _sample_sources(), EvalTextIndex.empty(), out)
    a = pl.read_parquet(out / "bitext_pairs")
    counts = a.group_by("pivot_lang", "lang").len()
    assert counts["len"].max() == 40 and set(counts["pivot_lang"]) == {"en", "es"}
    assert r.stats["blank"] == 2 and r.stats["duplicate"] >= 5
    b, *_ = select_pairs(BitextSettings(quota_per_language=40), list(reversed(_sample_sources())), progress=False)
    assert a.sort("pair_id").drop("lang").equals(b.sort("pair_id").drop("lang", "origin", "line")
                                                 .with_columns(a.sort("pair_id").select("origin", "line")))
    c, *_ = select_pairs(BitextSettings(quota_per_language=40, seed=14), _sample_sources(), progress=False)
    assert set(c["pair_id"]) != set(a["pair_id"])
    fc = pl.read_parquet(out / "bitext_filter_counts.parquet")
    assert (fc["read"] == fc.select(pl.sum_horizontal("blank", "too_short", "too_long", "length_ratio", "leaked",
                                                      "wrong_language", "duplicate", "not_selected", "kept"))
            .to_series()).all()


def test_orientation_and_proportional_quotas() -> None:
    assert orient("de", "es", ["en", "es"]) == ("es", "de")
    assert orient("es", "en", ["en", "es"]) == ("en", "es")
    with pytest.raises(ValueError, match="no pivot language"):
        orient("de", "fr", ["en", "es"])
    counts = {("en", "de"): 900, ("en", "sw"): 100}
    s = BitextSettings(quota_mode="proportional", total_pairs=100, temperature=1.0)
    assert quotas(s, counts) == {("en", "de"): 90, ("en", "sw"): 10}
    flat = quotas(s.model_copy(update={"temperature": 1000.0}), counts)
    assert abs(flat[("en", "de")] - flat[("en", "sw")]) <= 1
    t5 = quotas(s.model_copy(update={"temperature": 5.0}), counts)  # 900^.2 : 100^.2 = 3.90 : 2.51
    assert t5 == {("en", "de"): 60, ("en", "sw"): 39}
    assert quotas(s.model_copy(update={"total_pairs": 10_000}), counts) == counts  # capped at what exists


def test_leakage_guard_removes_and_counts_normalised_matches(tmp_path: Path) -> None:
    pairs = [(f"Sentence number {i} about the river.", f"Satz Nummer {i} über den Fluss.") for i in range(200)]
    src = _write(tmp_path / "b", "c", "en", "de", pairs)
    (tmp_path / "tatoeba.deu").write_text("satz nummer 3 ÜBER den fluss\nSatz Nummer 17 über den Fluss!\n")
    (tmp_path / "sts.tsv").write_text("SENTENCE NUMBER 5 ABOUT THE RIVER\tsomething else\n")
    index = EvalTextIndex.from_settings(LeakageSettings(eval_sets=[
        EvalSetSpec(name="tatoeba", path=tmp_path / "tatoeba.deu"),
        EvalSetSpec(name="sts", path=tmp_path / "sts.tsv", format="tsv", columns=[0, 1])]))
    for scan in ("candidates", "all"):
        s = BitextSettings(pivots=["en"], quota_per_language=1000, leakage_scan=scan)
        got, counts, leak, _ = select_pairs(s, [src], index, progress=False)
        assert got.height == 197
        assert not set(got["text"]) & {"Satz Nummer 3 über den Fluss.", "Satz Nummer 17 über den Fluss."}
        assert leak.sort("eval_set").select("eval_set", "lang", "units_removed").rows() == [
            ("sts", "de", 1), ("tatoeba", "de", 2)]
        assert counts["leaked"].sum() == 3


def test_language_identification_drops_wrong_language_side(tmp_path: Path) -> None:
    pairs = [("The weather is very nice today in the mountains.", "Das Wetter ist heute in den Bergen sehr schön."),
             ("I would like to order a coffee with milk please.", "Je voudrais commander un café au lait, s'il vous "
                                                                  "plaît."),
             ("Where is the nearest railway station from here?", "Wo ist der nächste Bahnhof von hier aus?")]
    src = _write(tmp_path, "c", "en", "de", pairs)
    got, counts, _, _ = select_pairs(BitextSettings(pivots=["en"], langid=True), [src], progress=False)
    assert got.height == 2 and not any("café" in t for t in got["text"])
    assert counts["wrong_language"].sum() == 1


def test_normalise_is_one_function() -> None:
    assert normalise("Hello,  WORLD!") == normalise("hello world") == "hello world"
    assert normalise("１２３ Ａｂｃ。") == "123 abc"
    assert normalise_series(pl.Series(["Straße — «Haus»"])).to_list() == [normalise("straße haus")]


def test_cjk_lengths_are_weighted_for_the_ratio_filter(tmp_path: Path) -> None:
    pairs = [("The weather is nice today, so we are going to the park.", "今天天气很好，所以我们去公园。"),
             ("The weather is nice today, so we are going to the park.", "好。")]
    for lang in ("zh", "de"):  # the same text under a Latin-script code is judged on plain characters
        got, counts, _, _ = select_pairs(BitextSettings(pivots=["en"]), [_write(tmp_path / lang, "c", "en", lang,
                                                                                pairs)], progress=False)
        dropped = counts["length_ratio"].sum() + counts["too_short"].sum()
        assert (dropped, got.height) == ((1, 1) if lang == "zh" else (2, 0))


def test_leakage_csv_without_header_reads_columns_by_index(tmp_path: Path) -> None:
    """stsb_multi_mt's test files are ``s1,s2,score`` with no header: 0-based indices name the columns, and the
    first line is a sentence pair, not a header."""
    f = tmp_path / "stsb-de-test.csv"
    f.write_text('Ein Mädchen frisiert ihr Haar.,Ein Mädchen bürstet sich die Haare.,2.5\n'
                 '"Ein Mann, der Gitarre spielt.",Eine Frau tanzt.,0.4\n', encoding="utf-8")
    index = EvalTextIndex.from_settings(LeakageSettings(eval_sets=[
        EvalSetSpec(name="stsb", path=f, format="csv", columns=[0, 1])]))
    texts = set(index.texts["norm"].to_list())
    assert texts == {normalise(t) for t in ("Ein Mädchen frisiert ihr Haar.", "Ein Mädchen bürstet sich die Haare.",
                                            "Ein Mann, der Gitarre spielt.", "Eine Frau tanzt.")}
    with pytest.raises(ValueError, match="all header names or all 0-based"):
        EvalTextIndex.from_settings(LeakageSettings(eval_sets=[
            EvalSetSpec(name="stsb", path=f, format="csv", columns=[0, "sentence2"])]))
