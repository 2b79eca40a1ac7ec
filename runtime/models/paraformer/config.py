"""The Paraformer bundle config: FunASR's ``encoder_conf``, ``predictor_conf`` and ``decoder_conf``
read into plain dimensions, plus the ``am.mvn`` CMVN rows the model rebuilds its buffers from.

Reading FunASR's ``config.yaml`` into it is the converter's work (``oasr_converters.funasr``).
Stored tensors keep FunASR's state-dict names (``encoder.encoders0.0.self_attn.linear_q_k_v.weight``,
``predictor.cif_conv1d.weight``, ``decoder.decoders.{i}.src_attn.linear_k_v.weight``, ...).

Fields:

- ``input_size``: LFR features in (80 mel bins x ``lfr_m`` 7 = 560).
- ``d_model``, ``encoder_layers``, ``encoder_heads``, ``encoder_ff``, ``encoder_kernel`` (the FSMN
  memory block's taps), ``encoder_shift`` (FunASR ``sanm_shfit``: taps moved to the past).
- ``predictor``: ``"CifPredictorV2"`` (a full conv, ReLU; vectorised integrate-and-fire) or
  ``"CifPredictor"`` (a depthwise conv with a residual; the loop form); ``predictor_left``,
  ``predictor_right`` (``l_order``, ``r_order``), ``cif_threshold``, ``smooth_factor``,
  ``noise_threshold``, ``tail_threshold`` (the weight added after the last frame so a final
  token fires), ``tail_mask`` (V2: the tail goes after each utterance's own last frame).
- ``decoder_layers`` (FunASR ``num_blocks``), ``decoder_att_layers`` (``att_layer_num``: layers
  with cross-attention), ``decoder_heads``, ``decoder_ff``, ``decoder_kernel``, ``decoder_shift``.
- ``vocab_size``; ``blank_id``, ``sos_id``, ``eos_id`` (FunASR's 0, 1, 2): removed from output.
- ``cmvn_shift``, ``cmvn_scale``: ``am.mvn``'s ``<AddShift>`` and ``<Rescale>`` rows (``input_size``
  each); the model's CMVN buffers are computed from them, never stored.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import BundleError
from ..base import BaseModelConfig

PREDICTORS = ("CifPredictorV2", "CifPredictor")


@dataclass(frozen=True)
class ParaformerConfig(BaseModelConfig):
    input_size: int
    d_model: int
    vocab_size: int
    encoder_layers: int = 50
    encoder_heads: int = 4
    encoder_ff: int = 2048
    encoder_kernel: int = 11
    encoder_shift: int = 0
    predictor: str = "CifPredictorV2"
    predictor_left: int = 1
    predictor_right: int = 1
    cif_threshold: float = 1.0
    smooth_factor: float = 1.0
    noise_threshold: float = 0.0
    tail_threshold: float = 0.45
    tail_mask: bool = True
    decoder_layers: int = 16
    decoder_att_layers: int = 16
    decoder_heads: int = 4
    decoder_ff: int = 2048
    decoder_kernel: int = 11
    decoder_shift: int = 0
    blank_id: int = 0
    sos_id: int = 1
    eos_id: int = 2
    cmvn_shift: tuple[float, ...] = ()
    cmvn_scale: tuple[float, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "cmvn_shift", tuple(float(v) for v in self.cmvn_shift))
        object.__setattr__(self, "cmvn_scale", tuple(float(v) for v in self.cmvn_scale))
        problems = []
        for name in ("input_size", "d_model", "vocab_size", "encoder_layers", "encoder_heads", "encoder_ff", "encoder_kernel",
                     "decoder_layers", "decoder_heads", "decoder_ff", "decoder_kernel"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                problems.append(f"{name} {value!r} (a positive integer)")
        if self.predictor not in PREDICTORS:
            problems.append(f"predictor {self.predictor!r} (one of {', '.join(PREDICTORS)})")
        if isinstance(self.d_model, int) and self.d_model % max(1, self.encoder_heads) or self.d_model % max(1, self.decoder_heads):
            problems.append(f"d_model {self.d_model} not divisible by the heads ({self.encoder_heads}, {self.decoder_heads})")
        if not 0 <= self.decoder_att_layers <= self.decoder_layers:
            problems.append(f"decoder_att_layers {self.decoder_att_layers} (0..decoder_layers)")
        if len(self.cmvn_shift) != self.input_size or len(self.cmvn_scale) != self.input_size:
            problems.append(f"CMVN rows of {len(self.cmvn_shift)} and {len(self.cmvn_scale)} values for {self.input_size} inputs")
        if problems:
            raise BundleError("Paraformer config: unsupported " + "; ".join(problems))
