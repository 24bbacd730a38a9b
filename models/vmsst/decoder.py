"""The decoder of VMSST / BGT: a causal Transformer decoder **without cross-attention**, conditioned on a latent vector.

Reference: BGT's ``TransformerSentenceEmbeddingDecoderLayer`` (jwcmu/bgt, ``fairseq/models/bgt.py``; methods §5.4).
Each layer is a post-norm fairseq decoder layer whose encoder-attention block is replaced by

    u = W [x_t ; s] + b  →  dropout  →  x_t + u  →  LayerNorm            (s broadcast over time)

with s the conditioning vector ([z_lang ; z_sem] for VMSST's reconstruction, [0 ; μ_sem of the translation] for
its translation terms in the paper's single shared decoder, μ_sem alone for BITRANSLATION or a ``separate``
translation decoder). BGT's ReLU after W is a no-op in its code (the result of ``F.relu`` is discarded), so the
block is affine here too. s is also concatenated to the final hidden state before the vocabulary projection
(``embed_out`` ∈ R^{V×(d+|s|)}; 3d × V for VMSST, as the paper says). No encoder memory exists anywhere: the
decoder's only inputs are the target prefix and s, so everything it knows about the source comes through the sentence
embedding.

Input = the target-language embedding as the first position, then the target tokens shifted right (teacher forcing),
read from the encoders' shared word-embedding table, plus learned positions and a LayerNorm. Self-attention uses
``scaled_dot_product_attention(is_causal=True)``: with right padding, a real position never sees a pad, and the pad
positions are masked out of the loss.

``checkpointing`` recomputes the whole decoder, logits and cross-entropy included, in the backward pass: with a
large vocabulary the B×T×V logits are the decoder's largest activation, which layer-only checkpointing would keep.

The NLL (``nll``) projects and scores only the real target positions (where the mask is 1; ``SideBatch.target_index``
names them, found on the host with the batch, so no device sync): a padded position's loss is masked out anyway, so its
logits were pure cost — the B×T×V projection and log-softmax are the decoder's largest work, and right padding to the
longest target of a batch leaves many positions empty. ``score_padding`` scores every position and masks afterwards
instead (the same loss; ``bench/vmsst_vocabulary.py`` times it). ``logits`` still returns every position's.

Restricted output vocabulary (``output_ids``; ``VmsstObjective.decoder_vocab_size: corpus``): the softmax runs over a
set S of token ids only — the ids that occur in the training corpus's decoder targets — and the output layer holds only
S's rows as parameters (|S| × (d+|s|), row i the output row of id S_i; ``compact_output``), initialised as exactly
those rows of the full-size layer (the full layer is drawn, then cut, so the random stream and every other module's
initialisation are the full decoder's). The log-softmax is renormalised exactly over S,

    log p_S(y | ·) = l_y − log Σ_{v ∈ S} exp(l_v)        (l = the full-vocabulary logits; y ∈ S)

and the targets are remapped to their positions in S. The rows outside S would never receive a gradient from this loss,
so dropping them changes nothing the model computes or learns (except AdamW's decoupled weight decay, which would have
shrunk those unused rows); the output layer is not tied to any word-embedding table (it maps [h_t ; s], 3d wide for
VMSST, to the vocabulary) and is not part of the exported sentence encoder. Why: from a pretrained multilingual encoder
(XLM-R's 250k pieces) the B×T×V output projection and its softmax are nearly all of a VMSST step, and its full-size
parameters a large part of what clipping and AdamW walk over, while a training corpus uses a small fraction of the
pieces; a token that never occurs as a target only ever receives the push-down of the normaliser. The restricted loss
is the full one conditioned on y ∈ S, so it is ≤ the full NLL (by log of the mass outside S) and not the same
objective: it is a setting, off by default. A target outside S (possible only for targets not drawn from the corpus
the set was collected from) is refused with the ids named, not scored.

Decoder inputs: ``embeddings`` is the word-embedding table the target prefix is read from — an ``nn.Embedding`` (the
student's own table, or a table of the decoders' own) or a bare weight matrix (the student's table detached:
``VmsstObjective.decoder_embeddings``). ``prefix`` gives the prefix's rows already looked up: ``lookup_rows`` looks up
several id tensors in one call, so that backward builds one dense V×d gradient of the table for all of them instead of
one per lookup (a 250k-row table makes each a pass over ~100M numbers).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils import skip_init
from torch.utils.checkpoint import checkpoint


class LatentConditionedDecoderLayer(nn.Module):
    """Causal self-attention → latent block (in place of cross-attention) → feed-forward; post-norm as fairseq."""

    def __init__(self, dim: int, condition_dim: int, heads: int, intermediate_size: int, dropout: float) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"decoder: hidden size {dim} is not divisible by {heads} attention heads")
        self.heads, self.dropout = heads, dropout
        self.qkv = nn.Linear(dim, 3 * dim)
        self.attention_out = nn.Linear(dim, dim)
        self.attention_norm = nn.LayerNorm(dim)
        self.latent = nn.Linear(dim + condition_dim, dim)
        self.latent_norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, intermediate_size)
        self.fc2 = nn.Linear(intermediate_size, dim)
        self.output_norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, condition: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        p = self.dropout if self.training else 0.0
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p).transpose(1, 2).reshape(b, t, d)
        x = self.attention_norm(x + F.dropout(self.attention_out(a), p, self.training))
        s = condition[:, None, :].expand(b, t, condition.shape[-1]).to(x.dtype)
        x = self.latent_norm(x + F.dropout(self.latent(torch.cat([x, s], -1)), p, self.training))
        h = self.fc2(F.dropout(F.relu(self.fc1(x)), p, self.training))
        return self.output_norm(x + F.dropout(h, p, self.training))


Embeddings = nn.Embedding | torch.Tensor  # the table the decoder reads its inputs from, or its bare weight matrix


def _lookup(embeddings: Embeddings, ids: torch.Tensor) -> torch.Tensor:
    """Rows ``ids`` of ``embeddings``: the module's own lookup (its ``padding_idx`` included), or of a weight matrix."""
    return embeddings(ids) if isinstance(embeddings, nn.Embedding) else F.embedding(ids, embeddings)


