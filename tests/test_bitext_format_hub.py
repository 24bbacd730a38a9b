"""The ``hub`` format: a hub dataset with a ``translation`` dict per row, as Helsinki-NLP publishes OPUS-100 and the
other OPUS sets (``Helsinki-NLP/opus-100``, config ``en-es``); converted in batches, and offline it fails fast naming
the local formats."""

from __future__ import annotations

import time

import polars as pl
import pytest
from bitext_helpers import PIVOTS

from pipelines.bitext.formats import hub
from pipelines.bitext.readers import CHUNK_SCHEMA, BitextFormatError, chunks_from_hub_dataset, count_pairs, iter_chunks
from pipelines.bitext.sources import HubSource
from pipelines.hub import HubUnavailableError


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


def test_an_opus100_dataset_as_published_and_its_count(monkeypatch) -> None:
    """OPUS-100's rows: ``{"translation": {"en": …, "es": …}}`` and nothing else; read es → en with a Spanish pivot,
    counted from the dataset's rows; no local file enters the key."""
    import datasets

    ds = datasets.Dataset.from_dict({"translation": [{"en": "Hello", "es": "Hola"}, {"en": "Thanks", "es": "Gracias"}]})
    monkeypatch.setattr(hub, "load_hub_dataset", lambda *args, **kwargs: ds)
    source = HubSource(format="hub", hub_id="Helsinki-NLP/opus-100", config="en-es", src="en", tgt="es")
    df = pl.concat(list(iter_chunks(source, ["es"], chunk_rows=1)))
    assert df.select("src_lang", "tgt_lang", "src_text", "tgt_text", "origin", "line").rows() == [
        ("es", "en", "Hola", "Hello", "hub:Helsinki-NLP/opus-100", 1),
        ("es", "en", "Gracias", "Thanks", "hub:Helsinki-NLP/opus-100", 2)]
    assert count_pairs(source, ["es"]) == {("es", "en"): 2}
    assert source.input_files() == {} and source.where() == "hub:Helsinki-NLP/opus-100"
