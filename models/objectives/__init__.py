"""Training objectives, one module per loss; each loss takes embeddings, so it is tested without a model."""

from models.objectives.ease import EntityHead, ease_entity_loss, ease_loss
from models.objectives.embedding_mse import embedding_mse
from models.objectives.info_nce import info_nce
from models.objectives.mpcl import mpcl_loss
from models.objectives.simcse import simcse_loss
from models.objectives.soft_label import soft_label_loss, soft_label_targets

__all__ = [
    "EntityHead",
    "ease_entity_loss",
    "ease_loss",
    "embedding_mse",
    "info_nce",
    "mpcl_loss",
    "simcse_loss",
    "soft_label_loss",
    "soft_label_targets",
]
