"""``oasr quantize --verify`` for speech LLMs: the decoder's logits and the answer's tokens.

Both models answer the clip's first window greedily with the task prompt; the source's answer
is then fed to both (teacher forcing) and their logits over the answer compared by cosine, and
the quantized answer's tokens compared position by position with the source's (agreement: the
share of the source's tokens the quantized model gave at the same place). Below the gates the
bundle fails verification (``VerificationError``) and DST is not written.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from ...errors import InputError

GATES = {"int8": {"cosine": 0.999, "agreement": 0.9}, "int4": {"cosine": 0.95, "agreement": 0.5}}


@dataclass(frozen=True)
class SpeechLlmVerifyReport:
    audio: str
    cosine: float  # decoder logits over the source's answer, teacher-forced, flattened
    agreement: float  # share of the source's answer tokens the quantized model gave at the same place
    source_text: str
    text: str
    gates: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def failures(self) -> list[str]:
        out = []
        if not self.cosine >= self.gates["cosine"]:  # NaN fails
            out.append(f"decoder logit cosine {self.cosine:.5f} < {self.gates['cosine']}")
        if not self.agreement >= self.gates["agreement"]:
            out.append(f"token agreement {self.agreement:.3f} < {self.gates['agreement']}")
        return out


def _answer_logits(engine, samples, answer: list[int]) -> torch.Tensor:
    """Logits [len(answer), V] at the answer's positions, the answer fed back (teacher forcing)."""
    model = engine.loaded.model
    prompt = engine.prompt(samples)
    if answer:
        prompt = torch.cat([prompt, model.embed_tokens(torch.tensor([answer], device=prompt.device)).to(prompt.dtype)], dim=1)
    return model.logits(prompt)[0, -len(answer) - 1 : -1] if answer else model.logits(prompt)[0, -1:]


def verify_speech_llm(models, samples: np.ndarray, audio) -> SpeechLlmVerifyReport:
    from ...options import TranscribeOptions
    from ...pipelines.transcribe.speech_llm import Engine
    from .options import SpeechLlmDecoding

    section = models[1].quantization
    if section is None:
        raise InputError("--verify compares a quantized bundle with its source; the second model is not quantized")
    window = samples[: round(models[0].feature_spec.chunk_seconds * models[0].feature_spec.sample_rate)]
    engines = [Engine(m, TranscribeOptions(), SpeechLlmDecoding()) for m in models]
    with torch.inference_mode():
        answers = [e.answer(window).tokens for e in engines]
        a, b = (_answer_logits(e, window, answers[0]) for e in engines)
    cosine = torch.nn.functional.cosine_similarity(a.flatten().double(), b.flatten().double(), dim=0).item()
    same = sum(x == y for x, y in zip(answers[0], answers[1]))
    agreement = same / len(answers[0]) if answers[0] else float(not answers[1])
    texts = [engines[0].tokenizer.decode(t) for t in answers]
    return SpeechLlmVerifyReport(str(audio), cosine, agreement, texts[0], texts[1], dict(GATES[section["scheme"]]))
