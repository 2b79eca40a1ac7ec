"""Compare a quantized bundle with its source on one clip: output cosine and transcript change.

Each decoding family declares its rule (``DecodingFamily.verify``); the built-in rules are here.
Whisper (``verify_whisper``): the decoder logits of the source's first-window transcript,
teacher-forced; reported, not gated. Encoder models (``verify_ctc``, ``verify_transducer``): the
encoder output and the head's logits over the first chunk (CTC: every frame; a transducer: each
frame's joint logits at the prediction state the source's greedy path had reached there, both
models fed the same labels), and the WER of the quantized transcript against the source's over
the whole clip. These are gated by ``ENCODER_GATES``: a bundle below them fails verification
(``VerificationError``).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..decoding.family import family
from ..errors import CapabilityError, InputError, VerificationError

_WORD = re.compile(r"[^\w]+")


@dataclass(frozen=True)
class VerifyReport:
    audio: str
    cosine: float  # decoder logits of the source's first-window transcript, teacher-forced, flattened
    wer_change: float  # word error rate of the quantized transcript against the source's transcript
    source_text: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def failures(self) -> list[str]:
        return []  # reported, not gated


# Gates for the encoder families, per scheme. On tiny random Parakeets (128 x 2; see the evidence
# in oasr.models.fastconformer.model) int8 measured encoder and head cosines of 0.9998-0.9999 and
# int4 0.97-0.98: the gates sit several times further from 1, while one layer's scales off by 4x
# (tests/test_quantize_fastconformer.py's deliberate break) falls below them. Random weights flip
# near-tied labels (int8 changed their jfk transcript by 2-13 WER points) where trained ones
# change by a point or two (Whisper base int8: none), so the WER gate catches a broken model only.
ENCODER_GATES = {
    "int8": {"encoder_cosine": 0.999, "cosine": 0.999, "wer_change": 0.25},
    "int4": {"encoder_cosine": 0.95, "cosine": 0.95, "wer_change": 0.25},
}


@dataclass(frozen=True)
class EncoderVerifyReport:
    audio: str
    cosine: float  # the head's logits over the first chunk, flattened
    encoder_cosine: float  # the encoder output over the first chunk, flattened
    wer_change: float  # word error rate of the quantized transcript against the source's transcript
    source_text: str
    text: str
    gates: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def failures(self) -> list[str]:
        """The gates missed, in words (empty when it passes)."""
        out = []
        if not self.encoder_cosine >= self.gates["encoder_cosine"]:  # NaN fails
            out.append(f"encoder cosine {self.encoder_cosine:.5f} < {self.gates['encoder_cosine']}")
        if not self.cosine >= self.gates["cosine"]:
            out.append(f"head logit cosine {self.cosine:.5f} < {self.gates['cosine']}")
        if not self.wer_change <= self.gates["wer_change"]:
            out.append(f"WER change {100 * self.wer_change:.1f} points > {100 * self.gates['wer_change']:g}")
        return out


def _words(text: str) -> list[str]:
    return _WORD.sub(" ", text.lower().replace("'", "")).split()


def word_error_rate(reference: str, hypothesis: str) -> float:
    """Word-level Levenshtein distance over the reference length (lowercased, punctuation dropped)."""
    ref, hyp = _words(reference), _words(hypothesis)
    previous = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, start=1):
        current = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, start=1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (r != h))
        previous = current
    return previous[-1] / len(ref) if ref else float(bool(hyp))


def first_window_logits(loaded, samples: np.ndarray, tokens: list[int]) -> torch.Tensor:
    """Logits [len(tokens), V] fp32 of a Whisper model teacher-forced on ``tokens`` over the first 30 s."""
    from ..features.logmel import log_mel_spectrogram

    spec = loaded.feature_spec
    frames = int(spec.chunk_seconds * spec.sample_rate) // spec.hop_length
    audio = torch.from_numpy(np.ascontiguousarray(samples, dtype=np.float32))
    mel = log_mel_spectrogram(audio, spec, padding=frames * spec.hop_length)[:, :frames]
    model = loaded.model
    param = next(model.parameters())
    with torch.inference_mode():
        features = model.embed_audio(mel[None].to(param.device, param.dtype))
        return model.logits(torch.tensor([tokens], device=param.device), features)[0].float().cpu()


def _cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return torch.nn.functional.cosine_similarity(a.flatten().double(), b.flatten().double(), dim=0).item()


def first_chunk_features(loaded, samples: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """(features [1, F, T], lengths [1]) of the first chunk of ``samples``, on the model's device."""
    from ..features import feature_extractor
    from ..pipelines.transcribe.chunked import CHUNK_LENGTH

    spec, model = loaded.feature_spec, loaded.model
    param = next(model.parameters())
    first = samples[: int(loaded.decoding.options.get("chunk_length", CHUNK_LENGTH) * spec.sample_rate)]
    audio = torch.from_numpy(np.ascontiguousarray(first, dtype=np.float32)).to(param.device)
    features = feature_extractor(spec)(audio, spec)[None].to(param.dtype)
    return features, torch.tensor([features.shape[-1]], device=param.device)


