"""oasr: speech checkpoints from any ecosystem, one native bundle, one runtime.

The public API is imported lazily so ``import oasr`` (and ``oasr --help``) does not load torch.
"""

from __future__ import annotations

import logging
from importlib import import_module

from .errors import (
    BundleError,
    CapabilityError,
    ConversionError,
    DetectionError,
    InputError,
    LoadError,
    OasrError,
    UnsafeCheckpointError,
)
from .version import __version__

logging.getLogger("oasr").addHandler(logging.NullHandler())

_LAZY = {
    "from_pretrained": "oasr.loading",
    "load_pretrained": "oasr.loading",
    "LoadedModel": "oasr.loading",
    "convert": "oasr.conversion.run",
    "ConvertResult": "oasr.conversion.run",
    "quantize": "oasr.quant.quantize",
    "QuantizeResult": "oasr.quant.quantize",
    "inspect": "oasr.conversion.inspect",
    "resolve_model": "oasr.hub.resolve",
    "describe_resolution": "oasr.hub.resolve",
    "transcribe": "oasr.pipelines.transcribe",
    "TranscribeOptions": "oasr.options",
    "WhisperDecoding": "oasr.decoding.whisper.options",
    "Transcript": "oasr.results",
    "pitch": "oasr.pipelines.pitch",
    "PitchOptions": "oasr.options",
    "PitchTrack": "oasr.results",
    "separate": "oasr.pipelines.separate",
    "SeparateOptions": "oasr.options",
    "Stems": "oasr.results",
    "diarize": "oasr.pipelines.diarize",
    "DiarizeOptions": "oasr.options",
    "SpeakerTurn": "oasr.results",
    "SpeakerTurns": "oasr.results",
    "detect_speech": "oasr.pipelines.vad.silero",
    "VadOptions": "oasr.options",
    "embed_segments": "oasr.pipelines.diarize.embedding",
    "synthesize": "oasr.pipelines.tts",
    "SynthesizeOptions": "oasr.options",
    "Speech": "oasr.results",
    "batch": "oasr.corpus",
    "BatchSummary": "oasr.corpus",
    "BatchProgress": "oasr.corpus",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'oasr' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "__version__",
    "OasrError",
    "InputError",
    "DetectionError",
    "ConversionError",
    "UnsafeCheckpointError",
    "BundleError",
    "LoadError",
    "CapabilityError",
    *_LAZY,
]
