"""Type-based hard negatives and EASE sampling on purpose-built entities, types, links and pages."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from conftest import SAMPLE
from wiki_chain import build_chain

from pipelines.leakage import EvalSetSpec, EvalTextIndex, LeakageSettings
from pipelines.wikipedia.entities import EntitySettings
from pipelines.wikipedia.hard_negatives import (
    HardNegativeSettings,
    build_hard_negatives,
    leaking_sentences,
    type_candidates,
)

DUMPS = {lang: SAMPLE / "wikipedia" / f"{lang}wiki-sample.xml.bz2" for lang in ("en", "de", "ru")}


def _types() -> pl.DataFrame:
    rows = [(f"C{i}", "city") for i in range(30)] + [(f"P{i}", "person") for i in range(5)]
    rows += [("C0", "capital"), ("C1", "capital"), ("X", "lonely")]
    return pl.DataFrame(rows, schema={"entity": pl.Utf8, "type": pl.Utf8}, orient="row")


def test_candidates_come_from_one_type_exclude_self_and_are_deterministic() -> None:
    types = _types()
    cands = type_candidates(types, k=10, seed=42)
    assert cands["entity"].to_list() == sorted(types["entity"].unique().to_list())
    members = types.group_by("type").agg("entity")
    by_type = dict(zip(members["type"], members["entity"].to_list(), strict=True))
    for entity, typ, cs in cands.iter_rows():
        assert (entity, typ) in set(types.iter_rows())  # the chosen type is one of the entity's own
        assert entity not in cs and len(cs) == len(set(cs))
        assert set(cs) <= set(by_type[typ])
        n = len(by_type[typ])
        assert len(cs) == n - 1 if n <= 10 else len(cs) in (9, 10)  # K drawn, then the entity itself removed
    lonely = cands.filter(pl.col("entity") == "X")
    assert lonely["candidates"][0].to_list() == []  # the only member of its type: no candidate
    assert type_candidates(types, k=10, seed=42).equals(cands)
    other = type_candidates(types, k=10, seed=7)
    assert not other.equals(cands)


def test_candidate_windows_cover_the_type_uniformly() -> None:
    """Over many entities every member of a type is drawn about equally often (a random K-subset per entity)."""
    types = pl.DataFrame({"entity": [f"E{i}" for i in range(400)], "type": ["t"] * 400})
    cands = type_candidates(types, k=10, seed=1)
    counts = cands.explode("candidates")["candidates"].value_counts()["count"]
    assert counts.len() == 400  # every member is somebody's candidate
    assert counts.mean() == pytest.approx(10 - 10 / 400, rel=0.01)
    assert counts.max() <= 25


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_chain(DUMPS, tmp_path_factory.mktemp("hn") / "c", SAMPLE / "wikidata" / "entities.jsonl",
                       entities=EntitySettings(min_link_count=2))


def test_negatives_are_of_the_positive_type_and_never_linked_on_the_page(chain: dict[str, Path]) -> None:
    hn = pl.read_parquet(chain["hn"] / "hard_negatives")
    assert hn.height > 300 and set(hn["lang"]) == {"en", "de", "ru"}
    types = pl.read_parquet(chain["entities"] / "entity_types.parquet")
    typed = set(types.select("entity", "type").iter_rows())
    titles = pl.read_parquet(chain["entities"] / "entity_titles.parquet")
    for lang in ("en", "de", "ru"):
        targets = (pl.read_parquet(chain[f"lang-{lang}"] / "wiki_page_targets")
                   .join(titles.filter(pl.col("lang") == lang).select(pl.col("page_id").alias("target_page_id"),
                                                                        "entity"), on="target_page_id"))
        on_page = set(targets.select("page_id", "entity").iter_rows())
        rows = hn.filter(pl.col("lang") == lang)
        own = dict(titles.filter(pl.col("lang") == lang).select("page_id", "entity").iter_rows())
        for page_id, entity, negative, cands, typ, origin in rows.select(
                "page_id", "entity", "negative", "candidates", "type", "origin_entity").iter_rows():
            assert negative in cands and entity not in cands
            assert (entity, typ) in typed and all((c, typ) in typed for c in cands)
            assert all((page_id, c) not in on_page for c in cands)
            assert origin == own[page_id] and origin not in cands  # the page's own subject is never a negative
    # the text really contains the link surface at its offsets
    assert hn.select((pl.col("text").str.slice(pl.col("start"), pl.col("end") - pl.col("start"))
                      == pl.col("surface")).all()).item()


def test_same_page_exclusion_drops_pairs_and_counts_them(chain: dict[str, Path], tmp_path: Path) -> None:
    """With K large enough to take a whole type, every candidate of a city on a page that links all other cities
    is excluded; such pairs are dropped and counted."""
    langs = {lang: chain[f"lang-{lang}"] for lang in DUMPS}
    shards = {lang: [chain[f"shard-{lang}-0"]] for lang in DUMPS}
    build_hard_negatives(HardNegativeSettings(negatives_per_entity=1000), chain["entities"], langs, shards, tmp_path)
    drops = pl.read_parquet(tmp_path / "ease_drop_counts.parquet")
    hn = pl.read_parquet(tmp_path / "hard_negatives")
    types = pl.read_parquet(chain["entities"] / "entity_types.parquet")
    sizes = dict(types.group_by("type").len().iter_rows())
    # with K ≥ every type's size the candidates are the whole type minus the entity and minus the page's links:
    # on the sample's city pages other cities are linked, so some candidate lists are shorter than the type
    short = hn.filter(pl.col("candidates").list.len() < pl.col("type").replace_strict(sizes) - 1)
    assert short.height > 0
    assert drops.filter(pl.col("reason") == "all_candidates_linked_on_page")["count"].sum() == 0
    # with K = 1 the single candidate is often linked on the same page: those pairs are dropped and counted
    one = tmp_path / "k1"
    one.mkdir()
    build_hard_negatives(HardNegativeSettings(negatives_per_entity=1), chain["entities"], langs, shards, one)
    drops1 = pl.read_parquet(one / "ease_drop_counts.parquet")
    n_on_page = drops1.filter(pl.col("reason") == "all_candidates_linked_on_page")["count"].sum()
    assert n_on_page > 50
    assert pl.read_parquet(one / "hard_negatives").height + n_on_page == hn.height
    links = sum(pl.read_parquet(chain[f"lang-{lang}"] / "wiki_links").height for lang in DUMPS)
    own = drops.filter(pl.col("stage") == "hard_negatives")
    assert hn.height + own["count"].sum() == links  # every link is either a pair or a counted drop
    assert set(drops["stage"]) == {"extract", "resolve", "hard_negatives"}  # one table of every drop


def test_caps_and_quotas_are_reproducible_subsets(chain: dict[str, Path], tmp_path: Path) -> None:
    langs = {lang: chain[f"lang-{lang}"] for lang in DUMPS}
    shards = {lang: [chain[f"shard-{lang}-0"]] for lang in DUMPS}
    full = pl.read_parquet(chain["hn"] / "hard_negatives")
    key = ["lang", "page_id", "sent_id", "link_no"]
    settings = HardNegativeSettings(max_pairs_per_entity=3, max_pairs_per_language={"en": 20, "de": 15, "ru": 10})
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    build_hard_negatives(settings, chain["entities"], langs, shards, a)
    build_hard_negatives(settings, chain["entities"], langs, shards, b)
    sa = pl.read_parquet(a / "hard_negatives")
    assert sa.equals(pl.read_parquet(b / "hard_negatives"))
    assert dict(sa.group_by("lang").len().iter_rows()) == {"en": 20, "de": 15, "ru": 10}
    assert sa.group_by("lang", "entity").len()["len"].max() <= 3
    # a subset of the uncapped pairs, with the same negatives (drawn per pair, not per sample)
    joined = sa.join(full, on=key, suffix="_full")
    assert joined.height == sa.height and (joined["negative"] == joined["negative_full"]).all()
    with pytest.raises(ValueError, match="no entry for 'ru'"):
        HardNegativeSettings(max_pairs_per_language={"en": 5}).quota("ru")


def test_sentences_that_are_evaluation_texts_give_no_pair_and_are_counted(chain: dict[str, Path],
                                                                         tmp_path: Path) -> None:
    """The leakage guard: two sentences that give pairs, written (in other case and spacing) as an evaluation set, lose
    every pair; the ``leakage`` table and the drop reason count their links; every other pair is as without the
    guard, and under a binding quota the others fill it."""
    langs = {lang: chain[f"lang-{lang}"] for lang in DUMPS}
    shards = {lang: [chain[f"shard-{lang}-0"]] for lang in DUMPS}
    full = pl.read_parquet(chain["hn"] / "hard_negatives")
    key = ["lang", "page_id", "sent_id"]
    per_sentence = full.group_by(key).len().sort("len", *key, descending=[True, False, False, False])
    chosen = per_sentence.filter(pl.col("lang") == "en").head(1).vstack(
        per_sentence.filter(pl.col("lang") == "de").head(1))
    texts = full.join(chosen.select(key), on=key).unique(key).sort(key)["text"].to_list()
    (tmp_path / "eval.txt").write_text("\n".join(f"  {t.upper()}  " for t in texts) + "\n", encoding="utf-8")
    index = EvalTextIndex.from_settings(LeakageSettings(eval_sets=[EvalSetSpec(name="probe",
                                                                               path=tmp_path / "eval.txt")]))
    out = tmp_path / "guarded"
    out.mkdir()
    result = build_hard_negatives(HardNegativeSettings(), chain["entities"], langs, shards, out, index)
    hn = pl.read_parquet(out / "hard_negatives")
    assert hn.join(chosen.select(key), on=key).is_empty()
    # every link of those sentences, pair or not (the extract's links, by their sentence), is counted once
    links = pl.concat([pl.read_parquet(chain[f"lang-{lang}"] / "wiki_links").select(
        pl.lit(lang).alias("lang"), pl.col("page_id").cast(pl.Int64), pl.col("sent_id").cast(pl.Int32))
        for lang in DUMPS]).join(chosen.select(key), on=key)
    leak = pl.read_parquet(out / "leakage.parquet")
    assert dict(leak.select("lang", "units_removed").iter_rows()) == dict(links.group_by("lang").len().iter_rows())
    assert set(leak["eval_set"]) == {"probe"} and set(leak["corpus"]) == {"hard_negatives"}
    drops = pl.read_parquet(out / "ease_drop_counts.parquet")
    assert drops.filter(pl.col("reason") == "in_evaluation_set")["count"].sum() == links.height
    assert result.stats["links_leaked"] == links.height >= chosen["len"].sum() >= 2
    assert hn.equals(full.join(chosen.select(key), on=key, how="anti"))
    # the leaked links are counted instead of elsewhere: every link is still a pair or one counted drop
    all_links = sum(pl.read_parquet(chain[f"lang-{lang}"] / "wiki_links").height for lang in DUMPS)
    assert hn.height + drops.filter(pl.col("stage") == "hard_negatives")["count"].sum() == all_links
    # a binding quota fills from the other sentences (removed before sampling, not after: dropping them from the
    # unguarded sample would leave it short by the leaked pairs among its smallest hashes)
    n_en = hn.filter(pl.col("lang") == "en").height
    quota = HardNegativeSettings(max_pairs_per_language={"en": n_en - 1, "de": 10_000, "ru": 10_000})
    capped = tmp_path / "capped"
    capped.mkdir()
    build_hard_negatives(quota, chain["entities"], langs, shards, capped, index)
    en = pl.read_parquet(capped / "hard_negatives").filter(pl.col("lang") == "en")
    assert en.height == n_en - 1 and en.join(chosen.select(key), on=key).is_empty()
    # without evaluation sets the table is empty and nothing is dropped for it
    plain = pl.read_parquet(chain["hn"] / "leakage.parquet")
    assert plain.is_empty() and plain.columns == ["corpus", "eval_set", "lang", "units_removed"]


def test_a_language_without_sentences_leaks_nothing(chain: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "eval.txt").write_text("a sentence\n", encoding="utf-8")
    index = EvalTextIndex.from_settings(LeakageSettings(eval_sets=[EvalSetSpec(name="e", path=tmp_path / "eval.txt")]))
    assert leaking_sentences([tmp_path], "en", index).is_empty()  # a shard folder without a wiki_sentences table
    en = pl.read_parquet(chain["shard-en-0"] / "wiki_sentences")
    (tmp_path / "hit.txt").write_text(en["text"][3] + "\n", encoding="utf-8")
    hit = EvalTextIndex.from_settings(LeakageSettings(eval_sets=[EvalSetSpec(name="e", path=tmp_path / "hit.txt")]))
    found = leaking_sentences([chain["shard-en-0"]], "en", hit)
    assert found.height >= 1 and (en["page_id"][3], en["sent_id"][3]) in set(found.select("page_id", "sent_id")
                                                                             .iter_rows())


@pytest.mark.parametrize("cap_quota", [(10_000, 1_000_000), (2, 25)])
def test_pages_in_chunks_give_the_rows_of_one_pass(chain: dict[str, Path], tmp_path: Path,
                                                   cap_quota: tuple[int, int]) -> None:
    """Chunked pruning by cap and quota is exact: 3 pages at a time = all pages at once, drop counts included."""
    langs = {lang: chain[f"lang-{lang}"] for lang in DUMPS}
    shards = {lang: [chain[f"shard-{lang}-0"]] for lang in DUMPS}
    cap, quota = cap_quota
    outs = []
    for chunk in (3, 1_000_000):
        d = tmp_path / str(chunk)
        d.mkdir()
        build_hard_negatives(HardNegativeSettings(max_pairs_per_entity=cap, max_pairs_per_language=quota,
                                                  pages_per_chunk=chunk), chain["entities"], langs, shards, d)
        outs.append((pl.read_parquet(d / "hard_negatives"), pl.read_parquet(d / "ease_drop_counts.parquet")))
    (a, da), (b, db) = outs
    assert a.height > 0 and a.equals(b) and da.equals(db)
    if cap == 2:
        assert da.filter(pl.col("reason") == "over_entity_cap")["count"].sum() > 0
        assert da.filter(pl.col("reason") == "over_language_quota")["count"].sum() > 0


LINK_SCHEMA = {"page_id": pl.Int64, "sent_id": pl.Int32, "link_no": pl.Int32, "start": pl.Int32, "end": pl.Int32,
               "surface": pl.Utf8, "target": pl.Utf8, "target_page_id": pl.Int64}
TARGET_SCHEMA = {"page_id": pl.Int64, "target": pl.Utf8, "target_page_id": pl.Int64}
LINK_TITLES_SCHEMA = {"lang": pl.Utf8, "title": pl.Utf8, "entity": pl.Utf8, "qid": pl.Utf8}


def _write(folder: Path, lang: str, rows: list[tuple], schema: dict) -> None:
    d = folder / f"lang={lang}"
    d.mkdir(parents=True, exist_ok=True)
    pl.DataFrame(rows, schema=schema, orient="row").write_parquet(d / "part-00000.parquet")


def _subject_fixture(root: Path) -> tuple[Path, dict[str, Path], dict[str, list[Path]]]:
    """Two languages with the same Wikidata items under different page ids. Cities Q1 Berlin, Q2 Paris, Q4 Rome;
    countries Q5 Germany, Q6 France. The Berlin and Rome pages link Paris (Paris's candidates are the other two
    cities: each page's own subject is one of them), the Germany page links France (whose only candidate is Germany,
    the page's subject). No page links itself, so the same-page links never exclude the subject."""
    ents = root / "entities"
    ents.mkdir(parents=True)
    qids = ["Q1", "Q2", "Q4", "Q5", "Q6"]
    pl.DataFrame({"entity": qids, "in_vocab": [True] * 5}).write_parquet(ents / "entities.parquet")
    pl.DataFrame({"entity": qids, "type": ["city", "city", "city", "country", "country"]}).write_parquet(
        ents / "entity_types.parquet")
    pages = {"en": {"Q1": 10, "Q2": 11, "Q4": 12, "Q5": 13, "Q6": 14},
             "de": {"Q1": 207, "Q2": 203, "Q4": 201, "Q5": 202, "Q6": 209}}
    names = {"Q1": "Berlin", "Q2": "Paris", "Q4": "Rome", "Q5": "Germany", "Q6": "France"}
    pl.DataFrame([(lang, names[q], pid, q, q) for lang, m in pages.items() for q, pid in m.items()],
                 schema={"lang": pl.Utf8, "title": pl.Utf8, "page_id": pl.Int64, "entity": pl.Utf8, "qid": pl.Utf8},
                 orient="row").write_parquet(ents / "entity_titles.parquet")
    pl.DataFrame(schema=LINK_TITLES_SCHEMA).write_parquet(ents / "entity_link_titles.parquet")
    languages, shards = {}, {}
    for lang, m in pages.items():
        path, shard = root / f"lang-{lang}", root / f"shard-{lang}"
        links, sents, targets = [], [], []
        for page, target in (("Q1", "Q2"), ("Q4", "Q2"), ("Q5", "Q6")):
            pid = m[page]
            targets.append((pid, names[target], m[target]))
            for sent in range(8):  # several pairs per page: each draws its negative by its own hash
                text = f"{names[page]} {sent} and {names[target]}."
                start = text.index(names[target])
                sents.append((pid, sent, text))
                links.append((pid, sent, 0, start, start + len(names[target]), names[target], names[target],
                              m[target]))
        _write(path / "wiki_links", lang, links, LINK_SCHEMA)
        _write(path / "wiki_page_targets", lang, targets, TARGET_SCHEMA)
        _write(path / "wiki_pages", lang, [(pid, names[q]) for q, pid in m.items()],
               {"page_id": pl.Int64, "title": pl.Utf8})
        _write(shard / "wiki_sentences", lang, sents, {"page_id": pl.Int64, "sent_id": pl.Int32, "text": pl.Utf8})
        languages[lang], shards[lang] = path, [shard]
    return ents, languages, shards


@pytest.mark.parametrize("pages_per_chunk", [1, 200_000])
def test_the_page_subject_is_never_a_hard_negative_of_its_sentences(tmp_path: Path, pages_per_chunk: int) -> None:
    """EASE's ``origin_entity``: a sentence on Berlin's page about Paris never gets Berlin as its hard negative, in
    any language, even when Berlin shares Paris's type and is (one of) its only candidate(s)."""
    ents, languages, shards = _subject_fixture(tmp_path / "in")
    out = tmp_path / "out"
    out.mkdir()
    build_hard_negatives(HardNegativeSettings(pages_per_chunk=pages_per_chunk), ents, languages, shards, out)
    cands = pl.read_parquet(out / "entity_negative_candidates.parquet")
    paris = cands.filter(pl.col("entity") == "Q2")["candidates"][0].to_list()
    assert sorted(paris) == ["Q1", "Q4"]  # both other cities: the page's subject would be drawable
    assert cands.filter(pl.col("entity") == "Q6")["candidates"][0].to_list() == ["Q5"]
    hn = pl.read_parquet(out / "hard_negatives")
    assert set(hn["lang"]) == {"en", "de"}
    for lang in ("en", "de"):
        rows = hn.filter(pl.col("lang") == lang)
        assert rows.height == 16  # Berlin's and Rome's sentences; Germany's lost their only candidate
        assert set(rows["origin_entity"]) == {"Q1", "Q4"}
        for origin, negative, cs in rows.select("origin_entity", "negative", "candidates").iter_rows():
            assert origin not in cs and negative != origin
            assert cs == [{"Q1": "Q4", "Q4": "Q1"}[origin]]  # the other city is left, and drawn
    drops = pl.read_parquet(out / "ease_drop_counts.parquet")
    lost = drops.filter(pl.col("reason") == "all_candidates_linked_on_page")
    assert dict(lost.select("lang", "count").iter_rows()) == {"en": 8, "de": 8}
