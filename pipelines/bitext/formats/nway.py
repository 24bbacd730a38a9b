"""N-way: line-aligned files, one per language, as NTREX-128 (``newstest2019-ref.deu.txt``, ``DOCUMENT_IDS.tsv``) and
FLORES (``devtest/deu_Latn.devtest``) publish them; pairs between every pivot and every other language present."""

from __future__ import annotations

import collections
import itertools
import logging
from collections.abc import Iterator
from contextlib import ExitStack
from functools import cached_property
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
import polars as pl
from pydantic import Field, model_validator

from pipelines.bitext.formats.base import BitextFormat
from pipelines.bitext.pivots import Pivots, orient
from pipelines.bitext.streams import BitextFormatError, LineReader, aligned_lines, count_files, frame, rechunk_rows
from pipelines.key_defaults import KeyWhenSet
from pipelines.language_codes import check_language
from pipelines.ntrex_documents import DOCUMENT_IDS, HELD_OUT_EVERY, Documents, document_ids, split_lines
from pipelines.text_lines import open_binary

log = logging.getLogger("polysent.pipelines.bitext")


class NwaySource(BitextFormat, KeyWhenSet):
    """Multi-way line-aligned files, one per language (NTREX-128, FLORES): line i is the same sentence everywhere.

    Either ``files`` (language → file) or ``dir`` + ``pattern`` with ``{code}`` + ``languages`` (language → the code
    in the file name, e.g. ``de: deu`` for NTREX's ``newstest2019-ref.deu.txt``), or ``dir`` + ``layout: ntrex``: the
    folder as NTREX-128 publishes it (``newstest2019-src.eng.txt``, the English source, is ``eng``;
    ``newstest2019-ref.{code}.txt`` is ``{code}``; second references such as ``newstest2019-ref-2.spa.txt`` are left
    out and logged), ``languages`` then naming the languages read (language → NTREX code) and ``all_languages: true``
    adding every other language of the folder under its NTREX code — a corpus of all 128 languages without listing
    them. Pairs are formed between every pivot and every other language present.

    ``documents: train`` / ``held_out`` reads only the lines of NTREX's training / held-out documents
    (``pipelines.ntrex_documents``: every ``held_out_every``-th document held out), from ``document_ids`` (default
    ``dir/DOCUMENT_IDS.tsv``); the ``line`` column keeps the files' own line numbers. Train on ``train`` and score
    xSIM on the ``parallel`` evaluation set with ``documents: held_out``.
    """

    format: Literal["nway"]
    """``nway``: this format"""
    files: dict[str, Path] | None = None
    """language → its file (line-aligned with every other); or ``dir`` + ``pattern`` + ``languages``"""
    dir: Path | None = None
    """the folder of the files, named by ``pattern``"""
    pattern: str | None = None
    """the file name with ``{code}`` where the language's code goes (``newstest2019-ref.{code}.txt``)"""
    layout: Literal["pattern", "ntrex"] = "pattern"
    """``ntrex``: ``dir`` holds NTREX-128's files under their published names (no ``pattern``)"""
    languages: dict[str, str] | None = None
    """language → the code in its file name (``de: deu`` for NTREX)"""
    all_languages: bool = False
    """with ``layout: ntrex``: also every language of the folder that ``languages`` does not name, under its own
    NTREX code (``afr``, ``aze-Latn``, ``zho-TW``)"""
    documents: Documents = "all"
    """all lines, or NTREX's training / held-out documents only"""
    held_out_every: int = Field(HELD_OUT_EVERY, ge=2)
    """every n-th document is held out"""
    document_ids: Path | None = Field(None, description=f"the per-line document ids (default dir/{DOCUMENT_IDS})")
    # the document split stays out of the dump (and cache keys) while unset
    KEY_WHEN_SET: ClassVar[tuple[str, ...]] = ("documents", "held_out_every", "document_ids", "layout",
                                               "all_languages")

    @model_validator(mode="after")
    def _one_layout(self) -> NwaySource:
        if self.layout == "ntrex":
            if self.dir is None or self.files is not None or self.pattern is not None:
                raise ValueError("layout: ntrex reads dir (NTREX-128's folder as published); give dir without files "
                                 "or pattern")
            if not self.languages and not self.all_languages:
                raise ValueError("layout: ntrex needs languages ({lang: NTREX code}) or all_languages: true")
            return self._documents_readable()
        if self.all_languages:
            raise ValueError("all_languages is for layout: ntrex (a pattern layout names its languages)")
        if self.files is None and (self.dir is None or self.pattern is None or not self.languages):
            raise ValueError("give either files: {lang: path} or dir + pattern ('...{code}...') + languages")
        if self.files is not None and self.dir is not None:
            raise ValueError("give files or dir + pattern, not both")
        if self.pattern is not None and "{code}" not in self.pattern:
            raise ValueError(f"pattern {self.pattern!r} must contain '{{code}}'")
        return self._documents_readable()

    def _documents_readable(self) -> NwaySource:
        if self.documents != "all" and self.document_ids is None and self.dir is None:
            raise ValueError(f"documents: {self.documents} needs document_ids (the DOCUMENT_IDS.tsv of the files) "
                             "or dir (read as dir/DOCUMENT_IDS.tsv)")
        return self

    def document_ids_file(self) -> Path | None:
        """The ids file that ``documents`` reads (``None`` for ``all``)."""
        if self.documents == "all":
            return None
        if self.document_ids is not None:
            return self.document_ids
        assert self.dir is not None
        return self.dir / DOCUMENT_IDS

    def language_files(self) -> dict[str, Path]:
        """Language → its file."""
        if self.files is not None:
            return dict(self.files)
        if self.layout == "ntrex":
            return dict(self.ntrex_layout_files)
        assert self.dir is not None and self.pattern is not None and self.languages is not None
        return {lang: self.dir / self.pattern.format(code=code) for lang, code in self.languages.items()}

    @cached_property
    def ntrex_layout_files(self) -> dict[str, Path]:
        """``layout: ntrex``: language → file, the named languages first, then (``all_languages``) every other code
        of the folder under its own name. Read from the folder once per source (``language_files`` is asked by
        ``pairs``, ``where`` and ``input_files`` alike)."""
        from pipelines.eval_sets.parallel import ntrex_files

        assert self.dir is not None
        found = ntrex_files(self.dir)  # NTREX code → file; eng always; second references left out
        second = sorted(p.name for p in self.dir.glob("newstest2019-ref-2.*.txt"))
        if second:
            log.info("nway %s: second references left out (one translation a language is read): %s", self.dir,
                     ", ".join(second))
        named = dict(self.languages or {})
        missing = sorted(code for code in named.values() if code not in found)
        if missing:
            raise FileNotFoundError(f"{self.dir}: no NTREX file for the codes {missing} that languages names "
                                    f"(expected newstest2019-ref.<code>.txt; found: {', '.join(sorted(found))})")
        out = {lang: found[code] for lang, code in named.items()}
        if self.all_languages:
            taken = set(named.values())
            for code, path in found.items():
                if code in taken:
                    continue
                if code in out:
                    raise ValueError(f"{self.dir}: languages names {code!r} for another file than "
                                     f"{path.name}; all_languages would read both under one name")
                out[code] = path
        return out

    def where(self) -> str:
        return ", ".join(str(p) for p in self.language_files().values())

    def input_files(self) -> dict[str, Path]:
        ids = self.document_ids_file()
        return {**{f"nway/{lang}/{p.name}": p for lang, p in sorted(self.language_files().items())},
                **({f"nway/{ids.name}": ids} if ids is not None else {})}

    def pairs(self, pivots: Pivots) -> tuple[dict[str, Path], list[tuple[str, str]]]:
        """Language → file (codes checked), and the oriented pairs read: every pivot with every other language."""
        files = self.language_files()
        for lang, path in files.items():
            check_language(lang, str(path))
        pairs = sorted({orient(a, b, pivots) for a, b in itertools.combinations(sorted(files), 2)
                        if pivots.covers(a, b)})
        if not pairs:
            raise ValueError(f"nway source {sorted(files)} ({self.where()}) contains none of the pivots "
                             f"{list(pivots)}")
        return files, pairs

    def chunks(self, pivots: Pivots, chunk_rows: int,
               stats: collections.Counter | None = None) -> Iterator[pl.DataFrame]:
        self.pairs(pivots)  # checked now, read lazily
        return self._chunks(pivots, chunk_rows)

    def _chunks(self, pivots: Pivots, chunk_rows: int) -> Iterator[pl.DataFrame]:
        files, pairs = self.pairs(pivots)
        used = sorted({lang for pair in pairs for lang in pair})
        step = max(1, chunk_rows // len(pairs))
        keep = self._selection()
        with ExitStack() as stack:
            readers = {lang: LineReader(stack.enter_context(open_binary(files[lang])), str(files[lang]))
                       for lang in used}
            yield from rechunk_rows(self._frames(readers, files, pairs, keep, step), chunk_rows)

    def _frames(self, readers: dict[str, LineReader], files: dict[str, Path], pairs: list[tuple[str, str]],
                keep: np.ndarray | None, step: int) -> Iterator[pl.DataFrame]:
        """One frame per pair per ``step`` lines (only the selected documents' lines when ``keep``)."""
        line = 1
        for got in aligned_lines(readers, step):
            n = len(next(iter(got.values())))
            if keep is None:
                for a, b in pairs:
                    yield frame(a, b, got[a], got[b], files[a].name, line, strip=False)
            else:
                if line - 1 + n > len(keep):
                    first = next(iter(readers))
                    raise self._mismatch(len(keep), count_files([files[first]])[str(files[first])])
                mask = pl.Series(keep[line - 1:line - 1 + n])
                numbers = pl.int_range(line, line + n, dtype=pl.Int64, eager=True).filter(mask)
                for a, b in pairs:
                    yield frame(a, b, got[a].filter(mask), got[b].filter(mask), files[a].name, numbers, strip=False)
            line += n
        if keep is not None and line - 1 != len(keep):
            raise self._mismatch(len(keep), line - 1)

    def count(self, pivots: Pivots) -> dict[tuple[str, str], int]:
        files, pairs = self.pairs(pivots)
        used = sorted({lang for pair in pairs for lang in pair})
        n = next(iter(count_files([files[lang] for lang in used]).values()))
        keep = self._selection()
        if keep is not None:
            if n != len(keep):
                raise self._mismatch(len(keep), n)
            n = int(keep.sum())
        return dict.fromkeys(pairs, n)

    def _selection(self) -> np.ndarray | None:
        """A boolean per line: the lines of the documents ``documents`` selects (``None``: every line)."""
        ids_file = self.document_ids_file()
        if ids_file is None:
            return None
        ids = document_ids(ids_file)
        train, held = split_lines(ids, self.held_out_every)
        keep = np.zeros(len(ids), dtype=bool)
        keep[train if self.documents == "train" else held] = True
        return keep

    def _mismatch(self, n_ids: int, n_lines: int) -> BitextFormatError:
        return BitextFormatError(f"{self.document_ids_file()}: {n_ids} document ids, but the nway files "
                                 f"({self.where()}) have {n_lines} lines; expected one id per line")
