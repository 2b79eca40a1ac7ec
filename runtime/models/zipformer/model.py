"""icefall's Zipformer ASR model (``AsrModel``) with one head: CTC or the stateless transducer.

Tensors keep icefall's names (``encoder_embed.*``, ``encoder.*``, ``ctc_output.1.*``,
``decoder.*``, ``joiner.*``). Decoding lives in ``oasr.decoding``; the model gives the tensors
the CTC engine (``ctc_log_probs``) and the transducer searches (``encode``, ``project_encoder``,
``predict``, ``decode_context``, ``joint_logits``) need. The blank is label 0.
Shapes: B batch, F fbank bins, T frames, C encoder width, J joiner width, V labels.

A CTC model may keep icefall's attention decoder (``attention_decoder.*``, the shared
Transformer decoder under its names): the bundle then decodes by the ``aed`` family, the CTC
prefix beam n-best rescored by the decoder (``ctc_log_probs_of``, ``decoder_log_probs``,
``decoder_step``).
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor, nn

from ..base import OasrModel
from ..transformer_decoder import TransformerDecoder
from .config import ZipformerConfig
from .encoder import Conv2dSubsampling, Zipformer2
from .heads import Decoder, Joiner


class Zipformer(OasrModel):
    config_class: ClassVar = ZipformerConfig
    # The class names all it may do; an instance without an attention decoder drops ``ctc_aed_rescoring``.
    capabilities: ClassVar = frozenset({"transcribe", "timestamps", "word_timestamps", "ctc_aed_rescoring"})
    display_name: ClassVar = "Zipformer"
    # Quantized: every linear layer of the encoder (attention, feed-forwards, the conv module's
    # projections, the subsampling's output projection) with at least 64 inputs. Float: the heads
    # (CTC output, the decoder's label table and conv, the joiner), convolutions, norms, bypass
    # scales. The heads are a few percent of a medium model's weights and FastConformer's
    # measurements put the head as the most sensitive layer; tests/quant/test_quantize_zipformer.py
    # has the verify figures on random weights. The attention decoder stays float too: its
    # rescoring under quantization is not measured.
    quant_refusal: ClassVar = None
    quant_keep: ClassVar = ("ctc_output.*", "decoder.*", "joiner.*", "attention_decoder.*")
    has_reverse_decoder: ClassVar = False  # icefall's decoder reads left to right only

    def __init__(self, config: ZipformerConfig):
        super().__init__(config)
        self.encoder_embed = Conv2dSubsampling(config)
        self.encoder = Zipformer2(config)
        if config.head == "ctc":
            self.ctc_output = nn.Sequential(nn.Identity(), nn.Linear(config.output_dim, config.vocab_size))
        else:
            self.decoder = Decoder(config)
            self.joiner = Joiner(config)
        if config.has_attention_decoder:
            self.attention_decoder = TransformerDecoder(config.attention_decoder_config())
        else:
            self.capabilities = type(self).capabilities - {"ctc_aed_rescoring"}

    @property
    def output_stride(self) -> int:
        """Feature frames per encoder frame: 2 at the front, 2 at the output."""
        return 4

    @property
    def blank_id(self) -> int:
        return 0

    def encode(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """features [B, F, T], lengths [B] -> encoded [B, T', C], lengths [B] (T' = ((T - 7) // 2 + 1) // 2).

        Rows of different lengths are encoded apart, each at its own length: icefall's modules
        have no mask before the stacks, so padding would leak into the last frames."""
        x = features.transpose(1, 2)
        sizes = lengths.tolist()
        if len(set(sizes)) == 1:
            return self._encode(x[:, : sizes[0]]), ((lengths - 7) // 2 + 1) // 2
        outs = [self._encode(x[i : i + 1, :n])[0] for i, n in enumerate(sizes)]
        return nn.utils.rnn.pad_sequence(outs, batch_first=True), torch.tensor([o.shape[0] for o in outs], device=lengths.device)

    def _encode(self, x: Tensor) -> Tensor:
        if x.shape[1] < 9:  # the front needs 7 frames, and one more pair to give one out
            raise ValueError(f"a Zipformer needs at least 9 feature frames, got {x.shape[1]}")
        return self.encoder(self.encoder_embed(x))

    def ctc_logits(self, encoded: Tensor) -> Tensor:
        """encoded [B, T, C] -> CTC logits [B, T, V]."""
        return self.ctc_output(encoded)

    def ctc_log_probs_of(self, encoded: Tensor) -> Tensor:
        return self.ctc_logits(encoded).float().log_softmax(-1)

    def ctc_log_probs(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        encoded, lengths = self.encode(features, lengths)
        return self.ctc_log_probs_of(encoded), lengths

    # The attention decoder, used by oasr.decoding.aed (``has_decoder`` is its name there).
    @property
    def has_decoder(self) -> bool:
        return self.config.has_attention_decoder

    def decoder_log_probs(self, tokens: Tensor, encoded: Tensor, reverse: bool = False) -> Tensor:
        """tokens [N, L] (sos first) against one utterance's encoded [1, T, C] -> [N, L, V]."""
        return self.attention_decoder.log_probs(tokens, encoded.expand(tokens.shape[0], -1, -1), None, reverse)

    def decoder_step(self, prefixes: Tensor, encoded: Tensor) -> Tensor:
        """prefixes [N, i] against encoded [1, T, C] -> the next token's log-probabilities [N, V]."""
        return self.attention_decoder.step(prefixes, encoded.expand(prefixes.shape[0], -1, -1))

    # Transducer pieces, used by oasr.decoding.transducer.
    def project_encoder(self, encoded: Tensor) -> Tensor:
        return self.joiner.encoder_proj(encoded)

    def decode_context(self, context: Tensor) -> Tensor:
        """context [N, K] (the last labels, -1 for none) -> the joiner's decoder input [N, J]."""
        return self.joiner.decoder_proj(self.decoder(context))

    def predict(self, labels: Tensor, state=None) -> tuple[Tensor, tuple[Tensor]]:
        """labels [B] -> (the joiner's decoder input after them [B, J], the context [1, B, K]).

        The state is the label context, shaped as a recurrent state ([layers, B, ...]) so the
        label-looping search can keep or replace it per row."""
        k = self.config.context_size
        previous = labels.new_full((labels.shape[0], k), -1) if state is None else state[0][0]
        context = torch.cat([previous[:, 1:], labels[:, None]], dim=1)
        return self.decode_context(context), (context[None],)

    def joint_logits(self, enc_proj: Tensor, dec_proj: Tensor) -> Tensor:
        return self.joiner(enc_proj, dec_proj)

    def forward(self, features: Tensor, lengths: Tensor) -> Tensor:
        return self.encode(features, lengths)[0]
