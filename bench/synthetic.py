"""Synthetic corpora in the real file formats, at paper scale, for the translation-corpus benchmarks.

- ``write_xnli_mt``: ``XNLI-MT-1.0/multinli/multinli.train.{lang}.tsv`` for 15 languages, 392,702 rows each, header
  ``premise hypo label``, labels ``entailment``/``neutral``/``contradictory``, each premise on 3 consecutive rows with
  its 3 hypotheses (MultiNLI's shape), row-aligned across languages.
- ``write_moses``: Moses file pairs ``{name}.{src}`` / ``{name}.{tgt}`` with ~60-character sentences, a share of exact
  and normalised (case/punctuation) duplicates and a few blank and over-long lines, so every filter has work.

Text is built column-wise with polars from a seeded numpy generator: tens of millions of lines per minute.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

XNLI_LANGS = ("ar", "bg", "de", "el", "en", "es", "fr", "hi", "ru", "sw", "th", "tr", "ur", "vi", "zh")
_VOCAB = {
    "en": [
        "the", "a", "of", "house", "river", "city", "people", "music", "water", "light", "over", "under", "between",
        "quickly", "never", "always", "big", "small", "green", "old", "new", "tree", "road", "night", "morning",
        "window", "teacher", "children", "letter", "garden"
    ],
    "de": [
        "das", "ein", "der", "Haus", "Fluss", "Stadt", "Leute", "Musik", "Wasser", "Licht", "über", "unter",
        "zwischen", "schnell", "nie", "immer", "groß", "klein", "grün", "alt", "neu", "Baum", "Straße", "Nacht",
        "Morgen", "Fenster", "Lehrer", "Kinder", "Brief", "Garten"
    ],
    "ru": [
        "дом", "река", "город", "люди", "музыка", "вода", "свет", "над", "под", "между", "быстро", "никогда",
        "всегда", "большой", "маленький", "зелёный", "старый", "новый", "дерево", "дорога", "ночь", "утро", "окно",
        "учитель", "дети", "письмо", "сад"
    ],
}


def _sentences(rng: np.random.Generator, n: int, vocab: list[str], tag: str, ids: np.ndarray) -> pl.Series:
    """``n`` sentences of 6–12 words from ``vocab``, each ending in its id (so distinct ids give distinct texts)."""
    v = pl.Series(vocab)
    k = rng.integers(6, 13, size=n)
    words = [v.gather(rng.integers(0, len(vocab), size=n)) for _ in range(12)]
    cols = [pl.when(pl.lit(pl.Series(k > i))).then(w).otherwise(pl.lit(None, pl.Utf8)) for i, w in enumerate(words)]
    body = pl.select(pl.concat_str(cols, separator=" ", ignore_nulls=True)).to_series()
    return (body + f" {tag}" + pl.Series(ids).cast(pl.Utf8) + ".").alias("text")


def write_xnli_mt(folder: Path, rows: int = 392_702, languages: tuple[str, ...] = XNLI_LANGS, seed: int = 0) -> Path:
    """Write the synthetic XNLI-MT folder; returns the folder to give ``XnliSource(format="xnli_mt", path=...)``."""
    base = folder / "XNLI-MT-1.0" / "multinli"
    base.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    premise_id = np.arange(rows) // 3
    labels = pl.Series(["entailment", "neutral", "contradictory"]).gather(np.arange(rows) % 3)
    for lang in languages:
        vocab = _VOCAB.get(lang, [f"{lang}{w}" for w in _VOCAB["en"]])
        r = np.random.default_rng(seed)  # same word choices in every language: a "translation"
        prem = _sentences(r, int(premise_id[-1]) + 1, vocab, "p", np.arange(premise_id[-1] + 1)).gather(premise_id)
        hyp = _sentences(r, rows, vocab, "h", np.arange(rows))
        df = pl.DataFrame({"premise": prem, "hypo": hyp, "label": labels})
        df.write_csv(base / f"multinli.train.{lang}.tsv", separator="\t", quote_style="never")
    del rng
    return folder / "XNLI-MT-1.0"


def write_moses(folder: Path, name: str, src: str, tgt: str, pairs: int, seed: int = 0,
                duplicate_share: float = 0.05) -> tuple[Path, Path]:
    """Write ``pairs`` synthetic translation pairs as Moses files; returns (src file, tgt file)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    ids = np.arange(pairs)
    dup = rng.random(pairs) < duplicate_share
    ids[dup] = rng.integers(0, pairs, size=int(dup.sum()))  # repeated pairs (exact duplicates of another line)
    out = []
    for lang in (src, tgt):
        vocab = _VOCAB.get(lang, [f"{lang}{w}" for w in _VOCAB["en"]])
        r = np.random.default_rng(seed + 1)
        text = _sentences(r, pairs, vocab, "n", ids)
        if lang == src:  # normalised duplicates: upper-cased, extra punctuation
            case = pl.Series(rng.random(pairs) < 0.02)
            text = pl.select(pl.when(case).then(text.str.to_uppercase() + "!!").otherwise(text)).to_series()
        blank = pl.Series(rng.random(pairs) < 0.001)
        text = pl.select(pl.when(blank).then(pl.lit("")).otherwise(text)).to_series()
        path = folder / f"{name}.{lang}"
        pl.DataFrame({"t": text}).write_csv(path, include_header=False, quote_style="never")
        out.append(path)
    return out[0], out[1]
