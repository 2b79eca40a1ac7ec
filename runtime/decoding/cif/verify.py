"""``--verify`` for CIF models (Paraformer): encoder output, decoder logits and transcript change.

Over the first chunk, both models' encoder outputs, then each decoder's logits over the token
count the source's predictor gave (the quantized model's own CIF embeddings, cut or zero-padded
to that count, so a count off by one still compares token by token); and the WER of the
quantized transcript against the source's over the whole clip, each CJK character counted as a
word (Paraformer's Chinese transcripts have no spaces, so one wrong character would be a whole
clip's error). Gated by ``ENCODER_GATES``.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import torch

from ...quant.verify import EncoderVerifyReport, first_chunk_features, verify_encoder_outputs, word_error_rate

# CJK ideographs, kana and hangul: written without spaces, one token a character
_CJK = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff])")


def unit_error_rate(reference: str, hypothesis: str) -> float:
    """``word_error_rate`` with every CJK character a word of its own."""
    return word_error_rate(_CJK.sub(r" \1 ", reference), _CJK.sub(r" \1 ", hypothesis))


def cif_outputs(loaded, samples: np.ndarray, count: int | None = None):
    """(encoder output [T, C], decoder logits [N, V], N) over the first chunk; N is ``count``
    (the source's) when given, else the predictor's own."""
    model = loaded.model
    with torch.inference_mode():
        features, lengths = first_chunk_features(loaded, samples)
        encoded = model.encode(features, lengths)
        cif = model.predictor(encoded, lengths)
        n = int(cif.token_num.round()[0]) if count is None else count
        embeds = cif.embeds[:, :n].to(encoded.dtype)
        if embeds.shape[1] < n:  # the quantized predictor fired fewer tokens: those past it are zero, as past a count
            embeds = torch.nn.functional.pad(embeds, (0, 0, 0, n - embeds.shape[1]))
        logits = model.decoder(encoded, lengths, embeds, torch.tensor([n], device=encoded.device))[0] if n else encoded.new_zeros(0, 1)
    return encoded[0].float().cpu(), logits.float().cpu(), n


def verify_cif(models, samples: np.ndarray, audio) -> EncoderVerifyReport:
    report = verify_encoder_outputs(models, samples, audio, cif_outputs)
    return dataclasses.replace(report, wer_change=unit_error_rate(report.source_text, report.text))
