"""WeNet's U2 / U2++ hybrid CTC/attention model (Zhang et al. 2020; Wu et al. 2021).

A shared encoder (Conformer or Transformer, ``encoder.*``), a CTC head (``ctc.ctc_lo``) and, when
the recipe kept it, an attention decoder (``decoder.*``; U2++'s ``decoder.left_decoder.*`` and
``decoder.right_decoder.*``). Decoding lives in ``oasr.decoding.aed``: the model gives the
encoder output, the CTC log-probabilities and the decoder's scores. Shapes: B batch, F mel bands,
T frames, C width, V units (blank first, ``<sos/eos>`` last in WeNet's ``units.txt``).
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor, nn

from ..base import OasrModel
from ..transformer_decoder import attention_decoder
from .config import WenetConfig
from .encoder import WenetEncoder


class CTC(nn.Module):
    def __init__(self, cfg: WenetConfig):
        super().__init__()
        self.ctc_lo = nn.Linear(cfg.d_model, cfg.vocab_size)


class WenetU2(OasrModel):
    config_class: ClassVar = WenetConfig
    # The class names all it may do; an instance without a decoder drops ``ctc_aed_rescoring``.
    capabilities: ClassVar = frozenset({"transcribe", "timestamps", "word_timestamps", "ctc", "ctc_aed_rescoring"})
    display_name: ClassVar = "WeNet U2 / U2++"
    # Quantized: every linear layer of the encoder and the decoder (attention, feed-forwards,
    # the subsampling's output, the decoder's output layer) and the conv module's pointwise
    # pair. Float: the CTC head (its log-probabilities pick the n-best that rescoring reads),
    # the subsampling and depthwise convs, norms, the decoder's token table. Evidence on jfk.wav,
    # tiny random U2++ Conformers (tests/decoding/aed/test_aed_verify.py): encoder and CTC-logit
    # cosine against fp32 above 0.999 at int8, the decoder's rescoring logits likewise.
    quant_refusal: ClassVar = None
    quant_keep: ClassVar = ("ctc.*", "*embed.0.weight")

    def __init__(self, config: WenetConfig):
        super().__init__(config)
        self.encoder = WenetEncoder(config)
        self.ctc = CTC(config)
        decoder = config.decoder_config()
        if decoder is not None:
            self.decoder = attention_decoder(decoder)
        if not config.decoder:
            self.capabilities = type(self).capabilities - {"ctc_aed_rescoring"}

    @property
    def output_stride(self) -> int:
        return self.config.subsampling

    @property
    def has_decoder(self) -> bool:
        return bool(self.config.decoder)

    @property
    def has_reverse_decoder(self) -> bool:
        return self.config.decoder == "bitransformer"

    def encode(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """features [B, F, T], lengths [B] -> encoded [B, T', C], lengths [B]."""
        return self.encoder(features, lengths)

    def ctc_logits(self, encoded: Tensor) -> Tensor:
        return self.ctc.ctc_lo(encoded)

    def ctc_log_probs_of(self, encoded: Tensor) -> Tensor:
        return self.ctc_logits(encoded).float().log_softmax(-1)

    def ctc_log_probs(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        encoded, lengths = self.encode(features, lengths)
        return self.ctc_log_probs_of(encoded), lengths

    def decoder_log_probs(self, tokens: Tensor, encoded: Tensor, reverse: bool = False) -> Tensor:
        """tokens [N, L] (sos first) against one utterance's encoded [1, T, C] -> [N, L, V]."""
        return self.decoder.log_probs(tokens, encoded.expand(tokens.shape[0], -1, -1), None, reverse)

    def decoder_step(self, prefixes: Tensor, encoded: Tensor) -> Tensor:
        """prefixes [N, i] against encoded [1, T, C] -> the next token's log-probabilities [N, V]."""
        return self.decoder.step(prefixes, encoded.expand(prefixes.shape[0], -1, -1))

    def forward(self, features: Tensor, lengths: Tensor) -> Tensor:
        encoded, _ = self.encode(features, lengths)
        return encoded
