"""Pair-classification sets (paraphrase detection: PAWS-X; mteb's PairClassification family) → Parquet.

Table ``eval_pair_classification``: ``dataset``, ``lang``, ``split``, ``idx`` (1-based line of the row in its file),
``s1``, ``s2`` (stripped), ``label`` (1 = paraphrase, 0 = not). Table ``eval_pair_classification_bad_rows``: every
row that was not read (``dataset``, ``lang``, ``split``, ``file`` as ``folder/name``, ``line``, ``reason``, ``text``:
the raw line, cut at 200 characters), so a user can see and fix each one. As in every reader of the stage
(:class:`pipelines.eval_sets.lines.BadRows`), each bad row is also logged as ``file:line: problem`` and counted in the
stage's ``skipped`` stats per file and problem, naming its lines.

Formats (``format`` of a ``sources.eval.pair_classification`` entry):

- ``pawsx``, the release as Google publishes it (google-research-datasets/paws, ``x-final.tar.gz``):
  ``x-final/{lang}/dev_2k.tsv``, ``test_2k.tsv``, ``translated_train.tsv`` (``en``: ``train.tsv``), each with the
  header ``id<TAB>sentence1<TAB>sentence2<TAB>label``; no quoting (a line is split at its tabs, as XTREME's
  ``utils_preprocess.pawsx_preprocess`` reads it: sentences hold bare ``"``). ``path`` is the ``x-final`` folder or
  the folder holding it. Splits are named ``dev``, ``test``, ``train`` (mteb's ``validation`` is ``dev``).
- ``pawsx`` in the XTREME layout (``bash scripts/download_data.sh`` → ``download/pawsx/{split}-{lang}.tsv``): no header,
  ``sentence1<TAB>sentence2<TAB>label``, written by Python's ``csv.writer(delimiter="\\t")``, so a field holding ``"``
  is CSV-quoted: read with the csv module, as XTREME's own loader does. XTREME strips the labels of its test files
  (rows of two fields): such a file is skipped as a whole, counted and logged, since it cannot be scored. A flat file
  that starts with the header ``id, sentence1, sentence2, label`` (the HF dataset written with ``to_csv(sep="\\t")``)
  is read by its header.
- ``tsv``: one file of any pair-classification set, two sentences and a binary label per row: either a header naming
  ``sentence1``, ``sentence2`` and ``label`` (other columns ignored) or, without one, exactly those three fields in that
  order. ``quoting``: ``csv`` (pandas / csv.writer output) or ``none`` (split at tabs).

Bad rows (a label that is not ``0`` or ``1`` — PAWS-X has some, the HF loader maps them to −1 —, a missing or empty
sentence, a wrong field count, invalid UTF-8, a quote left open) are skipped, never fatal. A file that cannot be read
at all fails naming it: it cannot be opened, an ``x-final`` file lacks its header, or not one of its rows is valid.
Language codes from folder and file names are data (:func:`pipelines.language_codes.data_language`).
"""

from __future__ import annotations

import csv
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import polars as pl
from pydantic import Field, field_validator, model_validator

from pipelines.eval_sets.lines import BadRows, EvalFormatError, Skipped, concat, short, skipped_or_new
from pipelines.eval_sets.source_config import StrictConfig, checked_languages
from pipelines.language_codes import data_language

log = logging.getLogger("polysent.pipelines.eval_sets")

TABLE = "eval_pair_classification"
BAD_TABLE = "eval_pair_classification_bad_rows"
SCHEMA = {"dataset": pl.String, "lang": pl.String, "split": pl.String, "idx": pl.Int32, "s1": pl.String,
          "s2": pl.String, "label": pl.Int8}
BAD_SCHEMA = {"dataset": pl.String, "lang": pl.String, "split": pl.String, "file": pl.String, "line": pl.Int32,
              "reason": pl.String, "text": pl.String}

