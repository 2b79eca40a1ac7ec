"""The FastConformer bundle config: encoder and head dimensions plus NeMo's mel preprocessor.

One dataclass serves every source: NeMo's ``model_config.yaml`` (``from_nemo``) and Hugging Face
Parakeet's ``config.json`` (``from_hf``). Stored tensors keep NeMo's own state-dict names
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
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from ...errors import BundleError, ConversionError
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

    @classmethod
    def from_nemo(cls, pre: Mapping[str, Any]) -> "PreprocessorConfig":
        """NeMo's ``preprocessor`` section (``window_size``/``window_stride`` in seconds)."""
        rate = int(pre.get("sample_rate", 16000))
        win = round(float(pre.get("window_size", 0.02)) * rate)
        n_fft = pre.get("n_fft") or 2 ** math.ceil(math.log2(win))
        guard = pre.get("log_zero_guard_value", 2.0**-24)
        norm = pre.get("normalize", "per_feature")
        return cls(
            sample_rate=rate,
            n_fft=int(n_fft),
            win_length=win,
            hop_length=round(float(pre.get("window_stride", 0.01)) * rate),
            window=str(pre.get("window", "hann")),
            n_mels=int(pre.get("features", pre.get("nfilt", 64))),
            preemphasis=pre.get("preemph", 0.97),
            mag_power=float(pre.get("mag_power", 2.0)),
            log=bool(pre.get("log", True)),
            log_zero_guard_type=str(pre.get("log_zero_guard_type", "add")),
            log_zero_guard_value=guard if isinstance(guard, str) else float(guard),
            normalize=dict(norm) if isinstance(norm, Mapping) else ("" if norm in (None, "None", "none", False) else str(norm)),
            pad_to=int(pre.get("pad_to", 16) or 0),
            pad_value=float(pre.get("pad_value", 0.0)),
            dither=float(pre.get("dither", 1e-5)),
            lowfreq=float(pre.get("lowfreq", 0.0)),
            highfreq=None if pre.get("highfreq") is None else float(pre["highfreq"]),
            mel_norm=pre.get("mel_norm", "slaney"),
            exact_pad=bool(pre.get("exact_pad", False)),
        )

    @classmethod
    def from_hf(cls, fe: Mapping[str, Any]) -> "PreprocessorConfig":
        """transformers' ``ParakeetFeatureExtractor`` settings (``preprocessor_config.json``)."""
        return cls(
            sample_rate=int(fe.get("sampling_rate", 16000)),
            n_fft=int(fe.get("n_fft", 512)),
            win_length=int(fe.get("win_length", 400)),
            hop_length=int(fe.get("hop_length", 160)),
            n_mels=int(fe.get("feature_size", 80)),
            preemphasis=fe.get("preemphasis", 0.97),
            pad_to=0,
            pad_value=float(fe.get("padding_value", 0.0)),
            dither=0.0,
        )


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

    @classmethod
    def from_nemo(cls, model_config: Mapping[str, Any]) -> "FastConformerConfig":
        """NeMo's ``model_config.yaml`` as a dict (an EncDecCTC/RNNT/Hybrid model's ``cfg``)."""
        try:
            return _from_nemo(cls, model_config)
        except (KeyError, TypeError, ValueError) as e:
            raise ConversionError(f"NeMo model config is incomplete or unsupported: {e!r}") from e

    @classmethod
    def from_hf(cls, config_json: Mapping[str, Any], preprocessor: Mapping[str, Any] | None = None) -> "FastConformerConfig":
        """Hugging Face Parakeet ``config.json`` (``parakeet_ctc``, ``parakeet_rnnt``, ``parakeet_tdt``)
        and, when present, its ``preprocessor_config.json``."""
        try:
            return _from_hf(cls, config_json, preprocessor or {})
        except (KeyError, TypeError, ValueError) as e:
            raise ConversionError(f"Parakeet config.json is incomplete or unsupported: {e!r}") from e


