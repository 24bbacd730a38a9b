"""Sentence encoder = a 🤗 transformer + pooling, saved in sentence-transformers' folder format.

``SentenceEncoder.save(path)`` writes what ``SentenceTransformer(path)`` loads (``modules.json``,
``sentence_bert_config.json``, ``1_Pooling/config.json`` and the backbone's ``save_pretrained`` files in the root),
without importing sentence-transformers; ``SentenceEncoder.load`` reads the same layout back.

Prompts are kept the way sentence-transformers keeps them (``config_sentence_transformers.json``: ``prompts`` by name
and a ``default_prompt_name``). The default prompt is part of the model's input function: it is prepended to every text
the encoder reads — in ``encode`` (as ``SentenceTransformer.encode`` does) *and* in the training forward — so a model
such as multilingual-e5 (``"query: "``) trains on the inputs it is evaluated on, and its export keeps the prompt.

On the CPU in float32, ``encode`` runs BERT / (XLM-)RoBERTa backbones through ``PackedBackbone`` — the same weights and
arithmetic without padding or attention masks, on packed oneDNN weights with bias, GELU and residual add fused into
the matrix products — instead of the 🤗 forward; the embeddings agree with the 🤗 forward's to float32 rounding.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from transformers import AutoConfig, AutoModel, AutoTokenizer, BertConfig, BertModel, PreTrainedTokenizerBase

from models.settings import EncoderSettings

POOLING_KEYS = ("pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens",
                "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken")
_POOLING_NAMES = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean", "pooling_mode_max_tokens": "max",
                  "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len", "pooling_mode_lasttoken": "lasttoken"}


def pool(hidden: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
    """Pooling as sentence-transformers does it (``models/Pooling.py``): ``mean`` over the attention mask (special
    tokens included, denominator clamped at 1e-9), ``cls``, ``max`` (padding set to -1e9), ``mean_sqrt_len`` (sum /
    sqrt(length)) or ``lasttoken`` (the last non-padding token, right padding)."""
    if mode == "cls":
        return hidden[:, 0]
    m = mask.unsqueeze(-1).to(hidden.dtype)
    if mode == "mean":
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
    if mode == "max":
        return hidden.masked_fill(m == 0, -1e9).max(1).values
    if mode == "mean_sqrt_len":
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9).sqrt()
    if mode == "lasttoken":
        last = mask.sum(1).long() - 1
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last.clamp(min=0)]
    raise ValueError(f"unknown pooling mode {mode!r}; expected cls, mean, max, mean_sqrt_len or lasttoken")


def length_batches(lengths: np.ndarray, batch_size: int, batch_tokens: int) -> list[np.ndarray]:
    """Indices of texts with token ``lengths`` cut into the batches ``SentenceEncoder.encode`` runs: ordered by length
    (stable), at most ``batch_size`` texts and about ``batch_tokens`` padded tokens (``len(batch) × longest``) each; a
    text longer than ``batch_tokens`` goes alone. Each batch's last index is its longest text."""
    order = np.argsort(np.asarray(lengths), kind="stable")
    out, i = [], 0
    while i < len(order):
        longest = int(lengths[order[min(i + batch_size, len(order)) - 1]])
        n = max(1, min(batch_size, batch_tokens // max(1, longest)))
        out.append(order[i:i + n])
        i += n
    return out


# -- the CPU inference path ------------------------------------------------------------------------------------------

_ROBERTA_TYPES = ("roberta", "xlm-roberta", "camembert")
_ONEDNN: bool | None = None  # whether torch's oneDNN linear kernels work here (probed once)
_PLANS: weakref.WeakKeyDictionary[nn.Module, tuple[tuple, PackedBackbone]] = weakref.WeakKeyDictionary()


def onednn_linear_available() -> bool:
    """Whether ``torch.ops.mkldnn._linear_pointwise`` (oneDNN's inner product on packed weights, with fused GELU and
    add) runs and agrees with ``F.linear`` here; probed once per process."""
    global _ONEDNN
    if _ONEDNN is None:
        _ONEDNN = False
        try:
            if torch.backends.mkldnn.is_available():
                gen = torch.Generator().manual_seed(0)
                x, w, b, other = (torch.randn(5, 8, generator=gen), torch.randn(6, 8, generator=gen),
                                  torch.randn(6, generator=gen), torch.randn(5, 6, generator=gen))
                with torch.inference_mode():
                    packed = torch.ops.mkldnn._reorder_linear_weight(w, 5)
                    ref = nn.functional.linear(x, w, b)
                    ok = [torch.allclose(torch.ops.mkldnn._linear_pointwise(x, packed, b, "gelu", [], "none"),
                                         nn.functional.gelu(ref), atol=1e-5),
                          torch.allclose(torch.ops.mkldnn._linear_pointwise.binary(x, other, packed, b, "add"),
                                         ref + other, atol=1e-5)]
                _ONEDNN = all(ok)
        except (RuntimeError, AttributeError, NotImplementedError):
            _ONEDNN = False
    return _ONEDNN


@dataclass(frozen=True)
class _Layer:
    qkv: tuple[torch.Tensor, torch.Tensor]  # query, key and value stacked into one product
    attention_out: tuple[torch.Tensor, torch.Tensor]
    norm1: tuple[torch.Tensor, torch.Tensor, float]
    intermediate: tuple[torch.Tensor, torch.Tensor]
    activation: Callable[[torch.Tensor], torch.Tensor] | None  # None: exact (erf) GELU, fused into the product
    output: tuple[torch.Tensor, torch.Tensor]
    norm2: tuple[torch.Tensor, torch.Tensor, float]
    heads: int
    head_dim: int
    scale: float


class PackedBackbone:
    """A BERT-family backbone's inference forward over *packed* texts: the tokens of a batch's texts are concatenated
    (no padding), every linear layer runs once over all of them, and attention runs per run of equal-length texts
    (the texts come sorted by length), so no attention mask is needed. With oneDNN the weights are reordered once into
    its blocked layout and the bias, the exact GELU and the residual additions are fused into the products; without
    it the same plan runs on ``F.linear``. Query, key and value are one product. Build it with ``PackedBackbone.of``,
    which returns ``None`` for a backbone it does not cover (other architectures, relative positions, a decoder,
    forward hooks, non-float32 or non-CPU weights)."""

    def __init__(self, backbone: nn.Module, onednn: bool) -> None:
        emb = backbone.embeddings
        self.onednn = onednn
        self.word = emb.word_embeddings.weight.detach()
        self.position = emb.position_embeddings.weight.detach()
        token_type = getattr(emb, "token_type_embeddings", None)
        self.token_type = token_type.weight.detach()[0] if token_type is not None else None
        roberta = backbone.config.model_type in _ROBERTA_TYPES
        self.position_offset = int(emb.padding_idx) + 1 if roberta else 0
        self.norm = _norm(emb.LayerNorm)
        self.layers = [self._layer(layer, backbone.config) for layer in backbone.encoder.layer]

    def _weights(self, *linears: nn.Linear) -> tuple[torch.Tensor, torch.Tensor]:
        w = torch.cat([m.weight.detach() for m in linears]) if len(linears) > 1 else linears[0].weight.detach()
        b = torch.cat([m.bias.detach() for m in linears]) if len(linears) > 1 else linears[0].bias.detach()
        if self.onednn:
            w = torch.ops.mkldnn._reorder_linear_weight(w.contiguous(), None)
        return w, b.contiguous()

    def _layer(self, layer: nn.Module, config: object) -> _Layer:
        att = layer.attention.self
        heads, head_dim = int(att.num_attention_heads), int(att.attention_head_size)
        exact_gelu = getattr(config, "hidden_act", None) == "gelu"
        return _Layer(qkv=self._weights(att.query, att.key, att.value),
                      attention_out=self._weights(layer.attention.output.dense),
                      norm1=_norm(layer.attention.output.LayerNorm),
                      intermediate=self._weights(layer.intermediate.dense),
                      activation=None if exact_gelu else layer.intermediate.intermediate_act_fn,
                      output=self._weights(layer.output.dense), norm2=_norm(layer.output.LayerNorm),
                      heads=heads, head_dim=head_dim, scale=float(getattr(att, "scaling", head_dim ** -0.5)))

    @classmethod
    def of(cls, backbone: nn.Module) -> PackedBackbone | None:
        """The plan for ``backbone`` (cached while its weights are unchanged), or ``None`` when it is not covered."""
        if not _packable(backbone):
            return None
        onednn = onednn_linear_available()
        try:  # the weights' storage and in-place version counters: a training step or a load moves them
            key = (onednn, *((p.data_ptr(), p._version) for p in backbone.parameters()))
        except RuntimeError:  # inference tensors have no version counter: build a plan for this call only
            return cls(backbone, onednn)
        cached = _PLANS.get(backbone)
        if cached is None or cached[0] != key:
            cached = (key, cls(backbone, onednn))
            _PLANS[backbone] = cached
        return cached[1]

    def _linear(self, x: torch.Tensor, wb: tuple[torch.Tensor, torch.Tensor], *, gelu: bool = False,
                add: torch.Tensor | None = None) -> torch.Tensor:
        w, b = wb
        if self.onednn:
            if add is not None:
                return torch.ops.mkldnn._linear_pointwise.binary(x, add, w, b, "add")
            return torch.ops.mkldnn._linear_pointwise(x, w, b, "gelu" if gelu else "none", [],
                                                      "none" if gelu else "")
        y = nn.functional.linear(x, w, b)
        if add is not None:
            y += add
        return nn.functional.gelu(y) if gelu else y

    def forward(self, input_ids: torch.Tensor, lengths: Sequence[int]) -> list[torch.Tensor]:
        """Last hidden states of texts whose token ids are concatenated in ``input_ids`` (``lengths`` tokens each,
        non-decreasing): one ``[n, length, hidden]`` tensor per run of ``n`` texts of equal length, in order."""
        lengths_t = torch.as_tensor(list(lengths), dtype=torch.long)
        starts = torch.cumsum(lengths_t, 0) - lengths_t
        positions = torch.arange(len(input_ids)) - torch.repeat_interleave(starts, lengths_t) + self.position_offset
        h = nn.functional.embedding(input_ids, self.word)
        if self.token_type is not None:
            h = h + self.token_type
        h = nn.functional.layer_norm(h + nn.functional.embedding(positions, self.position), h.shape[-1:],
                                     *self.norm[:2], eps=self.norm[2])
        runs = _equal_runs(lengths)
        width = h.shape[-1]
        for layer in self.layers:
            qkv = self._linear(h, layer.qkv)
            contexts = []
            for start, n, length in runs:
                rows = qkv[start:start + n * length].view(n, length, 3, layer.heads, layer.head_dim)
                q, k, v = rows.permute(2, 0, 3, 1, 4).unbind(0)  # [n, heads, length, head_dim] each
                att = nn.functional.scaled_dot_product_attention(q, k, v, scale=layer.scale)
                contexts.append(att.transpose(1, 2).reshape(n * length, -1))  # a view: the kernel writes it so
            context = contexts[0] if len(contexts) == 1 else torch.cat(contexts)
            h1 = self._linear(context, layer.attention_out, add=h)
            h1 = nn.functional.layer_norm(h1, (width,), *layer.norm1[:2], eps=layer.norm1[2])
            if layer.activation is None:
                inter = self._linear(h1, layer.intermediate, gelu=True)
            else:
                inter = layer.activation(self._linear(h1, layer.intermediate))
            h = self._linear(inter, layer.output, add=h1)
            h = nn.functional.layer_norm(h, (width,), *layer.norm2[:2], eps=layer.norm2[2])
        return [h[start:start + n * length].view(n, length, width) for start, n, length in runs]


def _norm(m: nn.LayerNorm) -> tuple[torch.Tensor, torch.Tensor, float]:
    return m.weight.detach(), m.bias.detach(), float(m.eps)


def _equal_runs(lengths: Sequence[int]) -> list[tuple[int, int, int]]:
    """(first token row, number of texts, length) of each run of equal consecutive ``lengths``."""
    runs, row, i = [], 0, 0
    while i < len(lengths):
        j = i
        while j < len(lengths) and lengths[j] == lengths[i]:
            j += 1
        runs.append((row, j - i, int(lengths[i])))
        row += (j - i) * int(lengths[i])
        i = j
    return runs


def _packable(backbone: nn.Module) -> bool:
    """Whether ``PackedBackbone`` computes exactly what ``backbone``'s own forward does: a float32 CPU BERT / RoBERTa
    encoder (absolute positions, no decoder or cross-attention) made of plain ``nn.Linear`` / ``nn.LayerNorm`` /
    ``nn.Embedding`` modules, without forward hooks."""
    config = getattr(backbone, "config", None)
    if config is None or getattr(config, "model_type", None) not in ("bert", *_ROBERTA_TYPES):
        return False
    if (getattr(config, "position_embedding_type", "absolute") or "absolute") != "absolute" or \
            getattr(config, "is_decoder", False) or getattr(config, "add_cross_attention", False):
        return False
    if any(p.dtype != torch.float32 or p.device.type != "cpu" for p in backbone.parameters()):
        return False
    if any(m._forward_hooks or m._forward_pre_hooks for m in backbone.modules()):
        return False
    try:
        emb, layers = backbone.embeddings, list(backbone.encoder.layer)
        parts: list[tuple[nn.Module, type]] = [(emb.word_embeddings, nn.Embedding),
                                                (emb.position_embeddings, nn.Embedding), (emb.LayerNorm, nn.LayerNorm)]
        for layer in layers:
            att = layer.attention
            parts += [(att.self.query, nn.Linear), (att.self.key, nn.Linear), (att.self.value, nn.Linear),
                      (att.output.dense, nn.Linear), (att.output.LayerNorm, nn.LayerNorm),
                      (layer.intermediate.dense, nn.Linear), (layer.output.dense, nn.Linear),
                      (layer.output.LayerNorm, nn.LayerNorm)]
            if getattr(layer, "crossattention", None) is not None:
                return False
    except AttributeError:
        return False
    return bool(layers) and all(type(m) is t and (t is not nn.Linear or m.bias is not None) for m, t in parts)


def trains_packed(backbone: nn.Module) -> bool:
    """Whether the packed training forward (``models.training.packed_forward``) computes what ``backbone``'s own
    does: what ``PackedBackbone`` covers, without 🤗 gradient (activation) checkpointing."""
    flag = "is_activation_checkpointing" if hasattr(type(backbone), "is_activation_checkpointing") \
        else "is_gradient_checkpointing"  # transformers 5 renamed it; 4.x has the old name
    return _packable(backbone) and not bool(getattr(backbone, flag, False))


class Dense(nn.Module):
    """sentence-transformers' ``models.Dense``: linear layer + activation (``Identity`` or ``Tanh`` in practice)."""

    def __init__(self, in_features: int, out_features: int, bias: bool, activation: str) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=bias)
        name = activation.rsplit(".", 1)[-1]
        if not hasattr(nn, name):
            raise ValueError(f"Dense activation {activation!r} is not a torch.nn module")
        self.activation = getattr(nn, name)()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.linear(x))


