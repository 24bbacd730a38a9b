"""The ``nway`` format: one line-aligned file per language, as NTREX-128 (``newstest2019-ref.<code>.txt``) and
FLORES-200 (``devtest/<lang_Script>.devtest``) publish them; pairs between every pivot and every other language, the
pivot listed first winning a pair of two pivots. The document split (``documents``) is tested in
``tests/test_ntrex_documents.py``."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from bitext_helpers import collect

from pipelines.bitext.readers import BitextFormatError, count_pairs
from pipelines.bitext.sources import NwaySource


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
    assert sorted(by_pair) == [("en", "de"), ("fr", "de"), ("fr", "en")]  # en-fr once, the pivot listed first first
    fr_en = by_pair[("fr", "en")].sort("line")
    assert fr_en.select("src_text", "tgt_text", "line", "origin").rows() == [
        ("un", "one", 1, "multi.fr"), ("deux", "two", 2, "multi.fr"), ("trois", "three", 3, "multi.fr")]
    assert by_pair[("fr", "de")].sort("line")["tgt_text"].to_list() == ["eins", "zwei", "drei"]
    assert count_pairs(source, ["fr", "en"]) == {("en", "de"): 3, ("fr", "de"): 3, ("fr", "en"): 3}
    assert count_pairs(source, ["en", "fr"]) == {("en", "de"): 3, ("en", "fr"): 3, ("fr", "de"): 3}
    assert count_pairs(source, ["en"]) == {("en", "de"): 3, ("en", "fr"): 3}
    with pytest.raises(ValueError, match=r"contains none of the pivots \['es'\]"):
        count_pairs(source, ["es"])


def test_nway_unequal_files_are_an_error(tmp_path: Path) -> None:
    source = nway_files(tmp_path, n_de=2)
    with pytest.raises(BitextFormatError, match=r"multi\.de has 2 lines") as err:
        collect(source, pivots=["en"])
    assert "multi.en has 3 lines" in str(err.value)
    with pytest.raises(BitextFormatError, match=r"multi\.de has 2 lines"):
        count_pairs(source, ["en"])


def test_a_flores_folder_as_published(tmp_path: Path) -> None:
    """FLORES-200's ``devtest/<lang_Script>.devtest`` read through ``dir`` + ``pattern`` + ``languages``; the files
    named by the layout enter the node's key under their language."""
    devtest = tmp_path / "flores200_dataset" / "devtest"
    devtest.mkdir(parents=True)
    texts = {"eng_Latn": ["On Monday, scientists said.", "Lead researchers say."],
             "spa_Latn": ["El lunes, los científicos dijeron.", "Los investigadores principales dicen."],
             "zho_Hans": ["周一，科学家们表示。", "首席研究员表示。"]}
    for code, lines in texts.items():
        (devtest / f"{code}.devtest").write_text("\n".join(lines) + "\n", encoding="utf-8")
    source = NwaySource(format="nway", dir=devtest, pattern="{code}.devtest",
                        languages={"en": "eng_Latn", "es": "spa_Latn", "zh": "zho_Hans"})
    df = collect(source, pivots=["en", "es"])
    assert df.group_by("src_lang", "tgt_lang").len().sort("src_lang", "tgt_lang").rows() == [
        ("en", "es", 2), ("en", "zh", 2), ("es", "zh", 2)]
    es_zh = df.filter((pl.col("src_lang") == "es") & (pl.col("tgt_lang") == "zh"))
    assert es_zh.select("src_text", "tgt_text", "origin", "line").rows()[0] == (
        "El lunes, los científicos dijeron.", "周一，科学家们表示。", "spa_Latn.devtest", 1)
    assert source.input_files() == {f"nway/{lang}/{code}.devtest": devtest / f"{code}.devtest"
                                    for lang, code in (("en", "eng_Latn"), ("es", "spa_Latn"), ("zh", "zho_Hans"))}


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


