"""Leakage guard: training units whose text occurs in an evaluation set are removed and counted.

VMSST had to strip the Tatoeba test sentences from its training bitext by hand; here every corpus node (``xnli_groups``,
``nli_triples``, ``bitext_pairs``) takes the same configured evaluation sets, removes every unit (group, triple, pair)
with a member whose normalised text (``pipelines.text_normalise``) equals a normalised evaluation text, and writes a
``leakage`` table: ``corpus, eval_set, lang, units_removed``.

Evaluation sets are read from files: ``lines`` (one sentence per line: Tatoeba, FLORES, NTREX), ``tsv`` (chosen
0-based columns: BUCC ``id<TAB>sentence`` → ``[1]``, STS ``s1<TAB>s2`` → ``[0, 1]``, XNLI ``[0, 1]``) or ``csv``
(named columns with a header, quoted: stsb-multi-mt ``[s1, s2]``). ``path`` may be a file, a folder (every file in it)
or a glob. ``ntrex``: an NTREX-128 folder as published (``newstest2019-src.eng.txt``, ``newstest2019-ref.{code}.txt``),
``languages`` (codes as in the file names; English always) and ``documents``: ``held_out`` reads only the lines of
the documents an xSIM set with ``documents: held_out`` scores (``pipelines.ntrex_documents``), so a corpus built
from NTREX's training documents loses only what actually overlaps the evaluation.
"""

from __future__ import annotations

import glob
import gzip
import logging
from pathlib import Path
from typing import ClassVar, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, model_validator

from pipelines.key_defaults import KeyWhenSet
from pipelines.ntrex_documents import DOCUMENT_IDS, HELD_OUT_EVERY, Documents, selected_lines
from pipelines.text_normalise import normalise_series

log = logging.getLogger("polysent.pipelines.leakage")
LEAKAGE_SCHEMA = {"corpus": pl.Utf8, "eval_set": pl.Utf8, "lang": pl.Utf8, "units_removed": pl.Int64}


class EvalSetSpec(KeyWhenSet):
    model_config = ConfigDict(extra="forbid")
    name: str
    """names the set in the ``leakage`` counts"""
    path: Path
    """a file, a folder (its files), a glob, or for ``ntrex`` the NTREX-128 folder"""
    format: Literal["lines", "tsv", "csv", "ntrex"] = "lines"
    """``lines`` (one text per line), ``tsv`` / ``csv`` (the ``columns`` given) or ``ntrex`` (the NTREX-128 files of
    ``languages``)"""
    columns: list[int | str] = Field(default_factory=list)
    """tsv: 0-based indices; csv: header names, or 0-based indices for a file without a header row"""
    languages: list[str] = Field(default_factory=list)
    """ntrex: codes as in the file names (deu, zho-CN); empty = all; English (eng) always"""
    documents: Documents = "all"
    """ntrex: all lines, or the training / held-out documents only"""
    held_out_every: int = Field(HELD_OUT_EVERY, ge=2)
    """ntrex: every n-th document is held out"""
    # the NTREX fields stay out of the dump (and cache keys) while unset
    KEY_WHEN_SET: ClassVar[tuple[str, ...]] = ("languages", "documents", "held_out_every")

    @model_validator(mode="after")
    def _ntrex_fields(self) -> EvalSetSpec:
        if self.format != "ntrex" and (self.languages or self.documents != "all"):
            raise ValueError(f"leakage eval set {self.name!r}: languages and documents are for format ntrex (an "
                             f"NTREX-128 folder), not {self.format}")
        return self

    def resolve(self) -> list[Path]:
        if self.format == "ntrex":
            from pipelines.eval_sets.parallel import ntrex_files

            files = sorted(ntrex_files(self.path, self.languages).values())
            return files + ([self.path / DOCUMENT_IDS] if self.documents != "all" else [])
        p = str(self.path)
        if any(c in p for c in "*?["):
            found = sorted(Path(f) for f in glob.glob(p) if Path(f).is_file())
        elif self.path.is_dir():
            found = sorted(f for f in self.path.iterdir() if f.is_file() and not f.name.startswith("."))
        else:
            found = [self.path] if self.path.exists() else []
        if not found:
            raise FileNotFoundError(f"leakage.eval_sets {self.name!r}: no files match {self.path}")
        return found


class LeakageSettings(BaseModel):
    """Which evaluation sets the training corpora must not contain."""

    model_config = ConfigDict(extra="forbid")
    eval_sets: list[EvalSetSpec] = Field(default_factory=list)
    """the evaluation files whose texts the training corpora must not contain"""
    min_normalised_chars: int = Field(1, ge=1)
    """evaluation texts shorter than this (after normalising) are not matched: a one-word test sentence would remove
    every pair saying it"""

    def files(self) -> dict[str, Path]:
        return {f"leakage/{s.name}/{p.name}": p for s in self.eval_sets for p in s.resolve()}


