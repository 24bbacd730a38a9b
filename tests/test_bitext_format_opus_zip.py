"""The ``opus_zip`` format: OPUS's ``moses`` download (``en-es.txt.zip``) as OPUS publishes it — the two text members
beside README, LICENSE, the alignment XML and the ids file — read inside the zip; ambiguous or missing members."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from bitext_helpers import EXPECTED, PIVOTS, SRC, TGT, collect

from pipelines.bitext.readers import BitextFormatError, count_pairs
from pipelines.bitext.sources import OpusZipSource


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


def test_opus_zip_with_the_pivot_second_and_unequal_members(tmp_path: Path) -> None:
    """OPUS names a pair alphabetically (``de-en``): with an English pivot the chunks are swapped; members of
    different lengths name both."""
    path = tmp_path / "de-en.txt.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("README", "readme\n")
        zf.writestr("Tatoeba.de-en.de", "Hallo\nDanke\n")
        zf.writestr("Tatoeba.de-en.en", "Hello\nThanks\n")
    source = OpusZipSource(format="opus_zip", path=path, src="de", tgt="en")
    df = collect(source, pivots=["en"])
    assert df.select("src_lang", "tgt_lang", "src_text", "tgt_text", "origin").rows() == [
        ("en", "de", "Hello", "Hallo", "de-en.txt.zip:Tatoeba.de-en.de"),
        ("en", "de", "Thanks", "Danke", "de-en.txt.zip:Tatoeba.de-en.de")]
    assert count_pairs(source, ["en"]) == {("en", "de"): 2}
    assert source.input_files() == {"de-en/de-en.txt.zip": path}
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("Tatoeba.de-en.de", "Hallo\nDanke\nBitte\n")
        zf.writestr("Tatoeba.de-en.en", "Hello\nThanks\n")
    with pytest.raises(BitextFormatError, match=r"Tatoeba\.de-en\.de has 3 lines.*Tatoeba\.de-en\.en has 2 lines"):
        count_pairs(source, ["en"])