def _first_chunk(loaded, samples: np.ndarray):
    """(encoder output [1, T, C], lengths) of an encoder model over the first chunk of ``samples``."""
    return loaded.model.encode(*first_chunk_features(loaded, samples))


def ctc_outputs(loaded, samples: np.ndarray, labels=None):
    """(encoder output [T, C], CTC logits [T, V], None) over the first chunk."""
    with torch.inference_mode():
        encoded, _ = _first_chunk(loaded, samples)
        logits = loaded.model.ctc_logits(encoded)[0]
    return encoded[0].float().cpu(), logits.float().cpu(), None


def transducer_outputs(loaded, samples: np.ndarray, labels: list | None = None):
    """(encoder output [T, C], joint logits [T, V], the greedy labels) over the first chunk.
    ``labels`` (the source's path, as returned): teacher-force these instead of decoding, so both
    models are compared at the same prediction states."""
    from ..decoding.transducer.search import greedy_transducer

    model = loaded.model
    param = next(model.parameters())
    with torch.inference_mode():
        encoded, lengths = _first_chunk(loaded, samples)
        if labels is None:
            labels = [(t.id, t.frame) for t in greedy_transducer(
                model, encoded, lengths, blank_id=loaded.decoding.blank_id,
                durations=tuple(loaded.decoding.options.get("durations", ())),
                max_symbols=loaded.decoding.options.get("max_symbols_per_step", 10),
            )[0]]
        pred = _prediction_path(model, [model.blank_id] + [i for i, _ in labels], param.device)
        frames = torch.arange(encoded.shape[1])
        emitted = torch.tensor([f for _, f in labels], dtype=torch.long)
        state = torch.searchsorted(emitted, frames, right=False)  # labels emitted before each frame
        logits = model.joint_logits(model.project_encoder(encoded[0]), pred[state.to(param.device)])
        return encoded[0].float().cpu(), logits.float().cpu(), labels


def _prediction_path(model, ids: list[int], device) -> torch.Tensor:
    """The joint's prediction input after each prefix of ``ids`` [U + 1, J], stepped through the
    model's ``predict`` as the searches do (an LSTM state or a label context alike)."""
    out, state = [], None
    for i in ids:
        g, state = model.predict(torch.tensor([i], device=device), state)
        out.append(g[0])
    return torch.stack(out)


def verify_ctc(models, samples: np.ndarray, audio) -> EncoderVerifyReport:
    return _verify_encoder(models, samples, audio, ctc_outputs)


def verify_transducer(models, samples: np.ndarray, audio) -> EncoderVerifyReport:
    return _verify_encoder(models, samples, audio, transducer_outputs)


