"""``oasr.synthesize``: text -> speech with a VITS (Piper) voice, sentence by sentence.

``prepare`` does everything that can fail on the input before any audio exists: it loads the
voice, resolves the speaker and the scales, takes out the characters the voice cannot say (one
warning), and phonemizes up to the first sentence with something to say (empty or
punctuation-only text is an InputError here). ``Synthesis.chunks`` then yields one sentence's
audio at a time, in order: the text is phonemized a line at a time and nothing is kept once
yielded, so memory does not grow with the text, and a caller that writes each chunk as it comes
(``oasr tts -o -``, ``--raw``) streams. ``synthesize`` collects the chunks into one ``Speech``.
"""

from __future__ import annotations

from pathlib import Path

import dataclasses
import itertools
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np
import torch

from ...errors import CapabilityError, InputError
from ...loading import LoadedModel, load_pretrained
from ...options import SynthesizeOptions
from ...results import ResultProvenance, Speech, SpokenSentence
from ...tokenizers.phonemes import PiperPhonemes, Sentence
from ...version import __version__

log = logging.getLogger("oasr")

Progress = Callable[[float, float], None]  # (characters spoken, characters in all)


@dataclass
class Chunk:
    sentence: SpokenSentence
    samples: np.ndarray  # float32 [S], the sentence then its silence


@dataclass
class Synthesis:
    """A text ready to be spoken by one voice; iterate ``chunks()`` once."""

    loaded: LoadedModel
    options: SynthesizeOptions
    sample_rate: int
    scales: dict[str, float]
    speaker_id: int | None
    provenance: ResultProvenance
    _sentences: Iterator[Sentence] = field(repr=False, default_factory=lambda: iter(()))
    _total_chars: int = 0
    _progress: Progress | None = field(default=None, repr=False)

    @property
    def wav_tags(self) -> dict[str, str]:
        """RIFF INFO tags: what made the file."""
        p = self.provenance
        what = f"synthesized speech, by oasr {__version__} with the {p.architecture} voice {p.model}"
        if p.source and p.source != p.model:
            what += f" ({p.source})"
        if p.bundle_sha256:
            what += f", bundle sha256 {p.bundle_sha256[:16]}"
        return {"ISFT": f"oasr {__version__}", "ICMT": what}

    def chunks(self) -> Iterator[Chunk]:
        model = self.loaded.model
        tokenizer: PiperPhonemes = self.loaded.tokenizer()
        device = next(model.parameters()).device
        generator = torch.Generator(device=device).manual_seed(self.options.seed)
        silence = np.zeros(round(self.options.sentence_silence * self.sample_rate), dtype=np.float32)
        warned: set[str] = set()
        at, done_chars, last_text = 0, 0, None
        for sentence in self._sentences:
            unknown = [p for p in tokenizer.unknown(sentence.phonemes) if p not in warned]
            if unknown:
                warned.update(unknown)
                log.warning("the voice has no id for phoneme(s) %s; skipped", " ".join(unknown))
            ids = torch.tensor([tokenizer.ids(sentence.phonemes)], device=device)
            with torch.inference_mode():
                audio = model(ids, **self.scales, speaker_id=self.speaker_id, generator=generator)
            samples = audio[0].float().cpu().numpy()
            spoken = SpokenSentence(
                text=sentence.text,
                phonemes="".join(sentence.phonemes),
                start=at / self.sample_rate,
                end=(at + len(samples)) / self.sample_rate,
            )
            if len(silence):
                samples = np.concatenate([samples, silence])
            at += len(samples)
            yield Chunk(spoken, samples)
            if self._progress is not None and sentence.text is not last_text:
                done_chars += len(sentence.text) + 1
                last_text = sentence.text
                self._progress(min(done_chars, self._total_chars), self._total_chars)


