from __future__ import annotations

import bz2
import gzip
import json
from pathlib import Path

import polars as pl
import pytest
from conftest import REPO, SAMPLE

from pipelines.wikidata import (
    SKIPPED,
    BadLine,
    EntityExtractor,
    WikidataFormatError,
    WikidataSettings,
    build_entities,
    iter_lines,
    wiki_lang,
)

FIXTURE = REPO / "tests" / "fixtures" / "wikidata" / "sample-pages.jsonl"
SETTINGS = WikidataSettings(wikis=["enwiki", "dewiki", "ruwiki", "zh_min_nanwiki", "jawiki"],
                            label_languages=["en", "de", "ru", "fr"])


def q42_line(shared: Path) -> bytes:
    """Q42.json (API shape ``{"entities":{"Q42":{…}}}``) unwrapped into one dump line, bytes as in the file."""
    raw = (shared / "wikidata" / "Q42.json").read_bytes()
    start = raw.index(b'"Q42":') + len(b'"Q42":')
    entity = json.loads(raw)["entities"]["Q42"]
    line = raw[start:raw.rindex(b"}", 0, raw.rindex(b"}"))].strip()
    assert json.loads(line) == entity
    return line


def both(line: bytes, settings: WikidataSettings = SETTINGS) -> tuple[object, object]:
    ex = EntityExtractor(settings)
    buf = bytearray(b"  " + line + b"  ")  # the fast path works on offsets into a shared buffer
    fast = ex.fast(buf, 2, 2 + len(line))
    try:
        full = ex.full(line)
    except BadLine as exc:
        full = exc
    return fast, full


def statement(value: str, rank: str = "normal", snaktype: str = "value", **extra: object) -> dict:
    snak = {"snaktype": snaktype, "property": "P31"}
    if snaktype == "value":
        snak["datavalue"] = {"value": {"entity-type": "item", "numeric-id": int(value[1:]), "id": value},
                             "type": "wikibase-entityid"}
    snak["datatype"] = "wikibase-item"
    return {"mainsnak": snak, "type": "statement", **extra, "id": f"Q1${value}", "rank": rank}


def qualifier_p31(value: str) -> dict:
    return {"P31": [{"snaktype": "value", "property": "P31", "hash": "00",
                     "datavalue": {"value": {"entity-type": "item", "numeric-id": int(value[1:]), "id": value},
                                   "type": "wikibase-entityid"}, "datatype": "wikibase-item"}]}


def entity(qid: str = "Q1", **parts: object) -> dict:
    ent = {"type": "item", "id": qid, "labels": {"en": {"language": "en", "value": "One"}}, "descriptions": {},
           "aliases": {}, "claims": {}, "sitelinks": {}, "lastrevid": 7}
    ent.update(parts)
    return {k: v for k, v in ent.items() if v is not None}


def dumps(ent: dict, **kw: object) -> bytes:
    kw.setdefault("separators", (",", ":"))
    return json.dumps(ent, **kw).encode()


def sl(site: str, title: str) -> dict:
    return {"site": site, "title": title, "badges": []}


