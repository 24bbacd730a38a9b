"""Stage ``bitext_pairs``: line-aligned bitext → filtered, de-duplicated, pivot-sampled translation pairs.

Readers cope with the real files: UTF-8 BOMs, CRLF line ends, blank lines (a pair with a blank side is dropped and
counted). Unequal line counts are an error naming both files. Every pair is expressed as (pivot language, other
language): pivots are configurable (VMSST: en and es). Filters: character length limits, a length-ratio limit, exact and
normalised (NFKC, case-folded, punctuation and spacing removed) de-duplication per language pair. Selection keeps, per
(pivot, language), the ``quota`` pairs with the smallest seeded MD5 of the pair — a deterministic streaming choice that
does not depend on file order and needs no shuffle in memory.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from pathlib import Path

import duckdb
import polars as pl
from pydantic import BaseModel, ConfigDict, Field, model_validator

from warehouse.artifacts import StageResult

log = logging.getLogger("polysent.pipelines.bitext")
STAGE_VERSION = "1"
_PUNCT = re.compile(r"[\W_]+", re.UNICODE)


class BitextSettings(BaseModel):
    """Pivot sampling of bitext (defaults: VMSST's en/es pivots)."""

    model_config = ConfigDict(extra="forbid")
    pivots: list[str] = Field(default_factory=lambda: ["en", "es"], min_length=1)
    quota_per_language: int = Field(1000, ge=1, description="pairs kept per (pivot, language)")
    min_chars: int = Field(3, ge=1)
    max_chars: int = Field(500, ge=1)
    max_length_ratio: float = Field(3.0, gt=1.0)
    seed: int = 13

    @model_validator(mode="after")
    def _limits(self) -> BitextSettings:
        if self.min_chars > self.max_chars:
            raise ValueError(f"min_chars {self.min_chars} > max_chars {self.max_chars}")
        return self


def read_lines(path: Path) -> list[str]:
    """Lines of a text file: BOM removed, CRLF/LF/CR endings, trailing whitespace stripped."""
    text = Path(path).read_text(encoding="utf-8-sig")
    return [ln.strip() for ln in text.splitlines()]


def read_moses(src_file: Path, tgt_file: Path) -> tuple[list[str], list[str]]:
    src, tgt = read_lines(src_file), read_lines(tgt_file)
    if len(src) != len(tgt):
        raise ValueError(f"{src_file} has {len(src)} lines but {tgt_file} has {len(tgt)}; Moses bitext must be "
                         "line-aligned")
    return src, tgt


def normalise(text: str) -> str:
    return _PUNCT.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def build_pairs(settings: BitextSettings, sources: list[dict], out: Path) -> StageResult:
    """``sources``: dicts with ``src``, ``tgt`` (language codes), ``src_file`` and ``tgt_file``."""
    frames = []
    stats: dict[str, int] = {"read": 0, "blank": 0}
    for s in sources:
        src, tgt = read_moses(Path(s["src_file"]), Path(s["tgt_file"]))
        if s["src"] in settings.pivots:
            pivot_lang, lang, pivot_text, text = s["src"], s["tgt"], src, tgt
        elif s["tgt"] in settings.pivots:
            pivot_lang, lang, pivot_text, text = s["tgt"], s["src"], tgt, src
        else:
            raise ValueError(f"bitext {s['src']}-{s['tgt']} ({s['src_file']}) has no pivot language "
                             f"(pivots: {settings.pivots})")
        stats["read"] += len(src)
        df = pl.DataFrame({"pivot_text": pivot_text, "text": text, "line": range(1, len(src) + 1)}).with_columns(
            pl.lit(pivot_lang).alias("pivot_lang"), pl.lit(lang).alias("lang"),
            pl.lit(Path(s["src_file"]).name).alias("source"))
        blank = (pl.col("pivot_text") == "") | (pl.col("text") == "")
        stats["blank"] += int(df.select(blank.sum()).item())
        frames.append(df.filter(~blank))
    pairs = pl.concat(frames).with_columns(
        pl.col("pivot_text").map_elements(normalise, return_dtype=pl.Utf8).alias("pivot_norm"),
        pl.col("text").map_elements(normalise, return_dtype=pl.Utf8).alias("norm"),
    )
    con = duckdb.connect()
    con.register("pairs", pairs.to_arrow())
    con.sql(f"""
        CREATE TEMP TABLE length_ok AS SELECT * FROM pairs
        WHERE length(pivot_text) BETWEEN {settings.min_chars} AND {settings.max_chars}
          AND length(text) BETWEEN {settings.min_chars} AND {settings.max_chars}
          AND greatest(length(pivot_text), length(text))
              <= {settings.max_length_ratio} * least(length(pivot_text), length(text))""")
    con.sql("""
        CREATE TEMP TABLE dedup AS SELECT * FROM length_ok
        QUALIFY row_number() OVER (PARTITION BY pivot_lang, lang, pivot_norm, norm ORDER BY source, line) = 1""")
    ((n_length_ok, n_dedup),) = con.sql(
        "SELECT (SELECT count(*) FROM length_ok), (SELECT count(*) FROM dedup)").fetchall()
    stats["dropped_length"] = pairs.height - n_length_ok
    stats["dropped_duplicate"] = n_length_ok - n_dedup
    selected = con.sql(f"""
        SELECT md5('{settings.seed}' || chr(31) || pivot_lang || chr(31) || lang || chr(31) || pivot_text
                   || chr(31) || text) AS pair_id,
               pivot_lang, lang, pivot_text, text, source, line
        FROM dedup
        QUALIFY row_number() OVER (PARTITION BY pivot_lang, lang ORDER BY pair_id) <= {settings.quota_per_language}
        ORDER BY pivot_lang, lang, pair_id""").pl()
    con.close()
    stats["kept"] = selected.height
    (out / "bitext_pairs").mkdir()
    for (lang,), df in selected.partition_by("lang", as_dict=True, maintain_order=True).items():
        d = out / "bitext_pairs" / f"lang={lang}"
        d.mkdir()
        df.drop("lang").write_parquet(d / "part-00000.parquet")
    log.info("bitext: read %d pairs, dropped %d blank, %d by length, %d duplicates; kept %d", stats["read"],
             stats["blank"], stats["dropped_length"], stats["dropped_duplicate"], stats["kept"])
    return StageResult(tables={"bitext_pairs": "bitext_pairs"}, stats=stats)
