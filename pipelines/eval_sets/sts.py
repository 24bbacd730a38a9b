"""Semantic textual similarity sets in their distribution formats → ``eval_sts`` (methods.md §7.4, §6.4, §4.5).

One table for every format: ``dataset``, ``subset``, ``lang1``/``lang2`` (the languages of ``s1``/``s2``), ``idx``
(1-based source line, or CSV row for stsb-multi-mt), ``s1``, ``s2`` (stripped), ``score`` (gold, 0–5).

- SemEval layout (SemEval-2017 task 1 release; the SentEval copies of STS12–16, ``SentEval/data/downstream/STS``):
  ``STS.input.{name}.txt`` (``s1<TAB>s2``; STS16 may add source-note columns, ignored) + ``STS.gs.{name}.txt`` (one
  score a line). A blank gold line marks a pair that was not scored (STS15/16 READMEs: "Blank lines indicate that the
  pair was not included in the official scoring"): skipped and counted, as SentEval ``STSEval.loadFile`` does. A gold
  file with no input file (STS12 ``ALL``, the licensed STS13 ``SMT``) is skipped and counted. ``subset`` = ``name``;
  ``dataset`` = the configured name (``sts17``) or ``sts12``…``sts16`` from a ``STS1x-en-test`` folder; languages from a
  ``.xx-yy`` suffix of ``name`` (English otherwise).
- STS Benchmark (``sts-{train,dev,test}.csv``): tab-separated, not CSV-quoted (sentences contain bare ``"``); fields
  4, 5, 6 (0-based) are score, s1, s2; some rows carry extra fields, ignored. ``dataset="stsb"``, ``subset`` = split.
- SICK (``SICK_test_annotated.txt``; SICK.txt with ``SemEval_set`` too): header; ``sentence_A``, ``sentence_B``,
  ``relatedness_score`` (1–5). ``dataset="sick-r"``, ``subset`` = ``SemEval_set`` lower-cased, else ``test``.
- stsb-multi-mt (PhilipMay/stsb-multi-mt; ``stsb-{lang}-{split}.csv``, CSV ``s1,s2,score``, no header, quoted where
  needed): files are row-parallel across languages. Monolingual subsets ``{a}-{a}`` and, with ``cross``, one subset
  ``{a}-{b}`` per ordered pair a ≠ b: s1 from a's row i, s2 from b's row i, score of row i. A row is a CSV record; a
  blank line inside the file is a (malformed) row, blank lines at the end are not. Row counts and the scores of the
  kept rows must agree across the files (else an error naming both files and the first differing row): a file that
  is not row-parallel is a whole-file problem, not a bad row.

A malformed row — too few fields, an empty sentence, a score that is not a number or lies outside [0, 5] — is skipped,
counted per file and problem with its lines, and logged (:class:`~pipelines.eval_sets.lines.BadRows`); a file with no
readable row fails naming it. In stsb-multi-mt a bad row in one language's file is dropped from *every* language's
file at once (:class:`~pipelines.eval_sets.lines.AlignedRows`): row i of each file is the same pair, so dropping it
from one file only would pair every later sentence with the wrong partner in the cross-lingual subsets; ``idx`` stays
the row number, the same in every subset.
"""

from __future__ import annotations

import csv
import itertools
import logging
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

import polars as pl
from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from pipelines.eval_sets.lines import (
    AlignedRows,
    BadRows,
    EvalFormatError,
    Skipped,
    concat,
    drop_trailing_blank,
    read_text_lines,
    short,
    skipped_or_new,
)
from pipelines.eval_sets.source_config import StrictConfig, checked_languages
from pipelines.language_codes import data_language

log = logging.getLogger("polysent.pipelines.eval_sets")

SCHEMA = {"dataset": pl.String, "subset": pl.String, "lang1": pl.String, "lang2": pl.String, "idx": pl.Int32,
          "s1": pl.String, "s2": pl.String, "score": pl.Float64}
TABLE = "eval_sts"
MIN_SCORE, MAX_SCORE = 0.0, 5.0

