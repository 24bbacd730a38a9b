"""Semantic textual similarity, pipelines part (scorer: ``models/evaluation/tasks/sts.py``).

Set ``sources.eval.sts``: a list of STS sets, each ``{format: semeval|stsbenchmark|sick|stsb_multi_mt, path: …}``
(a plain folder is one SemEval-layout STS17 folder; reader: ``pipelines.eval_sets.sts``; mteb's hub copies feed the
same table) → ``eval_sts`` (``dataset``, ``subset``, ``idx``, ``lang1``, ``lang2``, ``s1``, ``s2``, ``score``). Rows:
``canonical`` Spearman/Pearson per dataset and track, ``senteval`` (STS12–16 pooled ``all``, ``mean``, ``wmean``) and
``mteb``. mteb export: STS12–16 from the ``senteval`` ``all`` row (mteb pools each year's subsets), STS17,
STSBenchmark, SICK-R and stsb-multi-mt's monolingual pairs from the ``mteb`` rows. Figures: ``sts17`` (Spearman over
every STS17 track), ``sts17_mono`` / ``sts17_cross`` (tracks of one language / two), ``stsb_mono`` / ``stsb_cross``
(stsb-multi-mt's pairs).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import polars as pl
from pydantic import BeforeValidator, Field

from pipelines.eval_sets import sts as reader
from pipelines.eval_task_registry import (
    EvalSet,
    EvalTask,
    Figures,
    Mteb,
    MtebTarget,
    Report,
    Table,
    Variant,
    by_name,
    located,
    register_task,
)

STSB_DATASET = "stsb-multi-mt"  # the ``dataset`` value of STS-B multi-mt rows (``pipelines.eval_sets.sts``)
# STS-B multi-mt train captions in every language pair (``experiments/caption_sts.py``): ``captions_mono/_cross``
CAPTIONS_DATASET = "stsb-captions"
_STS_POOLED = {f"sts{y}": f"STS{y}" for y in range(12, 17)}  # mteb scores these as one pooled set


def _plain_folder(value: Any) -> Any:
    """A plain path is one SemEval-layout STS17 folder; one mapping, a list of one."""
    if value is None:
        return []
    if isinstance(value, str | Path):
        return [{"format": "semeval", "path": value, "dataset": "sts17"}]
    if isinstance(value, dict):
        return [value]
    return value


def _files(entries: Sequence[Any]) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for i, s in enumerate(entries):
        key = f"sts[{i}]"
        if isinstance(s, reader.SemEvalSts):
            out.update(by_name(f"sts/{i}", located(key, reader.semeval_files, s.path)))
        elif isinstance(s, reader.StsBenchmarkSts):
            out.update(by_name(f"sts/{i}", located(key, reader.stsbenchmark_files, s.path, s.splits).values()))
        elif isinstance(s, reader.SickSts):
            if not s.path.is_file():
                raise FileNotFoundError(f"sources.eval.{key}: SICK file not found: {s.path}")
            out.update(by_name(f"sts/{i}", [s.path]))
        else:
            out.update(by_name(f"sts/{i}", located(key, reader.stsb_multi_mt_files, s.path, s.languages,
                                                   s.split).values()))
    return out


def _read(entries: Sequence[Any], settings: Any, skipped: Any) -> Iterator[tuple[str, pl.DataFrame]]:
    yield reader.TABLE, reader.read_sts_sources(entries, skipped)


def _mteb(variant: str, subset: str, languages: str, run: Any) -> MtebTarget | str:
    dataset, _, sub = subset.partition("/")
    if dataset in _STS_POOLED:
        if variant == "senteval" and sub == "all":
            return MtebTarget(_STS_POOLED[dataset], "test", "default")
        if variant == "senteval":
            return f"mteb scores {_STS_POOLED[dataset]} as one pooled set: exported from senteval {dataset}/all"
        return (f"per-subset score; mteb scores {_STS_POOLED[dataset]} as one pooled set (exported from senteval "
                f"{dataset}/all)")
    if variant != "mteb":
        return f"not mteb's protocol (variant {variant})"
    if dataset == "sts17":
        return MtebTarget("STS17", "test", languages)
    if dataset == "stsb":
        return MtebTarget("STSBenchmark", sub, "default")
    if dataset == "sick-r":
        return MtebTarget("SICK-R", "test", "default") if sub == "test" else \
            f"SICK '{sub}' set; mteb's SICK-R scores the test split"
    if dataset == STSB_DATASET:
        a, _, b = sub.partition("-")
        if a != b:
            return "cross-lingual stsb-multi-mt pair; mteb's STSBenchmarkMultilingualSTS is monolingual"
        split = _stsb_multi_mt_split(run.sources)
        if split is None:
            return "the stsb-multi-mt split is unknown (no eval_sets manifest with an stsb_multi_mt source)"
        return MtebTarget("STSBenchmarkMultilingualSTS", split, a)
    return f"no mteb task for the STS dataset {dataset!r}"


def _stsb_multi_mt_split(sources: Mapping[str, Any]) -> str | None:
    entries = [s for s in sources.get("sts") or () if isinstance(s, Mapping)
               and str(s.get("format", "")).replace("-", "_") == "stsb_multi_mt"]
    splits = {str(s.get("split") or "test") for s in entries}  # the reader's default split is test
    return splits.pop() if len(splits) == 1 else None


def _figures(rows: Sequence[Mapping[str, Any]], trained: Sequence[str]) -> dict[str, float]:
    """Canonical Spearman of STS17 and stsb-multi-mt, over all tracks / subsets and split by one language or two."""
    sts: dict[str, list[float]] = {}
    for r in rows:
        if (r["task"], r["variant"], r["metric"]) != ("sts", "canonical", "spearman") or "/" not in r["subset"]:
            continue
        dataset = r["subset"].split("/", 1)[0]
        a, _, b = str(r["languages"]).partition("-")
        prefix = {"sts17": "sts17", STSB_DATASET: "stsb", CAPTIONS_DATASET: "captions"}.get(dataset)
        if prefix:
            sts.setdefault(prefix, []).append(r["value"])
            sts.setdefault(f"{prefix}_{'mono' if a == b else 'cross'}", []).append(r["value"])
    return {k: statistics.fmean(v) for k, v in sts.items() if k not in ("stsb", "captions")}


def _settings(families: set[str]) -> dict[str, Any]:
    """Only the datasets of the figures asked for, without mteb's duplicate scores."""
    datasets = ({"sts17"} & families | ({STSB_DATASET} if "stsb" in families else set())
                | ({CAPTIONS_DATASET} if "captions" in families else set()))
    return {"datasets": tuple(sorted(datasets)), "mteb": False}


