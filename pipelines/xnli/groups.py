"""Stage ``xnli_groups``: XNLI in any form → N-way translation groups (MPCL's data).

A group is one unique sentence of the anchor language (English): a premise appears with three hypotheses, and it is
one group, not three. Its members are that sentence in every selected language, taken from the first row it occurs
in. Row alignment across languages is verified by the readers (row counts, labels row by row, pair ids, premise
boundaries), not assumed.

Outputs
- ``xnli_groups``: ``group_id, split, lang, text, role, source_row, negative_group_id`` — the group of the
  contradiction hypothesis of a premise group (MPCL's hard negative; null for hypothesis groups and premises without
  one). The training sampler draws the negative's language.
- ``xnli_single_pairs``: MPCL's "+Single" baseline on the same sentences — each group's languages in a seeded random
  order, paired off into ⌊n/2⌋ disjoint language pairs.
- ``leakage``: groups removed because a member occurs in a configured evaluation set.

Language subsets are lists or the presets of the MPCL paper (``LANGUAGE_PRESETS``). The anchor language is read for
grouping even when it is not a member language (the unseen-only study has no English).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, field_validator

from pipelines.language_codes import check_language
from pipelines.leakage import EvalTextIndex, leakage_counts
from pipelines.partitioned import write_partitioned
from pipelines.text_normalise import normalise_series
from pipelines.xnli.readers import XnliFormatError, read_xnli, verify_alignment
from pipelines.xnli.sources import XNLI_LANGUAGES, XnliSource
from warehouse.artifacts import StageResult

log = logging.getLogger("polysent.pipelines.xnli")
STAGE_VERSION = "2"
LANGUAGE_PRESETS: dict[str, list[str]] = {
    "mpcl": ["en", "de", "fr", "es", "ru", "zh"],  # MPCL main setting
    "all": list(XNLI_LANGUAGES),  # MPCL hard-negative variant
    "unseen": ["bg", "el", "vi", "sw"],
    "unseen_plus": ["bg", "el", "vi", "sw", "hi", "th"],
    "seen": ["en", "de", "fr", "es", "ar", "tr"],
}


class XnliSettings(BaseModel):
    """Which languages and splits form the groups."""

    model_config = ConfigDict(extra="forbid")
    languages: list[str] | str = Field(default_factory=lambda: list(LANGUAGE_PRESETS["mpcl"]),
                                       description=f"a list, or a preset: {', '.join(LANGUAGE_PRESETS)}")
    splits: list[str] = Field(default_factory=lambda: ["dev"], min_length=1)
    anchor_language: str = "en"
    single_pairs: bool = Field(True, description="also derive MPCL's +Single pairs")
    max_boundary_mismatch: float = Field(0.0, ge=0.0, le=1.0,
                                         description="fraction of rows whose premise boundaries may disagree")
    seed: int = 13

    @field_validator("languages")
    @classmethod
    def _languages(cls, v: list[str] | str) -> list[str]:
        if isinstance(v, str):
            if v not in LANGUAGE_PRESETS:
                raise ValueError(f"unknown language preset {v!r}; expected a list or one of {list(LANGUAGE_PRESETS)}")
            v = list(LANGUAGE_PRESETS[v])
        if len(v) < 2:
            raise ValueError("a group needs at least 2 languages")
        for lang in v:
            check_language(lang, "corpora.xnli_groups.languages")
            if lang not in XNLI_LANGUAGES:
                raise ValueError(f"{lang!r} is not an XNLI language; XNLI has {', '.join(XNLI_LANGUAGES)}")
        if len(set(v)) != len(v):
            raise ValueError(f"languages repeat: {v}")
        return v

    @field_validator("splits")
    @classmethod
    def _splits(cls, v: list[str]) -> list[str]:
        bad = [s for s in v if s not in ("train", "dev", "test")]
        if bad:
            raise ValueError(f"unknown XNLI split(s) {bad}; expected train, dev or test")
        return v

    @property
    def language_list(self) -> list[str]:
        assert isinstance(self.languages, list)
        return self.languages

    def read_languages(self) -> list[str]:
        langs = self.language_list
        return langs if self.anchor_language in langs else [self.anchor_language, *langs]


def group_split(split: str, frames: dict[str, pl.DataFrame], anchor: str, members: list[str]) -> pl.DataFrame:
    """Aligned per-language frames (premise, hypothesis, label) of one split → long group rows."""
    ref = frames[anchor]
    n = ref.height
    # every sentence occurrence of the anchor language, in reading order: row 0 premise, row 0 hypothesis, row 1 ...
    occ = pl.concat([
        ref.select(pl.col("premise").alias("text")).with_row_index("row").with_columns(pl.lit(0, pl.UInt8).alias("h")),
        ref.select(pl.col("hypothesis").alias("text")).with_row_index("row").with_columns(pl.lit(1, pl.UInt8)
                                                                                          .alias("h")),
    ]).with_columns((pl.col("row").cast(pl.Int64) * 2 + pl.col("h")).alias("pos"))
    first = (occ.group_by("text").agg(pl.col("pos").min()).sort("pos").with_row_index("ordinal")
             .with_columns((pl.col("pos") // 2).alias("row"), (pl.col("pos") % 2).alias("h"),
                           (pl.lit(f"xnli-{split}-") + pl.col("ordinal").cast(pl.Utf8).str.zfill(7)).alias("group_id")))
    rows = first["row"].to_numpy()
    is_hyp = first["h"].cast(pl.Boolean)
    parts = []
    for lang in members:
        df = frames[lang]
        prem = df["premise"].gather(rows)
        hyp = df["hypothesis"].gather(rows)
        parts.append(pl.DataFrame({
            "group_id": first["group_id"], "split": pl.Series([split] * first.height, dtype=pl.Utf8),
            "lang": pl.Series([lang] * first.height, dtype=pl.Utf8),
            "text": pl.select(pl.when(is_hyp).then(hyp).otherwise(prem)).to_series(),
            "role": pl.select(pl.when(is_hyp).then(pl.lit("hypothesis")).otherwise(pl.lit("premise"))).to_series(),
            "source_row": first["row"].cast(pl.Int64) + 1,
        }))
    # contradiction hard negatives: premise group → the group of its (first) contradiction hypothesis
    text_to_group = first.select("text", "group_id")
    contra = (ref.with_row_index("row").filter(pl.col("label") == "contradiction")
              .join(text_to_group.rename({"text": "premise", "group_id": "p_group"}), on="premise")
              .join(text_to_group.rename({"text": "hypothesis", "group_id": "negative_group_id"}), on="hypothesis")
              .sort("row").unique(subset=["p_group"], keep="first")
              .select(pl.col("p_group").alias("group_id"), "negative_group_id"))
    groups = pl.concat(parts).join(contra, on="group_id", how="left")
    log.info("xnli %s: %d rows × %d languages → %d groups, %d with a contradiction negative", split, n, len(members),
             first.height, contra.height)
    return groups


def drop_leaks(groups: pl.DataFrame, index: EvalTextIndex) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Remove every group with a member in an evaluation set; (kept groups, leakage rows)."""
    if not len(index):
        return groups, leakage_counts("xnli_groups", pl.DataFrame())
    members = groups.select(pl.col("group_id").alias("unit"), "lang", normalise_series(groups["text"]).alias("norm"))
    matched = index.matches(members)
    leaked = matched["unit"].unique().implode()
    kept = groups.filter(~pl.col("group_id").is_in(leaked))
    # a negative that was removed is no longer linked
    kept = kept.with_columns(pl.when(pl.col("negative_group_id").is_in(leaked)).then(None)
                             .otherwise(pl.col("negative_group_id")).alias("negative_group_id"))
    return kept, leakage_counts("xnli_groups", matched)


