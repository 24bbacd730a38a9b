"""Bitext readers: purpose-built edge-case files per format, then the real TMX / NTREX / Multi30k files."""

from __future__ import annotations

import bz2
import collections
import gzip
import logging
import lzma
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.bitext import readers
from pipelines.bitext.readers import CHUNK_SCHEMA, BitextFormatError, chunks_from_hub_dataset, count_pairs, iter_chunks
from pipelines.bitext.sources import HubSource, MosesSource, NwaySource, OpusZipSource, ParquetSource, TmxSource
from pipelines.hub import HubUnavailableError
from pipelines.language_codes import UnknownLanguageError

REPO = Path(__file__).resolve().parents[1]
PIVOTS = ["en", "es"]


def collect(source, pivots=PIVOTS, chunk_rows: int = 1_000_000, stats=None) -> pl.DataFrame:
    chunks = list(iter_chunks(source, pivots, chunk_rows=chunk_rows, stats=stats))
    for df in chunks:
        assert df.schema == pl.Schema(CHUNK_SCHEMA)
        assert 0 < df.height <= chunk_rows
    return pl.concat(chunks) if chunks else pl.DataFrame(schema=CHUNK_SCHEMA)


def moses(tmp_path: Path, src: bytes, tgt: bytes, suffix: str = "", src_lang: str = "en",
          tgt_lang: str = "es") -> MosesSource:
    compress = {"": lambda b: b, ".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}[suffix]
    a, b = tmp_path / f"c.{src_lang}{suffix}", tmp_path / f"c.{tgt_lang}{suffix}"
    a.write_bytes(compress(src))
    b.write_bytes(compress(tgt))
    return MosesSource(src=src_lang, tgt=tgt_lang, src_file=a, tgt_file=b)


# the awkward real-file cases at once: BOM, CRLF, a blank line in the middle, no newline at the end of one file
SRC = "\ufeffHello world\r\n  spaced  \r\n\r\nA tab\there\r\nlast line".encode()
TGT = "Hola mundo\nespaciado\nsolo español\n\tUn tabulador\taquí \núltima línea\n".encode()
EXPECTED = [("Hello world", "Hola mundo"), ("spaced", "espaciado"), ("", "solo español"),
            ("A tab\there", "Un tabulador\taquí"), ("last line", "última línea")]


# -------------------------------------------------------------------------------------------------------- moses


@pytest.mark.parametrize("suffix", ["", ".gz", ".bz2", ".xz"])
def test_moses_bom_crlf_blank_and_missing_final_newline(tmp_path: Path, suffix: str) -> None:
    source = moses(tmp_path, SRC, TGT, suffix)
    df = collect(source)
    assert list(zip(df["src_text"], df["tgt_text"], strict=True)) == EXPECTED
    assert df["line"].to_list() == [1, 2, 3, 4, 5]
    assert set(df["origin"]) == {f"c.en{suffix}"}
    assert set(df["src_lang"]) == {"en"} and set(df["tgt_lang"]) == {"es"}
    assert count_pairs(source, PIVOTS) == {("en", "es"): 5}


def test_moses_chunks_are_bounded_and_consecutive(tmp_path: Path) -> None:
    df_chunks = list(iter_chunks(moses(tmp_path, SRC, TGT), PIVOTS, chunk_rows=2))
    assert [d.height for d in df_chunks] == [2, 2, 1]
    assert pl.concat(df_chunks)["line"].to_list() == [1, 2, 3, 4, 5]
    assert pl.concat(df_chunks)["tgt_text"].to_list() == [t for _, t in EXPECTED]


def test_moses_odd_bytes_never_split_a_line(tmp_path: Path) -> None:
    # NUL, unit separator, form feed, a lone CR and U+2028 are inside lines: only \n ends a line
    src = b"a\x00b\nc\x1fd\ne\rf\ng\x0ch\nline\xe2\x80\xa8sep\n\n"
    tgt = b"1\n2\n3\n4\n5\n6\n"
    df = collect(moses(tmp_path, src, tgt))
    assert df["src_text"].to_list() == ["a\x00b", "c\x1fd", "e\rf", "g\x0ch", "line\u2028sep", ""]
    assert df["tgt_text"].to_list() == ["1", "2", "3", "4", "5", "6"]
    assert count_pairs(moses(tmp_path, src, tgt), PIVOTS) == {("en", "es"): 6}


@pytest.mark.parametrize("block", [1, 5, 64])
def test_moses_tiny_blocks_match_a_reference_split(tmp_path: Path, monkeypatch, block: int) -> None:
    """Block edges falling inside lines, CRLFs and multi-byte characters change nothing."""
    monkeypatch.setattr(readers, "_BLOCK", block)
    lines = [f" {i} ñandú — 東京 {'x' * (i % 7)}\r" if i % 5 else "" for i in range(200)]
    src = "\n".join(lines).encode()
    tgt = "\n".join(f"t{i}" for i in range(200)).encode() + b"\n"
    df = collect(moses(tmp_path, src, tgt), chunk_rows=17)
    assert df["src_text"].to_list() == [ln.strip() for ln in lines]
    assert df["line"].to_list() == list(range(1, 201))


def test_moses_unequal_line_counts_name_both_files_and_counts(tmp_path: Path) -> None:
    source = moses(tmp_path, b"".join(b"s%d\n" % i for i in range(10)), b"".join(b"t%d\n" % i for i in range(7)))
    with pytest.raises(BitextFormatError) as err:
        collect(source, chunk_rows=3)  # the mismatch shows in the third chunk; the counts are still whole
    msg = str(err.value)
    assert f"{source.src_file} has 10 lines" in msg and f"{source.tgt_file} has 7 lines" in msg
    assert "ends after line 7" in msg
    with pytest.raises(BitextFormatError, match=r"has 10 lines.*has 7 lines"):
        count_pairs(source, PIVOTS)


def test_moses_invalid_utf8_names_file_and_line(tmp_path: Path) -> None:
    source = moses(tmp_path, b"ok\nfine\nbad \xff\xfe byte\nok\n", b"1\n2\n3\n4\n")
    with pytest.raises(BitextFormatError, match=rf"^{source.src_file}:3: invalid UTF-8.*column 5"):
        collect(source)


def test_moses_invalid_utf8_in_a_later_block(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(readers, "_BLOCK", 8)
    source = moses(tmp_path, b"".join(b"line %d\n" % i for i in range(50)) + b"\xc3(\n", b"t\n" * 51, suffix=".gz")
    with pytest.raises(BitextFormatError, match=rf"^{source.src_file}:51: invalid UTF-8"):
        collect(source, chunk_rows=10)


def test_unknown_language_code_is_rejected_before_reading(tmp_path: Path) -> None:
    source = MosesSource(src="xx", tgt="es", src_file=tmp_path / "missing.xx", tgt_file=tmp_path / "missing.es")
    with pytest.raises(UnknownLanguageError, match=r"missing\.xx.*'xx'"):
        iter_chunks(source, PIVOTS)
    with pytest.raises(UnknownLanguageError, match="pivots"):
        iter_chunks(moses(tmp_path, SRC, TGT), ["en", "xx"])


def test_pairs_are_oriented_pivot_first(tmp_path: Path) -> None:
    source = moses(tmp_path, SRC, TGT)
    df = collect(source, pivots=["es"])
    assert set(df["src_lang"]) == {"es"} and set(df["tgt_lang"]) == {"en"}
    assert df["src_text"][0] == "Hola mundo" and df["tgt_text"][0] == "Hello world"
    assert count_pairs(source, ["es"]) == {("es", "en"): 5}
    # both sides pivots: the smaller code is the source whatever the config says
    reverse = MosesSource(src="es", tgt="en", src_file=source.tgt_file, tgt_file=source.src_file)
    df = collect(reverse, pivots=["es", "en"])
    assert set(df["src_lang"]) == {"en"} and df["src_text"][0] == "Hello world" and df["tgt_text"][0] == "Hola mundo"
    assert count_pairs(reverse, ["es", "en"]) == {("en", "es"): 5}
    with pytest.raises(ValueError, match="no pivot"):
        iter_chunks(source, ["de"])


# ---------------------------------------------------------------------------------------------------------- tmx

TMX = """<?xml version="1.0" encoding="UTF-8"?>
<tmx version="1.4">
<header srclang="en" datatype="plaintext" segtype="sentence" adminlang="en" o-tmf="x" creationtool="t"
  creationtoolversion="1"/>
<body>
<tu>
  <tuv xml:lang="EN-us"><seg>Press <bpt i="1">&lt;b&gt;</bpt>Save<ept i="1">&lt;/b&gt;</ept> now<ph>&lt;br/&gt;</ph>
  </seg></tuv>
  <tuv xml:lang="es-ES"><seg> Pulse <hi type="b">Guardar</hi> ya </seg></tuv>
</tu>
<tu>
  <tuv xml:lang="en"><seg>Only English</seg></tuv>
  <tuv xml:lang="fr"><seg>Seulement anglais</seg></tuv>
</tu>
<tu>
  <tuv lang="en"><seg>Old TMX 1.1</seg></tuv>
  <tuv lang="es"><seg>TMX antiguo</seg></tuv>
</tu>
<tu>
  <tuv xml:lang="en"><note>no seg here</note></tuv>
  <tuv xml:lang="es"><seg>Sin segmento</seg></tuv>
</tu>
<tu>
  <tuv xml:lang="en"><seg>Image<ph x="1">&lt;img alt="<sub>A cat</sub>"&gt;</ph>!</seg></tuv>
  <tuv xml:lang="es"><seg></seg></tuv>
</tu>
</body>
</tmx>
"""


def test_tmx_units_inline_codes_languages_and_malformed(tmp_path: Path, caplog) -> None:
    path = tmp_path / "small.tmx"
    path.write_text(TMX, encoding="utf-8")
    source = TmxSource(format="tmx", path=path, src="en", tgt="es")
    stats: collections.Counter = collections.Counter()
    with caplog.at_level(logging.WARNING, logger="polysent.pipelines.bitext"):
        df = collect(source, chunk_rows=2, stats=stats)
    assert df.select("src_text", "tgt_text", "line").rows() == [
        ("Press Save now", "Pulse Guardar ya", 6), ("Old TMX 1.1", "TMX antiguo", 15), ("ImageA cat!", "", 23)]
    assert set(df["origin"]) == {"small.tmx"}
    assert stats["tmx_malformed_units"] == 2
    logged = [r.getMessage() for r in caplog.records]
    assert any(f"{path}:11:" in m and "'es'" in m for m in logged)
    assert any(f"{path}:19:" in m and "<seg>" in m for m in logged)
    assert count_pairs(source, PIVOTS) == {("en", "es"): 3}


def test_tmx_truncated_file_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "cut.tmx"
    path.write_text(TMX[: TMX.index("<tu>\n  <tuv lang")], encoding="utf-8")  # ends after the second unit
    source = TmxSource(format="tmx", path=path, src="en", tgt="es")
    with pytest.raises(BitextFormatError, match=rf"^{path}:\d+: XML syntax error"):
        collect(source)
    broken = tmp_path / "broken.tmx"
    broken.write_text(TMX.replace("<seg>Old TMX 1.1</seg>", "<seg>Old TMX 1.1</sg>"), encoding="utf-8")
    with pytest.raises(BitextFormatError, match=rf"^{broken}:16: XML syntax error"):
        collect(TmxSource(format="tmx", path=broken, src="en", tgt="es"))


# --------------------------------------------------------------------------------------------------------- nway


def nway_files(tmp_path: Path, n_de: int = 3) -> NwaySource:
    texts = {"en": ["one", "two", "three"], "fr": ["un", "deux", "trois"], "de": ["eins", "zwei", "drei"][:n_de]}
    files = {}
    for lang, lines in texts.items():
        files[lang] = tmp_path / f"multi.{lang}"
        files[lang].write_text("\n".join(lines) + "\n", encoding="utf-8")
    return NwaySource(format="nway", files=files)


def test_nway_pairs_each_pivot_with_every_other_language(tmp_path: Path) -> None:
    source = nway_files(tmp_path)
    df = collect(source, pivots=["fr", "en"], chunk_rows=4)
    by_pair = {k: g for k, g in df.group_by("src_lang", "tgt_lang", maintain_order=True)}
    assert sorted(by_pair) == [("en", "de"), ("en", "fr"), ("fr", "de")]  # en-fr once, the smaller pivot first
    en_fr = by_pair[("en", "fr")].sort("line")
    assert en_fr.select("src_text", "tgt_text", "line", "origin").rows() == [
        ("one", "un", 1, "multi.en"), ("two", "deux", 2, "multi.en"), ("three", "trois", 3, "multi.en")]
    assert by_pair[("fr", "de")].sort("line")["tgt_text"].to_list() == ["eins", "zwei", "drei"]
    assert count_pairs(source, ["fr", "en"]) == {("en", "de"): 3, ("en", "fr"): 3, ("fr", "de"): 3}
    assert count_pairs(source, ["en"]) == {("en", "de"): 3, ("en", "fr"): 3}


def test_nway_unequal_files_are_an_error(tmp_path: Path) -> None:
    source = nway_files(tmp_path, n_de=2)
    with pytest.raises(BitextFormatError, match=r"multi\.de has 2 lines") as err:
        collect(source, pivots=["en"])
    assert "multi.en has 3 lines" in str(err.value)
    with pytest.raises(BitextFormatError, match=r"multi\.de has 2 lines"):
        count_pairs(source, ["en"])


# ----------------------------------------------------------------------------------------------------- opus zip


def test_opus_zip_members_and_origin(tmp_path: Path) -> None:
    path = tmp_path / "en-es.txt.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("README", "readme\n")
        zf.writestr("LICENSE", "license\n")
        zf.writestr("OpenSubtitles.en-es.xml", "<xml/>")
        zf.writestr("OpenSubtitles.en-es.ids", "1\n2\n")
        zf.writestr("OpenSubtitles.en-es.en", SRC)
        zf.writestr("OpenSubtitles.en-es.es", TGT)
    source = OpusZipSource(format="opus_zip", path=path, src="en", tgt="es")
    df = collect(source, chunk_rows=3)
    assert list(zip(df["src_text"], df["tgt_text"], strict=True)) == EXPECTED
    assert set(df["origin"]) == {"en-es.txt.zip:OpenSubtitles.en-es.en"}
    assert count_pairs(source, PIVOTS) == {("en", "es"): 5}


def test_opus_zip_ambiguous_or_missing_members(tmp_path: Path) -> None:
    path = tmp_path / "two.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for corpus in ("Europarl", "OpenSubtitles"):
            zf.writestr(f"{corpus}.en-es.en", "a\n")
            zf.writestr(f"{corpus}.en-es.es", "b\n")
    with pytest.raises(BitextFormatError, match="more than one") as err:
        collect(OpusZipSource(format="opus_zip", path=path, src="en", tgt="es"))
    assert "Europarl.en-es" in str(err.value) and "OpenSubtitles.en-es" in str(err.value)
    with pytest.raises(BitextFormatError, match=r"no pair of members.*Europarl\.en-es\.en"):
        collect(OpusZipSource(format="opus_zip", path=path, src="en", tgt="de"), pivots=["en"])


# ------------------------------------------------------------------------------------------------------ parquet


def test_parquet_file_and_folder_nulls_become_blank(tmp_path: Path) -> None:
    (tmp_path / "pq" / "b").mkdir(parents=True)
    pq.write_table(pa.table({"id": [1, 2], "src": [" a ", None], "tgt": ["x", "y"]}), tmp_path / "pq" / "a.parquet")
    pq.write_table(pa.table({"src": ["c"], "tgt": [None]}), tmp_path / "pq" / "b" / "a.parquet")
    source = ParquetSource(format="parquet", path=tmp_path / "pq", src="en", tgt="es")
    df = collect(source)
    assert df.select("src_text", "tgt_text", "origin", "line").rows() == [
        ("a", "x", "a.parquet", 1), ("", "y", "a.parquet", 2), ("c", "", "b/a.parquet", 1)]
    assert count_pairs(source, PIVOTS) == {("en", "es"): 3}


def test_parquet_missing_column_names_file_and_columns(tmp_path: Path) -> None:
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"english": ["a"], "tgt": ["b"]}), path)
    source = ParquetSource(format="parquet", path=path, src="en", tgt="es")
    with pytest.raises(BitextFormatError, match=rf"^{path}: no column 'src'.*\['english', 'tgt'\]"):
        collect(source)
    with pytest.raises(BitextFormatError, match="no column 'src'"):
        count_pairs(source, PIVOTS)


