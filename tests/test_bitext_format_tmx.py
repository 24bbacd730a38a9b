"""The ``tmx`` format: a translation memory as CAT tools write it (inline codes, TMX 1.1's ``lang``, malformed units),
as OPUS publishes its TMX downloads (Uplug's header, one ``<tu>`` per sentence pair), and the real OPUS-style file."""

from __future__ import annotations

import collections
import logging
from pathlib import Path

import pytest
from bitext_helpers import PIVOTS, collect

from pipelines.bitext.readers import BitextFormatError, count_pairs
from pipelines.bitext.sources import TmxSource

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


OPUS_TMX = """<?xml version="1.0" encoding="UTF-8" ?>
<tmx version="1.4">
<header creationdate="Mon Sep 25 12:26:13 2023"
          srclang="en"
          adminlang="en"
          o-tmf="unknown"
          segtype="sentence"
          creationtool="Uplug"
          creationtoolversion="unknown"
          datatype="PlainText" />
  <body>
    <tu>
      <tuv xml:lang="en"><seg>Resumption of the session </seg></tuv>
      <tuv xml:lang="es"><seg>Reanudación del período de sesiones </seg></tuv>
    </tu>
    <tu>
      <tuv xml:lang="en"><seg>Please rise &amp; observe a minute&apos;s silence.</seg></tuv>
      <tuv xml:lang="es"><seg>Les ruego que se levanten.</seg></tuv>
    </tu>
  </body>
</tmx>
"""


def test_an_opus_tmx_as_published_read_either_way_round(tmp_path: Path) -> None:
    """OPUS's ``en-es.tmx``: Uplug's header, trailing spaces in ``<seg>``, XML entities; configured es → en with an
    English pivot, the chunks put English first."""
    path = tmp_path / "en-es.tmx"
    path.write_text(OPUS_TMX, encoding="utf-8")
    source = TmxSource(format="tmx", path=path, src="es", tgt="en")
    df = collect(source, pivots=["en"])
    assert df.select("src_lang", "tgt_lang", "src_text", "tgt_text", "origin", "line").rows() == [
        ("en", "es", "Resumption of the session", "Reanudación del período de sesiones", "en-es.tmx", 12),
        ("en", "es", "Please rise & observe a minute's silence.", "Les ruego que se levanten.", "en-es.tmx", 16)]
    assert count_pairs(source, ["en"]) == {("en", "es"): 2}
    assert source.input_files() == {"es-en/en-es.tmx": path} and source.where() == str(path)


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