TASK = register_task(EvalTask(
    name="sts", order=30,
    set=EvalSet(
        key="sts",
        source=(Annotated[list[reader.StsSource], BeforeValidator(_plain_folder)], Field(
            default_factory=list, description="STS sets; a plain folder = one SemEval-layout STS17 folder")),
        tables={reader.TABLE: Table(reader.SCHEMA, ("dataset", "subset", "idx"))}, read=_read, files=_files),
    report=Report(
        title="Semantic textual similarity",
        variants={"senteval": Variant("SentEval: STS12–16 `all` = correlation over the concatenated subsets", 7)},
        metrics=("spearman", "pearson"), headline=("spearman",), per_language="dataset/track"),
    card="STS Spearman",
    mteb=Mteb(_mteb, variants=frozenset({"mteb", "senteval"}),
              rename={"senteval": {"spearman": "cosine_spearman", "pearson": "cosine_pearson"}},
              datasets={"STS12": "mteb/sts12-sts", "STS13": "mteb/sts13-sts", "STS14": "mteb/sts14-sts",
                        "STS15": "mteb/sts15-sts", "STS16": "mteb/sts16-sts", "STSBenchmark": "mteb/stsbenchmark-sts",
                        "SICK-R": "mteb/sickr-sts", "STS17": "mteb/sts17-crosslingual-sts",
                        "STSBenchmarkMultilingualSTS": "mteb/stsb_multi_mt"}),
    figures=Figures(names=("sts17", "sts17_mono", "sts17_cross", "stsb_mono", "stsb_cross", "captions_mono",
                           "captions_cross"),
                    tables={"sts17": (reader.TABLE,), "stsb": (reader.TABLE,), "captions": (reader.TABLE,)},
                    compute=_figures,
                    settings=_settings)))
