"""FunASR's Paraformer: SAN-M encoder, CIF predictor, SAN-M decoder, run as one forward."""

from .config import ParaformerConfig
from .model import Paraformer

__all__ = ["Paraformer", "ParaformerConfig"]
