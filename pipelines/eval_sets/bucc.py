"""BUCC 2018 bitext mining → ``eval_bucc`` (sentences) and ``eval_bucc_gold`` (methods.md §7.3, D.4).

Layout of the shared-task release (and of LASER ``tasks/bucc/bucc.sh``, XTREME ``scripts/download_data.sh``):
``{src}-en.{split}.{src}`` and ``{src}-en.{split}.en`` with lines ``ID<TAB>sentence`` (IDs such as ``de-000413461``),
and ``{src}-en.{split}.gold`` with lines ``srcID<TAB>enID``. Splits are ``sample``, ``training`` and ``test``; the
test gold is hidden, so a gold file may be absent.

Tables:

- ``eval_bucc``: ``pair`` (``zh-en``), ``split``, ``lang`` (the side: ``zh`` or ``en``), ``id``, ``text`` (stripped),
  ``line`` (1-based line in the file).
- ``eval_bucc_gold``: ``pair``, ``split``, ``src_id``, ``tgt_id``.

Duplicated sentence *texts* are legal and kept: the mining protocol decides what to do with them (LASER drops texts
that occur twice from its text→ID map, §7.3 step 4). Malformed rows — a line without a tab, an empty ID or sentence, a
gold line that is not two fields, a gold ID missing from its sentence file — are skipped, counted per file and problem
with their lines (:class:`~pipelines.eval_sets.lines.BadRows`), and logged; a file with no readable row is an error.
Duplicated gold lines, and a sentence line repeating an earlier line's ID *and* sentence, are counted, logged and
skipped (the first is kept: nothing is lost).

An ID repeated with a *different* sentence is a genuine ambiguity: which sentence the gold pairs of that ID mean cannot
be known. Every line of that ID is dropped — both lines named in the count and the log — and so are the gold lines
citing it (counted as such), rather than the run failing. The reasons: (1) the files are joined by ID, not by
position, so dropping lines shifts nothing else; (2) keeping either sentence would be a silent guess, which could pair
a gold ID with the wrong text and bias F1 either way, while dropping both only removes that ID's candidates and gold
pairs from the mining, a cost the stats state exactly; (3) one bad line of a 400k-line release should cost that line,
not the evaluation, which is the rule every reader here follows. Failing would be right only if the defect said the
file as a whole is wrong; a file where so many IDs clash that no line is left still fails (no readable row), and a
file with a few clashes is visible in the stage's ``skipped`` stats.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from pipelines.eval_sets.lines import (
    BadRows,
    EvalFormatError,
    Skipped,
    concat,
    drop_trailing_blank,
    listing,
    read_text_lines,
    short,
    skipped_or_new,
)
from pipelines.language_codes import data_language

log = logging.getLogger("polysent.pipelines.eval_sets")

SCHEMA = {"pair": pl.String, "split": pl.String, "lang": pl.String, "id": pl.String, "text": pl.String,
          "line": pl.Int32}
GOLD_SCHEMA = {"pair": pl.String, "split": pl.String, "src_id": pl.String, "tgt_id": pl.String}

_NAME = re.compile(r"(?P<src>[A-Za-z]+)-en\.(?P<split>[^.]+)\.(?P<ext>[A-Za-z]+)")


def bucc_files(folder: Path) -> dict[tuple[str, str], dict[str, Path]]:
    """(pair, split) → {"src": …, "en": …, "gold": …} (gold only where present) for every BUCC file in ``folder``."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"BUCC folder not found: {folder} (expected {{src}}-en.{{split}}.{{src,en,gold}} "
                                "files)")
    found: dict[tuple[str, str], dict[str, Path]] = {}
    for path in sorted(folder.iterdir()):
        m = _NAME.fullmatch(path.name)
        if not m or not path.is_file():
            continue
        src, ext = m["src"], m["ext"]
        kind = "src" if ext == src else ext
        if kind not in ("src", "en", "gold"):
            raise EvalFormatError(f"{path}: a BUCC file must end in .{src}, .en or .gold, not .{ext}")
        found.setdefault((f"{src}-en", m["split"]), {})[kind] = path
    for (pair, split), kinds in found.items():
        for kind in ("src", "en"):
            if kind not in kinds:
                name = f"{pair}.{split}.{pair.split('-')[0] if kind == 'src' else 'en'}"
                raise FileNotFoundError(f"{folder}: {name} is missing (found {sorted(p.name for p in kinds.values())})")
    return found


