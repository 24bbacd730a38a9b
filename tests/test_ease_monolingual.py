"""EASE's monolingual English setting: entities are link targets keyed by their title (no Wikidata needed), types are
infobox templates, and a pair whose entity has no type-based hard negative may be kept.

``corpora.entities.unlinked_titles: title`` makes a linked title with neither a page in the dump nor a Wikidata
sitelink the entity ``<lang>:<title>`` (counted for the vocabulary, looked up in Wikipedia2Vec by that title);
``corpora.hard_negatives.without_negative: keep`` keeps a pair without a hard negative, with a null ``negative``. Both
default to the earlier behaviour and then stay out of every cache key (``pipelines.key_defaults.KeyWhenSet``).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml
from conftest import REPO, SHARED_DATA
from wiki_chain import build_chain, pages_dump

from flows.graph import canonical
from pipelines.wikipedia.entities import EntitySettings
from pipelines.wikipedia.hard_negatives import HardNegativeSettings

EASE_EN = REPO / "configs" / "examples" / "shared-data-ease-en.yaml"
EASE_MULTI = REPO / "configs" / "examples" / "shared-data-ease.yaml"

# pages: Berlin, Paris and Vienna (infobox city), Germany (infobox country), a redirect Roma → Rome; Rome, Madrid,
# France and Atlantis have no page
PAGES = [
    ("Berlin", 1, None, "{{Infobox city\n| name = Berlin\n}}\nBerlin is a large city that is often compared with "
                        "[[Paris]] and with [[rome|the eternal city]] by many travel writers."),
    ("Paris", 2, None, "{{Infobox city\n| name = Paris\n}}\nParis is a city whose museums are visited by people from "
                       "[[Roma]] and from [[Madrid]] every year, and by nobody from [[Atlantis]]."),
    ("Roma", 3, "Rome", None),
    ("Germany", 4, None, "{{Infobox country\n| name = Germany\n}}\nGermany is a country in Europe whose capital is "
                         "[[Berlin]], whose western neighbour is [[France]] and whose southern neighbour has "
                         "[[Vienna]] as its capital."),
    ("Vienna", 5, None, "{{Infobox city\n| name = Vienna\n}}\nVienna is a city on the Danube that many people from "
                        "[[Berlin]] visit during the long summer months."),
]



def _rows(hn_dir: Path) -> dict[tuple[str, str], dict]:
    hn = pl.read_parquet(hn_dir / "hard_negatives")
    rows = {(r["origin_entity"], r["entity"]): r for r in hn.iter_rows(named=True)}
    assert len(rows) == hn.height
    return rows


def _drops(hn_dir: Path) -> dict[str, int]:
    drops = pl.read_parquet(hn_dir / "ease_drop_counts.parquet").filter(pl.col("stage") == "hard_negatives")
    return dict(drops.select("reason", "count").iter_rows())


# ------------------------------------------------------------------------------------------------ settings, keys


def test_both_settings_default_to_the_earlier_behaviour_and_stay_out_of_the_dump() -> None:
    assert EntitySettings().unlinked_titles == "drop" and HardNegativeSettings().without_negative == "drop"
    assert "unlinked_titles" not in canonical(EntitySettings())
    assert "unlinked_titles" not in canonical(EntitySettings(unlinked_titles="drop"))
    assert canonical(EntitySettings(unlinked_titles="title"))["unlinked_titles"] == "title"
    assert "without_negative" not in canonical(HardNegativeSettings())
    assert canonical(HardNegativeSettings(without_negative="keep"))["without_negative"] == "keep"
    # the fields that were there keep their dump; pages_per_chunk stays excluded
    assert canonical(HardNegativeSettings()) == {"negatives_per_entity": 10, "max_pairs_per_entity": 10_000,
                                                 "max_pairs_per_language": 1_000_000, "seed": 42}
    assert canonical(EntitySettings()) == {"min_link_count": 10, "types": "auto"}
    with pytest.raises(ValueError):
        EntitySettings(unlinked_titles="keep")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        HardNegativeSettings(without_negative="title")  # type: ignore[arg-type]


def _rebased(config: Path, out: Path, **corpora: dict) -> Path:
    """``config`` with its relative paths made absolute (so it can live in ``out``) and ``corpora`` merged in."""
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    wiki = raw["sources"]["wikipedia"]
    wiki["dumps"] = {lang: str((config.parent / p).resolve()) for lang, p in wiki["dumps"].items()}
    if "wikidata" in wiki:
        wiki["wikidata"] = str((config.parent / wiki["wikidata"]).resolve())
    for section, values in corpora.items():
        raw["corpora"].setdefault(section, {}).update(values)
    path = out / config.name
    path.write_text(yaml.safe_dump(raw, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def test_an_existing_configs_cache_keys_do_not_move_and_setting_either_moves_only_its_node(tmp_path: Path) -> None:
    """shared-data-ease.yaml with the two settings written out at their defaults is the snapshot's DAG, node by node
    (``tests/fixtures/dag_specs``); set, each changes the config of its own node only (the nodes after it move through
    their input hashes, as for any corpus setting)."""
    from tests.dag_specs import dag_specs, snapshot_path

    if not SHARED_DATA.exists():
        pytest.skip(f"{EASE_MULTI.name} reads ../shared/data, not available at {SHARED_DATA}")
    expected = json.loads(snapshot_path(EASE_MULTI).read_text(encoding="utf-8"))
    same = json.loads(json.dumps(dag_specs(_rebased(EASE_MULTI, tmp_path, entities={"unlinked_titles": "drop"},
                                                    hard_negatives={"without_negative": "drop"}))))
    assert same == expected
    for section, key, value, node in (("entities", "unlinked_titles", "title", "entities"),
                                      ("hard_negatives", "without_negative", "keep", "hard_negatives")):
        d = tmp_path / key
        d.mkdir()
        moved = json.loads(json.dumps(dag_specs(_rebased(EASE_MULTI, d, **{section: {key: value}}))))
        assert moved.keys() == expected.keys()
        assert {n for n in moved if moved[n] != expected[n]} == {node}
        assert moved[node]["config"] != expected[node]["config"]


def test_the_english_config_wires_both_settings_into_its_nodes() -> None:
    from flows.config import config_warnings, load_config
    from flows.dag import build_dag

    cfg = load_config(EASE_EN, data_root=Path("/nonexistent/polysent-data-root"))
    assert cfg.sources.wikipedia is not None and cfg.sources.wikipedia.wikidata is None
    assert sorted(cfg.sources.wikipedia.dumps) == ["en"]
    nodes = build_dag(cfg)
    assert "wikidata" not in nodes
    assert nodes["entities"].config["settings"]["unlinked_titles"] == "title"
    assert nodes["entities"].config["type_source"] == "infobox"
    assert nodes["hard_negatives"].config["settings"]["without_negative"] == "keep"
    assert nodes["entity_vectors"].deps == {"entities": "entities", "wiki_extract.en": "wiki_extract.en"}
    assert config_warnings(cfg, EASE_EN) == []


def test_types_none_warns_of_an_empty_corpus_only_while_pairs_without_a_negative_are_dropped(tmp_path: Path) -> None:
    from flows.config import config_warnings, load_config

    dump = pages_dump(tmp_path / "enwiki.xml.bz2", PAGES)
    raw = {"name": "t", "data_root": str(tmp_path / "data"), "sources": {"wikipedia": {"dumps": {"en": str(dump)}}},
           "corpora": {"entities": {"types": "none"}}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    (warning,) = config_warnings(load_config(path), path)
    assert "corpora.entities.types: none" in warning
    raw["corpora"]["hard_negatives"] = {"without_negative": "keep"}
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert config_warnings(load_config(path), path) == []
    # an ease objective that would drop every pair keep wrote without a negative says so, at its line
    raw["training"] = {"ease": {"steps": 10, "warmup_steps": 1,
                                "objectives": [{"kind": "ease", "batch_size": 8}]}}
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    (warning,) = config_warnings(load_config(path), path)
    assert "training.ease.objectives[0]: an ease objective with hard_negatives: true drops every pair" in warning
    raw["training"]["ease"]["objectives"][0]["hard_negatives"] = False
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert config_warnings(load_config(path), path) == []


# ------------------------------------------------------------------------------------------------ the stages


@pytest.fixture(scope="module")
def chains(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Path]]:
    """The hand-made dump without Wikidata, infobox types, every link counted: the defaults, ``unlinked_titles:
    title``, and that with ``without_negative: keep``."""
    root = tmp_path_factory.mktemp("ease-en")
    dump = pages_dump(root / "enwiki.xml.bz2", PAGES)
    return {name: build_chain({"en": dump}, root / name, None,
                              entities=EntitySettings(min_link_count=0, types="infobox", unlinked_titles=titles),
                              hard_negatives=HardNegativeSettings(without_negative=negatives))
            for name, titles, negatives in (("default", "drop", "drop"), ("title", "title", "drop"),
                                            ("keep", "title", "keep"), ("keep_only", "drop", "keep"))}


def test_unlinked_titles_title_makes_every_linked_title_an_entity_keyed_by_its_title(
        chains: dict[str, dict[str, Path]]) -> None:
    default = pl.read_parquet(chains["default"]["entities"] / "entities.parquet")
    assert sorted(default["entity"]) == ["en:Berlin", "en:Germany", "en:Paris", "en:Vienna"]  # pages only
    ents = {r["entity"]: r for r in pl.read_parquet(chains["title"]["entities"] / "entities.parquet")
            .iter_rows(named=True)}
    assert sorted(ents) == ["en:Atlantis", "en:Berlin", "en:France", "en:Germany", "en:Madrid", "en:Paris",
                            "en:Rome", "en:Vienna"]
    # "rome" (normalised) and [[Roma]] (a redirect to the missing Rome) are the same entity, its title the link target
    rome = ents["en:Rome"]
    assert (rome["title"], rome["qid"], rome["link_count"], rome["links_without_page"], rome["n_languages"],
            rome["in_vocab"]) == ("Rome", None, 2, 2, 0, True)
    assert ents["en:Berlin"]["link_count"] == 2 and ents["en:Berlin"]["links_without_page"] == 0
    # the pages keep their rows: the same as with the defaults
    pages = pl.read_parquet(chains["title"]["entities"] / "entities.parquet").filter(pl.col("n_languages") > 0)
    assert pages.sort("entity").equals(default.sort("entity"))
    link_titles = pl.read_parquet(chains["title"]["entities"] / "entity_link_titles.parquet")
    assert link_titles.rows() == [("en", t, f"en:{t}", None) for t in ("Atlantis", "France", "Madrid", "Rome")]
    assert pl.read_parquet(chains["default"]["entities"] / "entity_link_titles.parquet").height == 0
    # no page, no infobox: the title-keyed entities have no type
    types = pl.read_parquet(chains["title"]["entities"] / "entity_types.parquet")
    assert sorted(set(types["entity"])) == ["en:Berlin", "en:Germany", "en:Paris", "en:Vienna"]


def test_without_negative_keep_keeps_the_pairs_without_a_hard_negative_with_a_null_negative(
        chains: dict[str, dict[str, Path]]) -> None:
    dropped, kept = _rows(chains["title"]["hn"]), _rows(chains["keep"]["hn"])
    with_negative = {("en:Berlin", "en:Paris"), ("en:Germany", "en:Berlin"), ("en:Germany", "en:Vienna"),
                     ("en:Vienna", "en:Berlin")}
    assert set(dropped) == with_negative
    without = {("en:Berlin", "en:Rome"), ("en:Paris", "en:Rome"), ("en:Paris", "en:Madrid"),
               ("en:Paris", "en:Atlantis"), ("en:Germany", "en:France")}
    assert set(kept) == with_negative | without
    # the pairs with a hard negative are the same rows, candidates and negative included
    for key in with_negative:
        assert kept[key] == dropped[key]
    assert dropped[("en:Berlin", "en:Paris")]["candidates"] == ["en:Vienna"]  # Berlin: the subject, Rome not typed
    for key in without:
        r = kept[key]
        assert r["negative"] is None and r["candidates"] == [] and r["type"] is None
        assert r["text"][r["start"]:r["end"]] == r["surface"]
    assert kept[("en:Berlin", "en:Rome")]["surface"] == "the eternal city"
    # drop: the untyped positives are dropped as such; keep: nothing is dropped for want of a negative
    assert _drops(chains["title"]["hn"])["positive_without_type_candidates"] == 5
    keep_drops = _drops(chains["keep"]["hn"])
    assert keep_drops["positive_without_type_candidates"] == keep_drops["all_candidates_linked_on_page"] == 0
    assert keep_drops["link_target_missing"] == 0  # every linked title is an entity now
    # keep alone (the defaults' entities: pages only, every one typed): every pair has a negative, nothing changes
    assert _rows(chains["keep_only"]["hn"]) == dropped
    assert _drops(chains["keep_only"]["hn"])["link_target_missing"] == 5


def test_without_negative_keep_also_keeps_a_pair_whose_candidates_are_all_linked_on_its_page(tmp_path: Path) -> None:
    """A page linking all three cities leaves each of their pairs there without a candidate (every other city is
    linked on the page): dropped by default, kept with ``keep`` (with the entity's type, and no negative)."""
    pages = [*PAGES, ("Europe", 6, None, "Europe is a continent where [[Berlin]] and [[Paris]] and [[Vienna]] are "
                                         "among the most visited of all the capital cities.")]
    built = {}
    for negatives in ("drop", "keep"):
        root = tmp_path / negatives
        root.mkdir()
        built[negatives] = build_chain({"en": pages_dump(root / "enwiki.xml.bz2", pages)}, root / "c", None,
                                       entities=EntitySettings(min_link_count=0, types="infobox"),
                                       hard_negatives=HardNegativeSettings(without_negative=negatives))
    dropped, kept = _rows(built["drop"]["hn"]), _rows(built["keep"]["hn"])
    europe = {k for k in kept if k[0] == "en:Europe"}
    assert europe == {("en:Europe", "en:Berlin"), ("en:Europe", "en:Paris"), ("en:Europe", "en:Vienna")}
    assert not any(k[0] == "en:Europe" for k in dropped)
    for key in europe:
        assert kept[key]["negative"] is None and kept[key]["candidates"] == []
        assert kept[key]["type"] == "infobox:en:Infobox city"
    assert _drops(built["drop"]["hn"])["all_candidates_linked_on_page"] == 3
    assert _drops(built["keep"]["hn"])["all_candidates_linked_on_page"] == 0


# ------------------------------------------------------------------------------------------------ the English sample


@pytest.mark.shared_data
def test_on_the_english_sample_every_linked_entity_the_model_knows_gets_its_vector(tmp_path: Path) -> None:
    """The English sample alone, no Wikidata, infobox types, EASE's > 10 links (shared-data-ease-en.yaml's corpora):
    with ``unlinked_titles: title`` every vocabulary entity that Wikipedia2Vec trained on the sample has a vector for —
    a link target, its page in the sample or not — gets exactly that vector in ``entity_vectors``. With the defaults
    the vocabulary is the 2 linked entities whose page is in the sample (Angola, Aristotle)."""
    if importlib.util.find_spec("wikipedia2vec") is None:
        pytest.skip("wikipedia2vec is not installed (pip install -e '.[entity-vectors]')")
    dump = SHARED_DATA / "wikipedia" / "enwiki-sample.xml.bz2"
    if not dump.is_file():
        pytest.skip(f"the English Wikipedia sample is not available at {dump} (set POLYSENT_SHARED_DATA)")
    from pipelines.wikipedia.entity_vectors import (
        EntityVectorSettings,
        build_entity_vectors,
        load_pretrained,
        train_model,
    )

    corpora = yaml.safe_load(EASE_EN.read_text(encoding="utf-8"))["corpora"]
    entities, negatives = EntitySettings(**corpora["entities"]), HardNegativeSettings(**corpora["hard_negatives"])
    assert (entities.unlinked_titles, negatives.without_negative) == ("title", "keep")
    before = build_chain({"en": dump}, tmp_path / "before", None, entities=EntitySettings(
        min_link_count=entities.min_link_count, types=entities.types))
    after = build_chain({"en": dump}, tmp_path / "after", None, entities=entities, hard_negatives=negatives)
    # the config's model but for size and speed (its dictionary: the same link-count rule, min_entity_count 5)
    model_path = train_model(dump, EntityVectorSettings(mode="train", dim=8, iterations=1, pool_size=1,
                                                        word_neg_power=0.0, link_mentions=False),
                             tmp_path / "w2v", progress=False)
    settings = EntityVectorSettings(mode="pretrained", pretrained=model_path, dim=8)
    vectors = {}
    for name, dirs in (("before", before), ("after", after)):
        out = tmp_path / f"vec-{name}"
        out.mkdir()
        build_entity_vectors(settings, None, dirs["entities"], dirs["lang-en"], out)
        vec = pl.read_parquet(out / "entity_vectors.parquet")
        vectors[name] = {e: np.asarray(v, dtype=np.float32)
                         for e, v in zip(vec["entity"], vec["vector"].to_list(), strict=True)}

    # what the model has, read independently of the stage: its entities (link targets, by title) as en:<title>
    model = load_pretrained(model_path)
    vocab = set(pl.read_parquet(after["entities"] / "entities.parquet").filter("in_vocab")["entity"])
    expected = {f"en:{e.title}": e.title for e in model.dictionary.entities() if f"en:{e.title}" in vocab}
    got = vectors["after"]
    assert set(got) <= vocab
    dropped = sorted(set(expected) - set(got))
    assert not dropped, f"linked entities the model has a vector for, exported without it: {dropped}"
    for entity, title in expected.items():
        np.testing.assert_array_equal(got[entity], model.get_entity_vector(title), err_msg=f"{entity} ({title})")
    # the sample: 15 link targets with more than 10 links, 2 of them with a page there; all 15 have a vector now
    ents = pl.read_parquet(after["entities"] / "entities.parquet").filter("in_vocab")
    assert ents.height == 15 and int((ents["n_languages"] > 0).sum()) == 2
    assert {"en:China", "en:Soviet Union"} <= set(got) and len(got) == len(expected) == 15
    before_vocab = set(pl.read_parquet(before["entities"] / "entities.parquet").filter("in_vocab")["entity"])
    assert before_vocab == set(vectors["before"]) == {"en:Angola", "en:Aristotle"}
    # the corpus: every link of those entities is a pair (no entity has a type-based hard negative here)
    hn = pl.read_parquet(after["hn"] / "hard_negatives")
    assert hn.height == int(ents["link_count"].sum()) == 200 and set(hn["entity"]) == set(got)
    assert hn["negative"].null_count() == hn.height
    assert pl.read_parquet(before["hn"] / "hard_negatives").height == 0


def test_the_ease_objectives_reader_takes_a_null_negative_as_no_hard_negative(
        chains: dict[str, dict[str, Path]], tmp_path: Path) -> None:
    """How training reads ``without_negative: keep`` rows (``models.training.corpus_tables.load_entity_pairs``, what
    the ``ease`` objective calls): with its ``hard_negatives: true`` the rows without one are dropped, with ``false``
    every row trains, its negative the [PAD] id 0. A table where no row has one is refused with ``true``."""
    from models.training.corpus_tables import CorpusError, load_entity_pairs

    hn = chains["keep"]["hn"] / "hard_negatives"
    entities = sorted(set(pl.read_parquet(hn)["entity"]))
    vectors = tmp_path / "entity_vectors.parquet"
    pl.DataFrame({"entity": entities, "title": entities, "vector": [[float(i)] * 4 for i in range(len(entities))]},
                 schema={"entity": pl.Utf8, "title": pl.Utf8, "vector": pl.Array(pl.Float32, 4)}).write_parquet(vectors)
    rows = pl.read_parquet(hn)
    with_negative = load_entity_pairs(hn, vectors, require_negative=True)
    assert len(with_negative) == rows["negative"].is_not_null().sum() == 4 and (with_negative.negative > 0).all()
    every = load_entity_pairs(hn, vectors, require_negative=False)
    assert len(every) == rows.height == 9
    assert int((every.negative == 0).sum()) == rows["negative"].null_count() == 5
    assert None not in every.entities and "" not in every.entities
    only_without = tmp_path / "without"
    (only_without / "lang=en").mkdir(parents=True)
    rows.filter(pl.col("negative").is_null()).drop("lang").write_parquet(only_without / "lang=en" / "p.parquet")
    with pytest.raises(CorpusError, match="no row has a hard negative"):
        load_entity_pairs(only_without, vectors, require_negative=True)