PAWSX_HEADER = ("id", "sentence1", "sentence2", "label")
# x-final file stem → split (the XTREME layout's names)
PAWSX_SPLITS = {"dev_2k": "dev", "test_2k": "test", "translated_train": "train", "train": "train"}
_FLAT = re.compile(r"(?P<split>[A-Za-z0-9]+)-(?P<lang>[^.]+)\.tsv")
_SHOWN = 200  # characters of a bad row kept in the bad-rows table


@dataclass
class PairFile:
    """One file to read: where it is, what its rows are, and how it is split into fields."""

    path: Path
    dataset: str
    lang: str
    split: str
    layout: str  # "xfinal" (header required, no quoting), "flat" (XTREME / HF export, CSV), "tsv" (generic)
    quoting: str = "csv"


@dataclass
class _Result:
    rows: list[tuple[int, str, str, int]] = field(default_factory=list)
    bad: list[tuple[int, str, str, str]] = field(default_factory=list)  # (line, problem, detail, raw text)
    unlabelled: int = 0


# --------------------------------------------------------------------------------------------------------------------
# finding the files


def _xfinal_root(folder: Path) -> Path | None:
    """The folder whose language subfolders hold ``dev_2k.tsv`` / ``test_2k.tsv``: ``folder`` or ``folder/x-final``."""
    for root in (folder / "x-final", folder):
        if root.is_dir() and any(p.is_file() for p in root.glob("*/*_2k.tsv")):
            return root
    return None


def pawsx_files(folder: Path, languages: Sequence[str] = (), splits: Sequence[str] = (),
                dataset: str = "pawsx") -> list[PairFile]:
    """Every PAWS-X file for ``languages`` × ``splits`` (empty = all found), in either published layout."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"PAWS-X folder not found: {folder} (expected x-final/{{lang}}/{{dev_2k,test_2k}}.tsv "
                                "or XTREME's {split}-{lang}.tsv)")
    found: dict[tuple[str, str], PairFile] = {}
    root = _xfinal_root(folder)
    if root is not None:
        for path in sorted(root.glob("*/*.tsv")):
            lang = data_language(path.parent.name, str(path.parent))
            split = PAWSX_SPLITS.get(path.stem, path.stem)
            found[(lang, split)] = PairFile(path, dataset, lang, split, "xfinal", "none")
    else:
        for path in sorted(folder.glob("*-*.tsv")):
            m = _FLAT.fullmatch(path.name)
            if m and path.is_file():
                lang = data_language(m["lang"], str(path))
                found[(lang, m["split"])] = PairFile(path, dataset, lang, m["split"], "flat", "csv")
    if not found:
        raise FileNotFoundError(f"{folder}: no PAWS-X files (expected x-final/{{lang}}/{{dev_2k,test_2k}}.tsv or "
                                "XTREME's {split}-{lang}.tsv)")
    have_langs = sorted({lang for lang, _ in found})
    have_splits = sorted({split for _, split in found})
    missing = [lang for lang in languages if lang not in have_langs]
    if missing:
        raise FileNotFoundError(f"{folder}: no PAWS-X files for languages {missing} (found: {have_langs})")
    missing = [s for s in splits if s not in have_splits]
    if missing:
        raise FileNotFoundError(f"{folder}: no PAWS-X files for splits {missing} (found: {have_splits})")
    return [f for (lang, split), f in sorted(found.items())
            if (not languages or lang in languages) and (not splits or split in splits)]


def pair_files(source: PairClassificationSource) -> list[PairFile]:
    """The files one configured ``sources.eval.pair_classification`` entry reads."""
    if source.format == "pawsx":
        return pawsx_files(source.path, source.languages, source.splits, source.name or "pawsx")
    if not Path(source.path).is_file():
        raise FileNotFoundError(f"pair-classification TSV not found: {source.path}")
    assert source.language is not None  # the settings model requires it for format tsv
    return [PairFile(Path(source.path), source.name or Path(source.path).stem, source.language,
                     source.split, "tsv", source.quoting)]


# --------------------------------------------------------------------------------------------------------------------
# reading one file


def _lines(path: Path) -> Iterator[tuple[int, str | None]]:
    """(1-based line number, text without its line break, or None when the line is not valid UTF-8)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EvalFormatError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    raw = data.split(b"\n")
    while raw and not raw[-1].strip():  # blank lines at the end are padding, not rows
        raw.pop()
    for i, line in enumerate(raw, start=1):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            yield i, None
            continue
        yield i, text[:-1] if text.endswith("\r") else text


