"""VMSST's inference networks besides the semantic encoder (methods §5.3, §5.6).

``GaussianHead``: the posterior of one latent variable from a pooled sentence vector, μ = W_μ h̄ and log σ² = W_σ h̄
with bias-free maps (BGT ``bgt.py``; the released VMSST's projection is bias-free), and the reparameterised sample
z = μ + σ ⊙ ε.

``LanguageEncoder``: the inference network of the language variables. The paper's semantic and language encoders
share only the word-embedding table; this one is a plain Transformer encoder (torch's ``TransformerEncoderLayer``,
post-norm, GELU) that reads the *semantic encoder's* table (passed in, not owned, so nothing is stored twice), with
its own positions and the sentence's language embedding prepended as a first position, then mean-pooled over the
real positions. It may be shallower than the semantic encoder (``VmsstObjective.language_layers``).
"""

from __future__ import annotations

import torch
from torch import nn


class GaussianHead(nn.Module):
    """Bias-free μ and log σ² maps d → k; ``mu`` may be given (the semantic variable's μ is the student's own
    projection, so that the exported model computes it)."""

    def __init__(self, dim: int, latent: int, mu: nn.Linear | None = None) -> None:
        super().__init__()
        self.mu = mu if mu is not None else nn.Linear(dim, latent, bias=False)
        self.logvar = nn.Linear(dim, latent, bias=False)

    def forward(self, pooled: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.mu(pooled), self.logvar(pooled)

    @staticmethod
    def sample(mu: torch.Tensor, logvar: torch.Tensor, eps: torch.Tensor | None = None) -> torch.Tensor:
        """z = μ + σ ⊙ ε, ε ~ N(0, I) (the reparameterisation trick); ``eps`` given = that noise."""
        if eps is None:
            eps = torch.randn_like(mu)
        return mu + torch.exp(0.5 * logvar) * eps.to(mu.dtype)


class LanguageEncoder(nn.Module):
    def __init__(self, dim: int, *, layers: int = 1, heads: int = 4, intermediate_size: int = 512,
                 dropout: float = 0.0, max_positions: int = 130) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"language encoder: hidden size {dim} is not divisible by {heads} attention heads")
        self.positions = nn.Embedding(max_positions, dim)
        nn.init.normal_(self.positions.weight, std=0.02)
        self.input_norm = nn.LayerNorm(dim)
        self.dropout = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(dim, heads, intermediate_size, dropout, activation="gelu",
                                           batch_first=True)
        self.layers = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, embeddings: nn.Embedding, language: torch.Tensor, ids: torch.Tensor,
                mask: torch.Tensor, embedded: torch.Tensor | None = None) -> torch.Tensor:
        """Pooled B×d vectors of ``ids`` (B×T, right-padded, ``mask`` 1 on real tokens) with ``language`` (B×d, the
        language embeddings) as position 0. ``embedded``: the rows of ``ids`` already looked up in ``embeddings``
        (B×T×d; ``models.vmsst.decoder.lookup_rows``), or None to look them up here."""
        t = ids.shape[1]
        if t + 1 > self.positions.num_embeddings:
            raise ValueError(f"language encoder: {t + 1} positions but only {self.positions.num_embeddings} position "
                             "embeddings (raise the encoder's max_length)")
        if embedded is None:
            embedded = embeddings(ids)
        x = torch.cat([language[:, None, :].to(embedded.dtype), embedded], 1)
        x = self.dropout(self.input_norm(x + self.positions.weight[: t + 1]))
        keep = torch.cat([torch.ones_like(mask[:, :1]), mask], 1).bool()
        h = self.layers(x, src_key_padding_mask=~keep)
        m = keep.unsqueeze(-1).to(h.dtype)
        return (h * m).sum(1) / m.sum(1)
