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
  order, paired off into ⌊n/2⌋ disjoint language pairs: ``group_id, split, pair_index, lang_a, lang_b`` (texts by a
  join with ``xnli_groups`` on ``group_id`` and language, so the text is stored once).
- ``leakage``: groups removed because a member occurs in a configured evaluation set.

Language subsets are lists or the presets of the MPCL paper (``pipelines.xnli.languages.LANGUAGE_PRESETS``). The
anchor language is read for grouping even when it is not a member language (the unseen-only study has no English).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, Field, field_validator

from contract import StageResult
from pipelines.leakage import EvalTextIndex, leakage_counts
from pipelines.seeded_hash import seeded_hash
from pipelines.text_normalise import normalise_series
from pipelines.xnli.languages import LANGUAGE_PRESETS, xnli_languages_validator
from pipelines.xnli.readers import XnliFormatError, read_xnli, verify_alignment
from pipelines.xnli.sources import XnliSource

log = logging.getLogger("polysent.pipelines.xnli")
STAGE_VERSION = "2"


class XnliSettings(BaseModel):
    """Which languages and splits form the groups."""

    model_config = ConfigDict(extra="forbid")
    languages: list[str] | str = Field(default_factory=lambda: list(LANGUAGE_PRESETS["mpcl"]),
                                       description=f"a list, or a preset: {', '.join(LANGUAGE_PRESETS)}")
    splits: list[str] = Field(default_factory=lambda: ["dev"], min_length=1)
    """XNLI splits grouped (``train``, ``dev``, ``test``); a group's id is unique across them"""
    anchor_language: str = "en"
    """the language whose unique sentences define the groups (read even when it is not a member language)"""
    single_pairs: bool = True
    """also derive MPCL's +Single pairs"""
    max_boundary_mismatch: float = Field(0.0, ge=0.0, le=1.0)
    """fraction of rows whose premise boundaries may disagree"""
    seed: int = 13
    """seeds the "+Single" pairing of each group's languages"""

    _languages = xnli_languages_validator("corpora.xnli_groups.languages")

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


@dataclass
class SplitGroups:
    """The groups of one split, column-wise: group attributes once, member texts per language (row g = group g)."""

    split: str
    groups: pl.DataFrame  # ordinal, group_id, role, source_row, negative_group_id
    texts: dict[str, pl.Series]

    def filter(self, keep: pl.Series) -> SplitGroups:
        return SplitGroups(self.split, self.groups.filter(keep), {k: v.filter(keep) for k, v in self.texts.items()})


