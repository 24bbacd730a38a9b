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
  ``{a}-{b}`` per ordered pair a ≠ b: s1 from a's row i, s2 from b's row i, score of row i. Row counts and scores must
  agree across the files (else an error naming both files and the first differing row).

Scores that are not numbers or lie outside [0, 5] raise naming ``file:line``.
"""

from __future__ import annotations

import csv
import itertools
import logging
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from pipelines.eval_sets.lines import (
    EvalFormatError,
    Skipped,
    concat,
    drop_trailing_blank,
    read_text_lines,
    short,
    skipped_or_new,
)
from pipelines.language_codes import check_language

if TYPE_CHECKING:
    from pipelines.eval_sets.settings import StsSource

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


def _score(text: str, path: Path, line: int) -> float:
    try:
        value = float(text)
    except ValueError:
        raise EvalFormatError(f"{path}:{line}: score {text!r} is not a number; expected a similarity score in "
                              f"[{MIN_SCORE:g}, {MAX_SCORE:g}]") from None
    if not (math.isfinite(value) and MIN_SCORE <= value <= MAX_SCORE):
        raise EvalFormatError(f"{path}:{line}: score {value:g} outside [{MIN_SCORE:g}, {MAX_SCORE:g}]")
    return value


def _pair(fields: Sequence[str], path: Path, line: int, what: str) -> tuple[str, str]:
    s1, s2 = fields[0].strip(), fields[1].strip()
    if not s1 or not s2:
        raise EvalFormatError(f"{path}:{line}: empty {'first' if not s1 else 'second'} sentence; expected {what}")
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
    return check_language(m["l1"], str(where)), check_language(m["l2"], str(where))


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
    for i, (line, g) in enumerate(zip(lines, gold, strict=True), start=1):
        if not g.strip():
            unscored += 1
            continue
        fields = line.split("\t")
        if len(fields) < 2:
            raise EvalFormatError(f"{inp}:{i}: expected s1<TAB>s2, found {len(fields)} field(s)")
        s1, s2 = _pair(fields, inp, i, "s1<TAB>s2")
        idx.append(i)
        s1s.append(s1)
        s2s.append(s2)
        scores.append(_score(g.strip(), gs, i))
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


def read_stsbenchmark(folder: Path, splits: Sequence[str] = STSB_SPLITS) -> pl.DataFrame:
    """``sts-{split}.csv``: genre, file, year, id, score, s1, s2 [, extra fields]; tab-separated, no quoting."""
    frames = []
    for split, path in stsbenchmark_files(folder, splits).items():
        lines = drop_trailing_blank(read_text_lines(path))
        idx, s1s, s2s, scores = [], [], [], []
        for i, line in enumerate(lines, start=1):
            fields = line.split("\t")
            if len(fields) < 7:
                raise EvalFormatError(f"{path}:{i}: expected at least 7 tab-separated fields (genre, file, year, id, "
                                      f"score, s1, s2), found {len(fields)}")
            s1, s2 = _pair(fields[5:7], path, i, "s1 and s2 in fields 6 and 7")
            idx.append(i)
            s1s.append(s1)
            s2s.append(s2)
            scores.append(_score(fields[4].strip(), path, i))
        frames.append(pl.DataFrame({"dataset": "stsb", "subset": split, "lang1": "en", "lang2": "en", "idx": idx,
                                    "s1": s1s, "s2": s2s, "score": scores}, schema=SCHEMA))
        log.info("sts stsb %s: %d pairs", split, len(idx))
    return concat(frames, SCHEMA)


SICK_COLUMNS = ("sentence_A", "sentence_B", "relatedness_score")


def read_sick(path: Path) -> pl.DataFrame:
    """SICK with its header (``pair_ID  sentence_A  sentence_B  relatedness_score  …``), tab-separated."""
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
    for i, line in enumerate(lines[1:], start=2):
        fields = line.split("\t")
        if len(fields) != len(header):
            raise EvalFormatError(f"{path}:{i}: expected {len(header)} tab-separated fields as in the header, found "
                                  f"{len(fields)}")
        s1, s2 = _pair([fields[a], fields[b]], path, i, "sentence_A and sentence_B")
        subset = fields[semeval_set].strip().lower() if semeval_set is not None else "test"
        rows.append((subset, i, s1, s2, _score(fields[r].strip(), path, i)))
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


def _stsb_csv(path: Path) -> pl.DataFrame:
    rows = []
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)
        try:
            for row in reader:
                line = reader.line_num
                if not row:
                    continue
                if len(row) != 3:
                    raise EvalFormatError(f"{path}:{line}: expected 3 CSV fields (s1,s2,score), found {len(row)}")
                s1, s2 = _pair(row, path, line, "s1,s2,score")
                rows.append((line, s1, s2, _score(row[2].strip(), path, line)))
        except csv.Error as exc:
            raise EvalFormatError(f"{path}:{reader.line_num}: not valid CSV ({exc})") from None
    return pl.DataFrame(rows, schema={"line": pl.Int32, "s1": pl.String, "s2": pl.String, "score": pl.Float64},
                        orient="row").with_row_index("row", offset=1)


def read_stsb_multi_mt(folder: Path, languages: Sequence[str], split: str = "test", cross: bool = True) -> pl.DataFrame:
    """Monolingual subsets ``{a}-{a}`` for each language and, with ``cross``, ``{a}-{b}`` for each ordered pair."""
    languages = list(dict.fromkeys(languages))
    if not languages:
        raise ValueError(f"{folder}: stsb-multi-mt needs at least one language")
    files = stsb_multi_mt_files(folder, languages, split)
    tables = {}
    for lang, path in files.items():
        check_language(lang, str(path))
        tables[lang] = _stsb_csv(path)
    ref_lang = languages[0]
    ref = tables[ref_lang]
    for lang in languages[1:]:
        t = tables[lang]
        n = min(t.height, ref.height)
        bad = (t["score"].head(n) != ref["score"].head(n)).arg_true()
        if len(bad) or t.height != ref.height:
            i = int(bad[0]) if len(bad) else n
            first = (f"; first differing row {i + 1}: {files[lang]}:{t['line'][i]} score {t['score'][i]:g} vs "
                     f"{files[ref_lang]}:{ref['line'][i]} score {ref['score'][i]:g}") if len(bad) else ""
            raise EvalFormatError(f"{files[lang]} ({t.height} rows) and {files[ref_lang]} ({ref.height} rows) are not "
                                  f"row-parallel{first}; stsb-multi-mt files must hold the same pairs in the same "
                                  "order with the same scores")
    pairs = [(a, a) for a in languages] + ([(a, b) for a, b in itertools.permutations(languages, 2)] if cross else [])
    frames = [pl.DataFrame({"dataset": "stsb-multi-mt", "subset": f"{a}-{b}", "lang1": a, "lang2": b,
                            "idx": tables[a]["row"], "s1": tables[a]["s1"], "s2": tables[b]["s2"],
                            "score": tables[a]["score"]}, schema=SCHEMA) for a, b in pairs]
    log.info("sts stsb-multi-mt %s: %d rows × %d subsets", split, ref.height, len(pairs))
    return concat(frames, SCHEMA)


# --------------------------------------------------------------------------------------------------------------------
# every configured source


def read_sts_sources(sources: Sequence[StsSource], skipped: Skipped | None = None) -> pl.DataFrame:
    """``eval_sts`` from the configured entries (``EvalSources.sts``); (dataset, subset, idx) must be unique."""
    frames = []
    for src in sources:
        if src.format == "semeval":
            frames.append(read_semeval(src.path, src.dataset, skipped))
        elif src.format == "stsbenchmark":
            frames.append(read_stsbenchmark(src.path, src.splits))
        elif src.format == "sick":
            frames.append(read_sick(src.path))
        elif src.format == "stsb_multi_mt":
            frames.append(read_stsb_multi_mt(src.path, src.languages, src.split, src.cross))
        else:  # pragma: no cover - the settings model admits no other format
            raise ValueError(f"unknown STS format {src.format!r}")
    df = concat(frames, SCHEMA)
    dup = df.filter(pl.struct("dataset", "subset", "idx").is_duplicated())
    if dup.height:
        row = dup.row(0, named=True)
        raise ValueError(f"eval_sts: two sources give dataset {row['dataset']!r} subset {row['subset']!r} (idx "
                         f"{row['idx']}); each STS set may be configured once")
    return df