def _fields_plain(path: Path) -> Iterator[tuple[int, list[str] | None, str]]:
    for i, text in _lines(path):
        yield i, (None if text is None else text.split("\t")), text or ""


def _fields_csv(path: Path) -> Iterator[tuple[int, list[str] | str | None, str]]:
    """Rows of a tab-separated CSV file with the line each starts on; an undecodable line gives None, a row the csv
    module refuses gives its error message."""
    numbered = list(_lines(path))
    undecodable = {i for i, text in numbered if text is None}
    texts = {i: text or "" for i, text in numbered}
    reader = csv.reader((text or "" for _, text in numbered), delimiter="\t")
    start = 1
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield start, f"not valid tab-separated CSV|: {exc}", texts.get(start, "")
            start = reader.line_num + 1
            continue
        if start in undecodable:
            yield start, None, ""
        elif reader.line_num > start:
            yield start, f"a quote opened here is closed on a later line|: line {reader.line_num}", texts.get(start, "")
        else:
            yield start, fields, texts.get(start, "")
        start = reader.line_num + 1


def _header(fields: Sequence[str]) -> dict[str, int] | None:
    names = [f.strip().lower() for f in fields]
    if {"sentence1", "sentence2", "label"} <= set(names):
        return {n: names.index(n) for n in ("sentence1", "sentence2", "label")}
    return None


def _read_file(pf: PairFile) -> _Result:
    res = _Result()
    rows = _fields_plain(pf.path) if pf.quoting == "none" else _fields_csv(pf.path)
    columns: dict[str, int] | None = None
    width, names = 3, "sentence1, sentence2, label"
    first = True
    for line, fields, text in rows:
        if first:
            first = False
            columns = _header(fields) if isinstance(fields, list) else None
            if pf.layout == "xfinal" and (not isinstance(fields, list)
                                          or tuple(f.strip() for f in fields) != PAWSX_HEADER):
                got = fields if isinstance(fields, list) else "not UTF-8 text"
                raise EvalFormatError(f"{pf.path}:1: header {got}; expected {list(PAWSX_HEADER)} (the PAWS-X x-final "
                                      "release): the file cannot be read")
            if columns is not None:
                width, names = len(fields), ", ".join(f.strip() for f in fields)  # type: ignore[union-attr]
                continue
            columns = {"sentence1": 0, "sentence2": 1, "label": 2}
        if fields is None:
            res.bad.append((line, "invalid UTF-8", "", text))
            continue
        if isinstance(fields, str):
            problem, _, detail = fields.partition("|")
            res.bad.append((line, problem, detail, text))
            continue
        if not any(f.strip() for f in fields):
            res.bad.append((line, "blank line", "", text))
            continue
        if pf.layout == "flat" and len(fields) == 2 and width == 3:
            res.unlabelled += 1  # XTREME's test files: labels removed
            res.bad.append((line, "no label", "", text))
            continue
        if len(fields) != width:
            res.bad.append((line, f"expected {width} tab-separated fields ({names})", f", found {len(fields)}",
                            text))
            continue
        s1, s2 = fields[columns["sentence1"]].strip(), fields[columns["sentence2"]].strip()  # type: ignore[index]
        label = fields[columns["label"]].strip()  # type: ignore[index]
        if not s1 or not s2:
            res.bad.append((line, f"missing {'sentence1' if not s1 else 'sentence2'}", "", text))
            continue
        if label not in ("0", "1"):
            res.bad.append((line, "label not 0 or 1", f" (got {label!r})", text))
            continue
        res.rows.append((line, s1, s2, int(label)))
    return res


