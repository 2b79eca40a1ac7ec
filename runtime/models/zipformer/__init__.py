"""icefall's Zipformer2 (Yao et al. 2023) with its CTC head or stateless transducer: config, encoder, heads, model."""

from .config import ZipformerConfig
from .model import Zipformer

__all__ = ["Zipformer", "ZipformerConfig"]
