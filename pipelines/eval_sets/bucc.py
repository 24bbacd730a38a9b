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
that occur twice from its text→ID map, §7.3 step 4). Errors (``file:line``): a line without a tab, an empty ID or
sentence, an ID twice in one file (both lines named), a gold line that is not two fields, a gold ID missing from its
sentence file. Duplicated gold lines are counted, logged and skipped.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path

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


def _sentences(path: Path, pair: str, split: str, lang: str) -> pl.DataFrame:
    lines = drop_trailing_blank(read_text_lines(path))
    ids, texts = [], []
    for i, line in enumerate(lines):
        head, tab, rest = line.partition("\t")
        if not tab:
            raise EvalFormatError(f"{path}:{i + 1}: no tab; expected ID<TAB>sentence")
        ids.append(head.strip())
        texts.append(rest.strip())
        if not ids[-1]:
            raise EvalFormatError(f"{path}:{i + 1}: empty ID; expected ID<TAB>sentence")
        if not texts[-1]:
            raise EvalFormatError(f"{path}:{i + 1}: empty sentence for ID {ids[-1]!r}; expected ID<TAB>sentence")
    df = pl.DataFrame({"pair": pair, "split": split, "lang": lang, "id": ids, "text": texts,
                       "line": range(1, len(ids) + 1)}, schema=SCHEMA)
    dup = df.filter(pl.col("id").is_duplicated())
    if dup.height:
        first_id = dup.sort("line")["id"][0]
        where = dup.filter(pl.col("id") == first_id)["line"].to_list()
        raise EvalFormatError(f"{path}:{where[1]}: ID {first_id!r} repeats line {where[0]}; IDs must be unique in "
                              "a file")
    return df


def _gold(path: Path, pair: str, split: str, src: pl.DataFrame, en: pl.DataFrame, src_path: Path, en_path: Path,
          skipped: Skipped) -> pl.DataFrame:
    lines = drop_trailing_blank(read_text_lines(path))
    pairs = []
    for i, line in enumerate(lines):
        fields = [f.strip() for f in line.split("\t")]
        if len(fields) != 2 or not all(fields):
            raise EvalFormatError(f"{path}:{i + 1}: expected srcID<TAB>enID (two non-empty fields), found "
                                  f"{len(fields)} field(s): {line[:80]!r}")
        pairs.append(fields)
    gold = pl.DataFrame({"src_id": [p[0] for p in pairs], "tgt_id": [p[1] for p in pairs],
                         "line": range(1, len(pairs) + 1)}, schema={"src_id": pl.String, "tgt_id": pl.String,
                                                                    "line": pl.Int32})
    for col, side, side_path in (("src_id", src, src_path), ("tgt_id", en, en_path)):
        bad = gold.filter(~pl.col(col).is_in(side["id"].implode()))
        if bad.height:
            row = bad.row(0, named=True)
            raise EvalFormatError(f"{path}:{row['line']}: ID {row[col]!r} is not in {side_path}"
                                  + (f" ({bad.height} gold lines have such IDs)" if bad.height > 1 else ""))
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
        check_language(src_lang, str(kinds["src"]))
        src = _sentences(kinds["src"], pair, split, src_lang)
        en = _sentences(kinds["en"], pair, split, "en")
        sentences += [src, en]
        if "gold" in kinds:
            golds.append(_gold(kinds["gold"], pair, split, src, en, kinds["src"], kinds["en"], skipped))
        else:
            log.info("bucc %s %s: no gold file (the test split's gold is hidden)", pair, split)
        log.info("bucc %s %s: %d %s and %d en sentences, %s gold pairs", pair, split, src.height, src_lang, en.height,
                 golds[-1].height if "gold" in kinds else "no")
    return concat(sentences, SCHEMA), concat(golds, GOLD_SCHEMA)