# ---------------------------------------------------------------------------------------------------------- hub


def test_hub_dataset_conversion_in_batches() -> None:
    import datasets

    ds = datasets.Dataset.from_dict({"translation": [{"en": " Hello ", "es": "Hola"}, {"en": "Bye", "es": None},
                                                     {"en": "Yes", "es": "Sí"}], "id": [1, 2, 3]})
    source = HubSource(format="hub", hub_id="org/bitext", src="en", tgt="es")
    chunks = list(chunks_from_hub_dataset(ds, source, chunk_rows=2))
    assert [c.height for c in chunks] == [2, 1]
    df = pl.concat(chunks)
    assert df.schema == pl.Schema(CHUNK_SCHEMA)
    assert df.select("src_text", "tgt_text", "origin", "line").rows() == [
        ("Hello", "Hola", "hub:org/bitext", 1), ("Bye", "", "hub:org/bitext", 2), ("Yes", "Sí", "hub:org/bitext", 3)]
    with pytest.raises(BitextFormatError, match=r"no language 'de'.*\['en', 'es'\]"):
        list(chunks_from_hub_dataset(ds, HubSource(format="hub", hub_id="org/bitext", src="en", tgt="de"), 2))


def test_hub_offline_fails_fast_naming_local_formats(monkeypatch) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    source = HubSource(format="hub", hub_id="polysent-tests/no-such-bitext", config="en-es", src="en", tgt="es")
    t0 = time.monotonic()
    with pytest.raises(HubUnavailableError, match=r"local.*moses.*tmx.*parquet"):
        list(iter_chunks(source, PIVOTS))
    assert time.monotonic() - t0 < 5


