"""The student's training forward without padding: a BERT / (XLM-)RoBERTa backbone run over *packed* texts, with
autograd, so no arithmetic is spent on padding in the forward or the backward.

A contrastive batch mixes languages and lengths: 96 XNLI sentences of six languages pad to about twice their real
tokens, and the padded 🤗 forward pays for every padded position in every linear layer, its backward and its dropout.
Here (as ``models.encoder.PackedBackbone`` does for inference) the batch's texts are sorted by length (stable) and
their tokens concatenated into one ``[tokens, hidden]`` matrix: every linear layer, layer norm, GELU and dropout runs
over the real tokens only; attention (about 3 % of a layer's arithmetic at 64 tokens) reads the texts padded to the
batch's longest, the padded keys masked out.
The arithmetic is the 🤗 forward's — the module's own weights through ``F.linear`` / ``F.layer_norm`` / its activation,
query·keyᵀ scaled, softmax, dropout on the probabilities, ·values, the residual additions and norms in the same order
— so the pooled embeddings, the loss and every gradient equal the padded forward's to float rounding
(``tests/test_packed_training.py``, with dropout off; with dropout on the two draw different masks, below).

Dropout. The 🤗 forward draws a Bernoulli mask for every padded position with torch's CPU generator (serial, about
6.5 ns a draw on this project's 2-core machine: ~0.5 s of a 96-sentence multilingual-e5-small step). This forward
draws one mask per dropout site for the real positions only, from numpy's ``SFC64`` seeded by one draw of torch's
generator per forward: the same distribution (keep with probability 1 − p, scale 1/(1 − p)), a third of the draws at
a fifth of the cost each, and still a function of ``torch.manual_seed`` and of the RNG state GradCache replays.
Masks therefore differ from the padded forward's draw by draw, as a CUDA run's do.

Covered (``models.encoder.trains_packed``): the backbones ``PackedBackbone`` covers (float32 CPU BERT / RoBERTa
family, absolute positions, plain modules, no hooks), not under gradient checkpointing; anything else keeps the padded
forward (``SentenceEncoder.forward``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

_ROBERTA_TYPES = ("roberta", "xlm-roberta", "camembert")


class DropoutMasks:
    """Dropout masks for one forward: Bernoulli(1 − p) keeps scaled by 1/(1 − p), drawn from numpy's ``SFC64`` seeded
    by one draw of torch's default CPU generator (so ``torch.manual_seed`` and GradCache's RNG replay fix them).
    ``None`` when dropout is off (eval mode or p = 0)."""

    def __init__(self) -> None:
        seed = int(torch.randint(0, 2**62, (1,), dtype=torch.long).item())
        self._bits = np.random.SFC64(seed)

    def mask(self, shape: Sequence[int], p: float, dtype: torch.dtype) -> torch.Tensor:
        n = int(np.prod(shape))
        raw = self._bits.random_raw((n + 1) // 2).view(np.uint32)[:n]
        keep = torch.from_numpy(raw >= np.uint32(min(round(p * 2**32), 2**32 - 1)))
        return keep.view(*shape).to(dtype).mul_(1.0 / (1.0 - p))


@dataclass(frozen=True)
class _Layer:
    qkv: tuple[nn.Linear, nn.Linear, nn.Linear]
    attention_out: nn.Linear
    norm1: nn.LayerNorm
    intermediate: nn.Linear
    activation: Callable[[torch.Tensor], torch.Tensor]
    output: nn.Linear
    norm2: nn.LayerNorm
    heads: int
    head_dim: int
    scale: float
    attention_p: float
    attention_out_p: float
    hidden_p: float


class PackedTrainingForward:
    """Last hidden states of a batch of texts through ``backbone`` without padding, with gradients into its own
    parameters (or, for the word-embedding table, into ``lookup``'s rows: ``models.training.embedding_rows``)."""

    def __init__(self, backbone: nn.Module,
                 lookup: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        emb = backbone.embeddings
        self.backbone = backbone
        self.word = emb.word_embeddings
        self.lookup = lookup
        self.position = emb.position_embeddings
        self.token_type = getattr(emb, "token_type_embeddings", None)
        roberta = backbone.config.model_type in _ROBERTA_TYPES
        self.position_offset = int(emb.padding_idx) + 1 if roberta else 0
        self.norm = emb.LayerNorm
        self.embedding_p = float(emb.dropout.p)
        self.layers = [self._layer(layer) for layer in backbone.encoder.layer]

    @staticmethod
    def _layer(layer: nn.Module) -> _Layer:
        att = layer.attention.self
        heads, head_dim = int(att.num_attention_heads), int(att.attention_head_size)
        return _Layer(qkv=(att.query, att.key, att.value), attention_out=layer.attention.output.dense,
                      norm1=layer.attention.output.LayerNorm, intermediate=layer.intermediate.dense,
                      activation=layer.intermediate.intermediate_act_fn, output=layer.output.dense,
                      norm2=layer.output.LayerNorm, heads=heads, head_dim=head_dim,
                      scale=float(getattr(att, "scaling", head_dim ** -0.5)), attention_p=float(att.dropout.p),
                      attention_out_p=float(layer.attention.output.dropout.p), hidden_p=float(layer.output.dropout.p))

    def __call__(self, ids: Sequence[Sequence[int]]) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
        """``(hidden, lengths, order)``: the texts' token ids (no padding) sorted by length (stable: ``order``, their
        ``lengths`` in that order) and run as one packed batch; ``hidden`` is ``[tokens, hidden]``, text after text
        in sorted order."""
        lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        order = np.argsort(lengths, kind="stable")
        lengths_sorted = lengths[order]
        flat = torch.as_tensor(np.concatenate([np.asarray(ids[i], dtype=np.int64) for i in order]))
        device = self.word.weight.device
        flat = flat.to(device)
        training = self.backbone.training
        masks = DropoutMasks() if training else None

        def dropout(x: torch.Tensor, p: float) -> torch.Tensor:
            return x if masks is None or p == 0.0 else x * masks.mask(x.shape, p, x.dtype)

        lengths_t = torch.as_tensor(lengths_sorted)
        starts = torch.cumsum(lengths_t, 0) - lengths_t
        positions = (torch.arange(len(flat)) - torch.repeat_interleave(starts, lengths_t) + self.position_offset)
        h = self.lookup(flat) if self.lookup is not None else self.word(flat)
        if self.token_type is not None:
            h = h + self.token_type.weight[0]
        h = h + self.position(positions.to(device))
        h = dropout(self.norm(h), self.embedding_p)
        width = h.shape[-1]
        # attention reads the texts padded to the longest (one batched product; attention is ~3 % of a layer's
        # arithmetic at 64 tokens): each token's row in the padded [texts × longest] layout, and the padded keys
        # masked out (exact zeros after the softmax, as in the 🤗 forward)
        n_texts, longest = len(lengths_sorted), int(lengths_sorted[-1])
        padded_row = (torch.arange(len(flat)) + torch.repeat_interleave(
            torch.arange(n_texts) * longest - starts, lengths_t)).to(device)
        key_mask = torch.zeros(n_texts, 1, 1, longest, dtype=h.dtype, device=device)
        key_mask.masked_fill_(torch.arange(longest, device=device)[None, None, None, :]
                              >= lengths_t.to(device)[:, None, None, None], float("-inf"))
        for layer in self.layers:
            q_lin, k_lin, v_lin = layer.qkv
            # the attention scale folded into the query projection (one pass fewer over the scores, each way)
            qkv = nn.functional.linear(h, torch.cat([q_lin.weight * layer.scale, k_lin.weight, v_lin.weight]),
                                       torch.cat([q_lin.bias * layer.scale, k_lin.bias, v_lin.bias]))
            grid = qkv.new_zeros(n_texts * longest, qkv.shape[1]).index_copy(0, padded_row, qkv)
            # one copy into [3, texts, heads, longest, head_dim]: contiguous q, k, v for the batched products
            q, k, v = grid.view(n_texts, longest, 3, layer.heads, layer.head_dim).permute(2, 0, 3, 1, 4).contiguous()
            probs = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) + key_mask, dim=-1)
            att = torch.matmul(dropout(probs, layer.attention_p), v)
            context = att.transpose(1, 2).reshape(n_texts * longest, width).index_select(0, padded_row)
            a = dropout(layer.attention_out(context), layer.attention_out_p)
            h1 = layer.norm1(a + h)
            inter = layer.activation(layer.intermediate(h1))
            o = dropout(layer.output(inter), layer.hidden_p)
            h = layer.norm2(o + h1)
        return h, lengths_sorted, order

