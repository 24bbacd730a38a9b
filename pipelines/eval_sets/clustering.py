"""MewsC-16 layout → ``eval_clustering`` (methods.md §4.5, §7.5).

EASE ``downstreams/text-clustering`` reads ``{lang}_sentences.txt`` and ``{lang}_categories.txt`` (studio-ousia/ease
``data/mewsc16``): line i of both files is one news sentence and its Wikinews category.

Table ``eval_clustering``: ``dataset`` (``mewsc16`` unless configured), ``lang`` (from the file name, ISO 639-1),
``idx`` (0-based line), ``text``, ``label`` (stripped). Unequal line counts (the files are not line-aligned), a file
with no readable line and invalid UTF-8 are errors naming the file. An empty label is a malformed row: line i is
dropped from both files (dropping only the label would give every later sentence its neighbour's category), counted
in the stage's ``skipped`` stats with its file and line, and logged (:class:`~pipelines.eval_sets.lines.AlignedRows`).
An empty sentence in a labelled row is an error naming ``file:line``, unless ``empty_sentences="skip"``: the real
MewsC-16 ``de`` file has one empty sentence (``de_sentences.txt:3128``, label ``Themenportal Sport``) — EASE embeds it
as an empty string, so silently dropping it would change the clustering being compared; skipping it is a choice the
config states, counted and logged. Either way the other rows keep their ``idx`` (line - 1).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import polars as pl

from pipelines.eval_sets.lines import (
    AlignedRows,
    EvalFormatError,
    Skipped,
    aligned_lines,
    concat,
    short,
    skipped_or_new,
)
from pipelines.language_codes import data_language, language_name

log = logging.getLogger("polysent.pipelines.eval_sets")

SCHEMA = {"dataset": pl.String, "lang": pl.String, "idx": pl.Int32, "text": pl.String, "label": pl.String}
TABLE = "eval_clustering"


def clustering_files(folder: Path) -> dict[str, tuple[Path, Path]]:
    """language → (sentences file, categories file) in ``folder``."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"clustering folder not found: {folder} (expected {{lang}}_sentences.txt and "
                                "{lang}_categories.txt)")
    out = {}
    for sents in sorted(folder.glob("*_sentences.txt")):
        lang = sents.name[: -len("_sentences.txt")]
        cats = folder / f"{lang}_categories.txt"
        if not cats.is_file():
            raise FileNotFoundError(f"{sents} has no label file {cats.name} next to it")
        out[lang] = (sents, cats)
    return out


def cap_per_language(df: pl.DataFrame, per_language: int) -> pl.DataFrame:
    """At most ``per_language`` rows of each language, chosen by the SHA-1 of the text (ties: the line), so every
    model, run and machine scores the same rows and each language's label mix is kept in expectation. Why: MewsC-16
    has 42k news texts of ~50 tokens, ~12 min of scoring per model on 2 CPU cores; 500 a language is ~1.5 min."""
    if df.height == 0:
        return df
    digest = pl.Series("_h", [hashlib.sha1(t.encode("utf-8")).hexdigest() for t in df["text"].to_list()])
    ranked = df.with_columns(digest).sort("lang", "_h", "idx")
    kept = ranked.filter(pl.int_range(pl.len()).over("lang") < per_language).drop("_h")
    return kept.sort("lang", "idx")


def read_clustering(folder: Path, languages: Sequence[str] = (), dataset: str = "mewsc16",
                    empty_sentences: Literal["error", "skip"] = "error",
                    skipped: Skipped | None = None, max_per_language: int | None = None) -> pl.DataFrame:
    """``eval_clustering`` for ``languages`` (empty = every ``{lang}_sentences.txt`` in ``folder``); with
    ``max_per_language``, that many texts of each language (``cap_per_language``; the rest counted as skipped)."""
    skipped = skipped_or_new(skipped)
    files = clustering_files(folder)
    wanted = list(dict.fromkeys(languages)) or sorted(files)
    missing = [lang for lang in wanted if lang not in files]
    if missing:
        raise FileNotFoundError(f"{folder}: no clustering files for {missing} (found: {sorted(files)})")
    frames = []
    for lang in wanted:
        sents, cats = files[lang]
        data_language(lang, str(sents))
        text, label = aligned_lines(sents, cats)
        rows = AlignedRows({"text": sents, "label": cats}, TABLE,
                           f"{sents.parent.name}/{lang}_{{sentences,categories}}.txt", len(text))
        rows.blank("label", label, f"the category of line i of {sents.name}")
        keep = rows.report(skipped)
        df = pl.DataFrame({"dataset": dataset, "lang": lang, "idx": keep, "text": [text[i] for i in keep],
                           "label": [label[i] for i in keep]}, schema=SCHEMA)
        empty = df.filter(pl.col("text") == "")
        if empty.height and empty_sentences != "skip":
            raise EvalFormatError(f"{sents}:{empty['idx'][0] + 1}: empty sentence ({empty.height} in the file); "
                                  "expected one sentence a line (eval_sets.clustering_empty_sentences: skip drops "
                                  "such lines)")
        if empty.height:
            skipped.add(TABLE, f"{short(sents)}: empty sentence", empty.height)
            df = df.filter(pl.col("text") != "")
        if max_per_language is not None and df.height > max_per_language:
            skipped.add(TABLE, f"{short(sents)}: over max_per_language {max_per_language} (hash-chosen)",
                        df.height - max_per_language)
            df = cap_per_language(df, max_per_language)
        frames.append(df)
        log.info("clustering %s %s (%s): %d sentences, %d labels", dataset, lang, language_name(lang), df.height,
                 df["label"].n_unique())
    return concat(frames, SCHEMA)