# SemEval-2017 track 6 (tr-en): STS.input.track6.tr-en.txt has 500 lines, STS.gs.track6.tr-en.txt 250 scores.
# The task README.txt says of every input file "One STS pair per line" and asks systems for "one line for each STS
# pair" of output; it says nothing of extra lines. Gold line i therefore scores input line i, and input lines 251–500
# have no gold score. This is the alignment mteb's STS17 subset "en-tr" holds (250 pairs whose character totals,
# 10,479 and 10,400, and mean score equal those of lines 1–250; lines 251–500 total 10,935 and 10,532) and the one
# mSimCSE eval/evaluation_xsts.py uses ("first 250 pairs per file"). Only this file may have surplus input lines.
SURPLUS_INPUT_LINES = {"STS.input.track6.tr-en.txt": (500, 250)}

# SemEval-2017: the column order does not always follow the xx-yy in the file name. In tracks 2, 4b and 6 the
# English sentence is the first column (read from the files; mteb names these subsets en-ar, –, en-tr, and its
# en-ar/en-tr text1 columns hold exactly these files' first columns). lang1/lang2 are the languages of s1/s2.
STS17_COLUMN_LANGUAGES = {"track2.ar-en": ("en", "ar"), "track4b.es-en": ("en", "es"), "track6.tr-en": ("en", "tr")}

_SUFFIX = re.compile(r".*\.(?P<l1>[a-z]{2,3})-(?P<l2>[a-z]{2,3})")
_SENTEVAL_FOLDER = re.compile(r"STS(?P<year>1[2-6])-en-test")


_SCORE_RANGE = f"a similarity score in [{MIN_SCORE:g}, {MAX_SCORE:g}]"


class _Bad(Protocol):
    """Where a malformed row is reported: :meth:`BadRows.add`'s signature (a file's rows, or one row of an aligned
    set: :class:`_AlignedRow`)."""

    def add(self, line: int, problem: str, detail: str = "") -> None: ...


class _AlignedRow:
    """Row ``row`` of ``key``'s file in ``rows``, reported like a :class:`BadRows` line (the row is dropped from every
    aligned file)."""

    def __init__(self, rows: AlignedRows, key: str, row: int) -> None:
        self.rows, self.key, self.row = rows, key, row

    def add(self, line: int, problem: str, detail: str = "") -> None:
        self.rows.add(self.key, self.row, problem, detail)


def _score(text: str, bad: _Bad, line: int) -> float | None:
    """The score, or None with the row reported to ``bad``."""
    try:
        value = float(text)
    except ValueError:
        bad.add(line, f"score is not a number; expected {_SCORE_RANGE}", f" ({text!r})")
        return None
    if not (math.isfinite(value) and MIN_SCORE <= value <= MAX_SCORE):
        bad.add(line, f"score outside [{MIN_SCORE:g}, {MAX_SCORE:g}]", f" ({value:g})")
        return None
    return value


def _pair(fields: Sequence[str], bad: _Bad, line: int, what: str) -> tuple[str, str] | None:
    """The stripped sentence pair, or None with the row reported to ``bad``."""
    s1, s2 = fields[0].strip(), fields[1].strip()
    if not s1 or not s2:
        bad.add(line, f"empty {'first' if not s1 else 'second'} sentence; expected {what}")
        return None
    return s1, s2


# --------------------------------------------------------------------------------------------------------------------
# SemEval layout


def semeval_dataset_name(folder: Path) -> str | None:
    """``sts12``…``sts16`` for SentEval's ``STS1x-en-test`` folders, else None."""
    m = _SENTEVAL_FOLDER.fullmatch(Path(folder).name)
    return f"sts{m['year']}" if m else None


def semeval_files(folder: Path) -> list[Path]:
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"STS folder not found: {folder} (expected STS.input.{{name}}.txt and "
                                "STS.gs.{name}.txt files)")
    return sorted(p for p in folder.glob("STS.*.txt") if p.name.startswith(("STS.input.", "STS.gs.")) and p.is_file())


def _languages(dataset: str, subset: str, where: Path) -> tuple[str, str]:
    if dataset == "sts17" and subset in STS17_COLUMN_LANGUAGES:
        return STS17_COLUMN_LANGUAGES[subset]
    m = _SUFFIX.fullmatch(subset)
    if not m:
        return "en", "en"
    return data_language(m["l1"], str(where)), data_language(m["l2"], str(where))