en_de_labels = {"en": {"language": "en", "value": "One"}, "de": {"language": "de", "value": "Eins"}}
TRICKY: dict[str, tuple[bytes, bool]] = {  # name → (line, the fast path must handle it itself)
    # "P31" as a qualifier key of another property, before the top-level P31
    "p31_in_qualifier_first": (dumps(entity(claims={
        "P279": [statement("Q7", qualifiers=qualifier_p31("Q666"), **{"qualifiers-order": ["P31"]})],
        "P31": [statement("Q5")]})), True),
    # the same without any top-level P31
    "p31_only_in_qualifier": (dumps(entity(claims={
        "P279": [statement("Q7", qualifiers=qualifier_p31("Q666"))]})), True),
    # statements in another key order (the mock dump's): the generic P31 scan
    "statement_key_order": (dumps(entity(claims={
        "P279": [{"rank": "normal", **statement("Q7", qualifiers=qualifier_p31("Q666"))}],
        "P31": [{"rank": "normal", **statement("Q5")}]})), True),
    # P31 inside the references of the top-level P31 and as the last claim
    "p31_in_own_reference": (dumps(entity(claims={
        "P21": [statement("Q6581097")],
        "P31": [statement("Q5", references=[{"hash": "1", "snaks": qualifier_p31("Q777"), "snaks-order": ["P31"]}])],
    })), True),
    "brackets_in_strings": (dumps(entity(claims={"P31": [statement(
        "Q5", qualifiers={"P1810": [{"snaktype": "value", "property": "P1810", "datavalue": {
            "value": "a ] } [[x]] \"P31\":[", "type": "string"}, "datatype": "string"}]})],
        "P373": [statement("Q9")]})), True),
    # claims last (before "lastrevid": the end of the list is found by counting brackets, which strings can fool)
    **{f"brackets_in_strings_last_{i}_{rev}": (dumps(entity(sitelinks=None, lastrevid=rev, claims={"P31": [statement(
        "Q5", qualifiers={"P1810": [{"snaktype": "value", "property": "P1810", "datavalue": {
            "value": text, "type": "string"}, "datatype": "string"}]})]})), rev is None or i == 3)
       for i, text in enumerate(["x]", "[x", "]]}}", "a\\"]) for rev in (None, 7)},
    "sitelinks_text_in_label": (dumps(entity(labels={"en": {"language": "en", "value": (
        'He said "sitelinks":{"enwiki":{"site":"enwiki","title":"Fake"}} and "claims":{"P31":[')}},
        sitelinks={"enwiki": sl("enwiki", "Real")})), True),
    "escapes_in_titles": (dumps(entity(
        labels={"en": {"language": "en", "value": 'Caf\u00e9 "Le D\u00f4me" \\ end\\'}},
        sitelinks={"enwiki": sl("enwiki", 'Caf\u00e9 "Le D\u00f4me"'), "dewiki": sl("dewiki", "C:\\"),
                   "ruwiki": sl("ruwiki", "Кафе \U0001F600")})), True),
    "escapes_raw_utf8": (dumps(entity(
        labels={"en": {"language": "en", "value": 'Caf\u00e9 "x"'}},
        sitelinks={"enwiki": sl("enwiki", 'Caf\u00e9 "Le D\u00f4me"')}), ensure_ascii=False), True),
    "whitespace_formatted": (dumps(entity(claims={"P31": [statement("Q5")]}, sitelinks={"enwiki": sl("enwiki", "X")}),
                                   separators=(", ", ": ")), False),
    "missing_claims": (dumps(entity(claims=None, sitelinks={"enwiki": sl("enwiki", "X")})), True),
    "empty_claims": (dumps(entity(sitelinks={"enwiki": sl("enwiki", "X")})), True),
    "missing_sitelinks": (dumps(entity(sitelinks=None, claims={"P31": [statement("Q5")]})), True),
    "other_wikis_only": (dumps(entity(sitelinks={"enwikiquote": sl("enwikiquote", "Q"), "frwiki": sl("frwiki", "F")},
                                      claims={"P31": [statement("Q5")]})), True),
    # labels without "en", while the descriptions (same entry form) do have one
    "en_only_in_descriptions": (dumps(entity(labels={"de": {"language": "de", "value": "Eins"}},
                                             descriptions={"en": {"language": "en", "value": "not a label"}},
                                             aliases={"en": [{"language": "en", "value": "alias"}]},
                                             claims={"P31": [statement("Q5")]},
                                             sitelinks={"dewiki": sl("dewiki", "Eins")})), True),
    "ranks_and_snaktypes": (dumps(entity(claims={"P31": [
        statement("Q5", rank="deprecated"), statement("Q6", rank="preferred"), statement("Q7", snaktype="novalue"),
        statement("Q8", snaktype="somevalue"),
        {"mainsnak": {"snaktype": "value", "property": "P31", "datavalue": {
            "value": {"entity-type": "item", "numeric-id": 9}, "type": "wikibase-entityid"}}, "rank": "normal"}]},
        labels=en_de_labels)), True),
    "api_key_order": (dumps({"id": "Q3", "type": "item", "labels": en_de_labels, "aliases": {}, "descriptions": {},
                             "claims": {"P31": [{"id": "Q3$1", **statement("Q5")}]},
                             "sitelinks": {"enwiki": sl("enwiki", "Three")}}), True),
    "type_after_labels": (dumps({"id": "Q4", "labels": en_de_labels, "type": "item", "claims": {}}), False),
    "property": (dumps({"type": "property", "datatype": "wikibase-item", "id": "P31", "labels": {}, "claims": {}}),
                 True),
    "lexeme": (dumps({"type": "lexeme", "id": "L1", "lemmas": {}, "forms": [{"id": "L1-F1", "claims": {
        "P31": [statement("Q5")]}}], "claims": {}}), False),
    "empty_p31": (dumps(entity(claims={"P31": []})), True),
    "lone_surrogate_label": (b'{"type":"item","id":"Q5","labels":{"en":{"language":"en","value":"a\\ud800"}},'
                             b'"claims":{},"sitelinks":{}}', False),
}


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_fast_path_equals_full_parse_on_tricky_lines(name: str) -> None:
    line, fast_expected = TRICKY[name]
    fast, full = both(line)
    assert not isinstance(full, Exception), full
    if fast_expected:
        assert fast is not None, "the fast path gave up"
    if fast is not None:
        assert fast == full


