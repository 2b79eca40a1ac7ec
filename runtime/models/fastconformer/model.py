"""NVIDIA's FastConformer (Rekesh et al. 2023) with its CTC, RNN-T, TDT or hybrid head.

One network for NeMo checkpoints and Hugging Face Parakeet: tensors keep NeMo's state-dict
names (``encoder.*``, ``decoder.*``, ``joint.*``, a hybrid's ``ctc_decoder.*``). Decoding lives
in ``oasr.decoding`` (``ctc.py``, ``transducer.py``); the model only gives the tensors they need.
Shapes: B batch, F mel channels, T frames, C encoder width, V labels with the blank.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor

from ..base import OasrModel
from .config import FastConformerConfig
from .encoder import ConformerEncoder
from .heads import ConvASRDecoder, JointNetwork, PredictionNetwork


class FastConformer(OasrModel):
    config_class: ClassVar = FastConformerConfig
    capabilities: ClassVar = frozenset({"transcribe", "timestamps", "word_timestamps"})
    display_name: ClassVar = "FastConformer"
    # Quantized: every linear layer and kernel-1 conv of the encoder (attention, feed-forwards,
    # the conv module's pointwise pair, the subsampling's output projection), the prediction
    # network's label table at int8. Float: the heads (CTC conv, joint), the LSTM, depthwise and
    # subsampling convs, norms. Evidence on jfk.wav, tiny random Parakeets (128 wide, 2 layers),
    # encoder / head-logit cosine against fp32 and bytes against fp32:
    # - CTC, linear layers only: int8 0.99989 / 0.99989 at 36%, int4 0.978 / 0.980 at 25%; adding
    #   the pointwise convs: int8 0.99986 / 0.99988 at 28%, int4 0.971 / 0.970 at 16% (they are an
    #   eighth of a 0.6B's weights: worth it); adding the CTC head: 0.99982 / 0.968 for 0.2% of a
    #   0.6B's bytes, so the head stays float.
    # - RNN-T joint (teacher-forced on the fp32 path): float 0.99988 int8 / 0.981 int4; quantized
    #   0.99983 / 0.971, for about 1% of a 0.6B's bytes: float. The label table at int8 changed
    #   nothing measurable (0.99983 either way).
    # The LSTM has no integer kernel here and is ~1% of the weights; the depthwise and subsampling
    # convs ~0.1%.
    quant_refusal: ClassVar = None
    quant_keep: ClassVar = ("*decoder_layers.0.weight", "joint.*")

    def __init__(self, config: FastConformerConfig):
        super().__init__(config)
        self.encoder = ConformerEncoder(config)
        if config.head == "ctc":
            self.decoder = ConvASRDecoder(config)
        else:
            self.decoder = PredictionNetwork(config)
            self.joint = JointNetwork(config)
            if config.hybrid_ctc:
                self.ctc_decoder = ConvASRDecoder(config)

    @property
    def output_stride(self) -> int:
        """Feature frames per encoder frame."""
        return self.config.subsampling_factor

    @property
    def blank_id(self) -> int:
        return self.config.vocab_size

    @property
    def has_ctc(self) -> bool:
        return self.config.head == "ctc" or self.config.hybrid_ctc

    def encode(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """features [B, F, T], lengths [B] -> encoded [B, T', C], lengths [B]."""
        return self.encoder(features, lengths)

    def ctc_logits(self, encoded: Tensor) -> Tensor:
        """encoded [B, T, C] -> CTC logits [B, T, V] (a hybrid's auxiliary head)."""
        head = self.decoder if self.config.head == "ctc" else self.ctc_decoder
        return head(encoded)

    def ctc_log_probs(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """The ``ctc`` engine's entry: features -> log-probabilities [B, T', V], lengths."""
        encoded, lengths = self.encode(features, lengths)
        return self.ctc_logits(encoded).float().log_softmax(-1), lengths

    # Transducer pieces, used step by step by oasr.decoding.transducer.
    def project_encoder(self, encoded: Tensor) -> Tensor:
        """encoded [B, T, C] -> the joint's encoder input [B, T, J]."""
        return self.joint.enc(encoded)

    def predict(self, labels: Tensor, state=None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """labels [B] -> the joint's prediction input [B, J] after them, the new LSTM state."""
        out, state = self.decoder(labels[:, None], state)
        return self.joint.pred(out[:, 0]), state

    def joint_logits(self, enc_proj: Tensor, pred_proj: Tensor) -> Tensor:
        """[..., J] + [..., J] -> label logits [..., V] then duration logits [..., K] for TDT."""
        return self.joint(enc_proj, pred_proj)

    def forward(self, features: Tensor, lengths: Tensor) -> Tensor:
        encoded, _ = self.encode(features, lengths)
        return encoded
