"""Typed settings of the model stages, as standard-library dataclasses.

They carry a ``__pydantic_config__`` so the pipeline config (pydantic) validates them strictly — unknown keys and
wrong types are rejected — while this package itself never imports pydantic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

_STRICT = {"extra": "forbid"}


@dataclass(frozen=True)
class TokenizerSettings:
    """WordPiece tokenizer trained on the pipeline's own corpora (no hub download needed)."""

    __pydantic_config__ = _STRICT
    vocab_size: int = 8000
    min_frequency: int = 2
    lowercase: bool = False
    max_texts: int = 2_000_000


@dataclass(frozen=True)
class EncoderSettings:
    """A small BERT-style encoder built from a config (``pretrained`` may name a local or hub model instead)."""

    __pydantic_config__ = _STRICT
    hidden_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    intermediate_size: int = 512
    dropout: float = 0.1
    max_length: int = 64
    pooling: Literal["mean", "cls"] = "mean"
    pretrained: str | None = None


@dataclass(frozen=True)
class TrainSettings:
    """One training run. ``objective`` names a loss in ``models.objectives``."""

    __pydantic_config__ = _STRICT
    objective: Literal["info_nce"] = "info_nce"
    data: tuple[Literal["xnli_groups", "bitext_pairs"], ...] = ("xnli_groups", "bitext_pairs")
    encoder: EncoderSettings = field(default_factory=EncoderSettings)
    steps: int = 300
    batch_size: int = 32
    lr: float = 5e-4
    warmup_steps: int = 30
    weight_decay: float = 0.01
    temperature: float = 0.05
    symmetric: bool = True
    seed: int = 13
    device: Literal["auto", "cpu", "cuda"] = "auto"
    log_every: int = 10


@dataclass(frozen=True)
class TatoebaSettings:
    """Tatoeba (methods §7.1): accuracy xx→en, en→xx and their mean (cosine, argmax, ties → lowest index, the file's
    pair count as denominator), per language and over the ``subsets``; ``mteb`` adds mteb's xx→en weighted-F1 variant
    and ``xtreme`` labels the en→xx accuracy as XTREME reports it."""

    __pydantic_config__ = _STRICT
    languages: tuple[str, ...] = ()
    subsets: tuple[Literal["xnli14", "xtreme36", "all"], ...] = ("xnli14", "xtreme36", "all")
    xtreme: bool = True
    mteb: bool = True


@dataclass(frozen=True)
class BuccSettings:
    """BUCC mining F1 as LASER's ``mine_bitexts`` (methods §7.3): ratio margin over k nearest neighbours, "max" 1:1
    retrieval, threshold search. *oracle* = tuned and scored on each split; *held-out* = tuned on ``tune_split``,
    applied to ``test_split`` (when both have gold). ``cosine`` adds the plain-cosine mining VMSST also reports;
    ``mteb`` adds mteb's retrieval-style BUCC (top-1 per gold source; not mining)."""

    __pydantic_config__ = _STRICT
    k: int = 4
    margin: Literal["ratio", "distance", "absolute"] = "ratio"
    retrieval: Literal["max", "fwd", "bwd", "intersect"] = "max"
    tune_split: str = "sample"
    test_split: str = "training"
    cosine: bool = True
    mteb: bool = True


@dataclass(frozen=True)
class StsSettings:
    """STS (methods §7.4): Spearman and Pearson ×100 of cosine per track/subset; STS12–16 also SentEval's "all"
    (concatenated subsets), "mean" and "wmean"; ``mteb`` adds mteb's cosine_spearman in its [0, 1] scale."""

    __pydantic_config__ = _STRICT
    datasets: tuple[str, ...] = ()
    mteb: bool = True


@dataclass(frozen=True)
class ClusteringSettings:
    """Clustering (methods §7.5): k-means (``n_init`` runs, seeded) with Hungarian-matched accuracy as EASE, and
    mteb's bootstrapped MiniBatchKMeans V-measure (on all documents, or mteb's own document sample with
    ``mteb_document_sample``)."""

    __pydantic_config__ = _STRICT
    languages: tuple[str, ...] = ()
    n_init: int = 10
    seed: int = 42
    v_measure: bool = True
    mteb_document_sample: bool = False


@dataclass(frozen=True)
class ClassificationSettings:
    """Logistic-regression probes on frozen embeddings (mteb's protocol: ``n_experiments`` undersampled fits of
    ``samples_per_label`` per label; ``None`` = the whole training split) and zero-shot cross-lingual transfer from
    ``source_language`` (MLDoc/MTOP style)."""

    __pydantic_config__ = _STRICT
    n_experiments: int = 10
    samples_per_label: int | None = 8
    seed: int = 42
    source_language: str = "en"
    train_split: str = "train"
    test_split: str = "test"


@dataclass(frozen=True)
class XsimSettings:
    """xSIM (LASER ``source/xsim.py``, methods §7.8): margin-based error rate per language pair on N-way parallel
    sets. ``pairs``: ``to_english`` (xx→eng, as FLORES xSIM) or ``nway`` (every ordered pair)."""

    __pydantic_config__ = _STRICT
    k: int = 4
    margin: Literal["ratio", "distance", "absolute"] = "ratio"
    compare_text: bool = True
    pairs: Literal["to_english", "nway"] = "to_english"
    pivot: str = "eng"


@dataclass(frozen=True)
class GeometrySettings:
    """Alignment and uniformity (Wang & Isola 2020; EASE §7.2) on translation pairs (Tatoeba, N-way sets), per
    language pair; uniformity over the union of both sides (``max_points`` caps it, seeded)."""

    __pydantic_config__ = _STRICT
    source: Literal["tatoeba", "parallel"] = "tatoeba"
    max_points: int = 20000
    seed: int = 0


@dataclass(frozen=True)
class LangidSettings:
    """Language-identification probe (mSimCSE Table 7): logistic regression predicting the language of a sentence
    from its frozen embedding; lower accuracy = more language-agnostic embeddings."""

    __pydantic_config__ = _STRICT
    seed: int = 0


@dataclass(frozen=True)
class EvaluationSettings:
    """The evaluation suite. A task runs when its section is set and the evaluation sets provide its data.

    ``models`` names external models to evaluate besides the trained runs (a local sentence-transformers folder or a
    hub id). Encoding: ``batch_tokens`` padded tokens per batch (at most ``batch_size`` texts), ``dtype`` (bfloat16 /
    float16 autocast on a GPU), ``cache`` (the embedding cache under ``<data_root>/cache/embeddings``)."""

    __pydantic_config__ = _STRICT
    tatoeba: TatoebaSettings | None = field(default_factory=TatoebaSettings)
    bucc: BuccSettings | None = field(default_factory=BuccSettings)
    sts: StsSettings | None = field(default_factory=StsSettings)
    clustering: ClusteringSettings | None = field(default_factory=ClusteringSettings)
    classification: ClassificationSettings | None = field(default_factory=ClassificationSettings)
    xsim: XsimSettings | None = field(default_factory=XsimSettings)
    geometry: GeometrySettings | None = field(default_factory=GeometrySettings)
    langid: LangidSettings | None = field(default_factory=LangidSettings)
    models: dict[str, str] = field(default_factory=dict)
    batch_size: int = 256
    batch_tokens: int = 4096
    max_length: int | None = None
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    device: Literal["auto", "cpu", "cuda"] = "auto"
    cache: bool = True