def read_semeval(folder: Path, dataset: str | None = None, skipped: Skipped | None = None) -> pl.DataFrame:
    """Every ``STS.input.{name}.txt`` + ``STS.gs.{name}.txt`` pair in ``folder`` (``dataset`` None: from the folder
    name, ``STS1x-en-test`` → ``sts1x``)."""
    skipped = skipped_or_new(skipped)
    folder = Path(folder)
    dataset = dataset or semeval_dataset_name(folder)
    if not dataset:
        raise ValueError(f"{folder}: give the dataset name of this SemEval-layout folder (e.g. sts17); it can only "
                         "be inferred from SentEval's STS12-en-test … STS16-en-test folder names")
    files = semeval_files(folder)
    inputs = [p for p in files if p.name.startswith("STS.input.")]
    golds = {p.name[len("STS.gs."):-len(".txt")]: p for p in files if p.name.startswith("STS.gs.")}
    if not inputs:
        raise FileNotFoundError(f"{folder}: no STS.input.*.txt files")
    frames = []
    for inp in inputs:
        subset = inp.name[len("STS.input."):-len(".txt")]
        gs = golds.pop(subset, None)
        if gs is None:
            raise FileNotFoundError(f"{inp} has no gold file STS.gs.{subset}.txt next to it")
        frames.append(_semeval_pair(inp, gs, dataset, subset, skipped))
    for subset, gs in sorted(golds.items()):
        skipped.add(TABLE, f"{short(gs)}: gold file without STS.input.{subset}.txt", len(read_text_lines(gs)))
    return concat(frames, SCHEMA)


def _semeval_pair(inp: Path, gs: Path, dataset: str, subset: str, skipped: Skipped) -> pl.DataFrame:
    lines = drop_trailing_blank(read_text_lines(inp))
    # trailing blank gold lines are unscored pairs (STS15/16 files end with some), not padding: trim only those
    # beyond the last input line
    gold = read_text_lines(gs)
    if len(gold) > len(lines) and not any(g.strip() for g in gold[len(lines):]):
        gold = gold[: len(lines)]
    if len(lines) != len(gold):
        if SURPLUS_INPUT_LINES.get(inp.name) == (len(lines), len(gold)):
            skipped.add(TABLE, f"{short(inp)}: input lines {len(gold) + 1}–{len(lines)} have no gold score (only "
                               f"the first {len(gold)} lines are scored)", len(lines) - len(gold))
            lines = lines[: len(gold)]
        else:
            raise EvalFormatError(f"{inp} has {len(lines)} lines but {gs} has {len(gold)}; line i of the gold file "
                                  "scores line i of the input file")
    lang1, lang2 = _languages(dataset, subset, inp)
    idx, s1s, s2s, scores = [], [], [], []
    unscored = 0
    bad_inp, bad_gs = BadRows(inp, TABLE), BadRows(gs, TABLE)
    good_inp = good_gs = 0
    for i, (line, g) in enumerate(zip(lines, gold, strict=True), start=1):
        if not g.strip():
            unscored += 1
            continue
        fields = line.split("\t")
        if len(fields) < 2:
            bad_inp.add(i, "expected s1<TAB>s2", f", found {len(fields)} field(s)")
            good_gs += _score(g.strip(), bad_gs, i) is not None
            continue
        pair = _pair(fields, bad_inp, i, "s1<TAB>s2")
        score = _score(g.strip(), bad_gs, i)
        good_inp += pair is not None
        good_gs += score is not None
        if pair is None or score is None:
            continue
        idx.append(i)
        s1s.append(pair[0])
        s2s.append(pair[1])
        scores.append(score)
    bad_inp.report(good_inp, skipped)  # a file fails when none of its own rows is readable
    bad_gs.report(good_gs, skipped)
    skipped.add(TABLE, f"{short(gs)}: blank gold line (pair not scored)", unscored)
    log.info("sts %s %s: %d scored pairs", dataset, subset, len(idx))
    return pl.DataFrame({"dataset": dataset, "subset": subset, "lang1": lang1, "lang2": lang2, "idx": idx,
                         "s1": s1s, "s2": s2s, "score": scores}, schema=SCHEMA)


# --------------------------------------------------------------------------------------------------------------------
# STS Benchmark, SICK


STSB_SPLITS = ("train", "dev", "test")


