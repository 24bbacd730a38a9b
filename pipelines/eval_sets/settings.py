"""Configuration of the ``eval_sets`` stage: where the evaluation sets are (:class:`EvalSources`, ``sources.eval``)
and how to read them (:class:`EvalSetsSettings`, ``corpora.eval_sets``).

The form configs have used so far stays valid: ``sources.eval: {tatoeba: DIR, sts: DIR, clustering: DIR}``, where a
plain ``sts`` path is one SemEval-layout folder holding STS17 (``{format: semeval, path: DIR, dataset: sts17}``).

Each kind of entry is defined beside the reader that reads it (``sts.StsSource``,
``classification.ClassificationSource``, ``parallel.ParallelSource``, ``pair_classification.PairClassificationSource``,
``langid.LangidSource``) on the shared base of ``source_config``; this module gathers them and imports every reader,
and no reader imports it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_serializer

from pipelines.eval_sets import bucc, clustering, langid, tatoeba
from pipelines.eval_sets.classification import ClassificationSource, classification_files
from pipelines.eval_sets.hub import HUB_DATASETS
from pipelines.eval_sets.langid import LangidSource
from pipelines.eval_sets.pair_classification import PairClassificationSource, pair_files
from pipelines.eval_sets.parallel import ParallelSource, parallel_files
from pipelines.eval_sets.source_config import StrictConfig, checked_languages
from pipelines.eval_sets.sts import (
    SemEvalSts,
    SickSts,
    StsBenchmarkSts,
    StsSource,
    semeval_files,
    stsb_multi_mt_files,
    stsbenchmark_files,
)
from pipelines.key_defaults import without_defaults
from pipelines.language_codes import check_language


class EvalSources(StrictConfig):
    tatoeba: Path | None = Field(None, description="folder of LASER Tatoeba v1 tatoeba.{xxx}-eng.{xxx,eng} files")
    bucc: Path | None = Field(None, description="folder of BUCC 2018 {src}-en.{split}.{src,en,gold} files")
    sts: list[StsSource] = Field(default_factory=list, description="STS sets; a plain folder = one SemEval-layout "
                                                                   "STS17 folder")
    clustering: Path | None = Field(None, description="MewsC-16 folder ({lang}_sentences.txt, {lang}_categories.txt)")
    classification: list[ClassificationSource] = Field(default_factory=list, description="classification probes")
    parallel: list[ParallelSource] = Field(default_factory=list, description="N-way parallel sets for xSIM")
    langid: LangidSource | None = Field(None, description="XNLI sentences for the language-identification probe")
    pair_classification: list[PairClassificationSource] = Field(
        default_factory=list, description="paraphrase / pair-classification sets (PAWS-X, generic TSV)")
    hub: list[str] = Field(default_factory=list, description=f"mteb datasets to load from the hub when online: "
                                                             f"{', '.join(HUB_DATASETS)}")

    @field_validator("sts", mode="before")
    @classmethod
    def _plain_sts_folder(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str | Path):
            return [{"format": "semeval", "path": value, "dataset": "sts17"}]
        if isinstance(value, dict):
            return [value]
        return value

    @field_validator("hub")
    @classmethod
    def _known_hub(cls, value: list[str]) -> list[str]:
        unknown = [v for v in value if v not in HUB_DATASETS]
        if unknown:
            raise ValueError(f"unknown mteb datasets {unknown}; known: {sorted(HUB_DATASETS)}")
        return value

    def configured(self) -> bool:
        """True when at least one evaluation set is configured."""
        return bool(self.tatoeba or self.bucc or self.sts or self.clustering or self.classification or self.parallel
                    or self.langid or self.hub or self.pair_classification)

    def files(self) -> dict[str, Path]:
        """Every local input file, keyed ``kind/…`` (for the stage's cache key); a missing folder raises naming the
        ``sources.eval`` key."""
        out: dict[str, Path] = {}

        def add(prefix: str, paths: Any) -> None:
            out.update({f"{prefix}/{p.name}": p for p in sorted(Path(x) for x in paths)})

        def where(key: str, fn: Any, *args: Any) -> Any:
            try:
                return fn(*args)
            except FileNotFoundError as exc:
                raise FileNotFoundError(f"sources.eval.{key}: {exc}") from None

        if self.tatoeba is not None:
            files = where("tatoeba", tatoeba.tatoeba_files, self.tatoeba)
            add("tatoeba", [p for sides in files.values() for p in sides.values()])
        if self.bucc is not None:
            files = where("bucc", bucc.bucc_files, self.bucc)
            add("bucc", [p for kinds in files.values() for p in kinds.values()])
        for i, s in enumerate(self.sts):
            key = f"sts[{i}]"
            if isinstance(s, SemEvalSts):
                add(f"sts/{i}", where(key, semeval_files, s.path))
            elif isinstance(s, StsBenchmarkSts):
                add(f"sts/{i}", where(key, stsbenchmark_files, s.path, s.splits).values())
            elif isinstance(s, SickSts):
                if not s.path.is_file():
                    raise FileNotFoundError(f"sources.eval.{key}: SICK file not found: {s.path}")
                add(f"sts/{i}", [s.path])
            else:
                add(f"sts/{i}", where(key, stsb_multi_mt_files, s.path, s.languages, s.split).values())
        if self.clustering is not None:
            files = where("clustering", clustering.clustering_files, self.clustering)
            add("clustering", [p for pair in files.values() for p in pair])
        for i, c in enumerate(self.classification):
            for p in where(f"classification[{i}]", classification_files, c):
                out[f"classification/{i}/{p.relative_to(c.path)}"] = p
        for i, par in enumerate(self.parallel):
            for p in where(f"parallel[{i}]", parallel_files, par):
                out[f"parallel/{i}/{p.relative_to(par.path)}"] = p
        for i, pc in enumerate(self.pair_classification):
            for pf in where(f"pair_classification[{i}]", pair_files, pc):
                rel = pf.path.relative_to(pc.path) if pf.path != Path(pc.path) else Path(pf.path.name)
                out[f"pair_classification/{i}/{rel}"] = pf.path
        if self.langid is not None:
            paths = langid.langid_files(self.langid.path, self.langid.languages)
            missing = [p.name for p in paths if not p.is_file()]
            if missing:
                raise FileNotFoundError(f"sources.eval.langid: {self.langid.path} lacks {missing}")
            add("langid", paths)
        return out


class EvalSetsSettings(StrictConfig):
    tatoeba_languages: list[str] = Field(default_factory=list, description="ISO 639-3 codes as in the Tatoeba file "
                                                                           "names, e.g. deu; empty = all")
    bucc_pairs: list[str] = Field(default_factory=list, description="BUCC pairs, e.g. de-en; empty = all found")
    bucc_splits: list[str] = Field(default_factory=list, description="BUCC splits (sample, training, test); empty = "
                                                                     "all found")
    clustering_languages: list[str] = Field(default_factory=list, description="MewsC-16 languages; empty = all")
    clustering_dataset: str = Field("mewsc16", description="dataset column of eval_clustering rows read from "
                                                           "sources.eval.clustering")
    clustering_empty_sentences: Literal["error", "skip"] = Field(
        "error", description="an empty sentence line in the clustering files: error, or skip (counted; the real "
                             "MewsC-16 de_sentences.txt has one)")
    clustering_max_per_language: int | None = Field(
        None, ge=2, description="at most this many clustering texts per language, chosen by a hash of the text (the "
                                "same rows for every model; MewsC-16 whole is ~12 min of scoring per model on 2 "
                                "cores); null = all. mteb export skips a capped set (its counts differ)")
    hub_subsets: dict[str, list[str]] = Field(default_factory=dict, description="mteb dataset → subsets to load "
                                                                                "(deu-eng, zh-en, de, eng_Latn); "
                                                                                "absent or empty = all")

    @model_serializer(mode="wrap")
    def _key(self, handler: Any) -> Any:
        """Unset ``clustering_max_per_language`` stays out of the dump, so cache keys of configs without it do not
        move."""
        return without_defaults(self, handler(self), ("clustering_max_per_language",))

    @field_validator("tatoeba_languages")
    @classmethod
    def _tatoeba_codes(cls, value: list[str]) -> list[str]:
        return checked_languages(value, "corpora.eval_sets.tatoeba_languages")

    @field_validator("clustering_languages")
    @classmethod
    def _clustering_codes(cls, value: list[str]) -> list[str]:
        return checked_languages(value, "corpora.eval_sets.clustering_languages")

    @field_validator("bucc_pairs")
    @classmethod
    def _bucc_pairs(cls, value: list[str]) -> list[str]:
        for pair in value:
            src, dash, tgt = pair.partition("-")
            if not dash or tgt != "en":
                raise ValueError(f"corpora.eval_sets.bucc_pairs: {pair!r}; expected xx-en (de-en, fr-en, ru-en, zh-en)")
            check_language(src, "corpora.eval_sets.bucc_pairs")
        return value

    @field_validator("hub_subsets")
    @classmethod
    def _hub_names(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        unknown = [k for k in value if k not in HUB_DATASETS]
        if unknown:
            raise ValueError(f"corpora.eval_sets.hub_subsets: unknown mteb datasets {unknown}; known: "
                             f"{sorted(HUB_DATASETS)}")
        return value
