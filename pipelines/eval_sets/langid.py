"""Sentences for the language-identification probe (mSimCSE, Wang et al. 2022, Table 7) → ``eval_langid``.

The probe asks whether a linear classifier can tell the language of a sentence from its embedding (a language-neutral
encoder should make it hard). Its sentences come from XNLI (XTREME layout ``{split}-{lang}.tsv``: premise, hypothesis,
label; read with :func:`pipelines.xnli.readers.read_xnli`, which keeps lines exact): per language the distinct
premises in file order (each XNLI premise has three hypothesis rows), the first ``max_per_language`` of ``dev`` as the
probe's ``train`` split and of ``test`` as its ``test`` split (XNLI's dev and test premises are disjoint).

Table ``eval_langid``: ``lang`` (XNLI's ISO 639-1 code), ``split`` (``train``/``test``), ``idx`` (0-based position
among the language's distinct premises of that XNLI split), ``text``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import polars as pl
from pydantic import Field, field_validator

from pipelines.eval_sets.lines import concat
from pipelines.eval_sets.source_config import StrictConfig, checked_languages
from pipelines.xnli.readers import read_xnli
from pipelines.xnli.sources import XnliSource

log = logging.getLogger("polysent.pipelines.eval_sets")

SCHEMA = {"lang": pl.String, "split": pl.String, "idx": pl.Int32, "text": pl.String}
SPLITS = {"dev": "train", "test": "test"}  # XNLI split → probe split


class LangidSource(StrictConfig):
    path: Path = Field(description="XNLI folder in the XTREME layout ({split}-{lang}.tsv)")
    languages: list[str] = Field(min_length=2, description="XNLI language codes to tell apart")
    max_per_language: int = Field(1000, ge=1, description="distinct premises per language and split (dev → train, "
                                                         "test → test)")

    @field_validator("languages")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        return checked_languages(value, "sources.eval.langid.languages")


def langid_files(folder: Path, languages: Sequence[str]) -> list[Path]:
    return [Path(folder) / f"{split}-{lang}.tsv" for split in SPLITS for lang in languages]


def read_langid(folder: Path, languages: Sequence[str], max_per_language: int) -> pl.DataFrame:
    """``eval_langid`` for ``languages`` (XNLI codes) from the XTREME-layout XNLI ``folder``."""
    if max_per_language < 1:
        raise ValueError(f"max_per_language must be at least 1, got {max_per_language}")
    if not Path(folder).is_dir():
        raise FileNotFoundError(f"XNLI folder not found: {folder} (expected {{dev,test}}-{{lang}}.tsv)")
    source = XnliSource(format="xtreme", dir=Path(folder))
    frames = []
    for xnli_split, split in SPLITS.items():
        for lang, table in read_xnli(source, xnli_split, list(languages)).items():
            premises = (table.frame.select(text=pl.col("premise").str.strip_chars())
                        .filter(pl.col("text") != "").unique("text", keep="first", maintain_order=True)
                        .head(max_per_language))
            if premises.height < max_per_language:
                log.info("langid %s %s: only %d distinct premises (max_per_language %d)", lang, xnli_split,
                         premises.height, max_per_language)
            frames.append(premises.select(lang=pl.lit(lang), split=pl.lit(split),
                                          idx=pl.int_range(pl.len(), dtype=pl.Int32), text="text"))
    return concat(frames, SCHEMA).cast(SCHEMA)  # type: ignore[arg-type]