# --------------------------------------------------------------------------------------------------------------------


def read_pair_files(files: Sequence[PairFile], skipped: Skipped | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``(eval_pair_classification, eval_pair_classification_bad_rows)`` of ``files``."""
    skipped = skipped_or_new(skipped)
    frames, bad_frames = [], []
    for pf in files:
        res = _read_file(pf)
        where = short(pf.path)
        if res.unlabelled and not res.rows and res.unlabelled == len(res.bad):
            log.warning("%s: no labels in any of its %d rows (XTREME removes the test labels); file skipped, it cannot "
                        "be scored", pf.path, res.unlabelled)
            skipped.add(TABLE, f"{where}: unlabelled file ({res.unlabelled} rows)", res.unlabelled)
            continue
        bad = BadRows(pf.path, TABLE)
        for line, problem, detail, _ in res.bad:
            bad.add(line, problem, detail)
        bad.report(len(res.rows), skipped)  # raises naming the file when not one row is readable
        if res.bad:
            bad_frames.append(pl.DataFrame(
                {"dataset": pf.dataset, "lang": pf.lang, "split": pf.split, "file": where,
                 "line": [b[0] for b in res.bad], "reason": [b[1] + b[2] for b in res.bad],
                 "text": [b[3][:_SHOWN] for b in res.bad]}, schema=BAD_SCHEMA))
        if not res.rows:
            log.warning("%s: no pairs (empty file)", pf.path)
            skipped.add(TABLE, f"{where}: empty file", 1)
            continue
        frames.append(pl.DataFrame(
            {"dataset": pf.dataset, "lang": pf.lang, "split": pf.split, "idx": [r[0] for r in res.rows],
             "s1": [r[1] for r in res.rows], "s2": [r[2] for r in res.rows], "label": [r[3] for r in res.rows]},
            schema=SCHEMA))
        log.info("%s %s %s: %d pairs (%d positive)", pf.dataset, pf.lang, pf.split, len(res.rows),
                 sum(r[3] for r in res.rows))
    return concat(frames, SCHEMA), concat(bad_frames, BAD_SCHEMA)


class PairClassificationSource(StrictConfig):
    format: Literal["pawsx", "tsv"] = Field(
        description="pawsx: PAWS-X as published (x-final/{lang}/{dev_2k,test_2k,translated_train}.tsv) or in XTREME's "
                    "layout ({split}-{lang}.tsv); tsv: one file of sentence1, sentence2, label (0/1) rows")
    path: Path = Field(description="pawsx: the x-final folder (or the folder holding it) or XTREME's pawsx folder; "
                                   "tsv: the file")
    languages: list[str] = Field(default_factory=list, description="pawsx: language codes as in the folder / file "
                                                                   "names; empty = all found")
    splits: list[str] = Field(default_factory=lambda: ["dev", "test"],
                              description="pawsx: splits (dev, test, train); empty = all found (train is 49k "
                                          "machine-translated pairs per language)")
    name: str | None = Field(None, description="dataset column (default pawsx, or the tsv file's stem)")
    language: str | None = Field(None, description="tsv: the language code of the pairs (required)")
    split: str = Field("test", description="tsv: the split the file is")
    quoting: Literal["csv", "none"] = Field("csv", description="tsv: csv (fields holding quotes are CSV-quoted, as "
                                                               "pandas and csv.writer write) or none (split at tabs)")

    @field_validator("languages")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        return checked_languages(value, "sources.eval.pair_classification.languages")

    @model_validator(mode="after")
    def _tsv_language(self) -> PairClassificationSource:
        if self.format == "tsv":
            if self.language is None:
                raise ValueError(f"{self.path}: format tsv needs language (the language code of its pairs)")
            checked_languages([self.language], "sources.eval.pair_classification.language")
        return self


def read_pair_classification(source: PairClassificationSource,
                             skipped: Skipped | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One configured entry of ``EvalSources.pair_classification``."""
    return read_pair_files(pair_files(source), skipped)
