"""VMSST and BITRANSLATION on one code path (methods §5.6, §5.7): the student encoder is the semantic inference
network, and this module holds everything else.

Per batch of translation pairs (x_a, x_b) in languages (l_a, l_b):

1. Semantic pass over *both* sides with the student (🤗 encoder → mean pooling → its bias-free projection = W_μ;
   ``semantic_logvar`` = W_σ): μ_sem(x_a), μ_sem(x_b). Both are needed by the translation terms.
2. Translation terms (every variant): the translation decoder, conditioned on μ_sem of the *other* side, generates
   each sentence (first input: the target-language embedding). This is BGT's ``decoder_trans`` path and the whole of
   BITRANSLATION.
3. VMSST: z_sem is sampled from the posterior of one side only, alternating a / b every micro-step (BGT's
   ``counter % 2``), which forces z_sem to keep only what both translations share; z_{l_a}, z_{l_b} come from the
   language encoder on their own sentence (with the language embedding prepended). The reconstruction decoder,
   conditioned on [z_l ; z_sem], regenerates each sentence; KL of the three posteriors to N(0, I), annealed.

The translation and the reconstruction decoders are two instances of ``LatentConditionedDecoder`` (|s| = k and 2k):
the paper's objective puts a term conditioned on μ_sem alone next to the ELBO, whose decoder sees [z_lang ; z_sem]
(3d × V output projection), so one decoder cannot serve both without inventing a z_lang for the translation term.
Both decoders are shared by all languages; the target language enters as the decoder's first input.

Monitoring (detached scalars, logged into ``train_steps``): per-sentence translation and reconstruction NLL, KL per
variable (sem, lang: per sentence), β, active units (dimensions whose μ varies across the batch with Var ≥ 0.01, BGT's
``au``) of z_sem (over μ_sem of both sides, in every variant, so the column compares across variants) and of the
language variables, and every ``monitor_every`` updates (0: never) the swap probe: the reconstruction
NLL of each sentence from its own z_sem versus from its translation's (posterior means) — nearly equal when z_sem
holds the shared meaning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from models.encoder import Dense, SentenceEncoder, pool
from models.objectives.vmsst import gaussian_kl, kl_annealing, vmsst_loss
from models.settings import VmsstObjective
from models.vmsst.decoder import LatentConditionedDecoder
from models.vmsst.inference import GaussianHead, LanguageEncoder


@dataclass
class SideBatch:
    """One side of a batch of pairs: encoder input ids (with the tokenizer's special tokens) and mask, decoder targets
    (content tokens + end-of-sentence) and mask, and language indices — all B-row tensors on the model's device."""

    ids: torch.Tensor
    mask: torch.Tensor
    targets: torch.Tensor
    target_mask: torch.Tensor
    language: torch.Tensor

    def __len__(self) -> int:
        return int(self.ids.shape[0])


@dataclass
class VmsstOutput:
    loss: torch.Tensor  # (B,) per-pair objective
    mu_a: torch.Tensor  # B×k μ_sem of side a (VMSST-CONTRASTIVE's InfoNCE reads these)
    mu_b: torch.Tensor
    metrics: dict[str, torch.Tensor]  # detached scalars for train_steps


def semantic_projection(encoder: SentenceEncoder) -> nn.Linear:
    """The student's bias-free projection W_μ (``encoder.projection``), or a ValueError saying what to set."""
    post = list(encoder.post)
    if (encoder.pooling != "mean" or len(post) != 1 or not isinstance(post[0], Dense)
            or post[0].linear.bias is not None or not isinstance(post[0].activation, nn.Identity)):
        kinds = [type(m).__name__ for m in post]
        raise ValueError(f"objective vmsst: the semantic variable's μ is the student's mean pooling followed by one "
                         f"bias-free linear projection; this encoder has pooling {encoder.pooling!r} and modules "
                         f"{kinds} after pooling. Set encoder.pooling: mean and encoder.projection (the size of z_sem,"
                         f" e.g. the hidden size) on an encoder without its own Dense/Normalize modules.")
    return post[0].linear


class VmsstModel(nn.Module):
    def __init__(self, semantic: SentenceEncoder, objective: VmsstObjective, languages: Sequence[str], *,
                 elbo_weight: float, max_positions: int) -> None:
        super().__init__()
        o = objective
        config = semantic.backbone.config
        dim = int(config.hidden_size)
        latent = semantic_projection(semantic).out_features
        heads = o.decoder_heads or int(getattr(config, "num_attention_heads", 4))
        ffn = o.decoder_intermediate_size or int(getattr(config, "intermediate_size", 4 * dim))
        vocab = semantic.backbone.get_input_embeddings().num_embeddings
        self.objective, self.languages, self.elbo_weight = o, tuple(languages), elbo_weight
        self.generative = o.variant != "bitranslation"
        self.language_embeddings = nn.Embedding(len(self.languages), dim)
        nn.init.normal_(self.language_embeddings.weight, std=0.02)
        decoder = dict(layers=o.decoder_layers, heads=heads, intermediate_size=ffn, dropout=o.dropout,
                       max_positions=max_positions, checkpointing=o.decoder_checkpointing)
        self.translation_decoder = LatentConditionedDecoder(vocab, dim, latent, **decoder)
        if self.generative:
            self.semantic_logvar = nn.Linear(dim, latent, bias=False)
            self.language_encoder = LanguageEncoder(
                dim, layers=o.language_layers or int(getattr(config, "num_hidden_layers", 1)), heads=heads,
                intermediate_size=ffn, dropout=o.dropout, max_positions=max_positions + 1)
            self.language_head = GaussianHead(dim, latent)
            self.decoder = LatentConditionedDecoder(vocab, dim, 2 * latent, **decoder)

    @staticmethod
    def semantic_mean(encoder: SentenceEncoder, side: SideBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """(pooled h̄, μ_sem) of the student on one side: exactly what ``encoder.encode`` computes for that text."""
        hidden = encoder.backbone(input_ids=side.ids, attention_mask=side.mask).last_hidden_state
        pooled = pool(hidden, side.mask, "mean")
        return pooled, semantic_projection(encoder)(pooled)

    def forward(self, encoder: SentenceEncoder, a: SideBatch, b: SideBatch, *, update: int, micro: int,
                monitor: bool = False, noise: Mapping[str, torch.Tensor] | None = None) -> VmsstOutput:
        """The per-pair loss of update ``update`` (β) and micro-step ``micro`` (which side z_sem reads). ``noise``:
        ε for ``sem``, ``lang_a`` and ``lang_b`` (B×k each; the component draws them per global batch row, so the
        samples do not depend on the number of ranks); fresh ``randn`` when not given."""
        eps = noise or {}
        table = encoder.backbone.get_input_embeddings()
        lang_a, lang_b = self.language_embeddings(a.language), self.language_embeddings(b.language)
        h_a, mu_a = self.semantic_mean(encoder, a)
        h_b, mu_b = self.semantic_mean(encoder, b)
        translation = (self.translation_decoder.nll(table, lang_a, a.targets, a.target_mask, mu_b)
                       + self.translation_decoder.nll(table, lang_b, b.targets, b.target_mask, mu_a))
        metrics = {"translation_nll": translation.detach().mean() / 2,
                   "active_units_sem": _active_units(torch.cat([mu_a, mu_b]))}
        if not self.generative:
            return VmsstOutput(vmsst_loss(translation), mu_a, mu_b, metrics)

        h_s, mu_s = (h_a, mu_a) if micro % 2 == 0 else (h_b, mu_b)
        logvar_s = self.semantic_logvar(h_s)
        z_sem = GaussianHead.sample(mu_s, logvar_s, eps.get("sem"))
        mu_la, logvar_la = self.language_head(self.language_encoder(table, lang_a, a.ids, a.mask))
        mu_lb, logvar_lb = self.language_head(self.language_encoder(table, lang_b, b.ids, b.mask))
        z_la = GaussianHead.sample(mu_la, logvar_la, eps.get("lang_a"))
        z_lb = GaussianHead.sample(mu_lb, logvar_lb, eps.get("lang_b"))
        reconstruction = (self.decoder.nll(table, lang_a, a.targets, a.target_mask, torch.cat([z_la, z_sem], 1))
                          + self.decoder.nll(table, lang_b, b.targets, b.target_mask, torch.cat([z_lb, z_sem], 1)))
        free = self.objective.free_bits
        kl_sem = gaussian_kl(mu_s, logvar_s, free)
        kl_lang = gaussian_kl(mu_la, logvar_la, free) + gaussian_kl(mu_lb, logvar_lb, free)
        beta = kl_annealing(update, self.objective.kl_anneal_steps)
        loss = vmsst_loss(translation, reconstruction, kl_sem + kl_lang, elbo_weight=self.elbo_weight, beta=beta)
        metrics.update({
            "reconstruction_nll": reconstruction.detach().mean() / 2, "kl_sem": kl_sem.detach().mean(),
            "kl_lang": kl_lang.detach().mean() / 2, "kl_beta": torch.full((), beta, device=mu_s.device),
            "active_units_lang": _active_units(torch.cat([mu_la, mu_lb]))})
        if monitor:
            with torch.no_grad():
                own = (self.decoder.nll(table, lang_a, a.targets, a.target_mask, torch.cat([mu_la, mu_a], 1))
                       + self.decoder.nll(table, lang_b, b.targets, b.target_mask, torch.cat([mu_lb, mu_b], 1)))
                swapped = (self.decoder.nll(table, lang_a, a.targets, a.target_mask, torch.cat([mu_la, mu_b], 1))
                           + self.decoder.nll(table, lang_b, b.targets, b.target_mask, torch.cat([mu_lb, mu_a], 1)))
            metrics.update({"swap_nll_own": own.mean() / 2, "swap_nll_swapped": swapped.mean() / 2})
        return VmsstOutput(loss, mu_a, mu_b, metrics)


def _active_units(mu: torch.Tensor, threshold: float = 0.01) -> torch.Tensor:
    """Dimensions whose posterior mean varies across the rows with Var ≥ ``threshold`` (BGT's ``au``)."""
    if mu.shape[0] < 2:
        return torch.full((), float("nan"), device=mu.device)
    return (mu.detach().float().var(0) >= threshold).sum().float()
