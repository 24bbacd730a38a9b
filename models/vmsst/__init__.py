"""VMSST (methods §5): the inference networks, the latent-conditioned decoder and the model that ties them to the
student encoder, and the loss maths (``loss.py``). The objective — settings, batches, the component that runs this
model — is ``models/objectives/vmsst.py``."""

from models.vmsst.decoder import LatentConditionedDecoder, LatentConditionedDecoderLayer
from models.vmsst.inference import GaussianHead, LanguageEncoder
from models.vmsst.model import SideBatch, VmsstModel, VmsstModelConfig, VmsstOutput

__all__ = [
    "GaussianHead",
    "LanguageEncoder",
    "LatentConditionedDecoder",
    "LatentConditionedDecoderLayer",
    "SideBatch",
    "VmsstModel",
    "VmsstModelConfig",
    "VmsstOutput",
]
