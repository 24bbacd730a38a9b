"""The ``moses`` format: two line-aligned text files as OPUS, WMT and Multi30k publish them — the line streams'
edge cases (BOM, CRLF, blank lines, odd bytes, block edges, bad UTF-8, unequal lengths), the compressed variants,
an OPUS Moses pair as unzipped from its download, and the real Multi30k files."""

from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl
import pytest
from bitext_helpers import EXPECTED, PIVOTS, SRC, TGT, collect, moses

from pipelines.bitext import streams
from pipelines.bitext.readers import BitextFormatError, count_pairs, iter_chunks
from pipelines.bitext.sources import MosesSource, NwaySource


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
    monkeypatch.setattr(streams, "_BLOCK", block)
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
    monkeypatch.setattr(streams, "_BLOCK", 8)
    source = moses(tmp_path, b"".join(b"line %d\n" % i for i in range(50)) + b"\xc3(\n", b"t\n" * 51, suffix=".gz")
    with pytest.raises(BitextFormatError, match=rf"^{source.src_file}:51: invalid UTF-8"):
        collect(source, chunk_rows=10)



def test_an_opus_moses_pair_as_published(tmp_path: Path) -> None:
    """OPUS's ``moses`` download unzipped: ``<Corpus>.<l1>-<l2>.<l1>`` / ``.<l2>``, the pair named in alphabetical
    order whatever the pivot (here the pivot, en, is the second language); gzipped as OPUS's mono downloads are."""
    de = ["Wiederaufnahme der Sitzungsperiode", "Ich bitte Sie, sich zu einer Schweigeminute zu erheben.", ""]
    en = ["Resumption of the session", "Please rise, then, for this minute' s silence.", "(The House rose)"]
    for lang, lines in (("de", de), ("en", en)):
        with gzip.open(tmp_path / f"Europarl.de-en.{lang}.gz", "wt", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    source = MosesSource(src="de", tgt="en", src_file=tmp_path / "Europarl.de-en.de.gz",
                         tgt_file=tmp_path / "Europarl.de-en.en.gz")
    df = collect(source, pivots=["en"])
    assert df.select("src_lang", "tgt_lang", "src_text", "tgt_text", "origin", "line").rows() == [
        ("en", "de", e, d, "Europarl.de-en.de.gz", i) for i, (e, d) in enumerate(zip(en, de, strict=True), 1)]
    assert count_pairs(source, ["en"]) == {("en", "de"): 3}
    assert source.input_files() == {"de-en/de/Europarl.de-en.de.gz": source.src_file,
                                    "de-en/en/Europarl.de-en.en.gz": source.tgt_file}
    assert source.where() == f"{source.src_file} / {source.tgt_file}"


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