def prepare(
    text: str,
    model: Any = "auto",
    options: SynthesizeOptions = SynthesizeOptions(),
    *,
    device: str | torch.device | None = "cpu",
    dtype: str | torch.dtype | None = "float32",
    progress: Progress | None = None,
) -> Synthesis:
    """The voice loaded and the text checked (see the module docstring); no audio yet."""
    if not isinstance(text, str):
        raise InputError(f"the text to say must be a string, not {type(text).__name__}")
    if not text.strip():
        raise InputError("the text is empty: nothing to say")
    if "\x00" in text:  # not text at all (and no C phonemizer takes it)
        raise InputError(f"the text holds a NUL character (at character {text.index(chr(0)) + 1}): it is binary data, not text")
    loaded = load_pretrained(model, task="tts", device=device, dtype=dtype)
    voice = loaded.decoding.options
    config = loaded.config
    speaker_id = _speaker(options.speaker, voice.get("speakers", {}), config.n_speakers, loaded)
    scales = {
        "noise_scale": voice.get("noise_scale", 0.667) if options.noise_scale is None else options.noise_scale,
        "length_scale": voice.get("length_scale", 1.0) / options.speed,
        "noise_w": voice.get("noise_w", 0.8) if options.noise_w is None else options.noise_w,
    }
    tokenizer: PiperPhonemes = loaded.tokenizer()
    if options.phonemes:
        sentences = itertools.chain.from_iterable(tokenizer.from_phonemes(line) for line in text.splitlines() if line.strip())
    else:
        cleaned = tokenizer.clean(text)
        if not any(ch.isalnum() for ch in cleaned):  # espeak-ng reads some punctuation aloud ("--"); the README promises an error
            raise InputError("the text holds nothing the voice can say (only punctuation, spaces or skipped characters)")
        sentences = itertools.chain.from_iterable(tokenizer.sentences(line) for line in cleaned.splitlines() if line.strip())
    first = _first_sayable(sentences, tokenizer)
    if first is None:
        what = "phonemes" if options.phonemes else "text"
        raise InputError(f"the {what} holds nothing the voice can say (only punctuation, spaces or skipped characters)")
    provenance = loaded.result_provenance({**dataclasses.asdict(options), **scales, "speaker_id": speaker_id})
    return Synthesis(
        loaded=loaded,
        options=options,
        sample_rate=loaded.feature_spec.sample_rate,
        scales=scales,
        speaker_id=speaker_id,
        provenance=provenance,
        _sentences=itertools.chain([first], (s for s in sentences if s.sayable)),
        _total_chars=len(text),
        _progress=progress,
    )


def synthesize(
    text: str,
    model: Any = "auto",
    options: SynthesizeOptions = SynthesizeOptions(),
    *,
    device: str | torch.device | None = "cpu",
    dtype: str | torch.dtype | None = "float32",
    progress: Progress | None = None,
) -> Speech:
    """``text`` spoken by ``model`` (a LoadedModel, a registry name such as
    ``piper-en-us-joe-medium``, ``auto``, a native bundle or a Piper voice's .onnx), as one
    ``Speech``. The CPU in fp32 by default: VITS is small and its flows want the precision.
    ``progress(characters_done, characters_total)`` is called after each line of text."""
    plan = prepare(text, model, options, device=device, dtype=dtype, progress=progress)
    parts, sentences = [], []
    for chunk in plan.chunks():
        parts.append(chunk.samples)
        sentences.append(chunk.sentence)
    return Speech(
        samples=np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32),
        sample_rate=plan.sample_rate,
        sentences=tuple(sentences),
        provenance=plan.provenance,
    )


def _first_sayable(sentences: Iterator[Sentence], tokenizer: PiperPhonemes) -> Sentence | None:
    for sentence in sentences:
        if sentence.sayable and any(p in tokenizer.id_map for p in sentence.phonemes):
            return sentence
    return None


def _speaker(speaker, speakers: dict[str, int], n_speakers: int, loaded: LoadedModel) -> int | None:
    """The speaker id ``--speaker`` names (an id or a name of the voice's map)."""
    label = _voice_name(loaded)
    if n_speakers <= 1:
        if speaker is not None:
            raise CapabilityError(f"{label} has one speaker; --speaker applies to multi-speaker voices only")
        return None
    if speaker is None:
        return 0
    if isinstance(speaker, str) and not speaker.isdigit():
        if speaker not in speakers:
            names = ", ".join(sorted(speakers)[:10]) or "none"
            raise InputError(f"{label} has no speaker {speaker!r}; its speakers include: {names}")
        return speakers[speaker]
    sid = int(speaker)
    if not 0 <= sid < n_speakers:
        raise InputError(f"--speaker {sid}: {label} has speakers 0..{n_speakers - 1}")
    return sid


def _voice_name(loaded: LoadedModel) -> str:
    """The voice as the user knows it: the name asked for, or for ``auto`` the registry's name of
    the voice it resolved to (its messages would otherwise say "auto")."""
    identity = loaded.identity
    if identity is None:
        return "this voice"
    if identity.requested not in ("", "auto"):
        return identity.requested
    from ...hub.resolve import bundle_origin

    origin = bundle_origin(identity.bundle) if identity.bundle else None
    name = (origin or {}).get("name")
    return name if name and name != "local" else "the default voice"