def _sentences(path: Path, pair: str, split: str, lang: str, skipped: Skipped) -> tuple[pl.DataFrame, set[str]]:
    """The file's readable lines, and the IDs dropped because they repeat with different sentences."""
    lines = drop_trailing_blank(read_text_lines(path))
    bad = BadRows(path, "eval_bucc")
    ids, texts, numbers = [], [], []
    for i, line in enumerate(lines, start=1):
        head, tab, rest = line.partition("\t")
        head, rest = head.strip(), rest.strip()
        if not tab:
            bad.add(i, "no tab; expected ID<TAB>sentence")
        elif not head:
            bad.add(i, "empty ID; expected ID<TAB>sentence")
        elif not rest:
            bad.add(i, "empty sentence; expected ID<TAB>sentence", f" (ID {head!r})")
        else:
            ids.append(head)
            texts.append(rest)
            numbers.append(i)
    df = pl.DataFrame({"pair": pair, "split": split, "lang": lang, "id": ids, "text": texts, "line": numbers},
                      schema=SCHEMA)
    repeated = (df.filter(pl.col("id").is_duplicated()).group_by("id", maintain_order=True)
                .agg("line", same=pl.col("text").n_unique() == 1))
    ambiguous = set(repeated.filter(~pl.col("same"))["id"])
    clashes = sorted((line, row["id"], row["line"]) for row in repeated.filter(~pl.col("same")).iter_rows(named=True)
                     for line in row["line"])
    for line, id_, where in clashes:
        bad.add(line, "ID repeated with a different sentence; expected each ID once in a file",
                f" (ID {id_!r} on lines {', '.join(map(str, where))}; all dropped)")
    again = sorted(line for row in repeated.filter(pl.col("same")).iter_rows(named=True) for line in row["line"][1:])
    df = df.filter(~pl.col("id").is_in(list(ambiguous)) & ~pl.col("line").is_in(again))
    bad.report(df.height, skipped)
    if again:
        log.info("%s: %d lines repeat an earlier line's ID and sentence; skipped", path, len(again))
        skipped.add("eval_bucc", f"{short(path)}: duplicated line, the ID and sentence of an earlier line "
                                 f"({listing(again)})", len(again))
    return df, ambiguous


def _gold(path: Path, pair: str, split: str, src: pl.DataFrame, en: pl.DataFrame, src_path: Path, en_path: Path,
          skipped: Skipped, dropped: dict[str, set[str]]) -> pl.DataFrame:
    """The gold pairs whose IDs are in ``src`` and ``en``; ``dropped`` (column → IDs) are those ambiguous IDs the
    sentence files dropped, named as such in the count."""
    lines = drop_trailing_blank(read_text_lines(path))
    bad_rows = BadRows(path, "eval_bucc_gold")
    pairs, numbers = [], []
    for i, line in enumerate(lines, start=1):
        fields = [f.strip() for f in line.split("\t")]
        if len(fields) != 2 or not all(fields):
            bad_rows.add(i, "expected srcID<TAB>enID (two non-empty fields)",
                         f", found {len(fields)} field(s): {line[:80]!r}")
            continue
        pairs.append(fields)
        numbers.append(i)
    gold = pl.DataFrame({"src_id": [p[0] for p in pairs], "tgt_id": [p[1] for p in pairs], "line": numbers},
                        schema={"src_id": pl.String, "tgt_id": pl.String, "line": pl.Int32})
    for col, side, side_path in (("src_id", src, src_path), ("tgt_id", en, en_path)):
        bad = gold.filter(~pl.col(col).is_in(side["id"].implode()))
        for row in bad.iter_rows(named=True):
            why = (f"ID dropped from {side_path.name} (repeated there with different sentences)"
                   if row[col] in dropped[col] else f"ID not in {side_path.name}")
            bad_rows.add(row["line"], why, f" ({row[col]!r})")
        gold = gold.filter(pl.col(col).is_in(side["id"].implode()))
    bad_rows.report(gold.height, skipped)
    unique = gold.unique(["src_id", "tgt_id"], keep="first", maintain_order=True)
    skipped.add("eval_bucc_gold", f"{short(path)}: duplicated gold line", gold.height - unique.height)
    return unique.select(pair=pl.lit(pair), split=pl.lit(split), src_id="src_id", tgt_id="tgt_id")


def read_bucc(folder: Path, pairs: Sequence[str] = (), splits: Sequence[str] = (),
              skipped: Skipped | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(``eval_bucc``, ``eval_bucc_gold``) for ``pairs`` (``de-en`` …) × ``splits``; empty = all found."""
    skipped = skipped_or_new(skipped)
    files = bucc_files(folder)
    present_pairs = sorted({p for p, _ in files})
    present_splits = sorted({s for _, s in files})
    want_pairs = list(dict.fromkeys(pairs)) or present_pairs
    want_splits = list(dict.fromkeys(splits)) or present_splits
    for name, want, present in (("pairs", want_pairs, present_pairs), ("splits", want_splits, present_splits)):
        missing = [x for x in want if x not in present]
        if missing:
            raise FileNotFoundError(f"{folder}: no BUCC files for {name} {missing} (found pairs {present_pairs}, "
                                    f"splits {present_splits})")
    sentences, golds = [], []
    for (pair, split), kinds in sorted(files.items()):
        if pair not in want_pairs or split not in want_splits:
            continue
        src_lang = pair.split("-")[0]
        data_language(src_lang, str(kinds["src"]))
        src, src_ambiguous = _sentences(kinds["src"], pair, split, src_lang, skipped)
        en, en_ambiguous = _sentences(kinds["en"], pair, split, "en", skipped)
        sentences += [src, en]
        if "gold" in kinds:
            golds.append(_gold(kinds["gold"], pair, split, src, en, kinds["src"], kinds["en"], skipped,
                               {"src_id": src_ambiguous, "tgt_id": en_ambiguous}))
        else:
            log.info("bucc %s %s: no gold file (the test split's gold is hidden)", pair, split)
        log.info("bucc %s %s: %d %s and %d en sentences, %s gold pairs", pair, split, src.height, src_lang, en.height,
                 golds[-1].height if "gold" in kinds else "no")
    return concat(sentences, SCHEMA), concat(golds, GOLD_SCHEMA)
