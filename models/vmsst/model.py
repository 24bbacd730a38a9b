"""VMSST and BITRANSLATION on one code path (methods §5.6, §5.7, §13): the student encoder is the semantic inference
network, and this module holds everything else.

Per batch of translation pairs (x_a, x_b) in languages (l_a, l_b) — the paper's objective (Wieting et al., ACL 2023):

    L = −log p(x_a | μ_sem(x_b)) − log p(x_b | μ_sem(x_a))                                  (translation terms)
        + λ · [ −log p(x_a | z_{l_a}, z_sem) − log p(x_b | z_{l_b}, z_sem)                    (reconstruction)
                + β(t) · (KL(q(z_sem | x_s)) + KL(q(z_{l_a} | x_a)) + KL(q(z_{l_b} | x_b))) ] (KL to N(0, I))

1. Semantic pass over *both* sides with the student (🤗 encoder → mean pooling → its bias-free projection = W_μ;
   ``semantic_logvar`` = W_σ): μ_sem(x_a), μ_sem(x_b). Both are needed by the translation terms. The two sides run
   as one batch (``stacked_inputs``: padding is masked, so each sentence's μ is its own).
2. Language passes (VMSST): z_{l_a}, z_{l_b} from the language encoder on their own sentence (the language
   embedding prepended), both sides as one batch too.
3. Translation terms: each sentence is generated from the mean of the semantic posterior of the *other* side
   **alone** (first decoder input: the target-language embedding). The paper's second term is "the sum of
   p(x_li | μ_sem_lj) and p(x_lj | μ_sem_li)": nothing encoded from the target sentence may enter it, or the decoder
   copies the target and μ_sem is never made to carry meaning. ``translation_decoder``:

   * ``shared`` (default, the paper's "single decoder for all languages"): the one decoder of the ELBO, conditioned
     on [0 ; μ_sem(other side)] — the language variable at its prior mean, so the target's own z_lang never enters
     (its gradient from these terms is exactly zero);
   * ``separate``: a second decoder conditioned on μ_sem(other side) alone (|s| = k), BITRANSLATION's path.

   BITRANSLATION (no language variables) always has its own decoder conditioned on μ_sem alone (BGT's
   ``decoder_trans``): that is the whole baseline. (Before train stage version 6 the shared reading fed z_lang of the
   target side: with μ_sem replaced by noise, that decoder's translation NLL fell below ln B, the no-information floor
   of B random sentences — the leak ``tests/test_vmsst.py`` now rules out.)
4. Reconstruction (VMSST): z_sem is sampled from the posterior of one side s of each pair, which forces it to keep
   only what both translations share. ``semantic_side``: ``rows`` (default, the paper: alternating within the batch,
   even global rows read a, odd rows b) or ``steps`` (BGT's ``counter % 2``: the whole batch alternates a / b every
   micro-step). The caller passes the per-row choice (``reads_b``). The decoder, conditioned on [z_l ; z_sem],
   regenerates each sentence; KL of the three posteriors to N(0, I), annealed.

The decoder is shared by all languages; the target language enters as its first input, and the conditioning vector
enters every layer and the 3d × V output projection (|s| = 2k). The decoders read the target prefix from the student's
word-embedding table (``decoder_embeddings: shared``, BGT's shared embeddings: the decoder terms train that table too),
from it with the gradient stopped (``detached``: the table learns from the encoders' paths only), or from a table of
their own (``own``: ``decoder_table``, a copy of the student's made when the model is built, trained by the decoder
terms alone). The language encoder reads the student's table, with its gradient, in every case.

Monitoring (detached scalars, logged into ``train_steps``): per-sentence translation and reconstruction NLL, KL per
variable (sem, lang: per sentence), β, active units (dimensions whose μ varies across the batch with Var ≥ 0.01, BGT's
``au``; and ``*_relative``: dimensions whose batch variance is ≥ 1 % of the mean per-dimension variance, which does not
depend on μ's scale) of z_sem (over μ_sem of both sides, in every variant, so the column compares across variants) and
of the language variables, and every ``monitor_every`` updates (0: never) the swap probe: the reconstruction
NLL of each sentence from its own z_sem versus from its translation's (posterior means) — nearly equal when z_sem
holds the shared meaning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn
from torch.nn import functional as F

from models.encoder import Dense, Normalize, SentenceEncoder, pool
from models.vmsst.decoder import LatentConditionedDecoder, lookup_rows
from models.vmsst.inference import GaussianHead, LanguageEncoder
from models.vmsst.loss import gaussian_kl, kl_annealing, vmsst_loss


@dataclass(frozen=True)
class VmsstModelConfig:
    """The settings :class:`VmsstModel` is built from, picked out of the objective's
    (``models.objectives.vmsst.VmsstObjective.model_config``; each field means what the objective's field of that name
    does). ``generative``: VMSST's language variables, reconstruction decoder and KL terms (False: BITRANSLATION, the
    translation terms alone). A size left None follows the semantic encoder's backbone."""

    elbo_weight: float
    generative: bool = True
    translation_decoder: Literal["shared", "separate"] = "shared"
    decoder_layers: int = 1
    decoder_heads: int | None = None
    decoder_intermediate_size: int | None = None
    language_layers: int | None = None
    dropout: float = 0.0
    decoder_checkpointing: bool = False
    decoder_embeddings: Literal["shared", "detached", "own"] = "shared"
    kl_anneal_steps: int = 1_000_000
    free_bits: float = 0.0


