"""The ``parquet`` format: one row per pair in two text columns — a file, or a folder of part files as a partitioned
table is written (``lang=de/part-0.parquet``, the layout of this project's own tables); nulls, missing columns."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from bitext_helpers import PIVOTS, collect

from pipelines.bitext.readers import BitextFormatError, count_pairs
from pipelines.bitext.sources import ParquetSource


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


def test_a_partitioned_table_with_its_own_column_names(tmp_path: Path) -> None:
    """Hive-style part files (``lang=de/part-0.parquet``) with named columns, the pivot in the second column."""
    table = tmp_path / "pairs"
    for i, rows in enumerate(([("Hallo", "Hello"), ("Danke", "Thanks")], [("Bitte", "Please")])):
        (table / f"lang=de{i}").mkdir(parents=True)
        pl.DataFrame(rows, schema=["german", "english"], orient="row").write_parquet(
            table / f"lang=de{i}" / "part-0.parquet")
    source = ParquetSource(format="parquet", path=table, src="de", tgt="en", src_column="german",
                           tgt_column="english")
    df = collect(source, pivots=["en"])
    assert df.select("src_lang", "tgt_lang", "src_text", "tgt_text", "origin", "line").rows() == [
        ("en", "de", "Hello", "Hallo", "lang=de0/part-0.parquet", 1),
        ("en", "de", "Thanks", "Danke", "lang=de0/part-0.parquet", 2),
        ("en", "de", "Please", "Bitte", "lang=de1/part-0.parquet", 1)]
    assert count_pairs(source, ["en"]) == {("en", "de"): 3}
    assert list(source.input_files()) == ["de-en/lang=de0/part-0.parquet", "de-en/lang=de1/part-0.parquet"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(BitextFormatError, match="holds no"):
        collect(ParquetSource(format="parquet", path=tmp_path / "empty", src="de", tgt="en"), pivots=["en"])