def group_split(split: str, frames: dict[str, pl.DataFrame], anchor: str, members: list[str]) -> SplitGroups:
    """Aligned per-language frames (premise, hypothesis, label) of one split → its groups."""
    ref = frames[anchor]
    # every sentence occurrence of the anchor language, in reading order: row 0 premise, row 0 hypothesis, row 1 ...
    occ = pl.concat([
        ref.select(pl.col("premise").alias("text")).with_row_index("row"),
        ref.select(pl.col("hypothesis").alias("text")).with_row_index("row"),
    ]).with_columns((pl.col("row").cast(pl.Int64) * 2 + pl.int_range(pl.len()).ge(ref.height).cast(pl.Int64))
                    .alias("pos"))
    first = (occ.group_by("text").agg(pl.col("pos").min()).sort("pos").with_row_index("ordinal")
             .with_columns((pl.col("pos") // 2).alias("row"), (pl.col("pos") % 2 == 1).alias("is_hyp"),
                           (pl.lit(f"xnli-{split}-") + pl.col("ordinal").cast(pl.Utf8).str.zfill(7)).alias("group_id")))
    rows = first["row"].to_numpy()
    is_hyp = first["is_hyp"]
    texts = {}
    for lang in members:
        df = frames[lang]
        texts[lang] = pl.select(pl.when(is_hyp).then(df["hypothesis"].gather(rows))
                                .otherwise(df["premise"].gather(rows))).to_series().alias("text")
    # contradiction hard negatives: premise group → the group of its (first) contradiction hypothesis
    text_to_group = first.select("text", "group_id")
    contra = (ref.with_row_index("row").filter(pl.col("label") == "contradiction")
              .join(text_to_group.rename({"text": "premise", "group_id": "p_group"}), on="premise")
              .join(text_to_group.rename({"text": "hypothesis", "group_id": "negative_group_id"}), on="hypothesis")
              .sort("row").unique(subset=["p_group"], keep="first")
              .select(pl.col("p_group").alias("group_id"), "negative_group_id"))
    groups = first.select(
        "ordinal", "group_id", pl.when("is_hyp").then(pl.lit("hypothesis")).otherwise(pl.lit("premise")).alias("role"),
        (pl.col("row").cast(pl.Int64) + 1).alias("source_row"),
    ).join(contra, on="group_id", how="left", maintain_order="left")
    log.info("xnli %s: %d rows × %d languages → %d groups, %d with a contradiction negative", split, ref.height,
             len(members), first.height, contra.height)
    return SplitGroups(split, groups, texts)


def drop_leaks(sg: SplitGroups, index: EvalTextIndex) -> tuple[SplitGroups, pl.DataFrame]:
    """Remove every group with a member in an evaluation set; (kept groups, matched (unit, lang, eval_set))."""
    empty = pl.DataFrame(schema={"unit": pl.Utf8, "lang": pl.Utf8, "eval_set": pl.Utf8})
    if not len(index):
        return sg, empty

    def match(lang: str) -> pl.DataFrame:
        members = pl.DataFrame({"unit": sg.groups["group_id"], "lang": pl.Series([lang] * sg.groups.height,
                                                                                dtype=pl.Utf8),
                                "norm": normalise_series(sg.texts[lang])})
        return index.matches(members)

    with ThreadPoolExecutor(max_workers=2) as pool:  # polars' string kernels run without the GIL
        matched = pl.concat([empty, *pool.map(match, list(sg.texts))])
    if matched.is_empty():
        return sg, matched
    leaked = matched["unit"].unique().implode()
    kept = sg.filter(~sg.groups["group_id"].is_in(leaked))
    # a negative that was removed is no longer linked
    kept.groups = kept.groups.with_columns(pl.when(pl.col("negative_group_id").is_in(leaked)).then(None)
                                           .otherwise(pl.col("negative_group_id")).alias("negative_group_id"))
    return kept, matched


def single_pairs(sg: SplitGroups, seed: int) -> pl.DataFrame:
    """MPCL "+Single": each group → ⌊n/2⌋ disjoint language pairs, languages in a seeded random order per group.

    The order is a splitmix64 hash of (seed, split, group ordinal, language): stable across library versions and
    independent of which other languages are selected.
    """
    langs = list(sg.texts)
    n = sg.groups.height
    ordinal = sg.groups["ordinal"].cast(pl.UInt64).to_numpy()
    keys = np.stack([seeded_hash(ordinal, f"{seed}/{sg.split}", lang) for lang in langs], axis=1)
    order = np.argsort(keys, axis=1, kind="stable")
    k = len(langs) // 2
    a, b = order[:, 0:2 * k:2].ravel(), order[:, 1:2 * k:2].ravel()  # group-major: group 0's pairs first
    rows = np.repeat(np.arange(n), k)
    lang_s = pl.Series(langs, dtype=pl.Utf8)
    return pl.DataFrame({
        "group_id": sg.groups["group_id"].gather(rows), "split": pl.Series([sg.split] * len(rows), dtype=pl.Utf8),
        "pair_index": pl.Series(np.tile(np.arange(k, dtype=np.int32), n)),
        "lang_a": lang_s.gather(a), "lang_b": lang_s.gather(b)})


def read_split(source: XnliSource, settings: XnliSettings, split: str) -> dict[str, pl.DataFrame]:
    tables = read_xnli(source, split, settings.read_languages())
    verify_alignment(tables, settings.anchor_language, max_boundary_mismatch=settings.max_boundary_mismatch)
    return {lang: t.frame for lang, t in tables.items()}


def build_groups(settings: XnliSettings, source: XnliSource, index: EvalTextIndex, out: Path) -> StageResult:
    if not isinstance(source, XnliSource):
        raise XnliFormatError(f"expected an XnliSource, got {type(source).__name__}")
    folder = out / "xnli_groups"
    folder.mkdir()
    for lang in settings.language_list:
        (folder / f"lang={lang}").mkdir()
    stats: dict[str, Any] = {"groups": 0, "groups_leaked": 0, "languages": settings.language_list,
                             "splits": settings.splits}
    matched, singles = [], []
    with ThreadPoolExecutor(max_workers=2) as pool:  # Parquet writes overlap with the next split's work
        writes = []
        for split in settings.splits:
            sg = group_split(split, read_split(source, settings, split), settings.anchor_language,
                             settings.language_list)
            n = sg.groups.height
            sg, m = drop_leaks(sg, index)
            matched.append(m)
            stats["groups"] += sg.groups.height
            stats["groups_leaked"] += n - sg.groups.height
            for lang, text in sg.texts.items():
                part = sg.groups.select("group_id", pl.lit(split).alias("split"), text.alias("text"), "role",
                                        "source_row", "negative_group_id")
                writes.append(pool.submit(part.write_parquet, folder / f"lang={lang}" / f"part-{split}.parquet"))
            if settings.single_pairs:
                singles.append(single_pairs(sg, settings.seed))
        tables = {"xnli_groups": "xnli_groups", "leakage": "leakage.parquet"}
        if settings.single_pairs:
            pairs = pl.concat(singles)
            writes.append(pool.submit(pairs.write_parquet, out / "xnli_single_pairs.parquet"))
            tables["xnli_single_pairs"] = "xnli_single_pairs.parquet"
            stats["single_pairs"] = pairs.height
        for w in writes:
            w.result()
    leak = leakage_counts("xnli_groups", pl.concat(matched) if matched else pl.DataFrame())
    leak.write_parquet(out / "leakage.parquet")
    log.info("xnli_groups: %d groups (%d removed for leakage) in %s", stats["groups"], stats["groups_leaked"],
             ", ".join(settings.language_list))
    return StageResult(tables=tables, stats=stats)
