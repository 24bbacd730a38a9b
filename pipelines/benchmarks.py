"""Stage ``eval_sets``: evaluation benchmarks in their distribution formats → Parquet tables.

- Tatoeba (LASER v1): ``tatoeba.{xxx}-eng.{xxx}`` and ``.eng``, line i ↔ line i → ``eval_tatoeba``;
- STS (SemEval-2017 layout): ``STS.input.{track}.txt`` (s1 TAB s2) + ``STS.gs.{track}.txt`` → ``eval_sts``
  (blank gold lines mark unscored pairs and are dropped, as in STS15/16);
- clustering (MewsC-16 layout): ``{lang}_sentences.txt`` + ``{lang}_categories.txt`` → ``eval_clustering``.
Line-count mismatches are errors naming both files.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from pipelines.text_lines import read_lines
from warehouse.artifacts import StageResult

log = logging.getLogger("polysent.pipelines.benchmarks")
STAGE_VERSION = "1"


class EvalSetsSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tatoeba_languages: list[str] = Field(default_factory=list, description="ISO 639-3 codes, e.g. deu; empty = all")


def _pair(a: Path, b: Path) -> tuple[list[str], list[str]]:
    la, lb = read_lines(a), read_lines(b)
    while la and lb and not la[-1] and not lb[-1]:
        la.pop()
        lb.pop()
    if len(la) != len(lb):
        raise ValueError(f"{a} has {len(la)} lines but {b} has {len(lb)}; they must be line-aligned")
    return la, lb


def read_tatoeba(folder: Path, languages: list[str]) -> pl.DataFrame:
    found = sorted({m.group(1) for p in Path(folder).glob("tatoeba.*-eng.*")
                    if (m := re.fullmatch(r"tatoeba\.(\w+)-eng\.\w+", p.name))})
    langs = languages or found
    missing = [lang for lang in langs if lang not in found]
    if missing:
        raise FileNotFoundError(f"{folder}: no Tatoeba files for {missing} (found: {found})")
    frames = []
    for lang in langs:
        src, eng = _pair(Path(folder) / f"tatoeba.{lang}-eng.{lang}", Path(folder) / f"tatoeba.{lang}-eng.eng")
        frames.append(pl.DataFrame({"lang": lang, "idx": range(len(src)), "text": src, "eng": eng},
                                   schema={"lang": pl.Utf8, "idx": pl.Int32, "text": pl.Utf8, "eng": pl.Utf8}))
    return pl.concat(frames)


def read_sts(folder: Path) -> pl.DataFrame:
    frames = []
    for inp in sorted(Path(folder).glob("STS.input.*.txt")):
        track = inp.name[len("STS.input."):-len(".txt")]
        gs = inp.with_name(f"STS.gs.{track}.txt")
        if not gs.exists():
            raise FileNotFoundError(f"{inp} has no gold file {gs.name}")
        pairs, gold = _pair(inp, gs)
        rows = []
        for i, (p, g) in enumerate(zip(pairs, gold, strict=True)):
            if not g:
                continue
            parts = p.split("\t")
            if len(parts) < 2:
                raise ValueError(f"{inp}:{i + 1}: expected 's1<TAB>s2'")
            rows.append({"track": track, "idx": i, "s1": parts[0], "s2": parts[1], "score": float(g)})
        frames.append(pl.DataFrame(rows))
    return pl.concat(frames) if frames else pl.DataFrame(
        schema={"track": pl.Utf8, "idx": pl.Int64, "s1": pl.Utf8, "s2": pl.Utf8, "score": pl.Float64})


def read_clustering(folder: Path) -> pl.DataFrame:
    frames = []
    for sents in sorted(Path(folder).glob("*_sentences.txt")):
        lang = sents.name.split("_", 1)[0]
        s, c = _pair(sents, sents.with_name(f"{lang}_categories.txt"))
        frames.append(pl.DataFrame({"lang": lang, "idx": range(len(s)), "text": s, "label": c},
                                   schema={"lang": pl.Utf8, "idx": pl.Int32, "text": pl.Utf8, "label": pl.Utf8}))
    return pl.concat(frames) if frames else pl.DataFrame(
        schema={"lang": pl.Utf8, "idx": pl.Int32, "text": pl.Utf8, "label": pl.Utf8})


def build_eval_sets(settings: EvalSetsSettings, out: Path, tatoeba: Path | None = None, sts: Path | None = None,
                    clustering: Path | None = None) -> StageResult:
    tables: dict[str, str] = {}
    stats: dict[str, int] = {}
    for name, folder, reader in (("eval_tatoeba", tatoeba, lambda f: read_tatoeba(f, settings.tatoeba_languages)),
                                 ("eval_sts", sts, read_sts), ("eval_clustering", clustering, read_clustering)):
        if folder is None:
            continue
        df = reader(Path(folder))
        df.write_parquet(out / f"{name}.parquet")
        tables[name] = f"{name}.parquet"
        stats[name] = df.height
        log.info("%s: %d rows from %s", name, df.height, folder)
    return StageResult(tables=tables, stats=stats)
