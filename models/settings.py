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
    """Tatoeba retrieval: accuracy xx→en and en→xx, cosine, argmax (ties → lowest index)."""

    __pydantic_config__ = _STRICT
    batch_size: int = 128
    languages: tuple[str, ...] = ()
    device: Literal["auto", "cpu", "cuda"] = "auto"
