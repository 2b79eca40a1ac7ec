"""The FastConformer bundle config: encoder and head dimensions plus NeMo's mel preprocessor.

One dataclass serves every source; reading a foreign config into it is the converters' work
(``oasr_converters.nemo.fastconformer_config`` for NeMo's ``model_config.yaml``,
``oasr_converters.hf_parakeet.parakeet_config`` for Hugging Face Parakeet's ``config.json``). Stored tensors keep NeMo's own state-dict names
(``encoder.pre_encode.conv.0.weight``, ``encoder.layers.{i}.self_attn.linear_q.weight``,
``decoder.decoder_layers.0.weight`` for a CTC head, ``decoder.prediction.embed.weight``,
``joint.joint_net.2.weight``, a hybrid's ``ctc_decoder.decoder_layers.0.weight``).

``FastConformerConfig`` fields:

- ``n_mels``: feature channels in (NeMo ``encoder.feat_in``).
- ``d_model``, ``n_layers``, ``n_heads``, ``ff_hidden`` (= d_model * ``ff_expansion_factor``).
- ``subsampling``: ``"dw_striding"`` (FastConformer) or ``"striding"`` (plain Conformer);
  ``subsampling_factor`` 4, 8 or 16; ``subsampling_conv_channels``; ``subsampling_kernel`` (3).
- ``conv_kernel_size``; ``conv_norm_type``: ``"batch_norm"`` or ``"layer_norm"`` (NeMo names
  both ``conv.batch_norm``).
- ``xscaling``: inputs scaled by sqrt(d_model) before the first block.
- ``att_context_size``: (left, right) frames each position attends to, -1 for unlimited;
  ``att_context_style``: ``"regular"`` (a band) or ``"chunked_limited"`` (NeMo's chunks of
  right + 1 frames, each seeing left // (right + 1) chunks back).
- ``linear_bias`` (feed-forwards and attention), ``conv_bias`` (conv module): NeMo ``use_bias``.
- ``head``: ``"ctc"``, ``"rnnt"`` or ``"tdt"``; ``hybrid_ctc``: a transducer that also carries
  a CTC head (``ctc_decoder.*``).
- ``vocab_size``: labels without the blank; the blank id is ``vocab_size`` for every head.
- ``pred_hidden``, ``pred_rnn_layers``: the LSTM prediction network; ``joint_hidden``,
  ``joint_activation`` (``"relu"``, ``"tanh"``, ``"sigmoid"``, ``"silu"``): the joint network.
- ``durations``: TDT frame advances, one duration logit each (empty for other heads).
- ``max_symbols_per_step``: greedy transducer guard (NeMo ``decoding.greedy.max_symbols``).
- ``preprocessor``: ``PreprocessorConfig``, the mel front end the weights were trained with.

``PreprocessorConfig`` fields (NeMo ``AudioToMelSpectrogramPreprocessor`` in samples, not
seconds): ``sample_rate``, ``n_fft``, ``win_length``, ``hop_length``, ``window`` (``"hann"``,
``"hamming"``, ``"blackman"``, ``"bartlett"``, ``"none"``), ``n_mels``, ``preemphasis`` (None: off),
``mag_power``, ``log``, ``log_zero_guard_type`` (``"add"`` or ``"clamp"``),
``log_zero_guard_value``, ``normalize`` (``"per_feature"``, ``"all_features"`` or ``""``),
``pad_to``, ``pad_value``, ``dither`` (as trained; inference uses none), ``lowfreq``,
``highfreq`` (None: Nyquist), ``mel_norm`` (``"slaney"`` or None), ``exact_pad``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from ...errors import BundleError
from ..base import BaseModelConfig

HEADS = ("ctc", "rnnt", "tdt")
SUBSAMPLING = ("dw_striding", "striding")
CONV_NORMS = ("batch_norm", "layer_norm")
JOINT_ACTIVATIONS = ("relu", "tanh", "sigmoid", "silu", "swish")


@dataclass(frozen=True)
class PreprocessorConfig:
    sample_rate: int = 16000
    n_fft: int = 512
    win_length: int = 400  # samples: NeMo window_size 0.025 s at 16 kHz
    hop_length: int = 160  # samples: NeMo window_stride 0.01 s
    window: str = "hann"
    n_mels: int = 80
    preemphasis: float | None = 0.97
    mag_power: float = 2.0
    log: bool = True
    log_zero_guard_type: str = "add"
    log_zero_guard_value: float | str = 2.0**-24  # or NeMo's "tiny" / "eps"
    normalize: Any = "per_feature"  # or "all_features", "", {"fixed_mean": [...], "fixed_std": [...]}
    pad_to: int = 0
    pad_value: float = 0.0
    dither: float = 0.0  # as configured for training; inference adds none
    lowfreq: float = 0.0
    highfreq: float | None = None
    mel_norm: str | None = "slaney"
    exact_pad: bool = False


@dataclass(frozen=True)
class FastConformerConfig(BaseModelConfig):
    n_mels: int
    d_model: int
    n_layers: int
    n_heads: int
    ff_hidden: int
    vocab_size: int  # labels without the blank; blank id = vocab_size
    head: str = "ctc"
    hybrid_ctc: bool = False
    subsampling: str = "dw_striding"
    subsampling_factor: int = 8
    subsampling_conv_channels: int = 256
    subsampling_kernel: int = 3
    conv_kernel_size: int = 9
    conv_norm_type: str = "batch_norm"
    xscaling: bool = True
    att_context_size: tuple[int, int] = (-1, -1)
    att_context_style: str = "regular"
    linear_bias: bool = True
    conv_bias: bool = True
    pred_hidden: int = 0
    pred_rnn_layers: int = 0
    joint_hidden: int = 0
    joint_activation: str = "relu"
    durations: tuple[int, ...] = ()
    max_symbols_per_step: int = 10
    preprocessor: PreprocessorConfig = field(default_factory=PreprocessorConfig)

    def __post_init__(self):
        # JSON gives lists and plain dicts back: normalise so a round trip compares equal.
        object.__setattr__(self, "att_context_size", tuple(int(v) for v in self.att_context_size))
        object.__setattr__(self, "durations", tuple(int(v) for v in self.durations))
        if isinstance(self.preprocessor, Mapping):
            object.__setattr__(self, "preprocessor", _preprocessor_from_dict(self.preprocessor))
        problems = []
        if self.head not in HEADS:
            problems.append(f"head {self.head!r} (one of {', '.join(HEADS)})")
        if self.subsampling not in SUBSAMPLING:
            problems.append(f"subsampling {self.subsampling!r} (one of {', '.join(SUBSAMPLING)})")
        if self.subsampling_factor not in (2, 4, 8, 16):
            problems.append(f"subsampling_factor {self.subsampling_factor} (2, 4, 8 or 16)")
        if self.conv_norm_type not in CONV_NORMS:
            problems.append(f"conv_norm_type {self.conv_norm_type!r} (one of {', '.join(CONV_NORMS)})")
        if self.d_model % self.n_heads:
            problems.append(f"d_model {self.d_model} not divisible by n_heads {self.n_heads}")
        if self.att_context_style not in ("regular", "chunked_limited"):
            problems.append(f"att_context_style {self.att_context_style!r} (regular or chunked_limited)")
        if len(self.att_context_size) != 2:
            problems.append(f"att_context_size {list(self.att_context_size)} (two numbers)")
        if self.head != "ctc" and min(self.pred_hidden, self.pred_rnn_layers, self.joint_hidden) <= 0:
            problems.append("a transducer needs pred_hidden, pred_rnn_layers and joint_hidden")
        if self.head != "ctc" and self.joint_activation not in JOINT_ACTIVATIONS:
            problems.append(f"joint_activation {self.joint_activation!r} (one of {', '.join(JOINT_ACTIVATIONS)})")
        if (self.head == "tdt") != bool(self.durations):
            problems.append("durations are given exactly for a TDT head")
        if self.hybrid_ctc and self.head == "ctc":
            problems.append("hybrid_ctc needs a transducer head")
        if problems:
            raise BundleError("FastConformer config: unsupported " + "; ".join(problems))

    @property
    def blank_id(self) -> int:
        return self.vocab_size

    @property
    def output_stride(self) -> int:
        return self.subsampling_factor

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]):
        data = dict(data)
        if isinstance(data.get("preprocessor"), Mapping):
            data["preprocessor"] = _preprocessor_from_dict(data["preprocessor"])
        return super().from_dict(data)


def _preprocessor_from_dict(data: Mapping[str, Any]) -> PreprocessorConfig:
    names = {f.name for f in dataclasses.fields(PreprocessorConfig)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise BundleError(f"preprocessor config has unknown field(s): {', '.join(unknown)}")
    return PreprocessorConfig(**data)