def test_tricky_lines_read_right() -> None:
    def get(name: str):
        return both(TRICKY[name][0])[1]

    assert get("p31_in_qualifier_first").types == ("Q5",)
    assert get("p31_only_in_qualifier").types == ()
    assert get("p31_in_own_reference").types == ("Q5",)
    assert get("sitelinks_text_in_label").sitelinks == (("enwiki", "Real"),)
    assert get("escapes_in_titles").sitelinks == (("enwiki", 'Café "Le Dôme"'), ("dewiki", "C:\\"),
                                                  ("ruwiki", "Кафе \U0001F600"))
    assert get("en_only_in_descriptions").labels == (None, "Eins", None, None)
    assert get("ranks_and_snaktypes").types == ("Q6", "Q9")  # deprecated, novalue, somevalue skipped
    assert get("property") is SKIPPED and get("lexeme") is SKIPPED


def test_fast_path_equals_full_parse_on_real_entities(shared_data: Path) -> None:
    line = q42_line(shared_data)
    fast, full = both(line)
    assert fast is not None and fast == full
    assert full.qid == "Q42" and full.types == ("Q5",)
    assert full.labels[:3] == ("Douglas Adams", "Douglas Adams", "Дуглас Адамс")
    assert dict(full.sitelinks) == {"enwiki": "Douglas Adams", "dewiki": "Douglas Adams", "ruwiki": "Адамс, Дуглас",
                                   "jawiki": "ダグラス・アダムズ"}
    for settings in (WikidataSettings(), WikidataSettings(wikis=["viwiki"], label_languages=["xx", "zh-hans"])):
        fast, full = both(line, settings)
        assert fast is not None and fast == full

    # Q42 as the dumps write it (key order, statements opening with "mainsnak", raw UTF-8), P31 moved or removed
    ent = json.loads(line)
    claims = {k: [{"mainsnak": st["mainsnak"], **{x: y for x, y in st.items() if x != "mainsnak"}} for st in v]
              for k, v in ent["claims"].items()}
    order = ["type", "id", "labels", "descriptions", "aliases", "claims", "sitelinks"]
    dump_order = {k: ent[k] for k in order} | {"claims": claims, "lastrevid": 1}
    p31_middle = dict(list(claims.items())[1:30]) | {"P31": claims["P31"]} | dict(list(claims.items())[30:])
    variants = [dump_order, dump_order | {"claims": p31_middle},
                dump_order | {"claims": {k: v for k, v in claims.items() if k != "P31"}},
                dump_order | {"labels": {k: v for k, v in ent["labels"].items() if k not in ("en", "de")}}]
    for variant in variants:
        for ascii_only in (True, False):
            fast, full = both(dumps(variant, ensure_ascii=ascii_only))
            assert fast is not None and fast == full
    assert both(dumps(variants[1]))[1].types == ("Q5",) and both(dumps(variants[2]))[1].types == ()
    assert both(dumps(variants[3]))[1].labels == (None, None, "Дуглас Адамс", "Douglas Adams")

    ex = EntityExtractor(SETTINGS)
    files = [shared_data / "wikidata" / "mock-dump.json", SAMPLE / "wikidata" / "entities.jsonl", FIXTURE]
    for path in files:
        n = 0
        for buf, a, b, lineno in iter_lines(path):
            fast = ex.fast(buf, a, b)
            full = ex.full(bytes(buf[a:b]))
            assert fast is None or fast == full, f"{path}:{lineno}"
            n += fast is not None
        if path != files[0]:  # the mock dump puts "id" after the sections: always the full parse
            assert n > 40, path