def stsbenchmark_files(folder: Path, splits: Sequence[str] = STSB_SPLITS) -> dict[str, Path]:
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"STS Benchmark folder not found: {folder} (expected sts-{{train,dev,test}}.csv)")
    files = {s: folder / f"sts-{s}.csv" for s in splits}
    missing = [p.name for p in files.values() if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{folder}: STS Benchmark files missing: {missing}")
    return files


def read_stsbenchmark(folder: Path, splits: Sequence[str] = STSB_SPLITS,
                      skipped: Skipped | None = None) -> pl.DataFrame:
    """``sts-{split}.csv``: genre, file, year, id, score, s1, s2 [, extra fields]; tab-separated, no quoting."""
    skipped = skipped_or_new(skipped)
    frames = []
    for split, path in stsbenchmark_files(folder, splits).items():
        lines = drop_trailing_blank(read_text_lines(path))
        bad = BadRows(path, TABLE)
        idx, s1s, s2s, scores = [], [], [], []
        for i, line in enumerate(lines, start=1):
            fields = line.split("\t")
            if len(fields) < 7:
                bad.add(i, "expected at least 7 tab-separated fields (genre, file, year, id, score, s1, s2)",
                        f", found {len(fields)}")
                continue
            pair = _pair(fields[5:7], bad, i, "s1 and s2 in fields 6 and 7")
            score = _score(fields[4].strip(), bad, i) if pair else None
            if pair is None or score is None:
                continue
            idx.append(i)
            s1s.append(pair[0])
            s2s.append(pair[1])
            scores.append(score)
        bad.report(len(idx), skipped)
        frames.append(pl.DataFrame({"dataset": "stsb", "subset": split, "lang1": "en", "lang2": "en", "idx": idx,
                                    "s1": s1s, "s2": s2s, "score": scores}, schema=SCHEMA))
        log.info("sts stsb %s: %d pairs", split, len(idx))
    return concat(frames, SCHEMA)


SICK_COLUMNS = ("sentence_A", "sentence_B", "relatedness_score")


def read_sick(path: Path, skipped: Skipped | None = None) -> pl.DataFrame:
    """SICK with its header (``pair_ID  sentence_A  sentence_B  relatedness_score  …``), tab-separated."""
    skipped = skipped_or_new(skipped)
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"SICK file not found: {path} (expected SICK_test_annotated.txt or SICK.txt)")
    lines = drop_trailing_blank(read_text_lines(path))
    if not lines:
        raise EvalFormatError(f"{path}:1: empty file; expected a header with {', '.join(SICK_COLUMNS)}")
    header = [h.strip() for h in lines[0].split("\t")]
    missing = [c for c in SICK_COLUMNS if c not in header]
    if missing:
        raise EvalFormatError(f"{path}:1: header lacks {missing}; it has {header}")
    a, b, r = (header.index(c) for c in SICK_COLUMNS)
    semeval_set = header.index("SemEval_set") if "SemEval_set" in header else None
    rows = []
    bad = BadRows(path, TABLE)
    for i, line in enumerate(lines[1:], start=2):
        fields = line.split("\t")
        if len(fields) != len(header):
            bad.add(i, f"expected {len(header)} tab-separated fields as in the header", f", found {len(fields)}")
            continue
        pair = _pair([fields[a], fields[b]], bad, i, "sentence_A and sentence_B")
        score = _score(fields[r].strip(), bad, i) if pair else None
        if pair is None or score is None:
            continue
        subset = fields[semeval_set].strip().lower() if semeval_set is not None else "test"
        rows.append((subset, i, *pair, score))
    bad.report(len(rows), skipped)
    log.info("sts sick-r: %d pairs from %s", len(rows), path)
    df = pl.DataFrame(rows, schema=["subset", "idx", "s1", "s2", "score"], orient="row")
    return df.select(dataset=pl.lit("sick-r"), subset="subset", lang1=pl.lit("en"), lang2=pl.lit("en"), idx="idx",
                     s1="s1", s2="s2", score="score").cast(SCHEMA) if rows else concat([], SCHEMA)


# --------------------------------------------------------------------------------------------------------------------
# stsb-multi-mt


def stsb_multi_mt_files(folder: Path, languages: Sequence[str], split: str) -> dict[str, Path]:
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"stsb-multi-mt folder not found: {folder} (expected stsb-{{lang}}-{{split}}.csv)")
    files = {lang: folder / f"stsb-{lang}-{split}.csv" for lang in languages}
    missing = [lang for lang, p in files.items() if not p.is_file()]
    if missing:
        present = sorted({p.name.split("-")[1] for p in folder.glob(f"stsb-*-{split}.csv")})
        raise FileNotFoundError(f"{folder}: no stsb-multi-mt {split} file for {missing} (languages present: "
                                f"{present})")
    return files