class Normalize(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.normalize(x, p=2, dim=1)


class MLPHead(nn.Module):
    """SimCSE's ``MLPLayer`` (Linear(d, d) + tanh), applied after pooling in training only (``--mlp_only_train``)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dense = nn.Linear(dim, dim)
        self.activation = nn.Tanh()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.dense(x))


class SentenceEncoder(nn.Module):
    def __init__(self, backbone: nn.Module, tokenizer: PreTrainedTokenizerBase, pooling: str, max_length: int,
                 post: Sequence[nn.Module] = (), train_head: nn.Module | None = None, *,
                 prompts: dict[str, str] | None = None, default_prompt_name: str | None = None) -> None:
        super().__init__()
        self.prompts = dict(prompts or {})
        if default_prompt_name is not None and default_prompt_name not in self.prompts:
            raise ValueError(f"default prompt {default_prompt_name!r} is not one of the prompts "
                             f"{sorted(self.prompts)}")
        self.default_prompt_name = default_prompt_name
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.pooling = pooling
        self.max_length = max_length
        self.post = nn.ModuleList(post)  # Dense / Normalize modules after pooling, as listed in modules.json
        self.train_head = train_head  # used in training mode only; never saved with the model
        # set by the trainer (models.training.train.start_run): the training forward without padding where it is
        # covered (models.training.packed_forward), and the word-embedding lookup through the rows a batch reads
        # (models.training.embedding_rows); neither changes what the forward computes
        self.packed_training = False
        self.embedding_lookup: Callable[[torch.Tensor], torch.Tensor] | None = None
        self._packed_plan: tuple[nn.Module, object] | None = None

    @classmethod
    def from_settings(cls, settings: EncoderSettings, tokenizer_dir: Path | None = None) -> SentenceEncoder:
        """A pretrained model (``settings.pretrained``: its own tokenizer, pooling from a sentence-transformers
        folder's config when it has one, else ``settings.pooling``) or a small BERT built from the size fields with
        the tokenizer in ``tokenizer_dir``; plus the bias-free ``projection`` (appended after pooling and any saved
        Dense, before a saved trailing Normalize), the train-only MLP head and gradient checkpointing when set."""
        if settings.pretrained:
            enc = cls.load(settings.pretrained)
            if not (Path(settings.pretrained) / "modules.json").exists():
                enc.pooling = settings.pooling
            enc.max_length = settings.max_length
        else:
            if tokenizer_dir is None:
                raise ValueError("encoder: building a model from a config needs a tokenizer folder (or set pretrained)")
            enc = cls._from_config(settings, tokenizer_dir)
        if settings.prompt is not None:
            enc.set_default_prompt(settings.prompt)
        if settings.projection:
            projection = Dense(enc.dim, settings.projection, bias=False,
                               activation="torch.nn.modules.linear.Identity")
            if settings.projection == enc.dim:
                nn.init.eye_(projection.linear.weight)
            post = list(enc.post)
            # before a saved trailing Normalize (multilingual-e5, all-MiniLM): the projection maps the pooled vector,
            # and the model still ends unit-length as it was saved
            at = len(post) - 1 if post and isinstance(post[-1], Normalize) else len(post)
            enc.post = nn.ModuleList([*post[:at], projection, *post[at:]])
        if settings.mlp_head:
            enc.train_head = MLPHead(int(enc.backbone.config.hidden_size))
        if settings.gradient_checkpointing:  # transformers 5 renamed it; 4.x only has the old name
            enable = getattr(enc.backbone, "activation_checkpointing_enable", None)
            (enable or enc.backbone.gradient_checkpointing_enable)()
        return enc

    @classmethod
    def _from_config(cls, settings: EncoderSettings, tokenizer_dir: Path) -> SentenceEncoder:
        tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
        config = BertConfig(
            vocab_size=len(tokenizer), hidden_size=settings.hidden_size,
            num_hidden_layers=settings.num_layers, num_attention_heads=settings.num_heads,
            intermediate_size=settings.intermediate_size, hidden_dropout_prob=settings.dropout,
            attention_probs_dropout_prob=settings.dropout, max_position_embeddings=max(settings.max_length, 64),
            pad_token_id=tokenizer.pad_token_id,
        )
        backbone = BertModel(config, add_pooling_layer=False)
        return cls(backbone, tokenizer, settings.pooling, settings.max_length)

    @property
    def dim(self) -> int:
        dim = int(self.backbone.config.hidden_size)
        for module in self.post:
            if isinstance(module, Dense):
                dim = module.linear.out_features
        return dim

    @property
    def prompt(self) -> str:
        """The default prompt's text (``""`` without one)."""
        return self.prompts.get(self.default_prompt_name, "") if self.default_prompt_name else ""

    def set_default_prompt(self, text: str) -> None:
        """Make ``text`` the default prompt (``""``: none). A named prompt with that text keeps its name (``"query: "``
        → ``query``); another text is recorded as the prompt ``default``."""
        if not text:
            self.default_prompt_name = None
            return
        name = next((n for n, t in self.prompts.items() if t == text), None)
        if name is None:
            name = "default"
            self.prompts[name] = text
        self.default_prompt_name = name

    def prompted(self, texts: Sequence[str], prompt: str | None = None) -> list[str]:
        """``texts`` as the encoder reads them: ``prompt`` (default: the model's default prompt) + text."""
        prefix = self.prompt if prompt is None else prompt
        return [prefix + t for t in texts] if prefix else list(texts)

    @property
    def device(self) -> torch.device:
        return next(self.backbone.parameters()).device

    def tokenize(self, texts: Sequence[str]) -> dict[str, torch.Tensor]:
        batch = self.tokenizer(self.prompted(texts), padding=True, truncation=True, max_length=self.max_length,
                               return_tensors="pt", return_token_type_ids=False)
        return {k: v.to(self.device) for k, v in batch.items()}

    def embed_batch(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        hidden = self.backbone(**batch).last_hidden_state
        return self._after_pooling(pool(hidden, batch["attention_mask"], self.pooling))

    def _after_pooling(self, emb: torch.Tensor) -> torch.Tensor:
        """The pooled vectors through the saved Dense / Normalize modules, then the training head in training mode."""
        for module in self.post:
            emb = module(emb)
        if self.training and self.train_head is not None:
            emb = self.train_head(emb)
        return emb

    def forward(self, texts: Sequence[str]) -> torch.Tensor:
        """Embeddings of ``texts`` (with the training head in training mode). In training mode with
        ``packed_training`` set, a backbone ``models.training.packed_forward`` covers runs without padding (same maths);
        otherwise the padded 🤗 forward, its word embeddings read through ``embedding_lookup`` when set."""
        plan = self._training_plan() if self.training and self.packed_training else None
        if plan is not None:
            return self._forward_packed(plan, texts)
        batch = self.tokenize(texts)
        if self.embedding_lookup is not None and self.training:
            return self._embed_through_lookup(batch)
        return self.embed_batch(batch)

    def _training_plan(self) -> object | None:
        """The packed training forward for this backbone (built once), or ``None`` where it is not covered (other
        architectures, non-float32 or non-CPU weights, gradient checkpointing, hooks, autocast)."""
        from models.training.packed_forward import PackedTrainingForward

        if torch.is_autocast_enabled("cpu") or not trains_packed(self.backbone):
            return None
        if self._packed_plan is None or self._packed_plan[0] is not self.backbone:
            self._packed_plan = (self.backbone, PackedTrainingForward(self.backbone))
        plan = self._packed_plan[1]
        plan.lookup = self.embedding_lookup  # type: ignore[attr-defined]
        return plan

    def leave_training_paths(self) -> None:
        """Drop what the trainer attached (the packed plan, the embedding lookup): a copy or export of the model
        carries none of it."""
        self.packed_training, self.embedding_lookup, self._packed_plan = False, None, None

    def _forward_packed(self, plan: object, texts: Sequence[str]) -> torch.Tensor:
        ids = self.tokenizer(self.prompted(texts), truncation=True, max_length=self.max_length, padding=False,
                             return_token_type_ids=False, return_attention_mask=False)["input_ids"]
        hidden, lengths, order = plan(ids)  # type: ignore[operator]
        runs = _equal_runs(lengths)
        width = hidden.shape[-1]
        emb = torch.cat([pool(h.view(n, length, width), torch.ones(n, length, dtype=torch.long, device=h.device),
                              self.pooling)
                         for h, (_, n, length) in zip(torch.split(hidden, [n * length for _, n, length in runs]),
                                                      runs, strict=True)])
        return self._after_pooling(emb[torch.as_tensor(np.argsort(order, kind="stable"), device=emb.device)])

    def _embed_through_lookup(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """``embed_batch`` with the word embeddings from ``embedding_lookup`` (``inputs_embeds``) and the position
        ids the backbone derives from the token ids (padding-aware for RoBERTa-style models)."""
        assert self.embedding_lookup is not None
        ids = batch["input_ids"]
        embeddings = self.backbone.embeddings
        make_positions = getattr(embeddings, "create_position_ids_from_input_ids", None)
        if make_positions is not None:
            positions = make_positions(ids, embeddings.padding_idx)
        else:
            positions = torch.arange(ids.shape[1], device=ids.device).expand_as(ids)
        hidden = self.backbone(inputs_embeds=self.embedding_lookup(ids), attention_mask=batch["attention_mask"],
                               position_ids=positions).last_hidden_state
        return self._after_pooling(pool(hidden, batch["attention_mask"], self.pooling))

    @torch.inference_mode()
    def encode(self, texts: Sequence[str], batch_size: int = 128, normalize: bool = True, *,
               batch_tokens: int = 4096, dtype: torch.dtype | None = None, chunk: int = 65536,
               progress: Callable[[int], None] | None = None, prompt: str | None = None,
               packed: bool = True) -> np.ndarray:
        """Embeddings as float32 numpy (L2-normalised by default), in input order. ``prompt`` replaces the model's
        default prompt (``None``: the default).

        Texts are tokenised once (without padding), ordered by token length (stable, so the batches — and therefore
        the floats — depend only on the input list) and cut into batches of at most ``batch_size`` texts and about
        ``batch_tokens`` padded tokens (``length_batches``): short sentences go in large batches, long documents in
        small ones, with almost no padding. ``dtype`` (e.g. ``torch.bfloat16`` on a GPU) runs the backbone under
        autocast.

        On the CPU in float32 (``dtype`` ``None`` or ``torch.float32``) a backbone ``PackedBackbone`` covers runs
        the same batches through it, without their padding (``packed=False``: the padded 🤗 forward, as in
        training); the embeddings agree with the padded forward's to float32 rounding.
        """
        was_training = self.training
        self.eval()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        plan = None
        if packed and self.device.type == "cpu" and dtype in (None, torch.float32):
            plan = PackedBackbone.of(self.backbone)
        try:
            for start in range(0, len(texts), chunk):
                part = self.prompted(texts[start:start + chunk], prompt)
                ids = self.tokenizer(part, truncation=True, max_length=self.max_length, padding=False,
                                     return_token_type_ids=False, return_attention_mask=False)["input_ids"]
                lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
                for idx in length_batches(lengths, batch_size, batch_tokens):
                    if plan is not None:
                        emb = self._embed_packed(plan, [ids[j] for j in idx], lengths[idx].tolist())
                    else:
                        emb = self._embed_padded([ids[j] for j in idx], lengths[idx], dtype)
                    if normalize:
                        emb = nn.functional.normalize(emb, dim=-1)
                    out[start + idx] = emb.cpu().numpy()
                    if progress is not None:
                        progress(len(idx))
        finally:
            self.train(was_training)
        return out

    def _embed_padded(self, ids: Sequence[list[int]], lengths: np.ndarray, dtype: torch.dtype | None) -> torch.Tensor:
        """Pooled (and post-processed) embeddings of one batch through the 🤗 forward, right-padded to its longest."""
        pad_id = self.tokenizer.pad_token_id or 0
        width = int(lengths.max())
        input_ids = torch.full((len(ids), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(ids), width), dtype=torch.long)
        for r, row in enumerate(ids):
            input_ids[r, : lengths[r]] = torch.as_tensor(row)
            mask[r, : lengths[r]] = 1
        batch = {"input_ids": input_ids.to(self.device), "attention_mask": mask.to(self.device)}
        with torch.autocast(self.device.type, dtype=dtype, enabled=dtype is not None):
            return self.embed_batch(batch).float()

    def _embed_packed(self, plan: PackedBackbone, ids: Sequence[list[int]], lengths: list[int]) -> torch.Tensor:
        """``embed_batch`` of one batch (texts sorted by length) through ``plan``, without padding."""
        hidden = plan.forward(torch.as_tensor(np.concatenate(ids), dtype=torch.long), lengths)
        emb = torch.cat([pool(h, torch.ones(h.shape[:2], dtype=torch.long), self.pooling) for h in hidden])
        for module in self.post:
            emb = module(emb)
        return emb

    # -- sentence-transformers folder format -------------------------------------------------------------------
    def save(self, path: Path) -> None:
        """The folder ``SentenceTransformer(path)`` loads, which plain 🤗 ``AutoModel`` / ``AutoTokenizer`` (and
        sentence-transformers' ONNX and OpenVINO backends) load too (``models.export_files``): the tokenizer's
        ``model_max_length`` is the backbone's position count (``max_seq_length`` in ``sentence_bert_config.json``
        stays the trained ``max_length``), a backbone trained without its pooler is saved with an identity pooler (so
        no weight is missing and no loader argument is needed), and every file is world-readable."""
        from models.export_files import positions, publishable, saved_with_pooler

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        with saved_with_pooler(self.backbone) as pooler:
            self.backbone.save_pretrained(str(path), safe_serialization=True)
        limit = positions(self.backbone.config)
        old_limit = self.tokenizer.model_max_length
        if limit is not None:
            self.tokenizer.model_max_length = limit
        try:
            self.tokenizer.save_pretrained(str(path))
        finally:
            self.tokenizer.model_max_length = old_limit
        write_module_configs(path, hidden=int(self.backbone.config.hidden_size), pooling=self.pooling,
                             max_length=self.max_length, post=self.post, prompts=self.prompts,
                             default_prompt_name=self.default_prompt_name, pooler=pooler)
        publishable(path)

    @classmethod
    def load(cls, path: Path | str, device: str | torch.device = "cpu") -> SentenceEncoder:
        """A sentence-transformers folder (``modules.json``: Transformer, Pooling, Dense, Normalize), a plain 🤗
        model folder (mean pooling, as sentence-transformers defaults to) or a hub id (needs the network)."""
        path = Path(path)
        if not path.exists():
            return cls._from_hub(str(path), device)
        modules_file = path / "modules.json"
        if not modules_file.exists():
            backbone, tokenizer = _backbone(path)
            return cls(backbone, tokenizer, "mean", _max_length(path, tokenizer)).to(device)
        backbone = tokenizer = None
        pooling, max_length, post = "mean", 512, []
        for module in json.loads(modules_file.read_text()):
            kind, where = module["type"].rsplit(".", 1)[-1], path / module.get("path", "")
            if kind == "Transformer":
                backbone, tokenizer = _backbone(where)
                max_length = _max_length(where, tokenizer)
            elif kind == "Pooling":
                pooling = _pooling_mode(where / "config.json")
            elif kind == "Dense":
                post.append(_dense(where))
            elif kind == "Normalize":
                post.append(Normalize())
            else:
                raise ValueError(f"{modules_file}: module type {module['type']!r} is not supported; expected "
                                 "Transformer, Pooling, Dense or Normalize")
        if backbone is None or tokenizer is None:
            raise ValueError(f"{modules_file}: no sentence_transformers.models.Transformer module")
        prompts, default_prompt = _prompts(path)
        return cls(backbone, tokenizer, pooling, max_length, post, prompts=prompts,
                   default_prompt_name=default_prompt).to(device)

    @classmethod
    def _from_hub(cls, name: str, device: str | torch.device) -> SentenceEncoder:
        try:
            from huggingface_hub import snapshot_download

            local = snapshot_download(name)
        except Exception as exc:
            raise FileNotFoundError(f"model {name!r} is neither a local folder nor reachable on the Hugging Face hub "
                                    f"({type(exc).__name__}: {exc}); offline, give the path of a downloaded "
                                    "sentence-transformers folder") from None
        return cls.load(Path(local), device)


def write_module_configs(path: Path, *, hidden: int, pooling: str, max_length: int, post: Sequence[nn.Module] = (),
                         prompts: dict[str, str] | None = None, default_prompt_name: str | None = None,
                         pooler: bool = True) -> None:
    """The sentence-transformers files around a 🤗 backbone saved in ``path``'s root: ``modules.json`` (Transformer,
    Pooling, then the ``post`` Dense / Normalize modules, Dense weights included), ``sentence_bert_config.json``
    (``add_pooling_layer: false`` when the backbone has no pooler, so sentence-transformers builds none),
    ``config_sentence_transformers.json`` (prompts) and ``1_Pooling/config.json``."""
    key = {v: k for k, v in _POOLING_NAMES.items()}.get(pooling)
    if key is None:
        raise ValueError(f"pooling {pooling!r} cannot be saved in sentence-transformers' format")
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    for i, module in enumerate(post, start=2):
        kind = "Dense" if isinstance(module, Dense) else "Normalize"
        modules.append({"idx": i, "name": str(i), "path": f"{i}_{kind}",
                        "type": f"sentence_transformers.models.{kind}"})
        (path / f"{i}_{kind}").mkdir(exist_ok=True)
        if isinstance(module, Dense):
            from safetensors.torch import save_file

            act = type(module.activation)
            write_json(path / f"{i}_{kind}" / "config.json",
                       {"in_features": module.linear.in_features, "out_features": module.linear.out_features,
                        "bias": module.linear.bias is not None,
                        "activation_function": f"{act.__module__}.{act.__name__}"})
            save_file({k: v.contiguous() for k, v in module.state_dict().items()},
                      str(path / f"{i}_{kind}" / "model.safetensors"))
    write_json(path / "modules.json", modules)
    st_config: dict = {"max_seq_length": max_length, "do_lower_case": False}
    if not pooler:
        st_config["model_args"] = {"add_pooling_layer": False}
    write_json(path / "sentence_bert_config.json", st_config)
    write_json(path / "config_sentence_transformers.json",
               {"model_type": "SentenceTransformer", "__version__": {"polysent": "0.1.0"}, "prompts": prompts or {},
                "default_prompt_name": default_prompt_name, "similarity_fn_name": "cosine"})
    flags = dict.fromkeys(POOLING_KEYS, False)
    flags[key] = True
    write_json(path / "1_Pooling" / "config.json",
               {"word_embedding_dimension": hidden, **flags, "include_prompt": True})


def _backbone(path: Path) -> tuple[nn.Module, PreTrainedTokenizerBase]:
    """The backbone without its pooler (sentence embeddings never read it): a checkpoint that has pooler weights
    (a polysent export, all-MiniLM-L6-v2) is loaded whole and the pooler dropped, one without is loaded without one,
    so 🤗's load report has nothing missing or unexpected to print."""
    from models.export_files import has_pooler_weights

    config = AutoConfig.from_pretrained(str(path))
    poolable = config.model_type in ("bert", "roberta", "xlm-roberta")
    saved_pooler = poolable and has_pooler_weights(path)
    model = AutoModel.from_pretrained(str(path), **({"add_pooling_layer": False} if poolable and not saved_pooler
                                                     else {}))
    if saved_pooler:
        model.pooler = None
    return model, AutoTokenizer.from_pretrained(str(path))


def _max_length(path: Path, tokenizer: PreTrainedTokenizerBase) -> int:
    st = path / "sentence_bert_config.json"
    if st.exists() and (value := json.loads(st.read_text()).get("max_seq_length")):
        return int(value)
    limit = getattr(tokenizer, "model_max_length", 512)
    return int(limit) if limit and limit < 100_000 else 512


def _prompts(path: Path) -> tuple[dict[str, str], str | None]:
    """``prompts`` and ``default_prompt_name`` of ``config_sentence_transformers.json`` (none when absent)."""
    cfg_file = path / "config_sentence_transformers.json"
    if not cfg_file.exists():
        return {}, None
    cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
    prompts, default = cfg.get("prompts") or {}, cfg.get("default_prompt_name")
    if not isinstance(prompts, dict) or not all(isinstance(v, str) for v in prompts.values()):
        raise ValueError(f"{cfg_file}: prompts must map names to strings, got {prompts!r}")
    if default is not None and default not in prompts:
        raise ValueError(f"{cfg_file}: default_prompt_name {default!r} is not one of the prompts {sorted(prompts)}")
    return prompts, default


def _pooling_mode(config_file: Path) -> str:
    cfg = json.loads(config_file.read_text())
    if isinstance(cfg.get("pooling_mode"), str):  # sentence-transformers ≥ 5 writes the mode by name
        mode = cfg["pooling_mode"]
        modes = [{"mean_tokens": "mean", "cls_token": "cls", "max_tokens": "max"}.get(mode, mode)]
    else:
        modes = [_POOLING_NAMES[k] for k in POOLING_KEYS if cfg.get(k) and k in _POOLING_NAMES]
        if cfg.get("pooling_mode_weightedmean_tokens"):
            modes.append("weightedmean")
    if len(modes) != 1 or modes[0] not in ("cls", "mean", "max", "mean_sqrt_len", "lasttoken"):
        raise ValueError(f"{config_file}: pooling {modes or 'none'} is not supported; expected exactly one of cls, "
                         "mean, max, mean_sqrt_len, lasttoken")
    return modes[0]


def _dense(path: Path) -> Dense:
    cfg = json.loads((path / "config.json").read_text())
    layer = Dense(int(cfg["in_features"]), int(cfg["out_features"]), bool(cfg.get("bias", True)),
                  str(cfg.get("activation_function", "torch.nn.modules.linear.Identity")))
    if (path / "model.safetensors").exists():
        from safetensors.torch import load_file

        state = load_file(str(path / "model.safetensors"))
    elif (path / "pytorch_model.bin").exists():
        state = torch.load(path / "pytorch_model.bin", map_location="cpu", weights_only=True)
    else:
        raise FileNotFoundError(f"{path}: Dense module without model.safetensors or pytorch_model.bin")
    layer.load_state_dict(state)
    return layer


def write_json(path: Path, obj: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' requested but torch sees no GPU")
    return torch.device(name)
