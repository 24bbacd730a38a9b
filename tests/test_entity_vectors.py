"""Wikipedia2Vec entity vectors: the link-graph shape bug of wikipedia2vec 2.0.0, our fixed builder, training with the
link graph on a hand-written dump, Parquet export, pretrained loading."""

from __future__ import annotations

import bz2
import importlib.util
import random
import re
import sys
import threading
import time
from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from pipelines.wikipedia.entity_vectors import (
    EntityModelError,
    EntityVectorSettings,
    build_link_graph,
    export_vectors,
    load_pretrained,
    model_entities,
    model_for,
    train_model,
)

needs_w2v = pytest.mark.skipif(
    importlib.util.find_spec("wikipedia2vec") is None,
    reason="wikipedia2vec is not installed (optional extra: pip install 'polysent[entity-vectors]')",
)

DIM = 8

# (title, wikitext, redirect target). With min_entity_count=1 every link target is an entity. The Greek letters link
# each other (they get link-graph edges). "Index of curiosities" is linked by no page, so it is no entity and its links
# to the Z-titles create no edge: Zither, Zygote, Zeppelin, Zebra crossing are entities without any edge, and the
# marisa trie gives them the highest entity indices — exactly the condition that crashes wikipedia2vec 2.0.0.
PAGES: list[tuple[str, str, str | None]] = [
    ("Alpha", "Alpha is the first letter and it comes before [[Beta]] and [[Gamma]] in the [[Epsilon|old]] "
              "alphabet of the Greeks.", None),
    ("Beta", "Beta follows [[Alpha]] and precedes [[Gamma]] and also [[Delta]] in the usual order.", None),
    ("Gamma", "Gamma is a letter written near [[Beta]] and [[alpha]] in the Greek script of old.", None),
    ("Delta", "Delta comes after [[Gamma#History|gamma]] and refers back to [[Alpha (letter)|the first letter]] "
              "of the alphabet.", None),
    ("Epsilon", "Epsilon is a vowel that follows [[Delta]] in most of the modern alphabets today.", None),
    ("Alpha (letter)", "#REDIRECT [[Alpha]]", "Alpha"),
    ("Greek alphabet", "The Greek alphabet contains [[Alpha]], [[Beta]], [[Gamma]], [[Delta]] and [[Epsilon]] "
                       "among its letters.", None),
    ("Index of curiosities", "This index lists [[Zither]], [[Zygote]], [[Zeppelin]] and [[Zebra crossing]] among "
                             "many other curiosities.", None),
    ("Zither", "A zither is a stringed instrument with many strings across a flat board.", None),
    ("Zygote", "A zygote is the cell formed when two gametes join during fertilisation.", None),
    ("Zeppelin", "A zeppelin is a rigid airship named after the count who built the first ones.", None),
    ("Zebra crossing", "A zebra crossing is a pedestrian crossing marked with broad white stripes.", None),
    ("Lambda", "Lambda is another letter of the alphabet that nobody links to here at all.", None),
    ("Omega", "Omega is the last letter and it points back to [[Alpha]] once more in the text.", None),
]


def write_dump(path: Path, pages: list[tuple[str, str, str | None]] = PAGES) -> Path:
    """A minimal MediaWiki export (xml:lang last on the first line: wikipedia2vec reads the language from it)."""
    parts = [
        '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" xml:lang="en">',
        "  <siteinfo>\n    <sitename>Wikipedia</sitename>\n    <dbname>enwiki</dbname>\n"
        "    <base>https://en.wikipedia.org/wiki/Main_Page</base>\n    <generator>MediaWiki 1.42</generator>\n"
        "    <case>first-letter</case>\n    <namespaces>\n"
        '      <namespace key="0" case="first-letter" />\n'
        '      <namespace key="14" case="first-letter">Category</namespace>\n'
        "    </namespaces>\n  </siteinfo>",
    ]
    all_pages = [*pages, ("Category:Letters", "Letters of [[Alpha]] and [[Zither]].", None)]
    for pid, (title, text, redirect) in enumerate(all_pages, 1):
        ns = 14 if title.startswith("Category:") else 0
        red = f'\n    <redirect title="{escape(redirect)}" />' if redirect else ""
        parts.append(
            f"  <page>\n    <title>{escape(title)}</title>\n    <ns>{ns}</ns>\n    <id>{pid}</id>{red}\n"
            f"    <revision>\n      <id>{1000 + pid}</id>\n"
            f'      <text bytes="{len(text)}" xml:space="preserve">{escape(text)}</text>\n'
            "    </revision>\n  </page>"
        )
    parts.append("</mediawiki>\n")
    path.write_bytes(bz2.compress("\n".join(parts).encode("utf-8")))
    return path