def _stsb_records(path: Path) -> list[tuple[int, list[str]]]:
    """(first line, fields) of each CSV record of ``path``, in order. A blank line inside the file is a record with no
    field (one row of the row-parallel set, malformed); blank records at the end are not rows."""
    lines = read_text_lines(path)  # UTF-8 (BOM dropped), or an error naming file:line
    reader = csv.reader(ln + "\n" for ln in lines)
    records = []
    try:
        while True:
            start = reader.line_num + 1
            fields = next(reader, None)
            if fields is None:
                break
            records.append((start, fields))
    except csv.Error as exc:  # an unclosed quote: no later row can be trusted
        raise EvalFormatError(f"{path}:{reader.line_num}: not valid CSV ({exc})") from None
    while records and not any(f.strip() for f in records[-1][1]):
        records.pop()
    return records


def read_stsb_multi_mt(folder: Path, languages: Sequence[str], split: str = "test", cross: bool = True,
                       skipped: Skipped | None = None) -> pl.DataFrame:
    """Monolingual subsets ``{a}-{a}`` for each language and, with ``cross``, ``{a}-{b}`` for each ordered pair; rows
    malformed in any language's file are dropped from all and counted into ``skipped``."""
    skipped = skipped_or_new(skipped)
    languages = list(dict.fromkeys(languages))
    if not languages:
        raise ValueError(f"{folder}: stsb-multi-mt needs at least one language")
    files = stsb_multi_mt_files(folder, languages, split)
    records = {}
    for lang, path in files.items():
        data_language(lang, str(path))
        records[lang] = _stsb_records(path)
        if not records[lang]:
            raise EvalFormatError(f"{path}: no readable row (the file is empty or blank); expected CSV rows "
                                  "s1,s2,score")
    ref_lang = languages[0]
    n = len(records[ref_lang])
    for lang in languages[1:]:
        if len(records[lang]) != n:
            raise EvalFormatError(f"{files[lang]} ({len(records[lang])} rows) and {files[ref_lang]} ({n} rows) are not "
                                  "row-parallel; stsb-multi-mt files must hold the same pairs in the same order with "
                                  "the same scores")
    rows = AlignedRows(files, TABLE, f"{Path(folder).name}/stsb-{{{','.join(languages)}}}-{split}.csv", n,
                       {lang: [line for line, _ in recs] for lang, recs in records.items()}, unit="row")
    parsed: dict[str, list[tuple[str, str, float] | None]] = {}
    for lang, recs in records.items():
        parsed[lang] = [None] * n
        for r, (line, fields) in enumerate(recs):
            bad = _AlignedRow(rows, lang, r)
            if not any(f.strip() for f in fields):
                bad.add(line, "empty line; expected s1,s2,score")
                continue
            if len(fields) != 3:
                bad.add(line, "expected 3 CSV fields (s1,s2,score)", f", found {len(fields)}")
                continue
            pair = _pair(fields, bad, line, "s1,s2,score")
            score = _score(fields[2].strip(), bad, line) if pair else None
            if pair is not None and score is not None:
                parsed[lang][r] = (*pair, score)
    keep = rows.report(skipped)
    # a kept row parsed in every language (a row any file could not parse was reported, so dropped from all)
    table = {lang: [v for r in keep if (v := parsed[lang][r]) is not None] for lang in languages}
    assert all(len(t) == len(keep) for t in table.values())
    for lang in languages[1:]:
        differ = next((k for k, r in enumerate(keep) if table[lang][k][2] != table[ref_lang][k][2]), None)
        if differ is not None:
            r = keep[differ]
            raise EvalFormatError(
                f"{files[lang]} ({n} rows) and {files[ref_lang]} ({n} rows) are not row-parallel; first differing "
                f"row {r + 1}: {files[lang]}:{records[lang][r][0]} score {table[lang][differ][2]:g} vs "
                f"{files[ref_lang]}:{records[ref_lang][r][0]} score {table[ref_lang][differ][2]:g}; stsb-multi-mt "
                "files must hold the same pairs in the same order with the same scores")
    pairs = [(a, a) for a in languages] + ([(a, b) for a, b in itertools.permutations(languages, 2)] if cross else [])
    idx = [r + 1 for r in keep]
    frames = [pl.DataFrame({"dataset": "stsb-multi-mt", "subset": f"{a}-{b}", "lang1": a, "lang2": b, "idx": idx,
                            "s1": [t[0] for t in table[a]], "s2": [t[1] for t in table[b]],
                            "score": [t[2] for t in table[a]]}, schema=SCHEMA) for a, b in pairs]
    log.info("sts stsb-multi-mt %s: %d rows × %d subsets (%d rows dropped)", split, len(keep), len(pairs),
             n - len(keep))
    return concat(frames, SCHEMA)


