"""Compare a quantized bundle with its source on one clip: decoder-logit cosine and transcript change."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import CapabilityError, InputError

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


def verify(source, quantized, audio: str | Path, *, device: str = "cpu") -> VerifyReport:
    """Transcribe ``audio`` with both models (default options, seeded) and compare.

    ``source``/``quantized``: bundle paths or ``LoadedModel``s. Only transcription models can be
    verified today.
    """
    import oasr
    from ..io.audio import load_audio
    from ..loading import LoadedModel

    models = [m if isinstance(m, LoadedModel) else oasr.load_pretrained(m, device=device, dtype="float32") for m in (source, quantized)]
    if "transcribe" not in models[0].capabilities:
        raise CapabilityError(f"--verify compares transcripts; {models[0].architecture} models do not transcribe")
    samples = load_audio(audio, models[0].feature_spec.sample_rate)
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
