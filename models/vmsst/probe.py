"""The translation probe of VMSST's decoders (methods §5.6 item 7, §5.7) on a fixed set of pairs, and the stopping rule
of the decoder warm-up that reads it (``VmsstObjective.warmup_decoder_steps``).

Whether a decoder reads μ_sem shows in its translation terms: with the translation's own μ_sem a sentence costs

    NLL = ½ · mean_i [ −log p(x_a,i | μ_sem(x_b,i)) − log p(x_b,i | μ_sem(x_a,i)) ]      (nats per sentence)

and with an unrelated pair's μ_sem (the probe set rolled by one pair) ``NLL_unrelated``; the **probe gap** is
NLL_unrelated − NLL. It is 0 for a decoder that ignores μ_sem (a freshly initialised one, or one that learnt only the
language model of the targets) and grows as μ_sem tells it the words. It is the figure the experiments report as
``train.probe_gap`` (``experiments.runner``: the same two terms, ``translation_nll_unrelated`` − ``translation_nll``,
on a training batch at the last probed update); here it is read on pairs the warm-up does not train on, of distinct
meanings (so no unrelated pair is a translation of its neighbour), in evaluation mode (no dropout) and without
gradients.

``WarmupProbe`` is the warm-up's stopping rule (``models.training.components.WarmUp.probe``): the gap before the
first warm-up update and every ``every`` updates (0: before the first and after the last only), and after the last;
the warm-up stops at the first probe whose gap reaches ``threshold`` nats (None: it runs its budget). μ_sem of the probe
pairs is computed once: the semantic encoder is frozen for the whole warm-up.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn

from models.encoder import SentenceEncoder
from models.vmsst.model import SideBatch, VmsstModel

log = logging.getLogger("polysent.models.vmsst.probe")

Chunk = tuple[SideBatch, SideBatch]  # sides a and b of some probe pairs, padded together


@contextmanager
def evaluation_mode(*modules: nn.Module) -> Iterator[None]:
    """``modules`` in evaluation mode (no dropout) inside the block; every submodule's own mode back afterwards."""
    modes = [(m, m.training) for module in modules for m in module.modules()]
    try:
        for module in modules:
            module.eval()
        yield
    finally:
        for m, mode in modes:
            m.training = mode


@torch.no_grad()
def probe_means(encoder: SentenceEncoder, chunks: Sequence[Chunk]) -> tuple[torch.Tensor, torch.Tensor]:
    """μ_sem of sides a and b of every probe pair, in the chunks' order (P×k each), the encoder in evaluation mode."""
    with evaluation_mode(encoder):
        means = [VmsstModel.semantic_means(encoder, a, b) for a, b in chunks]
    return torch.cat([m[0][1] for m in means]).float(), torch.cat([m[1][1] for m in means]).float()


@torch.no_grad()
def translation_probe(model: VmsstModel, encoder: SentenceEncoder, chunks: Sequence[Chunk],
                      means: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[float, float]:
    """(NLL, NLL_unrelated) of the translation terms over the probe pairs ``chunks`` (module docstring), nats per
    sentence: each sentence decoded from its translation's μ_sem, and from the μ_sem of the pair before it in the probe
    set (rolled by one pair across the chunks). ``means``: ``probe_means`` of the chunks, when already known."""
    mu_a, mu_b = means if means is not None else probe_means(encoder, chunks)
    sizes = [len(a) for a, _ in chunks]
    own = zip(mu_a.split(sizes), mu_b.split(sizes), strict=True)
    rolled = zip(mu_a.roll(1, 0).split(sizes), mu_b.roll(1, 0).split(sizes), strict=True)
    nll = unrelated = 0.0
    with evaluation_mode(model, encoder):
        for (a, b), (own_a, own_b), (other_a, other_b) in zip(chunks, own, rolled, strict=True):
            nll += float((model.translation_nll(encoder, a, own_b) + model.translation_nll(encoder, b, own_a)).sum())
            unrelated += float((model.translation_nll(encoder, a, other_b)
                                + model.translation_nll(encoder, b, other_a)).sum())
    sentences = 2 * sum(sizes)
    return nll / sentences, unrelated / sentences


class WarmupProbe:
    """The decoder warm-up's stopping rule (module docstring): called after ``done`` warm-up updates, it probes when
    due (``done`` 0, a multiple of ``every``, or ``budget``) and returns True once the probe gap has reached
    ``threshold``; ``record()`` gives the gap before the warm-up and at its last probe."""

    def __init__(self, model: VmsstModel, encoder: SentenceEncoder, chunks: Sequence[Chunk], *, every: int,
                 threshold: float | None, budget: int, name: str = "vmsst") -> None:
        if not chunks:
            raise ValueError(f"objective {name}: the warm-up probe needs at least one probe pair")
        self.model, self.encoder, self.chunks = model, encoder, list(chunks)
        self.every, self.threshold, self.budget, self.name = every, threshold, budget, name
        self.means: tuple[torch.Tensor, torch.Tensor] | None = None
        self.probes: list[tuple[int, float, float]] = []  # (updates done, NLL, NLL_unrelated)

    def gap(self, done: int) -> float:
        """The probe gap after ``done`` warm-up updates (nats per sentence), kept in ``probes``."""
        if self.means is None:  # the encoder is frozen during the warm-up: its μ_sem of the probe pairs is fixed
            self.means = probe_means(self.encoder, self.chunks)
        nll, unrelated = translation_probe(self.model, self.encoder, self.chunks, self.means)
        self.probes.append((done, nll, unrelated))
        return unrelated - nll

    def __call__(self, done: int) -> bool:
        if not (done == 0 or done >= self.budget or (self.every > 0 and done % self.every == 0)):
            return False
        gap = self.gap(done)
        passed = self.threshold is not None and gap >= self.threshold
        _, nll, unrelated = self.probes[-1]
        log.info("objective %s: warm-up update %d: probe gap %.3f nats (translation NLL %.3f, unrelated %.3f)%s",
                 self.name, done, gap, nll, unrelated, f" ≥ {self.threshold:g}: passed" if passed else "")
        return passed

    def record(self) -> dict[str, float]:
        """``probe_gap_start`` (before the first warm-up update) and ``probe_gap`` (at the last probe: where the
        warm-up stopped), nats per sentence."""
        if not self.probes:
            return {}
        (_, nll0, unrelated0), (_, nll, unrelated) = self.probes[0], self.probes[-1]
        return {"probe_gap_start": unrelated0 - nll0, "probe_gap": unrelated - nll}
