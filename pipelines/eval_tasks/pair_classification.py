"""Pair classification (paraphrase detection), pipelines part (scorer:
``models/evaluation/tasks/pair_classification.py``).

Set ``sources.eval.pair_classification``: a list of ``{format: pawsx|tsv, path: …}`` (PAWS-X as Google publishes it
or in XTREME's layout, or any ``sentence1 sentence2 label`` TSV; reader: ``pipelines.eval_sets.pair_classification``)
→ ``eval_pair_classification`` (``dataset``, ``lang``, ``split``, ``idx``, ``s1``, ``s2``, ``label``) and
``eval_pair_classification_bad_rows`` (every row not read, with its file, line and reason). Rows: ``mteb`` scores per
dataset, split and language and their mean over languages (headline: ``max_ap``, mteb's PAWS-X main score); mteb
export: PAWS-X as ``PawsXPairClassification``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import Field

from pipelines.eval_sets import pair_classification as reader
from pipelines.eval_task_registry import (
    MTEB_SPLITS,
    EvalSet,
    EvalTask,
    Mteb,
    MtebTarget,
    Report,
    Table,
    located,
    register_task,
)


def _files(entries: Sequence[Any]) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for i, pc in enumerate(entries):
        for pf in located(f"pair_classification[{i}]", reader.pair_files, pc):
            rel = pf.path.relative_to(pc.path) if pf.path != Path(pc.path) else Path(pf.path.name)
            out[f"pair_classification/{i}/{rel}"] = pf.path
    return out


def _read(entries: Sequence[Any], settings: Any, skipped: Any) -> Iterator[tuple[str, pl.DataFrame]]:
    for pc in entries:
        pairs, bad = reader.read_pair_classification(pc, skipped)
        yield reader.TABLE, pairs
        yield reader.BAD_TABLE, bad


def _mteb(variant: str, subset: str, languages: str, run: Any) -> MtebTarget | str:
    """``pawsx/{split}/{lang}`` (the suite's rows), ``pawsx/{lang}/{split}`` or ``pawsx/{lang}`` (split: the
    evaluate settings' ``pair_classification.split``, else test). The ``mean`` over languages has no mteb subset."""
    dataset, *parts = subset.split("/")
    if dataset.replace("-", "").lower() != "pawsx":
        return f"no mteb pair-classification task mapped for {dataset!r}"
    splits = [p for p in parts if MTEB_SPLITS.get(p, p) in ("test", "validation", "train")]
    langs = [p for p in parts if p not in splits]
    if len(langs) != 1 or len(splits) > 1:
        return f"cannot tell the language and split in subset {subset!r}"
    settings = run.settings.get("pair_classification")
    default = settings.get("split", "test") if isinstance(settings, Mapping) else "test"
    return MtebTarget("PawsXPairClassification", splits[0] if splits else str(default), langs[0])


TASK = register_task(EvalTask(
    name="pair_classification", order=90,
    set=EvalSet(
        key="pair_classification",
        source=(list[reader.PairClassificationSource], Field(
            default_factory=list, description="paraphrase / pair-classification sets (PAWS-X, generic TSV)")),
        tables={reader.TABLE: Table(reader.SCHEMA, ("dataset", "lang", "split", "idx")),
                reader.BAD_TABLE: Table(reader.BAD_SCHEMA, ("dataset", "lang", "split", "line"))},
        read=_read, files=_files),
    report=Report(
        title="Pair classification (paraphrase detection)",
        metrics=("max_ap", "cosine_ap", "max_f1", "cosine_f1", "max_accuracy", "cosine_accuracy", "max_precision",
                 "cosine_precision", "max_recall", "cosine_recall", "cosine_f1_threshold", "cosine_accuracy_threshold"),
        headline=("max_ap", "cosine_ap", "max_f1", "max_accuracy"),  # max_ap: mteb's PAWS-X main score
        per_language="language", raw_metrics=frozenset({"cosine_f1_threshold", "cosine_accuracy_threshold"})),
    mteb=Mteb(_mteb, rename={"mteb": {"accuracy": "cosine_accuracy", "f1": "cosine_f1", "ap": "cosine_ap",
                                      "precision": "cosine_precision", "recall": "cosine_recall",
                                      "accuracy_threshold": "cosine_accuracy_threshold",
                                      "f1_threshold": "cosine_f1_threshold"}},
              datasets={"PawsXPairClassification": "google-research-datasets/paws-x"})))