def test_lines_longer_than_the_buffer(tmp_path: Path) -> None:
    lines = [dumps(entity(f"Q{i}", descriptions={"en": {"language": "en", "value": "x" * 5000 * i}}))
             for i in range(1, 4)]
    path = tmp_path / "w.json"
    path.write_bytes(b"[\n" + b",\n".join(lines) + b"\n]")  # no newline after the last "]"
    got = [(bytes(buf[a:b]), n) for buf, a, b, n in iter_lines(path, block_bytes=1000)]
    assert got == [(line, i + 2) for i, line in enumerate(lines)]


def test_bad_lines_are_counted_with_line_numbers(tmp_path: Path) -> None:
    good = dumps(entity("Q1", sitelinks={"enwiki": sl("enwiki", "One")}))
    lines = [b"[", good + b",", b"{broken,", b'"just a string",', b'{"no_id": 1},', b"[1, 2],",
             dumps(entity("Q2")) + b",", b"", b"]"]
    dump = tmp_path / "w.json"
    dump.write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "out"
    out.mkdir()
    r = build_entities(WikidataSettings(), dump, out)
    assert r.stats["entities"] == 2 and r.stats["bad_lines"] == 4
    assert r.stats["bad_line_numbers"] == [3, 4, 5, 6]
    assert sorted(p.name for p in out.iterdir()) == sorted(r.tables.values())  # no temporary file left


def test_only_first_20_bad_line_numbers_are_kept(tmp_path: Path) -> None:
    dump = tmp_path / "w.jsonl"
    dump.write_bytes(b"x\n" * 30 + dumps(entity()) + b"\n")
    out = tmp_path / "out"
    out.mkdir()
    r = build_entities(WikidataSettings(), dump, out)
    assert r.stats["bad_lines"] == 30 and r.stats["bad_line_numbers"] == list(range(1, 21))


@pytest.mark.parametrize("suffix", [".bz2", ".gz"])
def test_truncated_compressed_dump_names_file_and_last_line(tmp_path: Path, suffix: str) -> None:
    body = b"[\n" + b"".join(dumps(entity(f"Q{i}", descriptions={"en": {"language": "en", "value": "x" * (i % 97)}}))
                             + b",\n" for i in range(1, 3001)) + b"]\n"
    data = bz2.compress(body, 1) if suffix == ".bz2" else gzip.compress(body)  # bz2: 100 kB blocks
    dump = tmp_path / f"w.json{suffix}"
    dump.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(WikidataFormatError, match=rf"{dump}: truncated .* after line (\d+)") as err:
        list(iter_lines(dump, block_bytes=4096))
    last = int(err.value.args[0].split("after line ")[1].split()[0])
    assert 10 < last < 3001
    # the lines up to the one named are whole and readable
    complete = 0
    try:
        for _ in iter_lines(dump, block_bytes=4096):
            complete += 1
    except WikidataFormatError:
        pass
    assert complete == last - 1  # line 1 is "["


def test_empty_file_is_a_clear_error(tmp_path: Path) -> None:
    for name, data in (("e.json", b""), ("e.json.bz2", bz2.compress(b"")), ("b.json", b"[\n]\n")):
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(WikidataFormatError, match=rf"{path}: no entity lines"):
            build_entities(WikidataSettings(), path, tmp_path)


