"""The ``whisper_seq2seq`` engine: the options checked against the Whisper model before any work, then a loop.

``batch_size`` 1 takes the sequential loop (``sequential.py``), above 1 the batched one (``batched.py``).
"""

from __future__ import annotations

from ....decoding.family import section_for
from ....decoding.whisper.options import WhisperDecoding
from ....errors import CapabilityError
from ....options import TranscribeOptions
from .. import EngineOutput
from .batched import decode_batched
from .decoder import WindowDecoder
from .segments import Recording
from .sequential import decode_sequentially


class Engine:
    """Checks the options against the Whisper model before any work, then runs the long-form loop."""

    reads_windows = True  # takes a SampleFile: the log-mel and the levels read it a window at a time
    streams_segments = True  # run(..., on_segment=) hears each segment as its window is decoded

    def __init__(self, loaded, options: TranscribeOptions, section: WhisperDecoding | None = None):
        self.loaded = loaded
        self.options = options
        self.decoding = section or section_for(loaded.decoding.family, options)
        self.tokenizer = _check_capabilities(loaded, options)
        _check_suppress_tokens(loaded, self.decoding)

    def run(self, samples, speech_map, duration, progress, on_segment=None) -> EngineOutput:
        decoder = WindowDecoder(self.loaded, self.tokenizer, self.options, self.decoding)
        recording = Recording(speech_map, duration, decoder.geometry, progress, on_segment)
        loop = decode_batched if self.options.batch_size > 1 else decode_sequentially
        segments, language, probability = loop(decoder, recording, samples)
        return EngineOutput(segments, language, probability)


def _check_capabilities(loaded, options: TranscribeOptions):
    if loaded.tokenizer_spec.kind == "none":
        raise CapabilityError(
            "this model was converted without tokenizer assets; it cannot transcribe (re-convert it with its tokenizer)"
        )
    tokenizer = loaded.tokenizer()
    if not tokenizer.multilingual:
        if options.language not in (None, "en"):
            raise CapabilityError(f"this Whisper model is English-only; it cannot transcribe language {options.language!r}")
        if options.task == "translate":
            raise CapabilityError("this Whisper model is English-only; it cannot translate (use a multilingual model)")
    elif options.language is not None:
        tokenizer.language_token(options.language)  # an unknown code fails here, before any work
    return tokenizer


def _check_suppress_tokens(loaded, decoding: WhisperDecoding) -> None:
    """Token ids to suppress must lie in the model's vocabulary (the options know only >= -1)."""
    n_vocab = loaded.model.config.n_vocab
    outside = [t for t in decoding.suppress_tokens if t >= n_vocab]
    if outside:
        raise CapabilityError(
            f"--suppress-tokens {', '.join(map(str, outside[:3]))}{' ...' if len(outside) > 3 else ''}: this model's "
            f"vocabulary has {n_vocab} tokens (ids 0..{n_vocab - 1}; -1 stands for the non-speech symbols)"
        )