@dataclass
class SideBatch:
    """One side of a batch of pairs: encoder input ids (with the tokenizer's special tokens) and mask, decoder targets
    (content tokens + end-of-sentence) and mask, and language indices — all B-row tensors on the model's device.
    ``target_index``: the flat indices into B×T of the real target positions (where ``target_mask`` is 1), made on
    the host with the batch so that the decoders find them without a device sync; None: found from the mask."""

    ids: torch.Tensor
    mask: torch.Tensor
    targets: torch.Tensor
    target_mask: torch.Tensor
    language: torch.Tensor
    target_index: torch.Tensor | None = None

    def __len__(self) -> int:
        return int(self.ids.shape[0])


@dataclass
class VmsstOutput:
    loss: torch.Tensor  # (B,) per-pair objective
    mu_a: torch.Tensor  # B×k μ_sem of side a (VMSST-CONTRASTIVE's InfoNCE reads these)
    mu_b: torch.Tensor
    metrics: dict[str, torch.Tensor]  # detached scalars for train_steps
    z_sem: torch.Tensor | None = None  # B×k sample of the semantic variable (None for BITRANSLATION)


def semantic_projection(encoder: SentenceEncoder) -> nn.Linear:
    """The student's bias-free projection W_μ (``encoder.projection``), or a ValueError saying what to set.

    Mean pooling, then W_μ, then at most a trailing ``Normalize`` (a pretrained sentence-transformers model such as
    multilingual-e5 ends with one; ``EncoderSettings.projection`` is inserted before it). μ_sem is W_μ's output;
    the normalisation only rescales the exported embedding, which every evaluation compares by cosine."""
    post = list(encoder.post)
    if len(post) == 2 and isinstance(post[1], Normalize):  # a pretrained model's own trailing Normalize (mE5, MiniLM)
        post = post[:1]  # μ is the projection's output; the saved model normalises it for cosine use only
    if (encoder.pooling != "mean" or len(post) != 1 or not isinstance(post[0], Dense)
            or post[0].linear.bias is not None or not isinstance(post[0].activation, nn.Identity)):
        kinds = [type(m).__name__ for m in post]
        raise ValueError(f"objective vmsst: the semantic variable's μ is the student's mean pooling followed by one "
                         f"bias-free linear projection; this encoder has pooling {encoder.pooling!r} and modules "
                         f"{kinds} after pooling. Set encoder.pooling: mean and encoder.projection (the size of z_sem,"
                         f" e.g. the hidden size) on an encoder without its own Dense/Normalize modules.")
    return post[0].linear


