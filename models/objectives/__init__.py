"""Training objectives: one module per objective (``<kind>.py``) holding its settings (registered with
``@objective``), its component (batch building and forward) and its loss; ``loss_parts`` holds what the contrastive
losses share. The objective registry (``models.objective_registry``) imports every module here, so adding an
objective is one new file (and its test). Each loss takes embeddings, so it is tested without a model. A part that only
one objective uses and that needs torch at definition time (an ``nn.Module``) sits beside it in a package named for the
kind, whose ``__init__`` is the objective's module: ``ease/`` holds EASE and its ``entity_head``.

This package imports nothing at import time: the modules load torch lazily (``models.lazy_torch``), so the pipeline's
config loader reads their settings without paying for torch.
"""