def lookup_rows(embeddings: Embeddings, *ids: torch.Tensor) -> list[torch.Tensor]:
    """The rows of each id tensor (shape S → S×d), from one lookup of ``embeddings``: the same values as one lookup
    each, but backward builds a single dense gradient of the table for all of them."""
    if len(ids) == 1:
        return [_lookup(embeddings, ids[0])]
    rows = _lookup(embeddings, torch.cat([x.flatten() for x in ids]))
    return [r.view(*x.shape, r.shape[-1]) for r, x in zip(rows.split([x.numel() for x in ids]), ids, strict=True)]


class LatentConditionedDecoder(nn.Module):
    """``layers`` × ``LatentConditionedDecoderLayer`` + the output projection over [h_t ; s]; ``output_ids`` keeps
    only those token ids' rows of the output layer and runs the softmax over them (module docstring), None keeps the
    full vocabulary."""

    def __init__(self, vocab_size: int, dim: int, condition_dim: int, *, layers: int = 1, heads: int = 4,
                 intermediate_size: int = 512, dropout: float = 0.0, max_positions: int = 128,
                 checkpointing: bool = False, output_ids: Sequence[int] | torch.Tensor | None = None) -> None:
        super().__init__()
        if layers < 1:
            raise ValueError(f"decoder: needs at least one layer, got {layers}")
        self.vocab_size, self.condition_dim, self.dropout = vocab_size, condition_dim, dropout
        self.checkpointing = checkpointing
        self.score_padding = False  # True: project and score the padded positions too, then mask (module docstring)
        self.positions = nn.Embedding(max_positions, dim)
        nn.init.normal_(self.positions.weight, std=0.02)
        self.input_norm = nn.LayerNorm(dim)
        self.layers = nn.ModuleList(LatentConditionedDecoderLayer(dim, condition_dim, heads, intermediate_size,
                                                                  dropout) for _ in range(layers))
        self.output = nn.Linear(dim + condition_dim, vocab_size, bias=False)
        # the output vocabulary: sorted ids S of the output layer's rows, and id → row (−1 outside); None = all V ids
        # in order. Not saved: S is a setting's (decoder_vocab_size: corpus), rebuilt from the corpus.
        self.output_ids: torch.Tensor | None
        self.output_position: torch.Tensor | None
        self.register_buffer("output_ids", None, persistent=False)
        self.register_buffer("output_position", None, persistent=False)
        if output_ids is not None:
            self.compact_output(output_ids)

    def _ids(self, ids: Sequence[int] | torch.Tensor) -> torch.Tensor:
        """``ids`` deduplicated and sorted (``unique`` sorts), checked to lie in [0, vocab_size)."""
        ids = torch.as_tensor(ids, dtype=torch.long).flatten().unique()
        if not len(ids) or int(ids[0]) < 0 or int(ids[-1]) >= self.vocab_size:
            raise ValueError(f"decoder: the output vocabulary must be a non-empty set of ids in [0, {self.vocab_size})"
                             f", got {len(ids)} id(s)" + (f" from {int(ids[0])} to {int(ids[-1])}" if len(ids) else ""))
        return ids

    def compact_output(self, ids: Sequence[int] | torch.Tensor) -> None:
        """Keep only the output rows of the token ids ``ids`` (deduplicated and sorted) as the output layer's
        parameters, with their current values, and run the softmax over them (module docstring). Every id must have
        a row now (ids outside the current set are refused); the other rows are dropped for good."""
        ids = self._ids(ids)
        rows = ids if self.output_position is None else self.output_position[ids.to(self.output_position.device)].cpu()
        if bool((rows < 0).any()):
            raise ValueError(f"decoder: {int((rows < 0).sum())} of the {len(ids)} ids have no row in the output layer "
                             f"of {self.output_size} ids, e.g. id(s) {ids[rows < 0][:10].tolist()}")
        weight = self.output.weight
        # skip_init: no random numbers drawn, so the modules built after this one start as beside the full layer
        layer = skip_init(nn.Linear, weight.shape[1], len(ids), bias=False, device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            layer.weight.copy_(weight.index_select(0, rows.to(weight.device)))
        layer.weight.requires_grad_(weight.requires_grad)
        self.use_output(layer, ids)

    def use_output(self, layer: nn.Linear, ids: Sequence[int] | torch.Tensor | None) -> None:
        """Make ``layer`` the output layer, its rows the output of the token ids ``ids`` (sorted and unique, row i =
        the i-th smallest id), or of the whole vocabulary in order for None. ``compact_output`` builds such a layer;
        ``bench/vmsst_vocabulary.py`` swaps a full-size and a compact layer of one model."""
        device = layer.weight.device
        sorted_ids = None if ids is None else self._ids(ids)
        if sorted_ids is not None and len(sorted_ids) != len(torch.as_tensor(ids).flatten()):
            raise ValueError("decoder: the output layer's ids must be unique")
        rows = self.vocab_size if sorted_ids is None else len(sorted_ids)
        if layer.bias is not None or layer.weight.shape != (rows, self.output.in_features):
            bias = " with a bias" if layer.bias is not None else ""
            raise ValueError(f"decoder: the output layer must be a bias-free {rows}×{self.output.in_features} linear "
                             f"map, got {tuple(layer.weight.shape)}{bias}")
        self.output = layer
        if sorted_ids is None:
            self.output_ids = self.output_position = None
            return
        position = torch.full((self.vocab_size,), -1, dtype=torch.long, device=device)
        position[sorted_ids.to(device)] = torch.arange(len(sorted_ids), device=device)
        self.output_ids, self.output_position = sorted_ids.to(device), position

    @property
    def output_size(self) -> int:
        """How many ids the softmax runs over: |S|, or the full vocabulary (the output layer's rows)."""
        return self.output.out_features

    def output_targets(self, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``targets`` (B×T token ids) as indices into the logits: themselves, or their positions in S. A target
        where ``mask`` is 1 that is not in S raises a ValueError naming it; masked positions (padding) map to 0."""
        if self.output_position is None:
            return targets
        position = self.output_position[targets]
        outside = (position < 0) & mask.bool()
        if bool(outside.any()):
            ids = targets[outside].unique()
            raise ValueError(f"decoder: {int(outside.sum())} target token(s) are not in the restricted output "
                             f"vocabulary of {self.output_size} ids, e.g. id(s) {ids[:10].tolist()}; the set is "
                             "collected from the training corpus (decoder_vocab_size: corpus), so these targets do "
                             "not come from it")
        return position.clamp(min=0)

    def features(self, embeddings: Embeddings, start: torch.Tensor, targets: torch.Tensor, condition: torch.Tensor,
                 prefix: torch.Tensor | None = None) -> torch.Tensor:
        """B×T×(d+|s|): the last layer's hidden states with ``condition`` appended, [h_t ; s], which the output layer
        projects. ``prefix``: the rows of ``targets[:, :-1]`` already looked up (B×(T−1)×d, ``lookup_rows``), or None
        to look them up here from ``embeddings``."""
        b, t = targets.shape
        if t > self.positions.num_embeddings:
            raise ValueError(f"decoder: {t} target positions but only {self.positions.num_embeddings} position "
                             "embeddings (raise the encoder's max_length)")
        if condition.shape != (b, self.condition_dim):
            raise ValueError(f"decoder: condition must be {b}×{self.condition_dim}, got {tuple(condition.shape)}")
        if prefix is None:
            prefix = _lookup(embeddings, targets[:, :-1])
        x = torch.cat([start[:, None, :].to(prefix.dtype), prefix], 1)
        x = self.input_norm(x + self.positions.weight[:t])
        x = F.dropout(x, self.dropout, self.training)
        for layer in self.layers:
            x = layer(x, condition)
        s = condition[:, None, :].expand(b, t, self.condition_dim).to(x.dtype)
        return torch.cat([x, s], -1)

    def logits(self, embeddings: Embeddings, start: torch.Tensor, targets: torch.Tensor,
               condition: torch.Tensor) -> torch.Tensor:
        """B×T×|S| logits of ``targets`` (B×T ids) given ``start`` (B×d, the target-language embedding) and
        ``condition`` (B×|s|): over the output vocabulary S (``output_ids``; the full vocabulary, B×T×V, when
        unrestricted), in S's order, at every position. ``embeddings``: the table the target prefix is read from
        (module docstring)."""
        return self.output(self.features(embeddings, start, targets, condition))

    def nll(self, embeddings: Embeddings, start: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor,
            condition: torch.Tensor, *, prefix: torch.Tensor | None = None,
            index: torch.Tensor | None = None) -> torch.Tensor:
        """Per-row NLL of ``targets`` (summed over the tokens where ``mask`` is 1), shape (B,); with a restricted
        output vocabulary, renormalised over S (module docstring). Only the real positions are projected and scored:
        ``index``, their flat indices into B×T (``SideBatch.target_index``), or found from ``mask`` when None (a
        device sync on a GPU). ``prefix``: as ``features``. The cross-entropy runs in float32 (float64 for float64
        weights), as ``models.vmsst.loss.sequence_nll``."""
        if targets.shape != mask.shape:
            raise ValueError(f"decoder: targets {tuple(targets.shape)} and mask {tuple(mask.shape)} differ in shape")
        b, t = targets.shape
        out = self.output_targets(targets, mask)
        if self.score_padding:
            index = torch.arange(b * t, device=targets.device)
        elif index is None:
            index = mask.flatten().nonzero().squeeze(1)
        rows = torch.div(index, t, rounding_mode="floor")
        chosen, weight = out.flatten().index_select(0, index), mask.flatten().index_select(0, index)

        def run(start: torch.Tensor, condition: torch.Tensor, prefix: torch.Tensor | None) -> torch.Tensor:
            h = self.features(embeddings, start, targets, condition, prefix).flatten(0, 1).index_select(0, index)
            logits = self.output(h)
            logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
            nll = F.cross_entropy(logits, chosen, reduction="none") * weight.to(logits.dtype)
            return nll.new_zeros(b).index_add(0, rows, nll)

        if self.checkpointing and torch.is_grad_enabled():
            return checkpoint(run, start, condition, prefix, use_reentrant=False)
        return run(start, condition, prefix)
