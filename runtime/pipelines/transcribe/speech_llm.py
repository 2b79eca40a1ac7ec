"""The ``speech_llm`` engine: an audio-conditioned language model asked about each 30 s window.

The model (``oasr.models.qwen2_audio``) gives no timestamps: the audio is cut by the shared
chunking (``longform.plan_chunks``, windows of the encoder's length without overlap, since
answers cannot be merged word by word), each window is one segment timed by its bounds, and its
text is the model's answer to the prompt (``oasr.decoding.speech_llm.prompt``). A detected
language is the tag the model writes first; with ``--prompt`` the answer is the text as it is.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from ...decoding.speech_llm.options import SpeechLlmDecoding
from ...decoding.speech_llm.prompt import prompt_ids, prompt_text
from ...decoding.speech_llm.search import Hypothesis, beam, greedy
from ...errors import CapabilityError
from ...features import feature_extractor
from ...models.qwen2_audio import KVCache, feature_lengths
from ...options import LANGUAGES, TranscribeOptions
from ...results import Segment
from . import EngineOutput
from .longform import plan_chunks

log = logging.getLogger("oasr")


class Engine:
    def __init__(self, loaded, options: TranscribeOptions, section: SpeechLlmDecoding):
        if "prompt" not in loaded.capabilities and section.prompt is not None:
            raise CapabilityError(f"--prompt: this {loaded.architecture} model takes no instruction")
        self.loaded, self.options, self.section = loaded, options, section
        self.tokenizer = loaded.tokenizer()
        defaults = loaded.decoding.options
        self.stops = set(defaults.get("eos_ids") or ([loaded.decoding.eos_id] if loaded.decoding.eos_id is not None else []))
        if not self.stops:
            raise CapabilityError(f"this {loaded.architecture} bundle names no stop token; re-convert it with its generation_config.json")
        self.max_new = section.max_new_tokens or int(defaults.get("max_new_tokens", 256))
        self.text = prompt_text(self.tokenizer, options.task, options.language, section.prompt, section.chat)
        self._tags = {self.tokenizer.special(f"<|{code}|>"): code for code in LANGUAGES}
        self._tags.pop(None, None)

    def prompt(self, samples: np.ndarray | torch.Tensor) -> torch.Tensor:
        """One window of at most the encoder's length -> the prompt's embeddings [1, T, C]."""
        spec = self.loaded.feature_spec
        model = self.loaded.model
        parameter = next(model.parameters())
        window = round(spec.chunk_seconds * spec.sample_rate)
        audio = torch.as_tensor(samples, dtype=torch.float32, device=parameter.device)
        mel = feature_extractor(spec)(audio, spec, padding=window - audio.shape[-1])
        frames = torch.tensor([-(-audio.shape[-1] // spec.hop_length)], device=parameter.device)
        features = model.embed_audio(mel[None].to(parameter.dtype), frames)[0]
        ids = prompt_ids(self.tokenizer, self.text, int(feature_lengths(frames)[0]))
        return model.embed_prompt(torch.tensor(ids, device=parameter.device), features)

    def answer(self, samples: np.ndarray | torch.Tensor) -> Hypothesis:
        """One window of at most the encoder's length -> the model's answer."""
        model = self.loaded.model
        prompt = self.prompt(samples)
        cache = KVCache()
        if self.section.beam_size == 1:
            return greedy(model, prompt, cache, self.stops, self.max_new)
        return beam(model, prompt, cache, self.stops, self.max_new, self.section.beam_size, self.section.length_penalty)

    def run(self, samples: np.ndarray, speech_map, duration: float, progress) -> EngineOutput:
        spec = self.loaded.feature_spec
        rate = spec.sample_rate
        segments: list[Segment] = []
        language = self.options.language or ""
        for chunk in plan_chunks(len(samples), rate, spec.chunk_seconds, 0.0):
            found = self.answer(samples[chunk.start : chunk.end])
            tokens = found.tokens
            if tokens and tokens[0] in self._tags and self.section.prompt is None:
                language = language or self._tags[tokens[0]]
            text = self.tokenizer.decode(tokens)
            if segments and text and not text[0].isspace():
                text = " " + text
            start, end = chunk.start / rate, chunk.end / rate
            if speech_map is not None:
                start, end = speech_map.to_original(start), speech_map.to_original(end)
            if text.strip():
                segments.append(Segment(id=len(segments), start=round(start, 3), end=round(min(end, duration), 3), text=text, tokens=tuple(tokens)))
            if progress is not None:
                progress(min(end, duration), duration)
        return EngineOutput(segments, language if segments else "", None)