def tiny_settings(**kw: object) -> EntityVectorSettings:
    base: dict[str, object] = dict(mode="train", dim=DIM, iterations=1, window=2, negative=2, min_entity_count=1,
                                   min_word_count=1, pool_size=2, word_neg_power=0.0)
    base.update(kw)
    return EntityVectorSettings(**base)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(dump, model.pkl): our pipeline, link graph on, on the crash-condition dump."""
    if importlib.util.find_spec("wikipedia2vec") is None:
        pytest.skip("wikipedia2vec is not installed")
    root = tmp_path_factory.mktemp("w2v")
    dump = write_dump(root / "enwiki-tiny.xml.bz2")
    model = train_model(dump, tiny_settings(), root / "work", progress=False)
    return dump, model


# ------------------------------------------------------------------------------------------ settings / no package


def test_settings_validate_and_document_every_field() -> None:
    s = EntityVectorSettings()
    assert s.mode == "none" and s.dim == 768 and s.link_graph is True
    assert all(f.description for f in EntityVectorSettings.model_fields.values())
    with pytest.raises(ValidationError, match="needs `pretrained`"):
        EntityVectorSettings(mode="pretrained")
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        EntityVectorSettings(dims=5)
    assert model_for(EntityVectorSettings(mode="none"), Path("unused")) is None


def test_clear_error_without_wikipedia2vec(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "wikipedia2vec", None)  # import fails as if not installed
    with pytest.raises(ImportError, match=r"polysent\[entity-vectors\]"):
        load_pretrained(tmp_path / "model.pkl")


# ------------------------------------------------------------------------------------------------ the bug + fix


@needs_w2v
def test_upstream_link_graph_is_too_short_and_training_crashes(tmp_path: Path) -> None:
    from wikipedia2vec import Dictionary, DumpDB, Wikipedia2Vec
    from wikipedia2vec.link_graph import LinkGraph
    from wikipedia2vec.utils.tokenizer import get_tokenizer
    from wikipedia2vec.utils.wiki_dump_reader import WikiDumpReader

    dump = write_dump(tmp_path / "enwiki-tiny.xml.bz2")
    DumpDB.build(WikiDumpReader(str(dump)), str(tmp_path / "dump.db"), pool_size=1, chunk_size=10)
    db = DumpDB(str(tmp_path / "dump.db"))
    tok = get_tokenizer("regexp")
    dic = Dictionary.build(db, tok, lowercase=True, min_word_count=1, min_entity_count=1, min_paragraph_len=5,
                           category=False, disambi=False, pool_size=1, chunk_size=10, progressbar=False)
    n, off = dic.entity_size, dic.entity_offset
    titles = {e.index - off: e.title for e in dic.entities()}
    assert set(titles.values()) == {"Alpha", "Beta", "Gamma", "Delta", "Epsilon", "Zither", "Zygote", "Zeppelin",
                                    "Zebra crossing"}

    upstream = LinkGraph.build(db, dic, pool_size=1, chunk_size=10, progressbar=False).serialize()
    ours = build_link_graph(db, dic, pool_size=1, progressbar=False)
    fixed = ours.serialize()

    # the cause: coo_matrix without shape= stops at the last entity that has an edge
    edgeless = [titles[i] for i in range(n) if len(ours.neighbor_indices(i + off)) == 0]
    assert set(edgeless) == {"Zither", "Zygote", "Zeppelin", "Zebra crossing"}
    last_linked = max(i for i in range(n) if titles[i] not in edgeless)
    assert last_linked < n - 1  # the highest entity indices are edgeless: the crash condition
    assert len(upstream["indptr"]) == last_linked + 2 < n + 1
    broken = LinkGraph.load(dict(upstream), dic)
    with pytest.raises(IndexError, match="out of bounds"):
        broken.neighbor_indices(off + n - 1)  # what training calls for every entity

    # the fix: same edges, indptr padded to entity_size + 1
    assert len(fixed["indptr"]) == n + 1
    np.testing.assert_array_equal(fixed["indices"], upstream["indices"])
    np.testing.assert_array_equal(fixed["indptr"][: len(upstream["indptr"])], upstream["indptr"])
    assert set(fixed["indptr"][len(upstream["indptr"]) - 1:].tolist()) == {len(upstream["indices"])}
    alpha = {dic.get_entity_by_index(int(i)).title for i in ours.neighbor_indices(dic.get_entity_index("Alpha"))}
    assert alpha == {"Beta", "Gamma", "Epsilon", "Delta"}  # Delta via the redirect "Alpha (letter)"; not Omega

    # and the real thing: upstream training with its link graph dies in the workers
    kw = dict(dim_size=DIM, init_alpha=0.025, min_alpha=0.0001, window=2, negative=2, word_neg_power=0.0,
              entity_neg_power=0.0, sample=1e-4, iteration=1, entities_per_page=10, pool_size=1, chunk_size=10,
              progressbar=False)
    with pytest.raises(IndexError, match="out of bounds"):
        Wikipedia2Vec(dic).train(db, LinkGraph.load(dict(upstream), dic), None, tok, None, **kw)
    model = Wikipedia2Vec(dic)
    model.train(db, LinkGraph.load(dict(fixed), dic), None, tok, None, **kw)
    assert model.get_entity_vector("Zeppelin").shape == (DIM,)


@needs_w2v
def test_no_entity_links_at_all(tmp_path: Path) -> None:
    """Upstream cannot even build the graph (no shape to infer from empty arrays); ours gives empty rows."""
    from wikipedia2vec import Dictionary, DumpDB
    from wikipedia2vec.link_graph import LinkGraph
    from wikipedia2vec.utils.tokenizer import get_tokenizer
    from wikipedia2vec.utils.wiki_dump_reader import WikiDumpReader

    dump = write_dump(tmp_path / "enwiki-nolinks.xml.bz2", [p for p in PAGES if p[0] in {
        "Index of curiosities", "Zither", "Zygote", "Zeppelin", "Zebra crossing", "Lambda"}])
    DumpDB.build(WikiDumpReader(str(dump)), str(tmp_path / "dump.db"), pool_size=1, chunk_size=10)
    db = DumpDB(str(tmp_path / "dump.db"))
    dic = Dictionary.build(db, get_tokenizer("regexp"), lowercase=True, min_word_count=1, min_entity_count=1,
                           min_paragraph_len=5, category=False, disambi=False, pool_size=1, chunk_size=10,
                           progressbar=False)
    assert dic.entity_size == 4
    with pytest.raises(ValueError, match="cannot infer dimensions"):
        LinkGraph.build(db, dic, pool_size=1, chunk_size=10, progressbar=False)
    graph = build_link_graph(db, dic, pool_size=1, progressbar=False).serialize()
    assert graph["indptr"].tolist() == [0] * 5 and len(graph["indices"]) == 0


@needs_w2v
def test_train_with_link_graph_writes_model(trained: tuple[Path, Path]) -> None:
    _dump, model_path = trained
    work = model_path.parent
    assert {p.name for p in work.iterdir()} >= {"dump.db", "dictionary.pkl", "link_graph.pkl", "mention_db.pkl",
                                                 "model.pkl", "model.json"}
    assert not [p for p in work.iterdir() if ".tmp-" in p.name or p.name.endswith("-lock")]
    model = load_pretrained(model_path, dim=DIM)
    assert model.train_params["link_graph"]  # trained with (our) link graph
    assert model.syn0.shape[1] == DIM and np.isfinite(model.syn0).all()
    counts = model_entities(model_path)
    assert set(counts["title"]) >= {"Alpha", "Zither"}
    assert counts.filter(pl.col("title") == "Alpha")["count"].item() == 5  # 4 direct links + 1 via its redirect
    assert set(model_entities(model_path, min_count=2)["title"]) == {"Alpha", "Beta", "Gamma", "Delta", "Epsilon"}


# ------------------------------------------------------------------------------------------------------ export


@needs_w2v
def test_export_only_vocabulary_rows_with_redirects(trained: tuple[Path, Path], tmp_path: Path) -> None:
    _dump, model_path = trained
    entities = pl.DataFrame({
        "entity": ["Q1", "Q10", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7", "Q1"],
        "title": ["Alpha", "Alpha (letter)", "Alfa", "beta", "Gamma#History", "Nonexistent page", "Greek alphabet",
                  "Zither", "Beta"],
    })
    out = tmp_path / "vec" / "entity_vectors.parquet"
    stats = export_vectors(model_path, entities, out, dim=DIM, redirects={"Alfa": "Alpha (letter)"})

    assert stats["requested"] == 9 and stats["duplicate_keys"] == 1
    assert stats["found"] == 6 and stats["missing"] == 2
    assert stats["missing_examples"] == ["Nonexistent page", "Greek alphabet"]  # a page, but never linked
    assert stats["found_by"] == {"exact": 2, "model_redirect": 1, "redirect": 1, "normalised": 2}
    table = pq.read_table(out)
    assert table.schema.field("vector").type == pa.list_(pa.float32(), DIM)
    assert table.schema.field("entity").type == pa.string() and table.schema.field("title").type == pa.string()
    df = pl.from_arrow(table)
    assert df["entity"].to_list() == ["Q1", "Q10", "Q2", "Q3", "Q4", "Q7"]
    vec = {e: np.asarray(v, dtype=np.float32) for e, v in zip(df["entity"], df["vector"].to_list(), strict=True)}
    model = load_pretrained(model_path)
    np.testing.assert_array_equal(vec["Q1"], model.get_entity_vector("Alpha"))
    np.testing.assert_array_equal(vec["Q2"], vec["Q1"])  # Alfa → Alpha (letter) → Alpha
    np.testing.assert_array_equal(vec["Q3"], model.get_entity_vector("Beta"))
    np.testing.assert_array_equal(vec["Q4"], model.get_entity_vector("Gamma"))
    assert not [p for p in out.parent.iterdir() if p != out]  # atomic: no temporary left

    # list input and an empty result still give the fixed-size schema
    stats = export_vectors(model_path, [("X", "Nothing here")], out, dim=DIM)
    assert stats["found"] == 0 and pq.read_table(out).schema.field("vector").type == pa.list_(pa.float32(), DIM)


@needs_w2v
def test_pretrained_errors_are_clear(trained: tuple[Path, Path], tmp_path: Path) -> None:
    _dump, model_path = trained
    with pytest.raises(EntityModelError, match=rf"{re.escape(str(model_path))}: .*dimension {DIM}, but dimension 768"):
        load_pretrained(model_path, dim=768)
    with pytest.raises(EntityModelError, match="dimension 768"):
        export_vectors(model_path, [("Q1", "Alpha")], tmp_path / "v.parquet", dim=768)
    settings = EntityVectorSettings(mode="pretrained", pretrained=model_path, dim=16)
    with pytest.raises(EntityModelError, match=rf"dimension {DIM}, but dimension 16"):
        model_for(settings, tmp_path)
    assert model_for(settings.model_copy(update={"dim": DIM}), tmp_path) == model_path
    with pytest.raises(FileNotFoundError, match=r"absent\.pkl"):
        load_pretrained(tmp_path / "absent.pkl")
    junk = tmp_path / "junk.pkl"
    junk.write_bytes(b"enwiki 2 3\nAlpha 0.1 0.2 0.3\n")
    with pytest.raises(EntityModelError, match="not a Wikipedia2Vec model"):
        load_pretrained(junk)
    assert not (tmp_path / "v.parquet").exists()


@needs_w2v
def test_train_rejects_plain_xml(tmp_path: Path) -> None:
    xml = tmp_path / "dump.xml"
    xml.write_text("<mediawiki/>")
    with pytest.raises(ValueError, match=r"bz2-compressed"):
        train_model(xml, tiny_settings(), tmp_path / "work")


@needs_w2v
def test_training_refuses_other_wikipedia2vec_versions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import pipelines.wikipedia.entity_vectors as ev

    monkeypatch.setattr(ev.metadata, "version", lambda name: "2.1.0")
    with pytest.raises(RuntimeError, match=r"wikipedia2vec 2\.1\.0 is installed.*2\.0\.x"):
        train_model(write_dump(tmp_path / "d.xml.bz2"), tiny_settings(), tmp_path / "work")


def test_stage_exports_vocabulary_vectors_of_the_pipeline_entities(tmp_path: Path) -> None:
    """The ``entity_vectors`` node: train on the sample dump, export the ``entities`` vocabulary by its en titles."""
    pytest.importorskip("wikipedia2vec", reason="wikipedia2vec not installed (pip install -e '.[entity-vectors]')")
    import polars as pl
    from conftest import SAMPLE
    from wiki_chain import build_chain

    from pipelines.wikipedia.entities import EntitySettings
    from pipelines.wikipedia.entity_vectors import build_entity_vectors

    dump = SAMPLE / "wikipedia" / "enwiki-sample.xml.bz2"
    dirs = build_chain({"en": dump}, tmp_path / "c", SAMPLE / "wikidata" / "entities.jsonl",
                       entities=EntitySettings(min_link_count=1))
    settings = EntityVectorSettings(mode="train", language="en", dim=8, iterations=1, min_entity_count=1,
                                    min_word_count=1, word_neg_power=0.0, pool_size=1, link_mentions=False)
    out = tmp_path / "vec"
    out.mkdir()
    result = build_entity_vectors(settings, dump, dirs["entities"], dirs["lang-en"], out)
    vec = pl.read_parquet(out / "entity_vectors.parquet")
    vocab = pl.read_parquet(dirs["entities"] / "entities.parquet").filter("in_vocab")
    assert vec.height > 20 and set(vec["entity"]) <= set(vocab["entity"])
    assert vec.schema["vector"] == pl.Array(pl.Float32, 8)
    assert "Q64" in set(vec["entity"])  # Berlin, by its en title
    assert result.stats["vocabulary"] == vocab.height
    # one worker: a rebuild is byte-identical (the pipeline's kill-and-rerun guarantee), and the model is scratch —
    # also when the stage runs on a worker thread beside threads that draw from the process-wide random streams, as
    # Prefect's do (websocket frame masks, run names): the cause of issue 21's Dask-vs-threads difference
    again = tmp_path / "vec2"
    again.mkdir()
    stop = threading.Event()

    def neighbour() -> None:
        while not stop.is_set():
            random.random()
            np.random.random()
            time.sleep(0.001)

    threads = [threading.Thread(target=neighbour, daemon=True),
               threading.Thread(target=build_entity_vectors,
                                args=(settings, dump, dirs["entities"], dirs["lang-en"], again))]
    for t in threads:
        t.start()
    threads[1].join()
    stop.set()
    threads[0].join()
    assert (again / "entity_vectors.parquet").read_bytes() == (out / "entity_vectors.parquet").read_bytes()
    assert sorted(p.name for p in out.iterdir()) == ["entity_vectors.parquet"]


@needs_w2v
def test_training_errors_of_the_child_process_are_raised_with_their_message(tmp_path: Path) -> None:
    """Training runs in a child process; its error comes back as the same exception type and message."""
    dump = write_dump(tmp_path / "enwiki-tiny.xml.bz2")
    with pytest.raises(ValueError, match=r"no entity is linked ≥ 100 times; lower min_entity_count"):
        train_model(dump, tiny_settings(min_entity_count=100), tmp_path / "work", progress=False)
    assert not list((tmp_path / "work").glob(".train-result*"))


# ------------------------------------------------------------------------- titles of entities without a page (issue 51)


def _stage_inputs(root: Path) -> tuple[Path, Path, Path]:
    """Hand-made ``entities``, ``wiki_extract.en`` and ``wikidata`` artifacts for the tiny dump's model.

    Q1 and Q6 have an English page (Q6's sitelink disagrees on purpose: the page wins); Q2 has only a German page but an
    enwiki sitelink to "Beta", a title the model has — the case a page-only lookup drops; Q3 has no English title at
    all; Q5 has one but is outside the vocabulary; Q7 has a dewiki sitelink only; ``de:Zeppelin`` has no QID. The
    linked titles without a page (``entity_link_titles``) are those a sitelink names, as the ``entities`` stage writes
    them by default: Q2's "Beta".
    """
    ents, lang_en, wd = root / "entities", root / "wiki_extract.en", root / "wikidata"
    for d in (ents, lang_en / "wiki_pages" / "lang=en", wd):
        d.mkdir(parents=True)
    keys = ["Q1", "Q2", "Q3", "Q5", "Q6", "Q7", "de:Zeppelin"]
    pl.DataFrame({"entity": keys, "in_vocab": [k != "Q5" for k in keys]}).write_parquet(ents / "entities.parquet")
    pl.DataFrame({"lang": ["en", "de", "de", "en", "de", "de"],
                  "title": ["Alpha", "Beta (Buchstabe)", "Omikron", "Delta", "Gamma", "Zeppelin"],
                  "page_id": [1, 2, 3, 4, 5, 6],
                  "entity": ["Q1", "Q2", "Q3", "Q6", "Q7", "de:Zeppelin"]}).write_parquet(
        ents / "entity_titles.parquet")
    pl.DataFrame({"qid": ["Q1", "Q2", "Q5", "Q6", "Q7", "Q2"], "wiki": ["enwiki"] * 4 + ["dewiki"] * 2,
                  "lang": ["en"] * 4 + ["de"] * 2,
                  "title": ["Alpha", "Beta", "Gamma", "Epsilon", "Gamma", "Beta (Buchstabe)"]}).write_parquet(
        wd / "wikidata_sitelinks.parquet")
    pl.DataFrame({"lang": ["en"], "title": ["Beta"], "entity": ["Q2"], "qid": ["Q2"]}).write_parquet(
        ents / "entity_link_titles.parquet")
    pl.DataFrame({"title": ["Alpha", "Alpha (letter)"], "is_redirect": [False, True],
                  "redirect_to": [None, "Alpha"]}).write_parquet(lang_en / "wiki_pages" / "lang=en" / "p.parquet")
    return ents, lang_en, wd


@needs_w2v
def test_an_entity_without_a_page_in_the_dump_gets_the_vector_of_its_sitelink_title(
        trained: tuple[Path, Path], tmp_path: Path) -> None:
    """Wikipedia2Vec has vectors for link targets, page or no page: the title of an entity whose page the dump lacks
    is its Wikidata sitelink, so the entity gets that vector (the page-only lookup gave Q2 none)."""
    from pipelines.wikipedia.entity_vectors import build_entity_vectors, vocabulary_titles

    _dump, model_path = trained
    ents, lang_en, wd = _stage_inputs(tmp_path)
    settings = EntityVectorSettings(mode="pretrained", pretrained=model_path, dim=DIM)
    titles, counts = vocabulary_titles(ents, "en", wd)
    assert titles.rows() == [("Q1", "Alpha"), ("Q2", "Beta"), ("Q6", "Delta")]
    assert counts == {"vocabulary": 6, "vocabulary_with_title": 3, "titles_from_pages": 2, "titles_from_sitelinks": 1,
                      "sitelinks_in_language": 4}

    out = tmp_path / "vec"
    out.mkdir()
    result = build_entity_vectors(settings, None, ents, lang_en, out, wd)
    df = pl.read_parquet(out / "entity_vectors.parquet")
    assert df.select("entity", "title").rows() == [("Q1", "Alpha"), ("Q2", "Beta"), ("Q6", "Delta")]
    model = load_pretrained(model_path)
    for entity, title in (("Q1", "Alpha"), ("Q2", "Beta"), ("Q6", "Delta")):
        row = df.filter(pl.col("entity") == entity)["vector"].to_list()[0]
        np.testing.assert_array_equal(np.asarray(row, dtype=np.float32), model.get_entity_vector(title))
    assert result.stats["found"] == 3 and result.stats["titles_from_sitelinks"] == 1

    # without Wikidata only pages give titles: the former behaviour, byte for byte the same rows but Q2's
    alone = tmp_path / "vec-no-wikidata"
    alone.mkdir()
    build_entity_vectors(settings, None, ents, lang_en, alone)
    assert pl.read_parquet(alone / "entity_vectors.parquet")["entity"].to_list() == ["Q1", "Q6"]


@needs_w2v
def test_an_entity_keyed_by_a_linked_title_without_page_or_qid_gets_the_vector_of_that_title(
        trained: tuple[Path, Path], tmp_path: Path) -> None:
    """``corpora.entities.unlinked_titles: title``: a linked title with neither a page nor a QID is the entity
    ``<lang>:<title>`` (``entity_link_titles``, null ``qid``); Wikipedia2Vec knows link targets by title, so it gets
    that title's vector — in the vector language only, in the vocabulary only. The rows of the other entities stay."""
    from pipelines.wikipedia.entity_vectors import build_entity_vectors, vocabulary_titles

    _dump, model_path = trained
    ents, lang_en, wd = _stage_inputs(tmp_path)
    base, _ = vocabulary_titles(ents, "en", wd)
    keys = ["Q1", "Q2", "Q3", "Q5", "Q6", "Q7", "de:Zeppelin", "en:Zygote", "en:Zebra crossing", "en:Nowhere",
            "de:Zither"]
    pl.DataFrame({"entity": keys, "in_vocab": [k not in ("Q5", "en:Zebra crossing") for k in keys]}).write_parquet(
        ents / "entities.parquet")
    pl.DataFrame({"lang": ["en", "en", "en", "en", "de"],
                  "title": ["Beta", "Nowhere", "Zebra crossing", "Zygote", "Zither"],
                  "entity": ["Q2", "en:Nowhere", "en:Zebra crossing", "en:Zygote", "de:Zither"],
                  "qid": ["Q2", None, None, None, None]}).write_parquet(ents / "entity_link_titles.parquet")
    titles, counts = vocabulary_titles(ents, "en", wd)
    assert titles.rows() == sorted([*base.rows(), ("en:Nowhere", "Nowhere"), ("en:Zygote", "Zygote")])
    assert counts["titles_from_link_titles"] == 2 and counts["titles_from_pages"] == 2
    assert ("de:Zither", "Zither") in vocabulary_titles(ents, "de", wd)[0].rows()  # a title of its own language

    out = tmp_path / "vec"
    out.mkdir()
    result = build_entity_vectors(EntityVectorSettings(mode="pretrained", pretrained=model_path, dim=DIM), None, ents,
                                  lang_en, out, wd)
    df = pl.read_parquet(out / "entity_vectors.parquet")
    assert df.select("entity", "title").rows() == [("Q1", "Alpha"), ("Q2", "Beta"), ("Q6", "Delta"),
                                                   ("en:Zygote", "Zygote")]  # "Nowhere" is no model entity
    zygote = np.asarray(df.filter(pl.col("entity") == "en:Zygote")["vector"].to_list()[0], dtype=np.float32)
    np.testing.assert_array_equal(zygote, load_pretrained(model_path).get_entity_vector("Zygote"))
    assert result.stats["missing"] == 1 and result.stats["titles_from_link_titles"] == 2
    (ents / "entity_link_titles.parquet").unlink()  # an entities artifact without it: an error that names it
    with pytest.raises(FileNotFoundError, match=r"entity_link_titles table is missing: .*entity_link_titles\.parquet"):
        vocabulary_titles(ents, "en", wd)


def test_stage_titles_name_the_file_of_a_bad_or_missing_table(tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    from pipelines.wikipedia.entity_vectors import vocabulary_titles

    ents, _lang_en, wd = _stage_inputs(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"wikidata_sitelinks table is missing: .*absent"):
        vocabulary_titles(ents, "en", tmp_path / "absent")
    pl.DataFrame({"qid": ["Q2"], "site": ["enwiki"]}).write_parquet(wd / "wikidata_sitelinks.parquet")
    with pytest.raises(ValueError, match=r"wikidata_sitelinks\.parquet \(wikidata_sitelinks\) has no column\(s\) "
                                         r"\['lang', 'title'\]"):
        vocabulary_titles(ents, "en", wd)
    pl.DataFrame({"entity": ["Q1"]}).write_parquet(ents / "entities.parquet")
    with pytest.raises(ValueError, match=r"entities\.parquet \(entities\) has no column\(s\) \['in_vocab'\]"):
        vocabulary_titles(ents, "en")
    ents, _lang_en, wd = _stage_inputs(tmp_path / "again")
    with caplog.at_level("WARNING", logger="polysent.pipelines.wiki.entity_vectors"):
        titles, counts = vocabulary_titles(ents, "vi", wd)
    assert titles.height == 0 and counts["sitelinks_in_language"] == 0
    assert "no sitelink to the 'vi' Wikipedia" in caplog.text and "'viwiki'" in caplog.text


def test_every_linked_entity_the_model_knows_gets_its_vector_on_the_english_sample(tmp_path: Path) -> None:
    """On the real samples (the EASE kit's inputs: five dumps, the Wikidata fixture written for them): every vocabulary
    entity that Wikipedia2Vec, trained on the English sample, has a vector for — a link target with enough links,
    whether or not its own page is in the sample — gets exactly that vector in ``entity_vectors``."""
    pytest.importorskip("wikipedia2vec", reason="wikipedia2vec not installed (pip install -e '.[entity-vectors]')")
    from conftest import REPO, SHARED_DATA
    from wiki_chain import build_chain

    from pipelines.wikidata import WikidataSettings
    from pipelines.wikipedia.entities import EntitySettings
    from pipelines.wikipedia.entity_vectors import build_entity_vectors

    dumps = {lang: SHARED_DATA / "wikipedia" / f"{lang}wiki-sample.xml.bz2" for lang in ("en", "ja", "el", "uk", "vi")}
    if not all(p.is_file() for p in dumps.values()):
        pytest.skip(f"the real Wikipedia samples are not available under {SHARED_DATA / 'wikipedia'} "
                    "(set POLYSENT_SHARED_DATA)")
    wikidata = REPO / "tests" / "fixtures" / "wikidata" / "sample-pages.jsonl"
    dirs = build_chain(dumps, tmp_path / "c", wikidata, entities=EntitySettings(min_link_count=10, types="wikidata"),
                       wikidata_settings=WikidataSettings(wikis=[f"{lang}wiki" for lang in dumps]))
    # the kit's model settings but for size and speed (its dictionary: the same link-count rule, min_entity_count 5)
    model_path = train_model(dumps["en"], EntityVectorSettings(mode="train", dim=DIM, iterations=1, pool_size=1,
                                                               word_neg_power=0.0, link_mentions=False),
                             tmp_path / "w2v", progress=False)
    settings = EntityVectorSettings(mode="pretrained", pretrained=model_path, dim=DIM)
    out = tmp_path / "vec"
    out.mkdir()
    result = build_entity_vectors(settings, None, dirs["entities"], dirs["lang-en"], out, dirs["wikidata"])

    # what the model has, read independently of the stage: its entities (link targets) mapped to an entity key by
    # their English page in the sample or by an enwiki sitelink, kept where the key is in the vocabulary
    model = load_pretrained(model_path)
    vocab = set(pl.read_parquet(dirs["entities"] / "entities.parquet").filter("in_vocab")["entity"])
    key_of = dict(pl.read_parquet(dirs["wikidata"] / "wikidata_sitelinks.parquet").filter(pl.col("lang") == "en")
                  .select("title", "qid").iter_rows())
    key_of.update(pl.read_parquet(dirs["entities"] / "entity_titles.parquet").filter(pl.col("lang") == "en")
                  .select("title", "entity").iter_rows())
    expected = {key_of[e.title]: e.title for e in model.dictionary.entities()
                if key_of.get(e.title) in vocab}
    vec = pl.read_parquet(out / "entity_vectors.parquet")
    got = {e: np.asarray(v, dtype=np.float32) for e, v in zip(vec["entity"], vec["vector"].to_list(), strict=True)}
    assert set(got) <= vocab
    dropped = sorted(set(expected) - set(got))
    assert not dropped, f"linked entities the model has a vector for, exported without it: {dropped}"
    for entity, title in expected.items():
        np.testing.assert_array_equal(got[entity], model.get_entity_vector(title), err_msg=f"{entity} ({title})")
    # linked in the English sample without a page of their own there: United States and China (issue 51)
    assert {"Q30", "Q148"} <= set(expected) and len(expected) >= 10
    assert result.stats["titles_from_sitelinks"] > result.stats["titles_from_pages"]