def single_pairs(groups: pl.DataFrame, seed: int) -> pl.DataFrame:
    """MPCL "+Single": each group → ⌊n/2⌋ disjoint language pairs, languages in a seeded random order per group."""
    order = (groups.select("group_id", "split", "lang", "text")
             .with_columns(groups.select("group_id", "lang").hash_rows(seed=seed).alias("_h"))
             .sort("group_id", "_h", "lang")
             .with_columns(pl.int_range(pl.len()).over("group_id").alias("_r")))
    a = order.filter(pl.col("_r") % 2 == 0).with_columns((pl.col("_r") // 2).alias("pair_index"))
    b = order.filter(pl.col("_r") % 2 == 1).with_columns((pl.col("_r") // 2).alias("pair_index"))
    return (a.join(b.select("group_id", "pair_index", pl.col("lang").alias("lang_b"), pl.col("text").alias("text_b")),
                   on=["group_id", "pair_index"], how="inner")
            .select("group_id", "split", pl.col("pair_index").cast(pl.Int32), pl.col("lang").alias("lang_a"),
                    pl.col("text").alias("text_a"), "lang_b", "text_b")
            .sort("group_id", "pair_index"))


def read_split(source: XnliSource, settings: XnliSettings, split: str) -> dict[str, pl.DataFrame]:
    tables = read_xnli(source, split, settings.read_languages())
    verify_alignment(tables, settings.anchor_language, max_boundary_mismatch=settings.max_boundary_mismatch)
    return {lang: t.frame for lang, t in tables.items()}


def build_groups(settings: XnliSettings, source: XnliSource, index: EvalTextIndex, out: Path) -> StageResult:
    if not isinstance(source, XnliSource):
        raise XnliFormatError(f"expected an XnliSource, got {type(source).__name__}")
    parts = [group_split(split, read_split(source, settings, split), settings.anchor_language,
                         settings.language_list) for split in settings.splits]
    groups = pl.concat(parts)
    n_before = groups["group_id"].n_unique()
    groups, leak = drop_leaks(groups, index)
    groups = groups.sort("group_id", "lang")
    stats: dict[str, Any] = {"groups": groups["group_id"].n_unique(), "groups_leaked": n_before
                             - groups["group_id"].n_unique(), "languages": settings.language_list,
                             "splits": settings.splits}
    write_partitioned(groups, out / "xnli_groups", "lang")
    tables = {"xnli_groups": "xnli_groups", "leakage": "leakage.parquet"}
    leak.write_parquet(out / "leakage.parquet")
    if settings.single_pairs:
        pairs = single_pairs(groups, settings.seed)
        pairs.write_parquet(out / "xnli_single_pairs.parquet")
        tables["xnli_single_pairs"] = "xnli_single_pairs.parquet"
        stats["single_pairs"] = pairs.height
    log.info("xnli_groups: %d groups (%d removed for leakage) in %s", stats["groups"], stats["groups_leaked"],
             ", ".join(settings.language_list))
    return StageResult(tables=tables, stats=stats)
