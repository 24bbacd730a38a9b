"""Training objectives, one module per loss; each loss takes embeddings, so it is tested without a model."""

from models.objectives.info_nce import info_nce

__all__ = ["info_nce"]
