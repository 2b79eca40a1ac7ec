"""A Whisper model set up to decode 30-second windows: encode, detect the language, decode with fallback, align words."""

from __future__ import annotations

import logging
from contextlib import nullcontext

import torch

from ....decoding.whisper.options import WhisperDecoding
from ....heap import releasing_between_layers
from ....options import TranscribeOptions
from .fallback import decode_with_fallback
from .window import Geometry, Piece, Window

log = logging.getLogger("oasr")


class WindowDecoder:
    """The model, its tokenizer, openai's decoder built from the decoding options, and the window clock."""

    def __init__(self, loaded, tokenizer, options: TranscribeOptions, decoding: WhisperDecoding):
        from ....decoding.whisper.decode import WhisperDecoder

        self.loaded, self.model, self.tokenizer = loaded, loaded.model, tokenizer
        self._detected: tuple[torch.Tensor, dict] | None = None  # see detect_language
        self.options, self.decoding = options, decoding
        self.geometry = Geometry.of(loaded.feature_spec, self.model.config.n_audio_ctx)
        parameter = next(self.model.parameters())
        self.device, self.dtype = parameter.device, parameter.dtype
        self.decoder = WhisperDecoder(
            self.model,
            tokenizer,
            beam_size=decoding.beam_size,
            best_of=decoding.best_of,
            patience=decoding.patience,
            length_penalty=decoding.length_penalty,
            suppress_tokens=decoding.suppress_tokens,
            suppress_blank=decoding.suppress_blank,
            without_timestamps=decoding.without_timestamps,
            max_initial_timestamp=decoding.max_initial_timestamp,
            generator=torch.Generator(self.device).manual_seed(decoding.seed),
        )

    def known_language(self) -> str | None:
        """The language given, or the only one an English-only model has; None: to be detected."""
        return self.options.language or (None if self.tokenizer.multilingual else "en")

    def initial_prompt(self) -> list[int]:
        d = self.decoding
        return self.tokenizer.encode(" " + d.initial_prompt.strip()) if d.initial_prompt else []

    def context(self, previous: list[int]) -> list[int]:
        """What a window is prompted with: the hotwords (faster-whisper's, in every window) then
        as much of the previous text as fits in the prompt's half of the context."""
        hot = self.decoding.hotwords
        if not hot or not hot.strip():
            return previous
        room = self.decoder.n_ctx // 2 - 1
        words = self.tokenizer.encode(" " + hot.strip())[: room - 1]
        return words + list(previous)[-(room - len(words)) :] if previous else words

    def encode(self, mel: torch.Tensor, only: bool = False) -> torch.Tensor:
        """A window's log-mel [n_mels, 3000] -> its audio features [1, n_audio_ctx, C]. ``only``:
        the recording's only window, whose layers give the heap's freed pages back on the CPU
        (oasr.heap: a clip under 30 s peaks about 30 MiB lower with Whisper base)."""
        with releasing_between_layers() if only and self.device.type == "cpu" else nullcontext():
            return self.model.embed_audio(mel[None])

    def detect_language(self, features: torch.Tensor) -> tuple[str, float]:
        """The language of the first of ``features``' windows; their cross-attention keys and
        values, projected for it, are kept for the decoding of the same ``features`` that follows."""
        from ....decoding.whisper.language import detect_language

        cross_kv = self.model.cross_kv(features)
        self._detected = (features, cross_kv)
        guess = detect_language(self.model, self.tokenizer, features, cross_kv)
        log.info(
            "detected language %s with probability %.2f (set --language to skip detection)",
            guess.language,
            guess.probability,
        )
        return guess.language, guess.probability

    def _projected(self, features: torch.Tensor) -> dict | None:
        """The cross-attention keys and values language detection projected for ``features``
        (handed over once, then forgotten), or None."""
        detected, self._detected = self._detected, None
        return detected[1] if detected is not None and detected[0] is features else None

    def decode(self, features: torch.Tensor, previous: list[int], language: str, first=None):
        """One window's result with temperature fallback, and the last temperature tried; the
        prompt runs only when a temperature is decoded here (not when ``first`` passes)."""
        prompted = []
        cross_kv = self._projected(features)

        def decode_at(temperature: float):
            if not prompted:
                tokens, sot_index = self.decoder.initial_tokens(language, self.options.task, self.context(previous))
                prompted.append(self.decoder.prompt(features, tokens, sot_index, cross_kv))
            return self.decoder.decode(prompted[0], temperature)

        return decode_with_fallback(decode_at, self.decoding, first)

    def decode_batch(self, features: torch.Tensor, prompt: list[int], language: str) -> list:
        """W windows [W, n_audio_ctx, C] decoded together at the first temperature, after the same prompt."""
        tokens, sot_index = self.decoder.initial_tokens(language, self.options.task, self.context(prompt))
        prompted = self.decoder.prompt(features, tokens, sot_index, self._projected(features))
        return self.decoder.decode_batch(prompted, self.decoding.temperatures[0])

    def align(self, pieces: list[Piece], window: Window, language: str, last_speech: float):
        """One alignment pass over a window's pieces: their words and openai-whisper's segment bounds
        set in place; returns the alignment (its last speech time)."""
        from ....decoding.whisper.alignment import align_segments

        d = self.decoding
        aligned = align_segments(
            self.model,
            self.tokenizer,
            window.mel,
            [p.tokens for p in pieces],
            num_frames=window.size,
            alignment_heads=self.loaded.decoding.options.get("alignment_heads"),
            language=language,
            prepend_punctuations=d.prepend_punctuations,
            append_punctuations=d.append_punctuations,
            time_offset=window.start,
            task=self.options.task,
            segment_bounds=[(p.start, p.end) for p in pieces],
            last_speech_timestamp=last_speech,
            audio_features=window.features,
        )
        for piece, words, bounds in zip(pieces, aligned.words, aligned.segment_bounds):
            piece.words = list(words)
            if bounds is not None:
                piece.start, piece.end = bounds
        return aligned
