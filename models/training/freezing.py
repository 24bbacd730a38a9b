"""Freezing parts of the student (``training.freeze``): the gentler update among the remedies for keeping a
pretrained model's broad abilities while fine-tuning it for one.

A short contrastive fine-tune on six languages moves every weight it reaches, the rows of the word-embedding table of
the pieces those languages use among them; the other languages share the transformer above that table but none of the
moved rows, so what they keep from the start depends on the two staying consistent. Freezing the embedding block
(and optionally the lowest layers) keeps the representation of every language's pieces where the start had it and lets
the fine-tune adapt the layers above; freezing the lowest layers of a multilingual encoder while fine-tuning on one
language is among the settings Wu & Dredze (2019, "Beto, Bentz, Becas: The Surprising Cross-Lingual Effectiveness of
BERT") measure for zero-shot transfer.

Frozen parameters get ``requires_grad = False`` before the optimiser is built, so AdamW holds no state for them (on
multilingual-e5-small, 96 M fewer weights to update a step) and no gradient is computed into them. Dropout inside a
frozen part still acts in training mode, as in the papers' setups.

``frozen`` freezes a whole module for a while and gives each parameter its flag back afterwards: the trainer's
pre-phase (``Component.warm_up``, VMSST's decoder warm-up) trains an objective's own modules with the student fixed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn

from models.settings import FreezeSettings

log = logging.getLogger("polysent.training.freezing")


def frozen_modules(backbone: nn.Module, freeze: FreezeSettings) -> list[tuple[str, nn.Module]]:
    """The backbone's parts that ``freeze`` names, as (name, module): its ``embeddings`` block and its lowest
    ``layers`` of ``encoder.layer`` (BERT / XLM-R / MiniLM as ``transformers`` builds them). A backbone without those
    parts, or with fewer layers than asked, is refused with what it has."""
    kind = type(backbone).__name__
    parts: list[tuple[str, nn.Module]] = []
    if freeze.embeddings:
        embeddings = getattr(backbone, "embeddings", None)
        if not isinstance(embeddings, nn.Module):
            raise ValueError(f"training.freeze.embeddings: the backbone ({kind}) has no 'embeddings' block; expected a "
                             "transformers encoder (BERT, XLM-R, MiniLM …) or freeze.embeddings: false")
        parts.append(("embeddings", embeddings))
    if freeze.layers:
        layers = getattr(getattr(backbone, "encoder", None), "layer", None)
        if not isinstance(layers, nn.ModuleList):
            raise ValueError(f"training.freeze.layers: the backbone ({kind}) has no 'encoder.layer' list; expected a "
                             "transformers encoder or freeze.layers: 0")
        if freeze.layers > len(layers):
            raise ValueError(f"training.freeze.layers: {freeze.layers}, but the backbone has {len(layers)} layers; "
                             f"expected at most {len(layers)}")
        parts += [(f"encoder.layer.{i}", layers[i]) for i in range(freeze.layers)]
    return parts


def freeze_student(backbone: nn.Module, freeze: FreezeSettings | None, *, run_name: str = "run") -> int:
    """Set ``requires_grad = False`` on every parameter of the parts ``freeze`` names (``frozen_modules``); returns
    how many weights were frozen (0 for ``None``) and logs it beside the number left to train."""
    if freeze is None:
        return 0
    parts = frozen_modules(backbone, freeze)
    frozen = 0
    for _, module in parts:
        for p in module.parameters():
            if p.requires_grad:
                p.requires_grad_(False)
                frozen += p.numel()
    total = sum(p.numel() for p in backbone.parameters())
    log.info("%s: froze %s of the backbone's %s weights (%s); %s train", run_name, f"{frozen:,}", f"{total:,}",
             ", ".join(name for name, _ in parts) or "nothing", f"{total - frozen:,}")
    return frozen


@contextmanager
def frozen(module: nn.Module) -> Iterator[None]:
    """Every parameter of ``module`` with ``requires_grad = False`` inside the block (no gradient reaches it, and a
    forward through it alone builds no graph); each one's own flag is restored on leaving, also on an error."""
    flags = [(p, p.requires_grad) for p in module.parameters()]
    try:
        for p, _ in flags:
            p.requires_grad_(False)
        yield
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)
