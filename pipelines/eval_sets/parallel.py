"""N-way parallel sets for xSIM → ``eval_parallel`` (methods.md §7.8; LASER ``source/xsim.py``, ``tasks/xsim``).

Table ``eval_parallel``: ``dataset``, ``lang`` (the code in the file name), ``idx`` (0-based line: line i of every
language is the same sentence), ``text`` (stripped).

- NTREX-128 (MicrosoftTranslator/NTREX): ``newstest2019-src.eng.txt`` (the English source, ``lang="eng"``, always
  read: xSIM retrieves into it) and ``newstest2019-ref.{code}.txt`` (one human translation per language; codes such
  as ``deu``, ``aze-Latn``, ``zho-CN``). ``LANGUAGES.tsv`` (``code`` then the language name, space-separated) is the
  dataset's code list, read for the languages' display names. Second references (``newstest2019-ref-2.spa.txt``) are
  skipped and counted.
- FLORES (facebookresearch/flores; FLORES-101 ``{split}/{lang}.{split}``, FLORES-200 ``{split}/{lang_Script}.{split}``;
  LASER ``tasks/xsim`` reads ``flores200/devtest/{lang}.devtest``): the folder may be the release root (with the
  split folders) or a split folder itself.

All selected languages must have the same line count (an error lists every file and count; trailing blank lines are
ignored), and a file with no readable line fails naming it. A blank line inside a file is a malformed row: line i is
dropped from *every* language's file at once, counted in the stage's ``skipped`` stats with its file and line, and
logged (:class:`~pipelines.eval_sets.lines.AlignedRows`). The other rows keep their ``idx``, so every language has
the same ``idx`` values and xSIM, which pairs languages by position after sorting on ``idx``, stays aligned; dropping
the line in its own language alone would shift every later sentence onto the wrong translation. Only the languages
read are aligned (and lose the row): a blank line in a language not selected costs nothing.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import polars as pl
from pydantic import Field, model_serializer, model_validator

from pipelines.eval_sets.lines import (
    AlignedRows,
    EvalFormatError,
    Skipped,
    aligned_lines,
    concat,
    drop_trailing_blank,
    read_text_lines,
    short,
    skipped_or_new,
)
from pipelines.eval_sets.source_config import StrictConfig
from pipelines.key_defaults import without_defaults
from pipelines.language_codes import data_language, language_name
from pipelines.ntrex_documents import DOCUMENT_IDS, HELD_OUT_EVERY, Documents, selected_lines

log = logging.getLogger("polysent.pipelines.eval_sets")

SCHEMA = {"dataset": pl.String, "lang": pl.String, "idx": pl.Int32, "text": pl.String}
TABLE = "eval_parallel"

NTREX_SOURCE = "newstest2019-src.eng.txt"
NTREX_LANGUAGES = "LANGUAGES.tsv"
_NTREX_REF = re.compile(r"newstest2019-ref(?P<second>-2)?\.(?P<code>[^.]+)\.txt")


def _aligned(dataset: str, files: dict[str, Path], skipped: Skipped, names: dict[str, str] | None = None,
             documents: tuple[Path, Documents, int] | None = None) -> pl.DataFrame:
    """The N-way table of ``files`` (lang → file); a row with a blank line in any language is dropped from all.
    ``documents`` (ids file, which documents, held_out_every) keeps only the lines of those documents
    (``pipelines.ntrex_documents``), with their own line numbers as ``idx``."""
    texts = dict(zip(files, aligned_lines(*files.values()), strict=True))
    n = len(next(iter(texts.values()), []))
    rows = AlignedRows(files, TABLE, f"{dataset} ({len(files)} languages)", n)
    for lang, t in texts.items():
        rows.blank(lang, t, f"the {lang} translation of line i of every other language's file")
    keep = rows.report(skipped)
    if documents is not None and documents[1] != "all":
        ids_file, which, every = documents
        chosen = set(selected_lines(ids_file, which, every, n_lines=n) or ())
        keep = [i for i in keep if i in chosen]
        log.info("%s: %s documents (every %d-th document held out, %s): %d of %d lines", dataset, which, every,
                 short(ids_file), len(keep), n)
    frames = [pl.DataFrame({"dataset": dataset, "lang": lang, "idx": keep, "text": [t[i] for i in keep]},
                           schema=SCHEMA) for lang, t in texts.items()]
    log.info("%s: %d languages × %d sentences (%d rows dropped) (%s)", dataset, len(files), len(keep), n - len(keep),
             ", ".join(f"{lang} {language_name(lang, names)}" for lang in files))
    return concat(frames, SCHEMA)


def _pick(found: dict[str, Path], languages: Sequence[str], where: Path, always: Sequence[str] = ()) -> dict[str, Path]:
    wanted = list(dict.fromkeys([*always, *(languages or sorted(found))]))
    missing = [lang for lang in wanted if lang not in found]
    if missing:
        raise FileNotFoundError(f"{where}: no file for languages {missing} (found: {sorted(found)})")
    return {lang: found[lang] for lang in wanted}


# --------------------------------------------------------------------------------------------------------------------
# NTREX-128


def ntrex_codes(folder: Path) -> dict[str, str]:
    """code → language name from ``LANGUAGES.tsv`` (empty when the file is absent)."""
    path = Path(folder) / NTREX_LANGUAGES
    if not path.is_file():
        return {}
    out = {}
    for i, line in enumerate(drop_trailing_blank(read_text_lines(path)), start=1):
        parts = line.split(None, 1)
        if len(parts) != 2:
            raise EvalFormatError(f"{path}:{i}: expected a language code and its name, found {line!r}")
        out[parts[0]] = parts[1].strip()
    return out


def ntrex_files(folder: Path, languages: Sequence[str] = (), skipped: Skipped | None = None) -> dict[str, Path]:
    """lang → file for ``languages`` (empty = all), the English source (``eng``) always included."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"NTREX folder not found: {folder} (expected {NTREX_SOURCE} and "
                                "newstest2019-ref.{code}.txt)")
    if not (folder / NTREX_SOURCE).is_file():
        raise FileNotFoundError(f"{folder}: {NTREX_SOURCE} (the English source) is missing")
    found = {"eng": folder / NTREX_SOURCE}
    for path in sorted(folder.glob("newstest2019-ref*.txt")):
        m = _NTREX_REF.fullmatch(path.name)
        if not m:
            continue
        if m["second"]:
            if skipped is not None:
                skipped.add(TABLE, f"{short(path)}: line of a second reference (one translation per language is "
                                   "read)", len(drop_trailing_blank(read_text_lines(path))))
            continue
        code = m["code"]
        found[data_language(code, str(path))] = path
    return _pick(found, languages, folder, always=("eng",))


