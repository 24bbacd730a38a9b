"""The ``mined`` format: pairs a ``mine.<name>`` node mined. Its table exists only as that node's artifact, so the
bitext node reads it as a Parquet source it builds from the upstream artifact (``flows.stages.corpora``; the whole way
is tested in ``tests/test_mining_node.py``); asked directly, it says so."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter

from pipelines.bitext.readers import count_pairs, iter_chunks
from pipelines.bitext.sources import BitextSource, MinedSource


def test_a_mined_source_is_a_config_entry_read_through_its_node() -> None:
    source = TypeAdapter(BitextSource).validate_python({"format": "mined", "mining": "wiki_de"})
    assert isinstance(source, MinedSource) and source.input_files() == {}
    with pytest.raises(TypeError, match=r"mining\.wiki_de.*mined_pairs"):
        iter_chunks(source, ["en"])
    with pytest.raises(TypeError, match="not a bitext source"):
        count_pairs(source, ["en"])
