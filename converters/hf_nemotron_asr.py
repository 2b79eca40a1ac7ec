"""Hugging Face transformers Nemotron ASR folders (``config.json`` with ``model_type``
``nemotron3_5_asr``): ``model.safetensors`` (or a sharded index), ``tokenizer.json`` and
``processor_config.json`` (the feature extractor's geometry, the blank token, the language prompts).

The encoder, prediction and joint networks keep NeMo's FastConformer names (``oasr.models.nemotron_asr``
adds the causal convolutions and the prompt fusion, ``prompt_kernel``). The blank sits past the
vocabulary (the joint's last class, ``blank_token_id``) and is named as the tokenizer's special
``<blank>``. The front end is ``nemotron_logmel``.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from oasr.conversion.base import CheckpointConverter
from oasr.conversion.tensor_map import TensorTable
from oasr.errors import ConversionError
from oasr.options import LANGUAGES
from oasr.specs import FeatureSpec

from .hf_parakeet import _LAYER, _LSTM, HFFolder, feature_extractor_settings, hf_preprocessor, mel_geometry, read_json_object

if TYPE_CHECKING:
    from oasr.models.nemotron_asr import NemotronAsrConfig

MODEL_TYPE = "nemotron3_5_asr"

_TABLE = {
    # causal stem conv, then (depthwise, pointwise) pairs at NeMo's Sequential indices 2+3k, 3+3k
    "encoder.subsampling.conv_in.weight": "encoder.pre_encode.conv.0.weight",
    "encoder.subsampling.conv_in.bias": "encoder.pre_encode.conv.0.bias",
    **{
        f"encoder.subsampling.layers.{i}.{hf}.{p}": f"encoder.pre_encode.conv.{2 + 3 * i + j}.{p}"
        for i in range(3)  # subsampling by up to 16: at most three pairs
        for j, hf in enumerate(("depthwise_conv", "pointwise_conv"))
        for p in ("weight", "bias")
    },
    "encoder.subsampling.linear.weight": "encoder.pre_encode.out.weight",
    "encoder.subsampling.linear.bias": "encoder.pre_encode.out.bias",
    **{f"encoder.layers.{{bid}}.{hf}": f"encoder.layers.{{bid}}.{ours}" for hf, ours in _LAYER.items()},
    "prompt_projector.linear_1.weight": "prompt_kernel.0.weight",
    "prompt_projector.linear_1.bias": "prompt_kernel.0.bias",
    "prompt_projector.linear_2.weight": "prompt_kernel.2.weight",
    "prompt_projector.linear_2.bias": "prompt_kernel.2.bias",
    "encoder_projector.weight": "joint.enc.weight",
    "encoder_projector.bias": "joint.enc.bias",
    "decoder.decoder_projector.weight": "joint.pred.weight",
    "decoder.decoder_projector.bias": "joint.pred.bias",
    "decoder.embedding.weight": "decoder.prediction.embed.weight",
    **{f"decoder.lstm.{p}": f"decoder.prediction.dec_rnn.lstm.{p}" for p in _LSTM},
    "joint.head.weight": "joint.joint_net.2.weight",
    "joint.head.bias": "joint.joint_net.2.bias",
}


def nemotron_config(cfg: dict, fe: dict) -> NemotronAsrConfig:
    from oasr.models.nemotron_asr import NemotronAsrConfig

    try:
        enc = cfg["encoder_config"]
        vocab = int(cfg.get("vocab_size", 13088))
        if int(cfg.get("blank_token_id", vocab - 1)) != vocab - 1:
            raise ValueError("a blank (blank_token_id) other than the last class")
        if int(enc.get("subsampling_conv_stride", 2)) != 2 or int(enc.get("subsampling_conv_kernel_size", 3)) != 3:
            raise ValueError("subsampling convolutions other than 3x3 with stride 2")
        if enc.get("hidden_act", "silu") not in ("silu", "swish"):
            raise ValueError(f"encoder hidden_act {enc.get('hidden_act')!r} (FastConformer uses silu)")
        hidden = int(cfg.get("decoder_hidden_size", 640))
        return NemotronAsrConfig(
            n_mels=int(enc.get("num_mel_bins", 80)),
            d_model=int(enc["hidden_size"]),
            n_layers=int(enc["num_hidden_layers"]),
            n_heads=int(enc["num_attention_heads"]),
            ff_hidden=int(enc["intermediate_size"]),
            vocab_size=vocab - 1,
            head="rnnt",
            subsampling="dw_striding",
            subsampling_factor=int(enc.get("subsampling_factor", 8)),
            subsampling_conv_channels=int(enc.get("subsampling_conv_channels", 256)),
            conv_kernel_size=int(enc.get("conv_kernel_size", 9)),
            conv_norm_type="layer_norm",
            xscaling=bool(enc.get("scale_input", True)),
            att_context_size=(int(enc.get("sliding_window", 71)) - 1, int(enc.get("default_num_lookahead_tokens", 13))),
            att_context_style="chunked_limited",
            linear_bias=bool(enc.get("attention_bias", True)),
            conv_bias=bool(enc.get("convolution_bias", True)),
            pred_hidden=hidden,
            pred_rnn_layers=int(cfg.get("num_decoder_layers", 2)),
            joint_hidden=hidden,
            joint_activation=str(cfg.get("hidden_act", "relu")),
            max_symbols_per_step=int(cfg.get("max_symbols_per_step", 10)),
            num_prompts=int(cfg.get("num_prompts", 128)),
            prompt_hidden=int(cfg.get("prompt_intermediate_size", 2048)),
            default_prompt_id=int(cfg.get("default_prompt_id", 101)),
            preprocessor=hf_preprocessor(fe),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ConversionError(f"Nemotron ASR config.json is incomplete or unsupported: {e!r}") from e


def nemotron_feature_spec(fe: Mapping[str, Any]) -> FeatureSpec:
    """The ``nemotron_logmel`` spec of transformers' ``NemotronAsrStreamingFeatureExtractor``
    settings (the ``feature_extractor`` object of ``processor_config.json``)."""
    from oasr.features.nemo_mel import nemo_feature_spec
    from oasr.features.nemotron_mel import LOG_ZERO_GUARD

    dtype = fe.get("mel_filters_dtype", "float32")
    if dtype != "float32":
        # Nemotron Transcribe rounds its filterbank and window to bfloat16: not reproduced here.
        raise ConversionError(f"Nemotron front end: mel_filters_dtype {dtype!r} (only float32 is implemented)")
    spec = nemo_feature_spec({**mel_geometry(fe), "log_zero_guard_value": LOG_ZERO_GUARD, "normalize": ""})
    return FeatureSpec(
        kind="nemotron_logmel", sample_rate=spec.sample_rate, n_fft=spec.n_fft, hop_length=spec.hop_length,
        n_mels=spec.n_mels, chunk_seconds=0.0, audio_scale=1.0, options=spec.options,
    )


class HFNemotronAsrConverter(HFFolder, CheckpointConverter):
    name = "hf-nemotron-asr"
    architecture = "nemotron-asr"
    markers = "config.json with model_type nemotron3_5_asr"
    model_types = (MODEL_TYPE,)
    tensor_table = TensorTable(_TABLE)

    @functools.cached_property
    def _processor(self) -> dict:
        file = self.path / "processor_config.json"
        return read_json_object(file) if file.is_file() else {}

    def build_config(self) -> NemotronAsrConfig:
        return nemotron_config(self._config, feature_extractor_settings(self.path))

    def build_specs(self, config):
        from oasr.models.fastconformer.specs import fastconformer_specs

        files = self.tokenizer_files()
        tokenizer, _, decoding = fastconformer_specs(config, files, language=None)
        features = nemotron_feature_spec(feature_extractor_settings(self.path))
        blank = str(self._processor.get("blank_token", "<blank>"))
        if files:
            self._check_blank(files["tokenizer.json"], blank, config.blank_id)
            tokenizer = type(tokenizer)(kind=tokenizer.kind, files=tokenizer.files, options={**tokenizer.options, "blank_token": blank})
        # language code -> prompt slot, for --language; "auto" (the model detects it) is the default
        prompts = self._processor.get("prompt_dictionary") or {}
        slots = {k: int(v) for k, v in prompts.items() if k in LANGUAGES or k == "auto"}
        slots.setdefault("auto", config.default_prompt_id)
        if any(not 0 <= v < config.num_prompts for v in slots.values()):
            raise ConversionError(f"processor_config.json: a prompt slot outside 0..{config.num_prompts - 1}")
        decoding = type(decoding)(family=decoding.family, blank_id=decoding.blank_id, options={**decoding.options, "language_prompts": slots})
        return tokenizer, files, features, decoding

    @staticmethod
    def _check_blank(file: Path, blank: str, blank_id: int) -> None:
        data = read_json_object(file)
        ids = {t.get("content"): t.get("id") for t in data.get("added_tokens", []) if isinstance(t, dict)}
        if blank in ids and ids[blank] != blank_id:
            raise ConversionError(f"{file}: the blank {blank!r} has id {ids[blank]}, but the joint's blank is {blank_id}")