def _read_ntrex_texts(spec: EvalSetSpec, path: Path) -> list[str]:
    """The lines of one NTREX file that ``spec.documents`` selects (every line for ``all``); the ids file itself
    holds no evaluation text."""
    from pipelines.eval_sets.lines import read_text_lines

    if path.name == DOCUMENT_IDS:
        return []
    lines = read_text_lines(path)
    chosen = selected_lines(path.parent / DOCUMENT_IDS, spec.documents, spec.held_out_every, n_lines=len(lines))
    return lines if chosen is None else [lines[i] for i in chosen]


def _read_texts(spec: EvalSetSpec, path: Path) -> list[str]:
    if spec.format == "ntrex":
        return _read_ntrex_texts(spec, path)
    opener = gzip.open if path.suffix == ".gz" else open
    if spec.format == "csv":
        # header names, or 0-based indices for a file without a header row (stsb_multi_mt's ``s1,s2,score``)
        indexed = bool(spec.columns) and all(isinstance(c, int) for c in spec.columns)
        if spec.columns and not indexed and any(isinstance(c, int) for c in spec.columns):
            raise ValueError(f"leakage eval set {spec.name!r}: csv columns are all header names or all 0-based "
                             f"indices (a file without a header row), got {spec.columns}")
        df = pl.read_csv(path, infer_schema=False, has_header=not indexed)
        if indexed and max(int(c) for c in spec.columns) >= df.width:
            raise ValueError(f"{path}: leakage eval set {spec.name!r} reads column {max(spec.columns)} (0-based), "
                             f"the file has {df.width} comma-separated columns")
        cols = ([df.columns[int(c)] for c in spec.columns] if indexed
                else [str(c) for c in spec.columns] or df.columns)
        missing = [c for c in cols if c not in df.columns]
        if missing:
            raise ValueError(f"{path}: leakage eval set {spec.name!r} needs columns {missing}; "
                             f"the file has {df.columns}")
        return [t for c in cols for t in df[c].to_list() if t]
    texts: list[str] = []
    with opener(path, "rt", encoding="utf-8-sig", errors="strict", newline=None) as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\n")
            if spec.format == "lines":
                texts.append(line)
                continue
            fields = line.split("\t")
            for c in spec.columns or range(len(fields)):
                if not isinstance(c, int):
                    raise ValueError(f"leakage eval set {spec.name!r}: tsv columns are 0-based indices, got {c!r}")
                if c >= len(fields):
                    if line.strip():
                        raise ValueError(f"{path}:{lineno}: leakage eval set {spec.name!r} reads column {c}, the "
                                         f"line has {len(fields)} tab-separated fields")
                    continue
                texts.append(fields[c])
    return texts


class EvalTextIndex:
    """Normalised evaluation texts → the evaluation sets they come from."""

    def __init__(self, texts: pl.DataFrame) -> None:
        self.texts = texts  # columns norm, eval_set (unique pairs)

    @classmethod
    def empty(cls) -> EvalTextIndex:
        return cls(pl.DataFrame(schema={"norm": pl.Utf8, "eval_set": pl.Utf8}))

    @classmethod
    def from_settings(cls, settings: LeakageSettings | None) -> EvalTextIndex:
        if settings is None or not settings.eval_sets:
            return cls.empty()
        frames = []
        for spec in settings.eval_sets:
            raw = [t for p in spec.resolve() for t in _read_texts(spec, p)]
            norm = normalise_series(pl.Series("norm", raw, dtype=pl.Utf8))
            frames.append(pl.DataFrame({"norm": norm}).filter(pl.col("norm").str.len_chars()
                                                              >= settings.min_normalised_chars)
                          .unique().with_columns(pl.lit(spec.name).alias("eval_set")))
            log.info("leakage: eval set %s: %d texts, %d distinct normalised", spec.name, len(raw), frames[-1].height)
        return cls(pl.concat(frames).sort("eval_set", "norm"))

    def __len__(self) -> int:
        return self.texts.height

    def matches(self, members: pl.DataFrame) -> pl.DataFrame:
        """``members`` (``unit``, ``lang``, ``norm``) → the (``unit``, ``lang``, ``eval_set``) that leak."""
        if not len(self):
            return pl.DataFrame(schema={"unit": members.schema["unit"], "lang": pl.Utf8, "eval_set": pl.Utf8})
        return members.join(self.texts, on="norm", how="inner").select("unit", "lang", "eval_set").unique()


def leakage_counts(corpus: str, matched: pl.DataFrame) -> pl.DataFrame:
    """Matched (``unit``, ``lang``, ``eval_set``) → the ``leakage`` table rows for ``corpus``."""
    if matched.is_empty():
        return pl.DataFrame(schema=LEAKAGE_SCHEMA)
    return (matched.group_by("eval_set", "lang").agg(pl.col("unit").n_unique().cast(pl.Int64).alias("units_removed"))
            .select(pl.lit(corpus).alias("corpus"), "eval_set", "lang", "units_removed").sort("eval_set", "lang"))