# --------------------------------------------------------------------------------------------------------------------
# every configured source: the entries (told apart by ``format``; an entry without one is a SemEval-layout folder)


class SemEvalSts(StrictConfig):
    format: Literal["semeval"] = Field("semeval", description="STS.input.{name}.txt + STS.gs.{name}.txt pairs")
    path: Path = Field(description="folder with STS.input.*.txt and STS.gs.*.txt (STS17 release, SentEval "
                                   "STS12-en-test … STS16-en-test)")
    dataset: str | None = Field(None, description="value of the dataset column (sts17, sts12, …); inferred from "
                                                  "SentEval folder names STS1x-en-test when not given")

    @model_validator(mode="after")
    def _named(self) -> SemEvalSts:
        if self.dataset is None and semeval_dataset_name(self.path) is None:
            raise ValueError(f"{self.path}: give dataset (e.g. sts17); it is only inferred from STS12-en-test … "
                             "STS16-en-test folder names")
        return self


class StsBenchmarkSts(StrictConfig):
    format: Literal["stsbenchmark"] = Field(description="STS Benchmark sts-{split}.csv (tab-separated)")
    path: Path = Field(description="folder with sts-train.csv, sts-dev.csv, sts-test.csv")
    splits: list[str] = Field(default_factory=lambda: ["test"], description="splits to read (train, dev, test)")


class SickSts(StrictConfig):
    format: Literal["sick"] = Field(description="SICK with its header; relatedness_score is the gold")
    path: Path = Field(description="SICK_test_annotated.txt (or SICK.txt)")


class StsbMultiMtSts(StrictConfig):
    format: Literal["stsb_multi_mt"] = Field(description="stsb-multi-mt stsb-{lang}-{split}.csv, row-parallel CSV")
    path: Path = Field(description="folder with stsb-{lang}-{split}.csv files")
    languages: list[str] = Field(min_length=1, description="ISO 639-1 codes, e.g. [en, de, es, fr]")
    split: str = Field("test", description="train, dev or test")
    cross: bool = Field(True, description="also every ordered cross-lingual pair a-b (s1 in a, s2 in b)")

    @field_validator("languages")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        return checked_languages(value, "sources.eval.sts.languages")


def _format_of(value: Any) -> str:
    if isinstance(value, dict):
        return value.get("format", "semeval")
    return getattr(value, "format", "semeval")


StsSource = Annotated[
    Annotated[SemEvalSts, Tag("semeval")] | Annotated[StsBenchmarkSts, Tag("stsbenchmark")]
    | Annotated[SickSts, Tag("sick")] | Annotated[StsbMultiMtSts, Tag("stsb_multi_mt")],
    Discriminator(_format_of),
]


def read_sts_sources(sources: Sequence[StsSource], skipped: Skipped | None = None) -> pl.DataFrame:
    """``eval_sts`` from the configured entries (``EvalSources.sts``); (dataset, subset, idx) must be unique."""
    frames = []
    for src in sources:
        if src.format == "semeval":
            frames.append(read_semeval(src.path, src.dataset, skipped))
        elif src.format == "stsbenchmark":
            frames.append(read_stsbenchmark(src.path, src.splits, skipped))
        elif src.format == "sick":
            frames.append(read_sick(src.path, skipped))
        elif src.format == "stsb_multi_mt":
            frames.append(read_stsb_multi_mt(src.path, src.languages, src.split, src.cross, skipped))
        else:  # pragma: no cover - the settings model admits no other format
            raise ValueError(f"unknown STS format {src.format!r}")
    df = concat(frames, SCHEMA)
    dup = df.filter(pl.struct("dataset", "subset", "idx").is_duplicated())
    if dup.height:
        row = dup.row(0, named=True)
        raise ValueError(f"eval_sts: two sources give dataset {row['dataset']!r} subset {row['subset']!r} (idx "
                         f"{row['idx']}); each STS set may be configured once")
    return df
