"""Bitext readers: the API every format is read through, and what makes a format one class — the registry, the union
the config reads, no code outside a format's class that names it, a toy format in one class read by the readers and
the stage. Each format's own edge cases and files as published: ``tests/test_bitext_format_<name>.py``; the pivot
rule: ``tests/test_bitext_pivots.py``."""

from __future__ import annotations

import ast
import collections
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import polars as pl
import pytest
from bitext_helpers import PIVOTS, SRC, TGT, collect, moses
from pydantic import TypeAdapter, ValidationError

from pipelines.bitext.formats import DEFAULT_FORMAT, FORMATS
from pipelines.bitext.formats.base import OneFilePairFormat
from pipelines.bitext.readers import count_pairs, iter_chunks
from pipelines.bitext.sampling import BitextSettings, select_pairs
from pipelines.bitext.sources import BitextSource, MosesSource, format_name
from pipelines.bitext.streams import frame
from pipelines.language_codes import UnknownLanguageError

REPO = Path(__file__).resolve().parents[1]


def test_unknown_language_code_is_rejected_before_reading(tmp_path: Path) -> None:
    source = MosesSource(src="xx", tgt="es", src_file=tmp_path / "missing.xx", tgt_file=tmp_path / "missing.es")
    with pytest.raises(UnknownLanguageError, match=r"missing\.xx.*'xx'"):
        iter_chunks(source, PIVOTS)
    with pytest.raises(UnknownLanguageError, match="pivots"):
        iter_chunks(moses(tmp_path, SRC, TGT), ["en", "xx"])
    with pytest.raises(ValueError, match="both 'en'"):
        count_pairs(MosesSource(src="en", tgt="en", src_file=tmp_path / "a", tgt_file=tmp_path / "b"), PIVOTS)
    with pytest.raises(ValueError, match="chunk_rows"):
        iter_chunks(moses(tmp_path, SRC, TGT), PIVOTS, chunk_rows=0)
    with pytest.raises(TypeError, match="not a bitext source: dict"):
        iter_chunks({"format": "moses"}, PIVOTS)  # type: ignore[arg-type]


def test_readers_import_neither_torch_nor_prefect() -> None:
    code = ("import sys, pipelines.bitext.readers, pipelines.bitext.sources; "
            "bad = [m for m in ('torch', 'prefect', 'datasets') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)


# --------------------------------------------------------------------------------------------- one class a format


def test_every_format_is_in_the_config_union_and_has_its_own_test() -> None:
    """``FORMATS`` is what the config reads (in the reference's order, the default first), and each format has its
    test file, built from a file laid out as its publisher lays it out."""
    union = typing.get_args(typing.get_args(BitextSource)[0])
    assert [typing.get_args(member)[0] for member in union] == list(FORMATS)
    names = [format_name(cls) for cls in FORMATS]
    assert names[0] == DEFAULT_FORMAT == "moses" and len(set(names)) == len(names)
    missing = [n for n in names if not (REPO / "tests" / f"test_bitext_format_{n}.py").is_file()]
    assert not missing, f"formats without a tests/test_bitext_format_<name>.py: {missing}"
    adapter = TypeAdapter(BitextSource)
    plain = adapter.validate_python({"src": "en", "tgt": "de", "src_file": "a.en", "tgt_file": "a.de"})
    assert type(plain) is MosesSource  # an entry without ``format`` is Moses
    with pytest.raises(ValidationError, match="tsv"):
        adapter.validate_python({"format": "tsv", "path": "x.tsv", "src": "en", "tgt": "de"})


def test_no_code_of_the_bitext_package_names_a_format_class_outside_its_module() -> None:
    """The readers and the stage ask the format (``chunks``, ``count``, ``input_files``, ``where``): no ``isinstance``
    on a format class, no format class named outside its own module and the lists that gather them."""
    names = {cls.__name__ for cls in FORMATS}
    bitext = REPO / "pipelines" / "bitext"
    gathering = {bitext / "formats" / "__init__.py", bitext / "sources.py"}
    found = []
    for path in sorted(bitext.rglob("*.py")):
        own = {cls.__name__ for cls in FORMATS if cls.__module__.replace(".", "/") + ".py" == str(
            path.relative_to(REPO))}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
                named = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)} & names
                found += [f"{path.relative_to(REPO)}:{node.lineno}: isinstance on {sorted(named)}"] if named else []
            elif isinstance(node, ast.Name) and node.id in names - own and path not in gathering:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: names {node.id}")
    assert not found, found


class TsvSource(OneFilePairFormat):
    """A toy format, all of it in one class: Tatoeba-Challenge-style TSV, ``source<TAB>target`` per line."""

    format: Literal["tsv"]
    path: Path
    src: str
    tgt: str

    def read(self, chunk_rows: int, stats: collections.Counter | None) -> Iterator[pl.DataFrame]:
        rows = pl.read_csv(self.path, separator="\t", has_header=False, new_columns=["a", "b"], quote_char=None)
        for i, part in enumerate(rows.iter_slices(chunk_rows)):
            yield frame(self.src, self.tgt, part["a"], part["b"], self.path.name, 1 + i * chunk_rows)

    def count_rows(self) -> int:
        return len(self.path.read_text(encoding="utf-8").splitlines())


def test_a_new_format_is_one_class_read_by_the_readers_and_the_stage(tmp_path: Path) -> None:
    path = tmp_path / "deu-eng.tsv"
    rows = [(f"Das ist Satz Nummer {i}.", f"This is sentence number {i}.") for i in range(30)]
    path.write_text("".join(f"{de}\t{en}\n" for de, en in rows), encoding="utf-8")
    source = TsvSource(format="tsv", path=path, src="de", tgt="en")
    df = collect(source, pivots=["en"], chunk_rows=7)
    assert df.select("src_lang", "tgt_lang").unique().rows() == [("en", "de")]
    assert df.select("src_text", "tgt_text", "line").row(29) == (rows[29][1], rows[29][0], 30)
    assert count_pairs(source, ["en"]) == {("en", "de"): 30}
    settings = BitextSettings(pivots=["en"], quota_mode="proportional", total_pairs=10)
    pairs, counts, _, _ = select_pairs(settings, [source], progress=False)
    assert pairs.height == 10 and set(pairs["pivot_lang"]) == {"en"} and set(pairs["origin"]) == {"deu-eng.tsv"}
    assert counts.select("pivot_lang", "lang", "quota", "read").rows() == [("en", "de", 10, 30)]