def read_ntrex(folder: Path, languages: Sequence[str] = (), dataset: str = "ntrex128",
               skipped: Skipped | None = None, documents: Documents = "all",
               held_out_every: int = HELD_OUT_EVERY) -> pl.DataFrame:
    """NTREX's N-way table; ``documents`` ``train`` / ``held_out`` keeps the lines of those documents only
    (``DOCUMENT_IDS.tsv`` in ``folder``; ``pipelines.ntrex_documents``)."""
    skipped = skipped_or_new(skipped)
    return _aligned(dataset, ntrex_files(folder, languages, skipped), skipped, ntrex_codes(folder),
                    (Path(folder) / DOCUMENT_IDS, documents, held_out_every))


# --------------------------------------------------------------------------------------------------------------------
# FLORES


def flores_files(folder: Path, languages: Sequence[str] = (), split: str = "devtest") -> dict[str, Path]:
    """lang → ``{split}/{lang}.{split}`` (or ``{lang}.{split}`` directly in ``folder``)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"FLORES folder not found: {folder} (expected {split}/{{lang}}.{split} files)")
    base = folder / split if (folder / split).is_dir() else folder
    found = {p.name[: -len(split) - 1]: p for p in sorted(base.glob(f"*.{split}")) if p.is_file()}
    if not found:
        raise FileNotFoundError(f"{folder}: no FLORES {split} files ({{lang}}.{split}, in {split}/ or directly)")
    picked = _pick(found, languages, base)
    for lang, path in picked.items():
        data_language(lang, str(path))
    return picked


def read_flores(folder: Path, languages: Sequence[str] = (), split: str = "devtest",
                dataset: str = "flores200", skipped: Skipped | None = None) -> pl.DataFrame:
    return _aligned(dataset, flores_files(folder, languages, split), skipped_or_new(skipped))


# --------------------------------------------------------------------------------------------------------------------


class ParallelSource(StrictConfig):
    format: Literal["ntrex", "flores"] = Field(
        description="ntrex: newstest2019-src.eng.txt + newstest2019-ref.{code}.txt; flores: {split}/{lang}.{split}")
    path: Path = Field(description="the dataset's folder")
    languages: list[str] = Field(default_factory=list, description="codes as in the file names (deu, zho-CN, "
                                                                   "eng_Latn); empty = all; NTREX always adds eng")
    split: str = Field("devtest", description="FLORES split (dev, devtest); unused for NTREX")
    name: str | None = Field(None, description="dataset column (default ntrex128 / flores200)")
    documents: Documents = Field("all", description="NTREX: all lines, or only the training / held-out documents "
                                 "(DOCUMENT_IDS.tsv; every held_out_every-th document held out)")
    held_out_every: int = Field(HELD_OUT_EVERY, ge=2, description="NTREX: every n-th document is held out")

    @model_serializer(mode="wrap")
    def _key(self, handler: Any) -> Any:
        """The document split stays out of the dump (and cache keys) while unset."""
        return without_defaults(self, handler(self), ("documents", "held_out_every"))

    @model_validator(mode="after")
    def _documents_for_ntrex(self) -> ParallelSource:
        if self.documents != "all" and self.format != "ntrex":
            raise ValueError(f"documents: {self.documents} splits NTREX by its DOCUMENT_IDS.tsv; format "
                             f"{self.format} has no document ids (expected documents: all)")
        return self


def read_parallel(source: ParallelSource, skipped: Skipped | None = None) -> pl.DataFrame:
    """One configured entry of ``EvalSources.parallel``."""
    if source.format == "ntrex":
        return read_ntrex(source.path, source.languages, source.name or "ntrex128", skipped, source.documents,
                          source.held_out_every)
    return read_flores(source.path, source.languages, source.split, source.name or "flores200", skipped)


def parallel_files(source: ParallelSource) -> list[Path]:
    if source.format == "ntrex":
        files = list(ntrex_files(source.path, source.languages).values())
        codes, ids = Path(source.path) / NTREX_LANGUAGES, Path(source.path) / DOCUMENT_IDS
        if source.documents != "all" and not ids.is_file():
            raise FileNotFoundError(f"{ids}: missing; documents: {source.documents} reads NTREX's document ids "
                                    "(one id a line, line-aligned with newstest2019-src.eng.txt)")
        return sorted(files + ([codes] if codes.is_file() else []) + ([ids] if source.documents != "all" else []))
    return sorted(flores_files(source.path, source.languages, source.split).values())
