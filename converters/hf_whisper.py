"""Hugging Face transformers Whisper directories (``config.json`` with ``model_type: whisper``).

Weights from ``model.safetensors``, ``pytorch_model.bin`` or their sharded indexes. The output
projection ``proj_out`` is tied to the token embedding and must equal it.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from oasr.io.checkpoint import load_safetensors_file, load_torch_file, shard_files
from oasr.conversion.base import DETECT_KEYED_VALUE, CheckpointConverter, detect_hf_model_type
from oasr.errors import ConversionError
from oasr.models.whisper_config import WhisperConfig, whisper_specs
from oasr.conversion.tensor_map import TensorTable
from oasr.tokenizers.whisper import find_tokenizer_assets
from oasr_converters.openai_whisper import check_whisper_config

_ATTN = {"q_proj": "query", "k_proj": "key", "v_proj": "value", "out_proj": "out"}
_LAYER = {
    **{f"self_attn.{hf}.{p}": f"attn.{ours}.{p}" for hf, ours in _ATTN.items() for p in ("weight", "bias")},
    "self_attn_layer_norm.weight": "attn_ln.weight",
    "self_attn_layer_norm.bias": "attn_ln.bias",
    "fc1.weight": "mlp.0.weight",
    "fc1.bias": "mlp.0.bias",
    "fc2.weight": "mlp.2.weight",
    "fc2.bias": "mlp.2.bias",
    "final_layer_norm.weight": "mlp_ln.weight",
    "final_layer_norm.bias": "mlp_ln.bias",
}
_CROSS = {
    **{f"encoder_attn.{hf}.{p}": f"cross_attn.{ours}.{p}" for hf, ours in _ATTN.items() for p in ("weight", "bias")},
    "encoder_attn_layer_norm.weight": "cross_attn_ln.weight",
    "encoder_attn_layer_norm.bias": "cross_attn_ln.bias",
}
_TOP = {
    "encoder.conv1.weight": "encoder.conv1.weight",
    "encoder.conv1.bias": "encoder.conv1.bias",
    "encoder.conv2.weight": "encoder.conv2.weight",
    "encoder.conv2.bias": "encoder.conv2.bias",
    "encoder.embed_positions.weight": "encoder.positional_embedding",
    "encoder.layer_norm.weight": "encoder.ln_post.weight",
    "encoder.layer_norm.bias": "encoder.ln_post.bias",
    "decoder.embed_tokens.weight": "decoder.token_embedding.weight",
    "decoder.embed_positions.weight": "decoder.positional_embedding",
    "decoder.layer_norm.weight": "decoder.ln.weight",
    "decoder.layer_norm.bias": "decoder.ln.bias",
    **{f"encoder.layers.{{bid}}.{hf}": f"encoder.blocks.{{bid}}.{ours}" for hf, ours in _LAYER.items()},
    **{f"decoder.layers.{{bid}}.{hf}": f"decoder.blocks.{{bid}}.{ours}" for hf, ours in {**_LAYER, **_CROSS}.items()},
}

# WhisperForConditionalGeneration nests everything under "model."; a bare WhisperModel does not.
_TABLE = {
    **{f"model.{hf}": ours for hf, ours in _TOP.items()},
    **_TOP,
    "proj_out.weight": "decoder.token_embedding.weight",  # tied output projection
}



class HFWhisperConverter(CheckpointConverter):
    name = "hf-whisper"
    architecture = "whisper"
    markers = "config.json with model_type whisper"
    detect_specificity = DETECT_KEYED_VALUE
    tensor_table = TensorTable(_TABLE)

    @classmethod
    def detect(cls, path: Path) -> str | None:
        return detect_hf_model_type(path, ("whisper",))

    @functools.cached_property
    def _config(self) -> dict:
        return _json_object(self.path / "config.json")

    @functools.cached_property
    def _weight_files(self) -> list[Path]:
        for index_name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
            index = self.path / index_name
            if index.is_file():  # each shard a plain name inside the folder (never /etc/passwd or ../x)
                return shard_files(self.path, index)
        for name in ("model.safetensors", "pytorch_model.bin"):
            if (self.path / name).is_file():
                return [self.path / name]
        raise ConversionError(
            f"{self.path}: no weights (model.safetensors, pytorch_model.bin or a sharded index)"
        )

    def source_files(self) -> list[Path]:
        return list(self._weight_files)

    def build_config(self) -> WhisperConfig:
        c = self._config
        dims = ("d_model", "num_mel_bins", "max_source_positions", "encoder_attention_heads", "encoder_layers",
                "vocab_size", "max_target_positions", "decoder_attention_heads", "decoder_layers")
        for key in dims:
            if key in c and (not isinstance(c[key], int) or isinstance(c[key], bool)):
                raise ConversionError(f"{self.path}/config.json: {key} is {c[key]!r}, not an integer")
        try:
            d_model = int(c["d_model"])
            if int(c.get("encoder_ffn_dim", 4 * d_model)) != 4 * d_model or int(c.get("decoder_ffn_dim", 4 * d_model)) != 4 * d_model:
                raise ConversionError(f"{self.path}: feed-forward width other than 4 x d_model is not Whisper's")
            if c.get("activation_function", "gelu") != "gelu" or c.get("scale_embedding", False):
                raise ConversionError(f"{self.path}: activation or embedding scaling differs from Whisper's")
            config = WhisperConfig(
                n_mels=int(c["num_mel_bins"]),
                n_audio_ctx=int(c["max_source_positions"]),
                n_audio_state=d_model,
                n_audio_head=int(c["encoder_attention_heads"]),
                n_audio_layer=int(c["encoder_layers"]),
                n_vocab=int(c["vocab_size"]),
                n_text_ctx=int(c["max_target_positions"]),
                n_text_state=d_model,
                n_text_head=int(c["decoder_attention_heads"]),
                n_text_layer=int(c["decoder_layers"]),
            )
        except KeyError as e:
            raise ConversionError(f"{self.path}/config.json lacks {e.args[0]}") from e
        except (TypeError, ValueError) as e:
            raise ConversionError(f"{self.path}/config.json: {e}") from e
        check_whisper_config(config, f"{self.path}/config.json")
        self._check_against_weights(config)
        return config

    def _check_against_weights(self, config: WhisperConfig) -> None:
        """The layer counts and position table the config names must be the weights' own, checked
        from the safetensors headers before a model of those dims is built."""
        from safetensors import safe_open

        shapes: dict[str, tuple] = {}
        for file in self._weight_files:
            if file.suffix != ".safetensors":
                return  # a torch .bin: its tensors are compared after loading (check_weights)
            try:
                with safe_open(str(file), framework="pt") as f:
                    shapes.update({k: tuple(f.get_slice(k).get_shape()) for k in f.keys()})
            except Exception as e:  # noqa: BLE001 - any header damage is the same refusal
                raise ConversionError(f"{file} is truncated or corrupted: {e}") from e
        def layers(prefix: str) -> int:
            found = {int(k.split(".")[3]) for k in shapes if k.startswith(prefix) and k.split(".")[3].isdigit()}
            return len(found)
        checks = (
            ("encoder_layers", config.n_audio_layer, layers("model.encoder.layers.")),
            ("decoder_layers", config.n_text_layer, layers("model.decoder.layers.")),
        )
        for key, declared, found in checks:
            if found and declared != found:
                raise ConversionError(f"{self.path}/config.json: {key} is {declared}, the weights hold {found}")
        positions = shapes.get("model.encoder.embed_positions.weight")
        if positions is not None and positions != (config.n_audio_ctx, config.n_audio_state):
            raise ConversionError(
                f"{self.path}/config.json: max_source_positions x d_model is {config.n_audio_ctx} x {config.n_audio_state}, "
                f"the weights' position table {positions[0]} x {positions[1]}"
            )

    def load_state_dict(self):
        state = {}
        for file in self._weight_files:
            part = load_safetensors_file(file) if file.suffix == ".safetensors" else load_torch_file(file)
            if not isinstance(part, dict):
                raise ConversionError(f"{file} does not hold a state dict")
            state.update(part)
        return state

    def build_specs(self, config):
        files = find_tokenizer_assets(self.path)
        gen = {}
        if (self.path / "generation_config.json").is_file():
            gen = _json_object(self.path / "generation_config.json")
            for key in ("suppress_tokens", "begin_suppress_tokens"):
                value = gen.get(key)
                if value is not None and not (isinstance(value, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in value)):
                    raise ConversionError(f"{self.path}/generation_config.json: {key} must be a list of token ids")
            heads = gen.get("alignment_heads")
            if heads is not None and not (
                isinstance(heads, list) and all(isinstance(h, list) and len(h) == 2 and all(isinstance(i, int) for i in h) for h in heads)
            ):
                raise ConversionError(f"{self.path}/generation_config.json: alignment_heads must be [layer, head] pairs")
        tokenizer, features, decoding = whisper_specs(
            config,
            files,
            suppress_ids=gen.get("suppress_tokens"),
            suppress_ids_begin=gen.get("begin_suppress_tokens"),
            alignment_heads=gen.get("alignment_heads"),
        )
        return tokenizer, files, features, decoding

    def notes(self) -> list[str]:
        if find_tokenizer_assets(self.path):
            return []
        return [f"{self.path} has no tokenizer.json or vocab.json + merges.txt: the model cannot turn tokens into text"]


def _json_object(file: Path) -> dict:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError) as e:
        raise ConversionError(f"{file} is not readable JSON: {e}") from e
    if not isinstance(data, dict):
        raise ConversionError(f"{file}: expected a JSON object, found {type(data).__name__}")
    return data
