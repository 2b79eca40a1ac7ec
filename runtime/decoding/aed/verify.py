"""``oasr quantize --verify`` for the ``aed`` family: the encoder output, the CTC logits and the
attention decoder's logits over the first chunk, and the WER change over the whole clip.

The decoder is compared teacher-forced on the source's best CTC prefix-beam hypothesis (both
models fed the same tokens, so the comparison is of the same states); U2++'s right-to-left
decoder likewise on the reversed tokens. The gates are the encoder families' (``ENCODER_GATES``
of ``oasr.quant.verify``), the decoder held to the head's gate.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from ...errors import InputError
from ...quant.verify import ENCODER_GATES, _cosine, _first_chunk, word_error_rate
from .search import _padded, ctc_prefix_beam_search


@dataclass(frozen=True)
class AedVerifyReport:
    audio: str
    cosine: float  # the CTC head's logits over the first chunk, flattened
    encoder_cosine: float
    decoder_cosine: float | None  # teacher-forced decoder logits (both directions); None without a decoder
    wer_change: float
    source_text: str
    text: str
    gates: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def failures(self) -> list[str]:
        out = []
        if not self.encoder_cosine >= self.gates["encoder_cosine"]:
            out.append(f"encoder cosine {self.encoder_cosine:.5f} < {self.gates['encoder_cosine']}")
        if not self.cosine >= self.gates["cosine"]:
            out.append(f"CTC logit cosine {self.cosine:.5f} < {self.gates['cosine']}")
        if self.decoder_cosine is not None and not self.decoder_cosine >= self.gates["cosine"]:
            out.append(f"decoder logit cosine {self.decoder_cosine:.5f} < {self.gates['cosine']}")
        if not self.wer_change <= self.gates["wer_change"]:
            out.append(f"WER change {self.wer_change:.1%} > {self.gates['wer_change']:.0%}")
        return out


def aed_outputs(loaded, samples: np.ndarray, tokens: tuple[int, ...] | None = None):
    """(encoder output [T, C], CTC logits [T, V], decoder logits or None, the tokens fed)."""
    model, d = loaded.model, loaded.decoding
    with torch.inference_mode():
        encoded, lengths = _first_chunk(loaded, samples)
        logits = model.ctc_logits(encoded)[0]
        if tokens is None:
            nbest = ctc_prefix_beam_search(logits.float().log_softmax(-1).cpu(), d.blank_id, 10)
            tokens = nbest[0].tokens if nbest else ()
        decoded = None
        if model.has_decoder:
            parts = [model.decoder_log_probs(_padded([tokens], d.bos_id, d.eos_id, encoded.device), encoded)]
            if model.has_reverse_decoder:
                parts.append(model.decoder_log_probs(_padded([tokens[::-1]], d.bos_id, d.eos_id, encoded.device), encoded, reverse=True))
            decoded = torch.cat([p.float().cpu().flatten() for p in parts])
    return encoded[0].float().cpu(), logits.float().cpu(), decoded, tokens


def verify_aed(models, samples: np.ndarray, audio) -> AedVerifyReport:
    import oasr

    section = models[1].quantization
    if section is None:
        raise InputError("--verify compares a quantized bundle with its source; the second model is not quantized")
    texts = [oasr.transcribe(samples, m).text for m in models]
    enc_a, ctc_a, dec_a, tokens = aed_outputs(models[0], samples)
    enc_b, ctc_b, dec_b, _ = aed_outputs(models[1], samples, tokens)
    return AedVerifyReport(
        str(audio), _cosine(ctc_a, ctc_b), _cosine(enc_a, enc_b), None if dec_a is None else _cosine(dec_a, dec_b),
        word_error_rate(texts[0], texts[1]), texts[0], texts[1], dict(ENCODER_GATES[section["scheme"]]),
    )