def test_dump_shape_and_json_lines_give_the_same_tables(tmp_path: Path) -> None:
    ents = [json.loads(line.rstrip(b",")) for line in FIXTURE.read_bytes().splitlines() if line.startswith(b"{")]
    shapes = {
        "dump.json": FIXTURE.read_bytes(),
        "lines.jsonl": b"".join(json.dumps(e, ensure_ascii=False).encode() + b"\r\n" for e in ents),
        "lines.jsonl.gz": gzip.compress(b"\n".join(dumps(e) for e in ents)),  # no final newline
        "dump.json.bz2": bz2.compress(FIXTURE.read_bytes()),
    }
    settings = WikidataSettings(wikis=["enwiki", "jawiki", "elwiki", "ukwiki", "viwiki"], label_languages=["en", "ja"])
    tables = {}
    for name, data in shapes.items():
        path = tmp_path / name
        path.write_bytes(data)
        out = tmp_path / f"out-{name}"
        out.mkdir()
        r = build_entities(settings, path, out)
        assert r.tables == {"wikidata_entities": "wikidata_entities.parquet",
                            "wikidata_sitelinks": "wikidata_sitelinks.parquet",
                            "wikidata_types": "wikidata_types.parquet"}
        tables[name] = {t: pl.read_parquet(out / f) for t, f in r.tables.items()}
        assert r.stats["entities"] == len(ents) and r.stats["bad_lines"] == 0 and r.stats["skipped"] == 0
        assert r.stats["sitelinks"] == tables[name]["wikidata_sitelinks"].height
        assert r.stats["types"] == tables[name]["wikidata_types"].height
    first = tables["dump.json"]
    for name, t in tables.items():
        for table in first:
            assert t[table].equals(first[table]), (name, table)
    assert first["wikidata_entities"].columns == ["qid", "label_en", "label_ja"]
    assert first["wikidata_sitelinks"].columns == ["qid", "wiki", "lang", "title"]
    assert first["wikidata_types"].columns == ["qid", "type_qid", "type_label"]


def test_fixture_types_and_cross_language_links(tmp_path: Path) -> None:
    settings = WikidataSettings(wikis=["enwiki", "jawiki", "elwiki", "ukwiki", "viwiki"])
    r = build_entities(settings, FIXTURE, tmp_path)
    types = pl.read_parquet(tmp_path / "wikidata_types.parquet")
    links = pl.read_parquet(tmp_path / "wikidata_sitelinks.parquet")
    assert types.filter(pl.col("qid") == "Q91").row(0, named=True) == {
        "qid": "Q91", "type_qid": "Q5", "type_label": "human"}
    assert types["type_label"].null_count() == 0  # every type entity is in the fixture
    sizes = types.group_by("type_qid").len().filter(pl.col("len") >= 4)
    assert {"Q5", "Q6256", "Q515", "Q35657"} <= set(sizes["type_qid"])
    multi = links.group_by("qid").agg(pl.col("lang").n_unique().alias("n")).filter(pl.col("n") >= 4)
    assert multi.height >= 10
    assert set(links.filter(pl.col("qid") == "Q30")["title"]) == {
        "United States", "アメリカ合衆国", "Ηνωμένες Πολιτείες Αμερικής", "Сполучені Штати Америки", "Hoa Kỳ"}
    assert r.stats["full_parses"] == 0


def test_sitelink_language_mapping(tmp_path: Path) -> None:
    assert wiki_lang("enwiki") == "en"
    assert wiki_lang("zh_min_nanwiki") == "zh-min-nan"
    assert wiki_lang("be_x_oldwiki") == "be-x-old"
    dump = tmp_path / "w.jsonl"
    dump.write_bytes(dumps(entity(sitelinks={"zh_min_nanwiki": sl("zh_min_nanwiki", "Chi̍t"),
                                             "enwikiquote": sl("enwikiquote", "Quote"),
                                             "enwiki": sl("enwiki", "One")})) + b"\n")
    build_entities(WikidataSettings(wikis=["enwiki", "zh_min_nanwiki"]), dump, tmp_path)
    links = pl.read_parquet(tmp_path / "wikidata_sitelinks.parquet")
    assert links.rows() == [("Q1", "enwiki", "en", "One"), ("Q1", "zh_min_nanwiki", "zh-min-nan", "Chi̍t")]
    for bad in (["enwikiquote"], ["commonswiki"], ["en"]):
        with pytest.raises(ValueError, match="not a language Wikipedia"):
            WikidataSettings(wikis=bad)


def test_deprecated_p31_is_skipped_and_type_labels_joined(tmp_path: Path) -> None:
    human = entity("Q5", labels={"en": {"language": "en", "value": "human"}})
    person = entity("Q42", claims={"P31": [statement("Q5"), statement("Q215627", rank="deprecated"),
                                           statement("Q999", snaktype="somevalue"), statement("Q95074")]})
    dump = tmp_path / "w.json"
    dump.write_bytes(b"[\n" + dumps(person) + b",\n" + dumps(human) + b"\n]\n")  # the type comes after its member
    build_entities(WikidataSettings(), dump, tmp_path)
    types = pl.read_parquet(tmp_path / "wikidata_types.parquet")
    assert types.rows() == [("Q42", "Q5", "human"), ("Q42", "Q95074", None)]
