"""Configuration of the ``eval_sets`` stage: where the evaluation sets are (:class:`EvalSources`, ``sources.eval``)
and how to read them (:class:`EvalSetsSettings`, ``corpora.eval_sets``).

The form configs have used so far stays valid: ``sources.eval: {tatoeba: DIR, sts: DIR, clustering: DIR}``, where a
plain ``sts`` path is one SemEval-layout folder holding STS17 (``{format: semeval, path: DIR, dataset: sts17}``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_serializer,
    model_validator,
)

from pipelines.eval_sets import bucc, classification, clustering, langid, pair_classification, parallel, sts, tatoeba
from pipelines.eval_sets.hub import HUB_DATASETS
from pipelines.language_codes import check_language


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _codes(codes: list[str], key: str) -> list[str]:
    for code in codes:
        check_language(code, key)
    return codes


# --------------------------------------------------------------------------------------------------------------------
# STS entries (told apart by ``format``; an entry without one is a SemEval-layout folder)


class SemEvalSts(_Strict):
    format: Literal["semeval"] = Field("semeval", description="STS.input.{name}.txt + STS.gs.{name}.txt pairs")
    path: Path = Field(description="folder with STS.input.*.txt and STS.gs.*.txt (STS17 release, SentEval "
                                   "STS12-en-test … STS16-en-test)")
    dataset: str | None = Field(None, description="value of the dataset column (sts17, sts12, …); inferred from "
                                                  "SentEval folder names STS1x-en-test when not given")

    @model_validator(mode="after")
    def _named(self) -> SemEvalSts:
        if self.dataset is None and sts.semeval_dataset_name(self.path) is None:
            raise ValueError(f"{self.path}: give dataset (e.g. sts17); it is only inferred from STS12-en-test … "
                             "STS16-en-test folder names")
        return self


class StsBenchmarkSts(_Strict):
    format: Literal["stsbenchmark"] = Field(description="STS Benchmark sts-{split}.csv (tab-separated)")
    path: Path = Field(description="folder with sts-train.csv, sts-dev.csv, sts-test.csv")
    splits: list[str] = Field(default_factory=lambda: ["test"], description="splits to read (train, dev, test)")


class SickSts(_Strict):
    format: Literal["sick"] = Field(description="SICK with its header; relatedness_score is the gold")
    path: Path = Field(description="SICK_test_annotated.txt (or SICK.txt)")


class StsbMultiMtSts(_Strict):
    format: Literal["stsb_multi_mt"] = Field(description="stsb-multi-mt stsb-{lang}-{split}.csv, row-parallel CSV")
    path: Path = Field(description="folder with stsb-{lang}-{split}.csv files")
    languages: list[str] = Field(min_length=1, description="ISO 639-1 codes, e.g. [en, de, es, fr]")
    split: str = Field("test", description="train, dev or test")
    cross: bool = Field(True, description="also every ordered cross-lingual pair a-b (s1 in a, s2 in b)")

    @field_validator("languages")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        return _codes(value, "sources.eval.sts.languages")


def _format_of(value: Any) -> str:
    if isinstance(value, dict):
        return value.get("format", "semeval")
    return getattr(value, "format", "semeval")


StsSource = Annotated[
    Annotated[SemEvalSts, Tag("semeval")] | Annotated[StsBenchmarkSts, Tag("stsbenchmark")]
    | Annotated[SickSts, Tag("sick")] | Annotated[StsbMultiMtSts, Tag("stsb_multi_mt")],
    Discriminator(_format_of),
]


# --------------------------------------------------------------------------------------------------------------------
# other sources


class ClassificationSource(_Strict):
    format: Literal["mtop", "mldoc", "sib200"] = Field(
        description="mtop: {lang}/{split}.txt of the MTOP release; mldoc: {language}.{split} files; sib200: "
                    "{lang_script}/{split}.tsv with header index_id, category, text")
    path: Path = Field(description="the dataset's folder")
    languages: list[str] = Field(default_factory=list, description="language codes (folder names for mtop/sib200, "
                                                                   "ISO 639-1 for mldoc); empty = all found")
    splits: list[str] = Field(default_factory=list, description="split names as in the file names; empty = all")
    name: str | None = Field(None, description="dataset column for sib200-layout sets (default sib200)")

    @field_validator("languages")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        return _codes(value, "sources.eval.classification.languages")


class ParallelSource(_Strict):
    format: Literal["ntrex", "flores"] = Field(
        description="ntrex: newstest2019-src.eng.txt + newstest2019-ref.{code}.txt; flores: {split}/{lang}.{split}")
    path: Path = Field(description="the dataset's folder")
    languages: list[str] = Field(default_factory=list, description="codes as in the file names (deu, zho-CN, "
                                                                   "eng_Latn); empty = all; NTREX always adds eng")
    split: str = Field("devtest", description="FLORES split (dev, devtest); unused for NTREX")
    name: str | None = Field(None, description="dataset column (default ntrex128 / flores200)")


class LangidSource(_Strict):
    path: Path = Field(description="XNLI folder in the XTREME layout ({split}-{lang}.tsv)")
    languages: list[str] = Field(min_length=2, description="XNLI language codes to tell apart")
    max_per_language: int = Field(1000, ge=1, description="distinct premises per language and split (dev → train, "
                                                         "test → test)")

    @field_validator("languages")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        return _codes(value, "sources.eval.langid.languages")


class PairClassificationSource(_Strict):
    format: Literal["pawsx", "tsv"] = Field(
        description="pawsx: PAWS-X as published (x-final/{lang}/{dev_2k,test_2k,translated_train}.tsv) or in XTREME's "
                    "layout ({split}-{lang}.tsv); tsv: one file of sentence1, sentence2, label (0/1) rows")
    path: Path = Field(description="pawsx: the x-final folder (or the folder holding it) or XTREME's pawsx folder; "
                                   "tsv: the file")
    languages: list[str] = Field(default_factory=list, description="pawsx: language codes as in the folder / file "
                                                                   "names; empty = all found")
    splits: list[str] = Field(default_factory=lambda: ["dev", "test"],
                              description="pawsx: splits (dev, test, train); empty = all found (train is 49k "
                                          "machine-translated pairs per language)")
    name: str | None = Field(None, description="dataset column (default pawsx, or the tsv file's stem)")
    language: str | None = Field(None, description="tsv: the language code of the pairs (required)")
    split: str = Field("test", description="tsv: the split the file is")
    quoting: Literal["csv", "none"] = Field("csv", description="tsv: csv (fields holding quotes are CSV-quoted, as "
                                                               "pandas and csv.writer write) or none (split at tabs)")

    @field_validator("languages")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        return _codes(value, "sources.eval.pair_classification.languages")

    @model_validator(mode="after")
    def _tsv_language(self) -> PairClassificationSource:
        if self.format == "tsv":
            if self.language is None:
                raise ValueError(f"{self.path}: format tsv needs language (the language code of its pairs)")
            _codes([self.language], "sources.eval.pair_classification.language")
        return self


class EvalSources(_Strict):
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
                add(f"sts/{i}", where(key, sts.semeval_files, s.path))
            elif isinstance(s, StsBenchmarkSts):
                add(f"sts/{i}", where(key, sts.stsbenchmark_files, s.path, s.splits).values())
            elif isinstance(s, SickSts):
                if not s.path.is_file():
                    raise FileNotFoundError(f"sources.eval.{key}: SICK file not found: {s.path}")
                add(f"sts/{i}", [s.path])
            else:
                add(f"sts/{i}", where(key, sts.stsb_multi_mt_files, s.path, s.languages, s.split).values())
        if self.clustering is not None:
            files = where("clustering", clustering.clustering_files, self.clustering)
            add("clustering", [p for pair in files.values() for p in pair])
        for i, c in enumerate(self.classification):
            for p in where(f"classification[{i}]", classification.classification_files, c):
                out[f"classification/{i}/{p.relative_to(c.path)}"] = p
        for i, par in enumerate(self.parallel):
            for p in where(f"parallel[{i}]", parallel.parallel_files, par):
                out[f"parallel/{i}/{p.relative_to(par.path)}"] = p
        for i, pc in enumerate(self.pair_classification):
            for pf in where(f"pair_classification[{i}]", pair_classification.pair_files, pc):
                rel = pf.path.relative_to(pc.path) if pf.path != Path(pc.path) else Path(pf.path.name)
                out[f"pair_classification/{i}/{rel}"] = pf.path
        if self.langid is not None:
            paths = langid.langid_files(self.langid.path, self.langid.languages)
            missing = [p.name for p in paths if not p.is_file()]
            if missing:
                raise FileNotFoundError(f"sources.eval.langid: {self.langid.path} lacks {missing}")
            add("langid", paths)
        return out


class EvalSetsSettings(_Strict):
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
        data = handler(self)
        if isinstance(data, dict) and data.get("clustering_max_per_language") is None:
            data.pop("clustering_max_per_language", None)
        return data

    @field_validator("tatoeba_languages")
    @classmethod
    def _tatoeba_codes(cls, value: list[str]) -> list[str]:
        return _codes(value, "corpora.eval_sets.tatoeba_languages")

    @field_validator("clustering_languages")
    @classmethod
    def _clustering_codes(cls, value: list[str]) -> list[str]:
        return _codes(value, "corpora.eval_sets.clustering_languages")

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
