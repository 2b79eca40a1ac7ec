"""FastConformer (NeMo, Hugging Face Parakeet): config, encoder, heads, model."""

from .config import FastConformerConfig, PreprocessorConfig
from .model import FastConformer

__all__ = ["FastConformer", "FastConformerConfig", "PreprocessorConfig"]
