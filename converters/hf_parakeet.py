"""Hugging Face transformers Parakeet folders (``config.json`` with ``model_type`` ``parakeet_ctc``,
``parakeet_rnnt`` or ``parakeet_tdt``): ``model.safetensors`` (or a sharded index),
``tokenizer.json`` and ``preprocessor_config.json``.

HF names are translated onto NeMo's, which the FastConformer model keeps; the blank is the last
class of every head (transformers' ``pad_token_id`` for CTC, ``blank_token_id`` for transducers).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from oasr.conversion.base import DETECT_KEYED_VALUE, CheckpointConverter, detect_hf_model_type
from oasr.conversion.tensor_map import TensorTable
from oasr.errors import ConversionError
from oasr.io.checkpoint import load_safetensors_file, load_torch_file, shard_files

if TYPE_CHECKING:
    from oasr.models.fastconformer.config import FastConformerConfig, PreprocessorConfig

MODEL_TYPES = ("parakeet_ctc", "parakeet_rnnt", "parakeet_tdt")

_ATTENTION = {
    "q_proj": "linear_q",
    "k_proj": "linear_k",
    "v_proj": "linear_v",
    "o_proj": "linear_out",
}
_LAYER = {
    **{f"self_attn.{hf}.{p}": f"self_attn.{ours}.{p}" for hf, ours in _ATTENTION.items() for p in ("weight", "bias")},
    "self_attn.relative_k_proj.weight": "self_attn.linear_pos.weight",  # no bias in either
    "self_attn.bias_u": "self_attn.pos_bias_u",
    "self_attn.bias_v": "self_attn.pos_bias_v",
    **{f"conv.norm.{p}": f"conv.batch_norm.{p}" for p in ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")},
    **{
        f"{module}.{p}": f"{module}.{p}"  # the same names on both sides
        for module in (
            "feed_forward1.linear1", "feed_forward1.linear2", "feed_forward2.linear1", "feed_forward2.linear2",
            "conv.pointwise_conv1", "conv.depthwise_conv", "conv.pointwise_conv2",
            "norm_feed_forward1", "norm_self_att", "norm_conv", "norm_feed_forward2", "norm_out",
        )
        for p in ("weight", "bias")
    },
}
_LSTM = ("weight_ih_l{bid}", "weight_hh_l{bid}", "bias_ih_l{bid}", "bias_hh_l{bid}")

_TABLE = {
    # The stride-2 convs, depthwise/pointwise pairs and their ReLUs sit at the same indices.
    "encoder.subsampling.layers.{bid}.weight": "encoder.pre_encode.conv.{bid}.weight",
    "encoder.subsampling.layers.{bid}.bias": "encoder.pre_encode.conv.{bid}.bias",
    "encoder.subsampling.linear.weight": "encoder.pre_encode.out.weight",
    "encoder.subsampling.linear.bias": "encoder.pre_encode.out.bias",
    **{f"encoder.layers.{{bid}}.{hf}": f"encoder.layers.{{bid}}.{ours}" for hf, ours in _LAYER.items()},
    # CTC: a 1x1 conv over the encoder frames.
    "ctc_head.weight": "decoder.decoder_layers.0.weight",
    "ctc_head.bias": "decoder.decoder_layers.0.bias",
    # Transducers: transformers splits NeMo's joint (enc/pred projections) across its modules.
    "encoder_projector.weight": "joint.enc.weight",
    "encoder_projector.bias": "joint.enc.bias",
    "decoder.decoder_projector.weight": "joint.pred.weight",
    "decoder.decoder_projector.bias": "joint.pred.bias",
    "decoder.embedding.weight": "decoder.prediction.embed.weight",
    **{f"decoder.lstm.{p}": f"decoder.prediction.dec_rnn.lstm.{p}" for p in _LSTM},
    "joint.head.weight": "joint.joint_net.2.weight",
    "joint.head.bias": "joint.joint_net.2.bias",
}


def read_json_object(file: Path) -> dict:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError) as e:
        raise ConversionError(f"{file} is not readable JSON: {e}") from e
    if not isinstance(data, dict):
        raise ConversionError(f"{file}: expected a JSON object, found {type(data).__name__}")
    return data


def weight_files(folder: Path) -> list[Path]:
    """A transformers folder's weights: a sharded index's shards, or the single file."""
    for index_name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if (folder / index_name).is_file():
            return shard_files(folder, folder / index_name)
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (folder / name).is_file():
            return [folder / name]
    raise ConversionError(f"{folder}: no weights (model.safetensors, pytorch_model.bin or a sharded index)")


def load_weights(files: list[Path]) -> dict:
    state = {}
    for file in files:
        part = load_safetensors_file(file) if file.suffix == ".safetensors" else load_torch_file(file)
        if not isinstance(part, dict):
            raise ConversionError(f"{file} does not hold a state dict")
        state.update(part)
    return state


def feature_extractor_settings(folder: Path) -> dict:
    """The feature extractor's settings: ``preprocessor_config.json``, or the ``feature_extractor``
    object of a ``processor_config.json`` (what ``ProcessorMixin.save_pretrained`` writes)."""
    for name in ("preprocessor_config.json", "processor_config.json"):
        if (folder / name).is_file():
            data = read_json_object(folder / name)
            settings = data.get("feature_extractor", data)
            if not isinstance(settings, dict):
                raise ConversionError(f"{folder / name}: feature_extractor is not an object")
            return settings
    return {}


class HFFolder:
    """What a transformers FastConformer folder gives every converter of one (Parakeet, Nemotron
    ASR): ``config.json``, the weight files (their sha256 is the source's identity) and
    ``tokenizer.json`` when there is one."""

    path: Path
    model_types: tuple[str, ...]  # config.json's model_type values the converter claims
    detect_specificity = DETECT_KEYED_VALUE

    @classmethod
    def detect(cls, path: Path) -> str | None:
        return detect_hf_model_type(path, cls.model_types)

    @functools.cached_property
    def _config(self) -> dict:
        return read_json_object(self.path / "config.json")

    @functools.cached_property
    def _weight_files(self) -> list[Path]:
        return weight_files(self.path)

    def source_files(self) -> list[Path]:
        return list(self._weight_files)

    def load_state_dict(self):
        return load_weights(self._weight_files)

    def tokenizer_files(self) -> dict[str, Path]:
        file = self.path / "tokenizer.json"
        return {"tokenizer.json": file} if file.is_file() else {}

    def notes(self) -> list[str]:
        if self.tokenizer_files():
            return []
        return [f"{self.path} has no tokenizer.json: the model cannot turn tokens into text"]


class HFParakeetConverter(HFFolder, CheckpointConverter):
    name = "hf-parakeet"
    architecture = "fastconformer"
    markers = "config.json with model_type parakeet_ctc, parakeet_rnnt or parakeet_tdt"
    model_types = MODEL_TYPES
    tensor_table = TensorTable(_TABLE)

    def build_config(self) -> FastConformerConfig:
        return parakeet_config(self._config, feature_extractor_settings(self.path))

    def build_specs(self, config):
        from oasr.models.fastconformer.specs import fastconformer_specs

        files = self.tokenizer_files()
        tokenizer, features, decoding = fastconformer_specs(config, files, language=None)
        return tokenizer, files, features, decoding


# --- config.json (+ preprocessor_config.json) -> FastConformerConfig ----------------------------------


def parakeet_config(config_json: Mapping[str, Any], preprocessor: Mapping[str, Any] | None = None) -> FastConformerConfig:
    """Hugging Face Parakeet ``config.json`` (``parakeet_ctc``, ``parakeet_rnnt``, ``parakeet_tdt``)
    and, when present, its ``preprocessor_config.json``."""
    try:
        return _from_hf(config_json, preprocessor or {})
    except (KeyError, TypeError, ValueError) as e:
        raise ConversionError(f"Parakeet config.json is incomplete or unsupported: {e!r}") from e


def _from_hf(cfg: Mapping[str, Any], fe: Mapping[str, Any]) -> FastConformerConfig:
    from oasr.models.fastconformer.config import FastConformerConfig

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
        preprocessor=hf_preprocessor(fe),
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
    return FastConformerConfig(**fields)


def mel_geometry(fe: Mapping[str, Any]) -> dict[str, Any]:
    """A transformers NeMo-style feature extractor's settings (Parakeet's, Nemotron ASR's) under
    the names of the mel preprocessor's fields, in samples."""
    return dict(
        sample_rate=int(fe.get("sampling_rate", 16000)),
        n_fft=int(fe.get("n_fft", 512)),
        win_length=int(fe.get("win_length", 400)),
        hop_length=int(fe.get("hop_length", 160)),
        n_mels=int(fe.get("feature_size", 80)),
        preemphasis=fe.get("preemphasis", 0.97),
        pad_value=float(fe.get("padding_value", 0.0)),
    )


def hf_preprocessor(fe: Mapping[str, Any]) -> PreprocessorConfig:
    """transformers' ``ParakeetFeatureExtractor`` settings (``preprocessor_config.json``)."""
    from oasr.models.fastconformer.config import PreprocessorConfig

    return PreprocessorConfig(**mel_geometry(fe), pad_to=0, dither=0.0)