def verify_encoder_outputs(models, samples: np.ndarray, audio, outputs) -> EncoderVerifyReport:
    """The encoder families' comparison: ``outputs(loaded, samples, path=None)`` gives (encoder
    output, head logits, the path the source took), the quantized model is fed the source's path."""
    return _verify_encoder(models, samples, audio, outputs)


def _verify_encoder(models, samples: np.ndarray, audio, outputs) -> EncoderVerifyReport:
    import oasr

    texts = [oasr.transcribe(samples, m).text for m in models]
    enc_a, logits_a, labels = outputs(models[0], samples)
    enc_b, logits_b, _ = outputs(models[1], samples, labels)
    section = models[1].quantization
    if section is None:
        raise InputError("--verify compares a quantized bundle with its source; the second model is not quantized")
    scheme = section["scheme"]
    return EncoderVerifyReport(
        str(audio), _cosine(logits_a, logits_b), _cosine(enc_a, enc_b), word_error_rate(texts[0], texts[1]),
        texts[0], texts[1], dict(ENCODER_GATES[scheme]),
    )


def check_gates(report) -> None:
    """Raise ``VerificationError`` when ``report`` misses a gate (Whisper's report has none)."""
    failures = report.failures()
    if failures:
        raise VerificationError(f"verification on {report.audio} failed: {'; '.join(failures)}")


def verify(source, quantized, audio: str | Path, *, device: str = "cpu") -> VerifyReport | EncoderVerifyReport:
    """Transcribe ``audio`` with both models (default options, seeded) and compare.

    ``source``/``quantized``: bundle paths or ``LoadedModel``s. Only transcription models can be
    verified, each by its decoding family's rule (``DecodingFamily.verify``: a function of the two
    models, the samples and the clip's name returning a report with ``failures()``, which
    ``check_gates`` applies).
    """
    import oasr
    from ..io.audio import load_audio
    from ..loading import LoadedModel

    models = [m if isinstance(m, LoadedModel) else oasr.load_pretrained(m, device=device, dtype="float32") for m in (source, quantized)]
    if "transcribe" not in models[0].capabilities:
        raise CapabilityError(f"--verify compares transcripts; {models[0].architecture} models do not transcribe")
    samples = load_audio(audio, models[0].feature_spec.sample_rate)
    return family(models[0].decoding.family).load_verify()(models, samples, audio)


def verify_whisper(models, samples: np.ndarray, audio) -> VerifyReport:
    import oasr

    transcripts = []
    for m in models:
        torch.manual_seed(0)  # temperature fallback samples alike
        transcripts.append(oasr.transcribe(samples, m))
    texts = [t.text for t in transcripts]
    window = models[0].feature_spec.chunk_seconds
    first = "".join(s.text for s in transcripts[0].segments if s.end <= window)
    tokenizer = models[0].tokenizer()
    limit = models[0].config.n_text_ctx // 2
    tokens = (tokenizer.sot_sequence(transcripts[0].language or None, timestamps=False) + tokenizer.encode(first))[:limit]
    a, b = (first_window_logits(m, samples, tokens) for m in models)
    cosine = torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0).item()
    return VerifyReport(str(audio), cosine, word_error_rate(texts[0], texts[1]), texts[0], texts[1])


def verify_clip(path: str | Path | None) -> Path:
    """The clip ``--verify`` runs: the one given, else pyannote-audio's sample when that is installed.

    oasr ships no audio; the pyannote sample (30 s, two speakers, telephone, MIT) is used because
    a machine that has it needs no download for it.
    """
    from importlib.util import find_spec

    from ..io.audio import check_audio_path

    if path is not None:
        return check_audio_path(path)
    try:
        spec = find_spec("pyannote.audio")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin is not None:
        sample = Path(spec.origin).parent / "sample" / "sample.wav"
        if sample.is_file():
            return sample
    raise InputError("--verify needs a clip: pass --verify-audio FILE (oasr ships none, and pyannote-audio's sample is not installed)")