def _preprocessor_from_dict(data: Mapping[str, Any]) -> PreprocessorConfig:
    names = {f.name for f in dataclasses.fields(PreprocessorConfig)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise BundleError(f"preprocessor config has unknown field(s): {', '.join(unknown)}")
    return PreprocessorConfig(**data)


def _nemo_head(model_config: Mapping[str, Any]) -> tuple[str, bool]:
    """The head kind from the config's shape: a joint means a transducer, TDT when it names durations."""
    if "joint" not in model_config:
        return "ctc", False
    durations = _nemo_durations(model_config)
    return ("tdt" if durations else "rnnt"), "aux_ctc" in model_config


def _nemo_durations(model_config: Mapping[str, Any]) -> list[int]:
    defaults = model_config.get("model_defaults") or {}
    loss = (model_config.get("loss") or {}).get("tdt_kwargs") or {}
    decoding = model_config.get("decoding") or {}
    return list(defaults.get("tdt_durations") or loss.get("durations") or decoding.get("durations") or [])


def _from_nemo(cls, cfg: Mapping[str, Any]) -> FastConformerConfig:
    enc = cfg["encoder"]
    head, hybrid = _nemo_head(cfg)
    d_model = int(enc["d_model"])
    channels = int(enc.get("subsampling_conv_channels", -1))
    context = enc.get("att_context_size") or [-1, -1]
    if context and isinstance(context[0], (list, tuple)):  # multi-lookahead models: the first is the default
        context = context[0]
    attention = enc.get("self_attention_model", "rel_pos")
    if attention != "rel_pos":
        raise ValueError(f"self_attention_model {attention!r} (only rel_pos is implemented)")
    if enc.get("causal_downsampling"):
        raise ValueError("causal_downsampling (streaming models' causal subsampling is not implemented)")
    use_bias = bool(enc.get("use_bias", True))
    fields: dict[str, Any] = dict(
        n_mels=int(enc["feat_in"]),
        d_model=d_model,
        n_layers=int(enc["n_layers"]),
        n_heads=int(enc.get("n_heads", 4)),
        ff_hidden=int(d_model * enc.get("ff_expansion_factor", 4)),
        subsampling=str(enc.get("subsampling", "striding")),
        subsampling_factor=int(enc.get("subsampling_factor", 4)),
        subsampling_conv_channels=d_model if channels == -1 else channels,
        conv_kernel_size=int(enc.get("conv_kernel_size", 31)),
        conv_norm_type=str(enc.get("conv_norm_type", "batch_norm")),
        xscaling=bool(enc.get("xscaling", True)),
        att_context_size=tuple(int(v) for v in context),
        att_context_style=str(enc.get("att_context_style", "regular")),
        linear_bias=use_bias,
        conv_bias=use_bias,
        head=head,
        hybrid_ctc=hybrid,
        preprocessor=PreprocessorConfig.from_nemo(cfg.get("preprocessor") or {}),
    )
    if head == "ctc":
        fields["vocab_size"] = _num_labels(cfg["decoder"])
    else:
        joint, dec = cfg["joint"], cfg["decoder"]
        prednet, jointnet = dec.get("prednet") or {}, joint.get("jointnet") or {}
        defaults = cfg.get("model_defaults") or {}
        fields.update(
            vocab_size=_num_labels(joint),
            pred_hidden=int(prednet.get("pred_hidden", defaults.get("pred_hidden", 0))),
            pred_rnn_layers=int(prednet.get("pred_rnn_layers", 1)),
            joint_hidden=int(jointnet.get("joint_hidden", defaults.get("joint_hidden", 0))),
            joint_activation=str(jointnet.get("activation", "relu")),
            durations=tuple(_nemo_durations(cfg)),
            max_symbols_per_step=int(((cfg.get("decoding") or {}).get("greedy") or {}).get("max_symbols") or 10),
        )
    return cls(**fields)


def _num_labels(section: Mapping[str, Any]) -> int:
    """NeMo's ``num_classes`` counts labels without the blank (-1: the vocabulary's length)."""
    n = int(section.get("num_classes", -1))
    return len(section.get("vocabulary") or []) if n < 1 else n


def _from_hf(cls, cfg: Mapping[str, Any], fe: Mapping[str, Any]) -> FastConformerConfig:
    kind = cfg["model_type"]
    enc = cfg["encoder_config"]
    fields: dict[str, Any] = dict(
        n_mels=int(enc.get("num_mel_bins", 80)),
        d_model=int(enc["hidden_size"]),
        n_layers=int(enc["num_hidden_layers"]),
        n_heads=int(enc["num_attention_heads"]),
        ff_hidden=int(enc["intermediate_size"]),
        subsampling="dw_striding",
        subsampling_factor=int(enc.get("subsampling_factor", 8)),
        subsampling_conv_channels=int(enc.get("subsampling_conv_channels", 256)),
        subsampling_kernel=int(enc.get("subsampling_conv_kernel_size", 3)),
        conv_kernel_size=int(enc.get("conv_kernel_size", 9)),
        xscaling=bool(enc.get("scale_input", True)),
        linear_bias=bool(enc.get("attention_bias", True)),
        conv_bias=bool(enc.get("convolution_bias", True)),
        preprocessor=PreprocessorConfig.from_hf(fe),
    )
    if int(enc.get("subsampling_conv_stride", 2)) != 2:
        raise ValueError("subsampling_conv_stride other than 2")
    if enc.get("hidden_act", "silu") not in ("silu", "swish"):
        raise ValueError(f"encoder hidden_act {enc.get('hidden_act')!r} (FastConformer uses silu)")
    if kind == "parakeet_ctc":
        # The CTC head's classes include the blank, which is pad_token_id and the last class.
        vocab = int(cfg.get("vocab_size", 1025))
        if int(cfg.get("pad_token_id", vocab - 1)) != vocab - 1:
            raise ValueError("a CTC blank (pad_token_id) other than the last class")
        fields.update(head="ctc", vocab_size=vocab - 1)
    elif kind in ("parakeet_rnnt", "parakeet_tdt"):
        vocab = int(cfg.get("vocab_size", 8193))
        if int(cfg.get("blank_token_id", vocab - 1)) != vocab - 1:
            raise ValueError("a transducer blank (blank_token_id) other than the last class")
        hidden = int(cfg.get("decoder_hidden_size", 640))
        fields.update(
            head="tdt" if kind == "parakeet_tdt" else "rnnt",
            vocab_size=vocab - 1,
            pred_hidden=hidden,
            pred_rnn_layers=int(cfg.get("num_decoder_layers", 2)),
            joint_hidden=hidden,
            joint_activation=str(cfg.get("hidden_act", "relu")),
            durations=tuple(cfg.get("durations", (0, 1, 2, 3, 4))) if kind == "parakeet_tdt" else (),
            max_symbols_per_step=int(cfg.get("max_symbols_per_step", 10)),
        )
    else:
        raise ValueError(f"model_type {kind!r}")
    return cls(**fields)