def test_readers_import_neither_torch_nor_prefect() -> None:
    code = ("import sys, pipelines.bitext.readers; "
            "bad = [m for m in ('torch', 'prefect', 'datasets') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)


# ---------------------------------------------------------------------------------------------------- real data


@pytest.mark.shared_data
def test_real_tmx_en_es(shared_data: Path) -> None:
    source = TmxSource(format="tmx", path=shared_data / "parallel" / "tmx" / "en-es.tmx", src="en", tgt="es")
    stats: collections.Counter = collections.Counter()
    df = collect(source, stats=stats)
    assert df.height == 6690 and stats["tmx_malformed_units"] == 0  # every unit of this file is well formed
    assert count_pairs(source, PIVOTS) == {("en", "es"): 6690}
    assert df.row(0, named=True) == {
        "src_lang": "en", "tgt_lang": "es", "origin": "en-es.tmx", "line": 12,
        "src_text": "This article looks at the anatomy and workflow of the average video game from a technical point "
                    "of view, in terms of how the main loop should run.",
        "tgt_text": "Este artículo examina la anatomía y el flujo de trabajo de un videojuego promedio desde un punto "
                    "de vista técnico, en términos de cómo debe ejecutarse el bucle principal."}
    assert df.row(2, named=True)["src_text"] == ("Experienced game programmers who are new to web development could "
                                                 "also benefit, too.")
    assert df.row(2, named=True)["tgt_text"] == ("Los programadores de juegos experimentados que son nuevos en el "
                                                 "desarrollo web también podrían beneficiarse.")
    assert df["line"].is_sorted() and df["line"].n_unique() == 6690


@pytest.mark.shared_data
def test_real_ntrex_three_languages(shared_data: Path) -> None:
    d = shared_data / "parallel" / "ntrex128"
    source = NwaySource(format="nway", dir=d, pattern="newstest2019-{code}.txt",
                        languages={"en": "src.eng", "de": "ref.deu", "fr": "ref.fra"})
    df = collect(source, pivots=["en"], chunk_rows=1000)
    assert df.group_by("src_lang", "tgt_lang").len().sort("tgt_lang").rows() == [("en", "de", 1997), ("en", "fr", 1997)]
    first = {r["tgt_lang"]: r for r in df.filter(pl.col("line") == 1).iter_rows(named=True)}
    assert first["de"]["src_text"] == first["fr"]["src_text"] == "Welsh AMs worried about 'looking like muppets'"
    assert first["de"]["tgt_text"] == ("Mitglieder der Nationalversammlung für Wales befürchten Verwechslungen mit den "
                                       "Muppets")
    assert first["fr"]["tgt_text"] == ("Des membres de l’Assemblée du pays de Galles inquiets de «\u00a0passer pour "
                                       "des marionnettes\u00a0»")
    assert first["de"]["origin"] == "newstest2019-src.eng.txt"
    assert count_pairs(source, ["en"]) == {("en", "de"): 1997, ("en", "fr"): 1997}


@pytest.mark.shared_data
def test_real_multi30k_val_gz(shared_data: Path) -> None:
    d = shared_data / "parallel" / "multi30k"
    source = MosesSource(src="en", tgt="de", src_file=d / "val.en.gz", tgt_file=d / "val.de.gz")
    df = collect(source, pivots=["en"])
    assert df.height == 1014 and df["line"].to_list() == list(range(1, 1015))
    assert df["src_text"][0] == "A group of men are loading cotton onto a truck"
    assert count_pairs(source, ["en"]) == {("en", "de"): 1014}
    nway = NwaySource(format="nway", files={lang: d / f"val.{lang}.gz" for lang in ("en", "de", "fr", "cs")})
    assert count_pairs(nway, ["en"]) == {("en", "cs"): 1014, ("en", "de"): 1014, ("en", "fr"): 1014}
