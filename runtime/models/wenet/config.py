"""The WeNet U2 / U2++ bundle config: encoder, CTC head, attention decoder and fbank front end.

Reading WeNet's ``train.yaml`` into it is the converter's work (``oasr_converters.wenet``); field
names say what WeNet's ``encoder_conf`` / ``decoder_conf`` keys mean here:

- ``encoder``: ``"conformer"`` or ``"transformer"``; ``n_mels`` (``input_dim``), ``d_model``
  (``output_size``), ``n_heads`` (``attention_heads``), ``ff_hidden`` (``linear_units``),
  ``n_layers`` (``num_blocks``).
- ``input_layer``: ``conv2d`` (4x), ``conv2d6``, ``conv2d8`` or ``linear`` (no subsampling).
- ``pos_enc``: ``rel_pos`` (sinusoids of positions 0..T-1 fed to the attention, WeNet's relative
  attention without Transformer-XL's shift), ``abs_pos`` (added to the input) or ``no_pos``;
  ``attention``: ``rel_selfattn`` (with ``pos_bias_u`` / ``pos_bias_v``) or ``selfattn``.
- ``macaron``, ``use_cnn_module``, ``cnn_kernel``, ``causal`` (left-only depthwise kernel),
  ``cnn_norm`` (``batch_norm`` or ``layer_norm``), ``conv_bias``, ``qkv_bias``.
- ``static_chunk_size`` / ``use_dynamic_chunk``: a model trained with a static chunk sees only
  its chunk and those before it, also at inference; a dynamic-chunk model decodes full context.
- ``cmvn``: a global CMVN (``encoder.global_cmvn.mean`` / ``istd``) precedes the subsampling.
- ``decoder``: ``""`` (CTC only), ``"transformer"`` or ``"bitransformer"`` (U2++:
  ``decoder_r_layers`` right-to-left layers); ``vocab_size`` counts every unit with ``<sos/eos>``.
- ``frame_length_ms`` / ``frame_shift_ms``, ``sample_rate``: Kaldi fbank of ``dataset_conf``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import BundleError
from ..base import BaseModelConfig
from ..transformer_decoder import ACTIVATIONS, AttentionDecoderConfig

ENCODERS = ("conformer", "transformer")
INPUT_LAYERS = {"conv2d": 4, "conv2d6": 6, "conv2d8": 8, "linear": 1}
POS_ENCODINGS = ("rel_pos", "abs_pos", "no_pos")
ATTENTIONS = ("rel_selfattn", "selfattn")
DECODERS = ("", "transformer", "bitransformer")


@dataclass(frozen=True)
class WenetConfig(BaseModelConfig):
    n_mels: int
    vocab_size: int
    d_model: int
    n_heads: int
    ff_hidden: int
    n_layers: int
    encoder: str = "conformer"
    input_layer: str = "conv2d"
    pos_enc: str = "rel_pos"
    attention: str = "rel_selfattn"
    normalize_before: bool = True
    final_norm: bool = True
    activation: str = "swish"
    macaron: bool = True
    use_cnn_module: bool = True
    cnn_kernel: int = 15
    causal: bool = False
    cnn_norm: str = "batch_norm"
    conv_bias: bool = True
    qkv_bias: tuple[bool, bool, bool] = (True, True, True)
    norm_eps: float = 1e-5
    conv_norm_eps: float = 1e-5
    static_chunk_size: int = 0
    use_dynamic_chunk: bool = False
    cmvn: bool = True
    decoder: str = "bitransformer"
    decoder_heads: int = 4
    decoder_ff_hidden: int = 2048
    decoder_layers: int = 6
    decoder_r_layers: int = 0
    decoder_normalize_before: bool = True
    decoder_activation: str = "relu"
    blank_id: int = 0
    sos_id: int = -1  # -1: vocab_size - 1, WeNet's <sos/eos>
    eos_id: int = -1
    sample_rate: int = 16000
    frame_length_ms: float = 25.0
    frame_shift_ms: float = 10.0

    def __post_init__(self):
        object.__setattr__(self, "qkv_bias", tuple(bool(b) for b in self.qkv_bias))
        problems = []
        for name, value, allowed in (
            ("encoder", self.encoder, ENCODERS),
            ("input_layer", self.input_layer, tuple(INPUT_LAYERS)),
            ("pos_enc_layer_type", self.pos_enc, POS_ENCODINGS),
            ("selfattention_layer_type", self.attention, ATTENTIONS),
            ("cnn_module_norm", self.cnn_norm, ("batch_norm", "layer_norm")),
            ("activation_type", self.activation, tuple(ACTIVATIONS)),
            ("decoder", self.decoder, DECODERS),
        ):
            if value not in allowed:
                problems.append(f"{name} {value!r} (one of {', '.join(a or '(none)' for a in allowed)})")
        if self.d_model % self.n_heads or (self.decoder and self.d_model % self.decoder_heads):
            problems.append(f"output_size {self.d_model} not divisible by the attention heads")
        if self.attention == "rel_selfattn" and self.pos_enc != "rel_pos":
            problems.append("rel_selfattn needs pos_enc_layer_type rel_pos")
        if self.use_cnn_module and not self.causal and self.cnn_kernel % 2 == 0:
            problems.append(f"a non-causal cnn_module_kernel must be odd, not {self.cnn_kernel}")
        if (self.decoder == "bitransformer") != (self.decoder_r_layers > 0):
            problems.append("a bitransformer decoder has r_num_blocks > 0, and only it")
        if problems:
            raise BundleError("WeNet config: unsupported " + "; ".join(problems))

    @property
    def subsampling(self) -> int:
        return INPUT_LAYERS[self.input_layer]

    @property
    def sos(self) -> int:
        return self.vocab_size - 1 if self.sos_id < 0 else self.sos_id

    @property
    def eos(self) -> int:
        return self.vocab_size - 1 if self.eos_id < 0 else self.eos_id

    def decoder_config(self) -> AttentionDecoderConfig | None:
        if not self.decoder:
            return None
        return AttentionDecoderConfig(
            vocab_size=self.vocab_size,
            d_model=self.d_model,
            n_heads=self.decoder_heads,
            ff_hidden=self.decoder_ff_hidden,
            n_layers=self.decoder_layers,
            r_layers=self.decoder_r_layers,
            normalize_before=self.decoder_normalize_before,
            activation=self.decoder_activation,
            norm_eps=self.norm_eps,
        )
