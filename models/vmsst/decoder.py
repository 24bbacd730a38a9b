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

Restricted output vocabulary (``output_ids``; ``VmsstObjective.decoder_vocab_size: corpus``): the softmax runs over a
set S of token ids only — the ids that occur in the training corpus's decoder targets. The logits are those of the
rows of ``embed_out`` in S (``index_select`` of the full-size weight, so the parameters, their gradients' shape and the
saved model are unchanged; rows outside S get a zero gradient), the log-softmax is renormalised exactly over S,

    log p_S(y | ·) = l_y − log Σ_{v ∈ S} exp(l_v)        (l = the full-vocabulary logits; y ∈ S)

and the targets are remapped to their positions in S. Why: from a pretrained multilingual encoder (XLM-R's 250k
pieces) the B×T×V output projection and its softmax are nearly all of a VMSST step, while a training corpus uses a
small fraction of the pieces; a token that never occurs as a target only ever receives the push-down of the
normaliser. The restricted loss is the full one conditioned on y ∈ S, so it is ≤ the full NLL (by log of the mass
outside S) and not the same objective: it is a setting, off by default. A target outside S (possible only for targets
not drawn from the corpus the set was collected from) is refused with the ids named, not scored.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from models.vmsst.loss import sequence_nll


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


class LatentConditionedDecoder(nn.Module):
    """``layers`` × ``LatentConditionedDecoderLayer`` + the output projection over [h_t ; s]; ``output_ids`` restricts
    the softmax to those token ids (module docstring), None keeps the full vocabulary."""

    def __init__(self, vocab_size: int, dim: int, condition_dim: int, *, layers: int = 1, heads: int = 4,
                 intermediate_size: int = 512, dropout: float = 0.0, max_positions: int = 128,
                 checkpointing: bool = False, output_ids: Sequence[int] | torch.Tensor | None = None) -> None:
        super().__init__()
        if layers < 1:
            raise ValueError(f"decoder: needs at least one layer, got {layers}")
        self.vocab_size, self.condition_dim, self.dropout = vocab_size, condition_dim, dropout
        self.checkpointing = checkpointing
        self.positions = nn.Embedding(max_positions, dim)
        nn.init.normal_(self.positions.weight, std=0.02)
        self.input_norm = nn.LayerNorm(dim)
        self.layers = nn.ModuleList(LatentConditionedDecoderLayer(dim, condition_dim, heads, intermediate_size,
                                                                  dropout) for _ in range(layers))
        self.output = nn.Linear(dim + condition_dim, vocab_size, bias=False)
        # the restricted output vocabulary: sorted ids S, and id → position in S (−1 outside); not saved (a setting)
        self.output_ids: torch.Tensor | None
        self.output_position: torch.Tensor | None
        self.register_buffer("output_ids", None, persistent=False)
        self.register_buffer("output_position", None, persistent=False)
        if output_ids is not None:
            self.restrict_output(output_ids)

    def restrict_output(self, ids: Sequence[int] | torch.Tensor | None) -> None:
        """Make the softmax run over the token ids ``ids`` only (deduplicated and sorted; module docstring); None
        restores the full vocabulary."""
        if ids is None:
            self.output_ids = self.output_position = None
            return
        device = self.output.weight.device
        ids = torch.as_tensor(ids, dtype=torch.long).flatten().unique().to(device)  # unique() sorts
        if not len(ids) or int(ids[0]) < 0 or int(ids[-1]) >= self.vocab_size:
            raise ValueError(f"decoder: the output vocabulary must be a non-empty set of ids in [0, {self.vocab_size})"
                             f", got {len(ids)} id(s)" + (f" from {int(ids[0])} to {int(ids[-1])}" if len(ids) else ""))
        position = torch.full((self.vocab_size,), -1, dtype=torch.long, device=device)
        position[ids] = torch.arange(len(ids), device=device)
        self.output_ids, self.output_position = ids, position

    @property
    def output_size(self) -> int:
        """How many ids the softmax runs over: |S|, or the full vocabulary."""
        return self.vocab_size if self.output_ids is None else len(self.output_ids)

    def output_weight(self) -> torch.Tensor:
        """The rows of ``embed_out`` the softmax runs over (all of them, or S's in S's order)."""
        w = self.output.weight
        return w if self.output_ids is None else w.index_select(0, self.output_ids)

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

    def logits(self, embeddings: nn.Embedding, start: torch.Tensor, targets: torch.Tensor,
               condition: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
        """B×T×|S| logits of ``targets`` (B×T ids) given ``start`` (B×d, the target-language embedding) and
        ``condition`` (B×|s|): over the output vocabulary S (``output_ids``; the full vocabulary, B×T×V, when
        unrestricted), in S's order. ``weight``: ``output_weight()`` when already gathered (``nll``)."""
        b, t = targets.shape
        if t > self.positions.num_embeddings:
            raise ValueError(f"decoder: {t} target positions but only {self.positions.num_embeddings} position "
                             "embeddings (raise the encoder's max_length)")
        if condition.shape != (b, self.condition_dim):
            raise ValueError(f"decoder: condition must be {b}×{self.condition_dim}, got {tuple(condition.shape)}")
        x = torch.cat([start[:, None, :].to(embeddings.weight.dtype), embeddings(targets[:, :-1])], 1)
        x = self.input_norm(x + self.positions.weight[:t])
        x = F.dropout(x, self.dropout, self.training)
        for layer in self.layers:
            x = layer(x, condition)
        s = condition[:, None, :].expand(b, t, self.condition_dim).to(x.dtype)
        return F.linear(torch.cat([x, s], -1), self.output_weight() if weight is None else weight)

    def nll(self, embeddings: nn.Embedding, start: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor,
            condition: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
        """Per-row NLL of ``targets`` (summed over the tokens where ``mask`` is 1), shape (B,); with a restricted
        output vocabulary, renormalised over S (module docstring). ``weight``: ``output_weight()``, gathered once
        by a caller that scores several terms in one forward (the gather's backward writes a dense V-row gradient,
        once per gather); gathered here when not given."""
        out = self.output_targets(targets, mask)
        weight = self.output_weight() if weight is None else weight

        def run(start: torch.Tensor, condition: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
            return sequence_nll(self.logits(embeddings, start, targets, condition, weight), out, mask)

        if self.checkpointing and torch.is_grad_enabled():
            return checkpoint(run, start, condition, weight, use_reentrant=False)
        return run(start, condition, weight)