class VmsstModel(nn.Module):
    """Language embeddings, the language encoder and heads, W_σ of the semantic variable and the decoder(s).

    Decoders: VMSST with ``translation_decoder: shared`` has exactly one (``decoder``, |s| = 2k, used by the
    translation and the reconstruction terms); ``separate`` adds ``translation_decoder`` (|s| = k); BITRANSLATION has
    only ``translation_decoder`` (|s| = k). ``output_ids``: the token ids every decoder's softmax runs over (the ids
    of the training corpus's targets, ``decoder_vocab_size: corpus``; ``models.vmsst.decoder``), the only rows their
    output layers hold; None for the full vocabulary. ``decoder_table``: the decoders' own word-embedding table
    (``decoder_embeddings: own`` only)."""

    def __init__(self, semantic: SentenceEncoder, settings: VmsstModelConfig, languages: Sequence[str], *,
                 max_positions: int, output_ids: Sequence[int] | torch.Tensor | None = None) -> None:
        super().__init__()
        o = settings
        config = semantic.backbone.config
        dim = int(config.hidden_size)
        latent = semantic_projection(semantic).out_features
        heads = o.decoder_heads or int(getattr(config, "num_attention_heads", 4))
        ffn = o.decoder_intermediate_size or int(getattr(config, "intermediate_size", 4 * dim))
        vocab = semantic.backbone.get_input_embeddings().num_embeddings
        self.settings, self.languages, self.elbo_weight = o, tuple(languages), o.elbo_weight
        self.generative = o.generative
        self.shared_translation = self.generative and o.translation_decoder == "shared"
        self.language_embeddings = nn.Embedding(len(self.languages), dim)
        nn.init.normal_(self.language_embeddings.weight, std=0.02)
        decoder = dict(layers=o.decoder_layers, heads=heads, intermediate_size=ffn, dropout=o.dropout,
                       max_positions=max_positions, checkpointing=o.decoder_checkpointing, output_ids=output_ids)
        if not self.shared_translation:
            self.translation_decoder = LatentConditionedDecoder(vocab, dim, latent, **decoder)
        if self.generative:
            self.semantic_logvar = nn.Linear(dim, latent, bias=False)
            self.language_encoder = LanguageEncoder(
                dim, layers=o.language_layers or int(getattr(config, "num_hidden_layers", 1)), heads=heads,
                intermediate_size=ffn, dropout=o.dropout, max_positions=max_positions + 1)
            self.language_head = GaussianHead(dim, latent)
            self.decoder = LatentConditionedDecoder(vocab, dim, 2 * latent, **decoder)
        self.decoder_embeddings = o.decoder_embeddings
        if self.decoder_embeddings not in ("shared", "detached", "own"):
            raise ValueError(f"vmsst: decoder_embeddings must be shared, detached or own, got "
                             f"{self.decoder_embeddings!r}")
        if self.decoder_embeddings == "own":  # a copy of the student's table now; built last and drawing no random
            table = semantic.backbone.get_input_embeddings()  # numbers, so every other module starts as with shared
            self.decoder_table = nn.Embedding.from_pretrained(table.weight.detach().clone(), freeze=False,
                                                              padding_idx=table.padding_idx)

    def decoder_inputs(self, encoder: SentenceEncoder) -> nn.Embedding | torch.Tensor:
        """The word-embedding table the decoders read their inputs from (``decoder_embeddings``): the student's
        (``shared``), its weight with the gradient stopped (``detached``) or the decoders' own (``own``)."""
        if self.decoder_embeddings == "own":
            return self.decoder_table
        table = encoder.backbone.get_input_embeddings()
        return table.weight.detach() if self.decoder_embeddings == "detached" else table

    @staticmethod
    def semantic_mean(encoder: SentenceEncoder, side: SideBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """(pooled h̄, μ_sem) of the student on one side: what ``encoder.encode`` computes for that text, before a
        trailing ``Normalize``."""
        return VmsstModel._semantic(encoder, side.ids, side.mask)

    @staticmethod
    def _semantic(encoder: SentenceEncoder, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = encoder.backbone(input_ids=ids, attention_mask=mask).last_hidden_state
        pooled = pool(hidden, mask, "mean")
        return pooled, semantic_projection(encoder)(pooled)

    @staticmethod
    def semantic_means(encoder: SentenceEncoder, a: SideBatch,
                       b: SideBatch) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
        """``semantic_mean`` of both sides in one pass of the student (``stacked_inputs``): the same values up to
        rounding (padding is masked), half the passes — one dense gradient of the word-embedding table instead of
        two, and half the operations."""
        ids, mask = stacked_inputs(encoder, a, b)
        pooled, mu = VmsstModel._semantic(encoder, ids, mask)
        n = len(a)
        return (pooled[:n], mu[:n]), (pooled[n:], mu[n:])

    def _translation(self, mu_other: torch.Tensor) -> tuple[LatentConditionedDecoder, torch.Tensor]:
        """The decoder of the translation terms and its conditioning vector: [0 ; μ_sem(other side)] into the shared
        decoder (the language variable at its prior mean: nothing of the target sentence enters), or μ_sem(other
        side) alone into the translation decoder."""
        if not self.shared_translation:
            return self.translation_decoder, mu_other
        return self.decoder, torch.cat([torch.zeros_like(mu_other), mu_other], 1)

    def translation_logits(self, encoder: SentenceEncoder, target: SideBatch, mu_other: torch.Tensor) -> torch.Tensor:
        """B×T×V logits of the translation term −log p(x_t | μ_sem(other side)) of the ``target`` side (B×T×|S|, in
        S's order, with a restricted output vocabulary)."""
        decoder, condition = self._translation(mu_other)
        start = self.language_embeddings(target.language)
        return decoder.logits(self.decoder_inputs(encoder), start, target.targets, condition)

    def translation_nll(self, encoder: SentenceEncoder, target: SideBatch, mu_other: torch.Tensor,
                        prefix: torch.Tensor | None = None) -> torch.Tensor:
        """Per-row NLL (B,) of the translation term of the ``target`` side (what ``translation_logits`` scores);
        ``prefix``: its decoder inputs already looked up (``LatentConditionedDecoder.features``)."""
        decoder, condition = self._translation(mu_other)
        start = self.language_embeddings(target.language)
        return decoder.nll(self.decoder_inputs(encoder), start, target.targets, target.target_mask, condition,
                           prefix=prefix, index=target.target_index)

    def forward(self, encoder: SentenceEncoder, a: SideBatch, b: SideBatch, *, update: int,
                reads_b: torch.Tensor | bool = False, monitor: bool = False,
                noise: Mapping[str, torch.Tensor] | None = None) -> VmsstOutput:
        """The per-pair loss of update ``update`` (β). ``reads_b``: which side the semantic posterior reads, per row
        ((B,) bool, True = side b) or for the whole batch (a bool); the component derives it from ``semantic_side``.
        ``noise``: ε for ``sem``, ``lang_a`` and ``lang_b`` (B×k each; the component draws them per global batch
        row, so the samples do not depend on the number of ranks); fresh ``randn`` when not given."""
        eps = noise or {}
        table = encoder.backbone.get_input_embeddings()
        # both sides in one pass of the student and one of the language encoder (stacked_inputs)
        ids, mask = stacked_inputs(encoder, a, b)
        n = len(a)
        h, mu = self._semantic(encoder, ids, mask)
        (h_a, h_b), (mu_a, mu_b) = h.split(n), mu.split(n)
        metrics = active_unit_metrics("sem", mu)
        # every word-embedding row the decoders and the language encoder read, in one lookup per table (one dense
        # gradient of a 250k-row table in backward instead of one per term; models.vmsst.decoder)
        inputs = self.decoder_inputs(encoder)
        prefixes = [a.targets[:, :-1], b.targets[:, :-1]]
        encoded = [ids] if self.generative else []
        if inputs is table:
            prefix_a, prefix_b, *embedded = lookup_rows(table, *prefixes, *encoded)
        else:
            prefix_a, prefix_b = lookup_rows(inputs, *prefixes)
            embedded = lookup_rows(table, *encoded) if encoded else []
        if not self.generative:
            translation = (self.translation_nll(encoder, a, mu_b, prefix_a)
                           + self.translation_nll(encoder, b, mu_a, prefix_b))
            metrics["translation_nll"] = translation.detach().mean() / 2
            if monitor:  # the probe's translation half: an unrelated pair's μ_sem (the batch rolled by one row)
                with torch.no_grad():
                    metrics["translation_nll_unrelated"] = (
                        self.translation_nll(encoder, a, mu_b.roll(1, 0))
                        + self.translation_nll(encoder, b, mu_a.roll(1, 0))).mean() / 2
            return VmsstOutput(vmsst_loss(translation), mu_a, mu_b, metrics)

        lang = self.language_embeddings(torch.cat([a.language, b.language]))
        lang_a, lang_b = lang.split(n)
        mu_l, logvar_l = self.language_head(self.language_encoder(table, lang, ids, mask, embedded[0]))
        (mu_la, mu_lb), (logvar_la, logvar_lb) = mu_l.split(n), logvar_l.split(n)
        z_la = GaussianHead.sample(mu_la, logvar_la, eps.get("lang_a"))
        z_lb = GaussianHead.sample(mu_lb, logvar_lb, eps.get("lang_b"))
        translation = (self.translation_nll(encoder, a, mu_b, prefix_a)
                       + self.translation_nll(encoder, b, mu_a, prefix_b))

        side_b = torch.as_tensor(reads_b, dtype=torch.bool, device=mu_a.device).expand(len(a))[:, None]
        h_s, mu_s = torch.where(side_b, h_b, h_a), torch.where(side_b, mu_b, mu_a)
        logvar_s = self.semantic_logvar(h_s)
        z_sem = GaussianHead.sample(mu_s, logvar_s, eps.get("sem"))
        reconstruction = (self.decoder.nll(inputs, lang_a, a.targets, a.target_mask, torch.cat([z_la, z_sem], 1),
                                           prefix=prefix_a, index=a.target_index)
                          + self.decoder.nll(inputs, lang_b, b.targets, b.target_mask, torch.cat([z_lb, z_sem], 1),
                                             prefix=prefix_b, index=b.target_index))
        free = self.settings.free_bits
        kl_sem = gaussian_kl(mu_s, logvar_s, free)
        kl_lang = gaussian_kl(mu_la, logvar_la, free) + gaussian_kl(mu_lb, logvar_lb, free)
        beta = kl_annealing(update, self.settings.kl_anneal_steps)
        loss = vmsst_loss(translation, reconstruction, kl_sem + kl_lang, elbo_weight=self.elbo_weight, beta=beta)
        metrics.update({
            "translation_nll": translation.detach().mean() / 2,
            "reconstruction_nll": reconstruction.detach().mean() / 2, "kl_sem": kl_sem.detach().mean(),
            "kl_lang": kl_lang.detach().mean() / 2, "kl_beta": torch.full((), beta, device=mu_s.device),
            **active_unit_metrics("lang", torch.cat([mu_la, mu_lb]))})
        if monitor:
            metrics.update(self.swap_probe(encoder, a, b, (mu_la, mu_a), (mu_lb, mu_b)))
        return VmsstOutput(loss, mu_a, mu_b, metrics, z_sem)


    @torch.no_grad()
    def swap_probe(self, encoder: SentenceEncoder, a: SideBatch, b: SideBatch,
                   means_a: tuple[torch.Tensor, torch.Tensor],
                   means_b: tuple[torch.Tensor, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Per-sentence NLLs (means over both sides) that tell whether μ_sem carries the pair's meaning.

        ``means_*`` = (μ_lang, μ_sem) of each side. Reconstruction of each sentence from [μ_lang ; μ_sem] of itself
        (``swap_nll_own``), of its translation (``swap_nll_swapped``) and of an unrelated pair (the batch rolled by
        one row, ``swap_nll_unrelated``); and the translation term from an unrelated pair's μ_sem
        (``translation_nll_unrelated``, to set against ``translation_nll``)."""
        table = self.decoder_inputs(encoder)
        (mu_la, mu_a), (mu_lb, mu_b) = means_a, means_b
        other_a, other_b = mu_a.roll(1, 0), mu_b.roll(1, 0)

        def rec(sem_a: torch.Tensor, sem_b: torch.Tensor) -> torch.Tensor:
            return (self.decoder.nll(table, self.language_embeddings(a.language), a.targets, a.target_mask,
                                     torch.cat([mu_la, sem_a], 1), index=a.target_index)
                    + self.decoder.nll(table, self.language_embeddings(b.language), b.targets, b.target_mask,
                                       torch.cat([mu_lb, sem_b], 1), index=b.target_index)).mean() / 2

        unrelated = (self.translation_nll(encoder, a, other_b) + self.translation_nll(encoder, b, other_a)).mean() / 2
        return {"swap_nll_own": rec(mu_a, mu_b), "swap_nll_swapped": rec(mu_b, mu_a),
                "swap_nll_unrelated": rec(other_a, other_b), "translation_nll_unrelated": unrelated}


def stacked_inputs(encoder: SentenceEncoder, a: SideBatch, b: SideBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """The encoder inputs of sides ``a`` then ``b`` as one 2B-row batch (ids, mask), right-padded with the tokenizer's
    pad id to the wider side's width. Padding is masked everywhere it is read (attention, mean pooling), so each row's
    outputs are those of its own side's batch up to rounding."""
    width = max(a.ids.shape[1], b.ids.shape[1])
    pad = encoder.tokenizer.pad_token_id or 0

    def widen(x: torch.Tensor, value: int) -> torch.Tensor:
        return F.pad(x, (0, width - x.shape[1]), value=value)

    return torch.cat([widen(a.ids, pad), widen(b.ids, pad)]), torch.cat([widen(a.mask, 0), widen(b.mask, 0)])


def active_units(mu: torch.Tensor, threshold: float = 0.01) -> torch.Tensor:
    """Dimensions whose posterior mean varies across the rows with Var ≥ ``threshold`` (BGT's ``au``); it depends on
    μ's scale (μ·c counts the dimensions with Var ≥ threshold / c²)."""
    if mu.shape[0] < 2:
        return torch.full((), float("nan"), device=mu.device)
    return (mu.detach().float().var(0) >= threshold).sum().float()


def relative_active_units(mu: torch.Tensor, fraction: float = 0.01) -> torch.Tensor:
    """Dimensions whose variance across the rows (centred per dimension) is ≥ ``fraction`` of the mean per-dimension
    variance: unchanged by scaling μ by any c > 0 or shifting it; 0 when no dimension varies."""
    if mu.shape[0] < 2:
        return torch.full((), float("nan"), device=mu.device)
    var = mu.detach().float().var(0)
    mean = var.mean()
    count = (var >= fraction * mean).sum().float()
    return torch.where(mean > 0, count, torch.zeros_like(count))  # no host sync: the trainer syncs once a step


def active_unit_metrics(name: str, mu: torch.Tensor) -> dict[str, torch.Tensor]:
    """``active_units_<name>`` (``active_units``) and ``active_units_<name>_relative`` (``relative_active_units``) of
    the B×k means ``mu``."""
    return {f"active_units_{name}": active_units(mu), f"active_units_{name}_relative": relative_active_units(mu)}
