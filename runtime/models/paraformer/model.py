"""FunASR's Paraformer (Gao et al. 2022): non-autoregressive speech recognition in one forward.

LFR features -> CMVN (``am.mvn``'s rows, computed buffers) -> SAN-M encoder -> CIF predictor
(how many tokens, and an acoustic embedding each) -> SAN-M decoder over those embeddings ->
a distribution per token. Tensors keep FunASR's names (``encoder.*``, ``predictor.*``,
``decoder.*``). Reading tokens and times out of it is ``oasr.decoding.cif``'s work.
Shapes: B batch, F = input_size LFR features, T frames, N tokens, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from ..base import OasrModel
from .config import ParaformerConfig
from .decoder import ParaformerDecoder
from .encoder import SanmEncoder
from .predictor import CifOutput, CifPredictor


@dataclass
class ParaformerOutput:
    encoded: Tensor  # [B, T, C]
    lengths: Tensor  # [B] encoder frames
    cif: CifOutput
    token_lengths: Tensor  # [B] tokens per utterance (the predictor's count, rounded)
    log_probs: Tensor | None  # [B, N, V] float32; None when no utterance fired a token


class Paraformer(OasrModel):
    config_class: ClassVar = ParaformerConfig
    capabilities: ClassVar = frozenset({"transcribe", "timestamps", "word_timestamps"})
    display_name: ClassVar = "Paraformer"
    computed_buffers: ClassVar = ("cmvn_shift", "cmvn_scale")
    # Quantized: the encoder's linear layers (attention, feed-forwards). Float: the predictor, the
    # decoder, the FSMN convs, norms. Evidence on jfk.wav's first 4 s, tiny random Paraformers (64
    # wide, 3 + 3 layers, zh / en vocabularies), encoder / decoder-logit cosine against fp32 over
    # the source's token count: encoder only, int8 0.99977 / 0.99981 and 0.99983 / 0.99962, int4
    # 0.9939 / 0.985 and 0.9956 / 0.968; adding the decoder's layers, int8 0.99927 and 0.99876
    # (under the 0.999 gate), int4 0.970 and 0.960: the decoder stays float.
    quant_refusal: ClassVar = None
    quant_keep: ClassVar = ("predictor.*", "decoder.*")

    def __init__(self, config: ParaformerConfig):
        super().__init__(config)
        self.encoder = SanmEncoder(config)
        self.predictor = CifPredictor(config)
        self.decoder = ParaformerDecoder(config)
        # Filled from the config when the weights are materialised (oasr.models.weights).
        self.register_buffer("cmvn_shift", torch.empty(config.input_size))
        self.register_buffer("cmvn_scale", torch.empty(config.input_size))

    def computed_buffer_values(self) -> dict[str, Tensor]:
        return {
            "cmvn_shift": torch.tensor(self.config.cmvn_shift, dtype=torch.float32),
            "cmvn_scale": torch.tensor(self.config.cmvn_scale, dtype=torch.float32),
        }

    @property
    def output_stride(self) -> int:
        """Feature frames per encoder frame: LFR features are the encoder's frames."""
        return 1

    def normalise(self, features: Tensor) -> Tensor:
        """[B, F, T] LFR features -> [B, T, F] after FunASR's CMVN ((x + shift) * scale, float32)."""
        x = features.transpose(1, 2).float()
        return ((x + self.cmvn_shift) * self.cmvn_scale).to(features.dtype)

    def encode(self, features: Tensor, lengths: Tensor) -> Tensor:
        """features [B, F, T] -> encoded [B, T, C]."""
        return self.encoder(self.normalise(features), lengths)

    def recognise(self, features: Tensor, lengths: Tensor) -> ParaformerOutput:
        """The ``cif`` engine's entry: encoder, predictor, then the decoder's log-probabilities."""
        encoded = self.encode(features, lengths)
        cif = self.predictor(encoded, lengths)
        token_lengths = cif.token_num.round().long()
        if int(token_lengths.max()) < 1:
            return ParaformerOutput(encoded, lengths, cif, token_lengths, None)
        logits = self.decoder(encoded, lengths, cif.embeds.to(encoded.dtype), token_lengths)
        return ParaformerOutput(encoded, lengths, cif, token_lengths, logits.float().log_softmax(-1))

    def forward(self, features: Tensor, lengths: Tensor) -> Tensor:
        return self.encode(features, lengths)
