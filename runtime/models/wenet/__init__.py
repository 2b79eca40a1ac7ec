"""WeNet U2 / U2++ (Conformer or Transformer encoder, CTC, attention decoder): config, encoder, model."""

from .config import WenetConfig
from .model import WenetU2

__all__ = ["WenetConfig", "WenetU2"]