def ntrex_folder(tmp_path: Path) -> Path:
    """A folder laid out as NTREX-128 publishes it: the English source, references, a second reference and the
    dataset's own metadata files."""
    d = tmp_path / "NTREX-128"
    d.mkdir()
    texts = {"newstest2019-src.eng.txt": ["Hello.", "Goodbye."],
             "newstest2019-ref.deu.txt": ["Hallo.", "Tschüss."],
             "newstest2019-ref.afr.txt": ["Hallo.", "Totsiens."],
             "newstest2019-ref.spa.txt": ["Hola.", "Adiós."],
             "newstest2019-ref-2.spa.txt": ["¡Hola!", "¡Adiós!"],
             "newstest2019-ref.zho-CN.txt": ["你好。", "再见。"]}
    for name, lines in texts.items():
        (d / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (d / "LANGUAGES.tsv").write_text("afr Afrikaans\ndeu German\n", encoding="utf-8")
    return d


def test_an_ntrex_folder_as_published_in_every_language(tmp_path: Path) -> None:
    """``layout: ntrex``: the named languages under their names, every other one under its NTREX code, the second
    reference left out; the pairs are the pattern layout's."""
    d = ntrex_folder(tmp_path)
    source = NwaySource(format="nway", dir=d, layout="ntrex", languages={"en": "eng", "de": "deu", "es": "spa"},
                        all_languages=True)
    assert source.language_files() == {"en": d / "newstest2019-src.eng.txt", "de": d / "newstest2019-ref.deu.txt",
                                       "es": d / "newstest2019-ref.spa.txt", "afr": d / "newstest2019-ref.afr.txt",
                                       "zho-CN": d / "newstest2019-ref.zho-CN.txt"}
    assert count_pairs(source, ["en", "es"]) == {("en", "afr"): 2, ("en", "de"): 2, ("en", "es"): 2,
                                                 ("en", "zho-CN"): 2, ("es", "afr"): 2, ("es", "de"): 2,
                                                 ("es", "zho-CN"): 2}
    df = collect(source, pivots=["en"])
    afr = df.filter(pl.col("tgt_lang") == "afr").sort("line")
    assert afr.select("src_text", "tgt_text", "origin", "line").rows() == [
        ("Hello.", "Hallo.", "newstest2019-src.eng.txt", 1), ("Goodbye.", "Totsiens.", "newstest2019-src.eng.txt", 2)]
    assert "¡Hola!" not in df["tgt_text"].to_list() + df["src_text"].to_list()
    # the named languages alone without all_languages; the same pairs as the pattern layout reads
    named = NwaySource(format="nway", dir=d, layout="ntrex", languages={"en": "eng", "de": "deu"})
    pattern = NwaySource(format="nway", dir=d, pattern="newstest2019-{code}.txt",
                         languages={"en": "src.eng", "de": "ref.deu"})
    assert collect(named, pivots=["en"]).equals(collect(pattern, pivots=["en"]))
    # every language under its NTREX code: English is eng
    codes = NwaySource(format="nway", dir=d, layout="ntrex", all_languages=True)
    assert sorted(codes.language_files()) == ["afr", "deu", "eng", "spa", "zho-CN"]


def test_an_ntrex_layout_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    d = ntrex_folder(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"NTREX-128: no NTREX file for the codes \['fra'\]"):
        NwaySource(format="nway", dir=d, layout="ntrex", languages={"en": "eng", "fr": "fra"}).language_files()
    with pytest.raises(ValueError, match=r"needs languages .* or all_languages: true"):
        NwaySource(format="nway", dir=d, layout="ntrex")
    with pytest.raises(ValueError, match="give dir without files or pattern"):
        NwaySource(format="nway", dir=d, layout="ntrex", pattern="{code}.txt", all_languages=True)
    with pytest.raises(ValueError, match="all_languages is for layout: ntrex"):
        NwaySource(format="nway", dir=d, pattern="newstest2019-{code}.txt", languages={"en": "src.eng"},
                   all_languages=True)
    with pytest.raises(ValueError, match="languages names 'afr' for another file"):
        NwaySource(format="nway", dir=d, layout="ntrex", languages={"afr": "deu"}, all_languages=True).language_files()
    with pytest.raises(FileNotFoundError, match=r"missing.*English source|English source\) is missing"):
        (d / "newstest2019-src.eng.txt").unlink()
        NwaySource(format="nway", dir=d, layout="ntrex", all_languages=True).language_files()


def test_the_ntrex_layout_enters_a_dump_and_so_a_cache_key_only_when_set(tmp_path: Path) -> None:
    plain = NwaySource(format="nway", dir=tmp_path, pattern="{code}.txt", languages={"en": "eng"}).model_dump()
    assert not {"layout", "all_languages"} & set(plain)
    ntrex = NwaySource(format="nway", dir=tmp_path, layout="ntrex", all_languages=True).model_dump()
    assert ntrex["layout"] == "ntrex" and ntrex["all_languages"] is True
