"""Stage ``xnli_groups``: XNLI per-language TSVs → N-way translation groups (MPCL's data).

Input: XTREME-style files ``{split}-{lang}.tsv`` with ``premise \\t hypothesis \\t label`` and no header, row i being
the same item in every language. Alignment is **verified**, not assumed: equal row counts, equal labels per row, and
premise boundaries (where the premise changes from one row to the next) at the same rows in every language.

A group is one unique English sentence (a premise appears with three hypotheses: it is one group, not three); its
members are that sentence in every selected language.
"""

from __future__ import annotations

import logging
from pathlib import Path

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from warehouse.artifacts import StageResult

log = logging.getLogger("polysent.pipelines.xnli")
STAGE_VERSION = "1"
LABELS = {"entailment", "neutral", "contradiction"}


class XnliSettings(BaseModel):
    """Which languages and splits form the groups."""

    model_config = ConfigDict(extra="forbid")
    languages: list[str] = Field(default_factory=lambda: ["en", "de", "fr", "es", "ru"], min_length=2)
    splits: list[str] = Field(default_factory=lambda: ["dev"], min_length=1)
    anchor_language: str = "en"


class XnliFormatError(ValueError):
    pass


def read_xnli_tsv(path: Path) -> pl.DataFrame:
    """Read one XTREME-style XNLI file; errors name the file and line.

    Split on tabs by hand: the format is not CSV-quoted and XNLI texts contain bare quotes.
    """
    rows = []
    with open(path, encoding="utf-8-sig", newline="") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\r\n")
            if not line:
                continue
            parts = line.split("\t")
            if len(parts) != 3:
                raise XnliFormatError(f"{path}:{lineno}: expected 3 tab-separated fields "
                                      f"(premise, hypothesis, label), found {len(parts)}")
            if parts[2] not in LABELS:
                raise XnliFormatError(f"{path}:{lineno}: label {parts[2]!r}, expected one of {sorted(LABELS)}")
            rows.append(parts)
    return pl.DataFrame(rows, schema=["premise", "hypothesis", "label"], orient="row")


def verify_alignment(frames: dict[str, pl.DataFrame], files: dict[str, Path], anchor: str) -> None:
    ref = frames[anchor]
    ref_bounds = (ref["premise"] != ref["premise"].shift(1)).to_list()
    for lang, df in frames.items():
        if len(df) != len(ref):
            raise XnliFormatError(f"{files[lang]}: {len(df)} rows but {files[anchor]} has {len(ref)}; XNLI files "
                                  "must be row-aligned across languages")
        bad = (df["label"] != ref["label"]).arg_true()
        if len(bad):
            i = int(bad[0])
            raise XnliFormatError(f"{files[lang]}: row {i + 1} has label {df['label'][i]!r} but {files[anchor]} "
                                  f"has {ref['label'][i]!r}; the files are not row-aligned")
        bounds = (df["premise"] != df["premise"].shift(1)).to_list()
        for i, (a, b) in enumerate(zip(ref_bounds, bounds, strict=True)):
            if a != b and i > 0:
                raise XnliFormatError(f"{files[lang]}: row {i + 1} starts a new premise in one file but not in "
                                      f"{files[anchor]}; the files are not row-aligned")


def build_groups(settings: XnliSettings, xnli_dir: Path, out: Path) -> StageResult:
    if settings.anchor_language not in settings.languages:
        raise XnliFormatError(f"anchor_language {settings.anchor_language!r} must be one of languages")
    parts = []
    for split in settings.splits:
        files = {lang: Path(xnli_dir) / f"{split}-{lang}.tsv" for lang in settings.languages}
        missing = [str(p) for p in files.values() if not p.exists()]
        if missing:
            raise FileNotFoundError(f"XNLI files not found: {', '.join(missing)}")
        frames = {lang: read_xnli_tsv(p) for lang, p in files.items()}
        verify_alignment(frames, files, settings.anchor_language)
        n = len(frames[settings.anchor_language])
        # one long frame: (row, role, lang, text); group = unique anchor-language sentence
        long = pl.concat(
            [
                df.with_row_index("row").select(
                    pl.col("row"), pl.lit(lang).alias("lang"),
                    pl.col("premise"), pl.col("hypothesis"))
                .unpivot(index=["row", "lang"], on=["premise", "hypothesis"], variable_name="role", value_name="text")
                for lang, df in frames.items()
            ]
        )
        anchor = (
            long.filter(pl.col("lang") == settings.anchor_language)
            .select("row", "role", pl.col("text").alias("anchor_text"))
        )
        first = (
            anchor.with_columns((pl.col("row") * 2 + (pl.col("role") == "hypothesis").cast(pl.UInt32)).alias("pos"))
            .group_by("anchor_text").agg(pl.col("pos").min(), pl.col("role").sort_by("pos").first())
            .sort("pos").with_row_index("ordinal")
            .select("anchor_text", pl.col("role").alias("group_role"), "ordinal",
                    (pl.col("pos") // 2).alias("first_row"))
        )
        members = (
            long.join(anchor, on=["row", "role"])
            .join(first, on="anchor_text")
            .filter((pl.col("row") == pl.col("first_row")) & (pl.col("role") == pl.col("group_role")))
            .select(
                (pl.lit(f"xnli-{split}-") + pl.col("ordinal").cast(pl.Utf8).str.zfill(6)).alias("group_id"),
                pl.lit(split).alias("split"), "lang", "text", "role", pl.col("row").alias("source_row"),
            )
        )
        log.info("%s: %d rows × %d languages → %d groups", split, n, len(files), first.height)
        parts.append(members)
    groups = pl.concat(parts).sort("group_id", "lang")
    (out / "xnli_groups").mkdir()
    for (lang,), df in groups.partition_by("lang", as_dict=True, maintain_order=True).items():
        d = out / "xnli_groups" / f"lang={lang}"
        d.mkdir()
        df.drop("lang").write_parquet(d / "part-00000.parquet")
    return StageResult(tables={"xnli_groups": "xnli_groups"},
                       stats={"groups": groups["group_id"].n_unique(), "languages": settings.languages})
