"""Hugging Face Qwen2-Audio folders (``config.json`` with ``model_type: qwen2_audio``).

``config.json`` (``audio_config`` and ``text_config``; the fields a checkpoint omits are
transformers' defaults: Qwen2's for the decoder, Qwen2-Audio's for the encoder),
``generation_config.json`` (the stop tokens), the weights as ``model.safetensors`` or
``model-0000N-of-0000M.safetensors`` shards with ``model.safetensors.index.json``, the tokenizer
(``tokenizer.json``, ``tokenizer_config.json`` with its special tokens, the chat template inline
or as ``chat_template.jinja``) and ``preprocessor_config.json`` (or ``processor_config.json``
with the feature extractor nested) for the 128-bin log-mel front end.

Every name of the index must be in the shard it names, and every shard's tensors in the index.
Shards are memory mapped one at a time, never copied: a tensor's pages are read when it is
written into the bundle, and the kernel may drop them again after.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from oasr.conversion.base import DETECT_KEYED_VALUE, CheckpointConverter, detect_hf_model_type
from oasr.conversion.tensor_map import TensorTable
from oasr.errors import ConversionError
from oasr_converters.hf_parakeet import feature_extractor_settings, read_json_object, weight_files

if TYPE_CHECKING:
    from oasr.models.qwen2_audio import Qwen2AudioConfig

# transformers' defaults for what a config.json may leave out (Qwen2Config, Qwen2AudioEncoderConfig).
QWEN2_DEFAULTS = {
    "vocab_size": 151936,
    "hidden_size": 4096,
    "intermediate_size": 22016,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": None,  # the attention heads
    "hidden_act": "silu",
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
    "use_sliding_window": False,
    "rope_theta": 10000.0,
}
ENCODER_DEFAULTS = {
    "num_mel_bins": 128,
    "encoder_layers": 32,
    "encoder_attention_heads": 20,
    "encoder_ffn_dim": 5120,
    "d_model": 1280,
    "max_source_positions": 1500,
    "activation_function": "gelu",
    "scale_embedding": False,
}
AUDIO_TOKEN_ID = 151646  # Qwen2AudioConfig.audio_token_index
MAX_NEW_TOKENS = 256  # when generation_config.json names no length

_ENC = {
    **{f"self_attn.{p}.weight": f"self_attn.{p}.weight" for p in ("q_proj", "k_proj", "v_proj", "out_proj")},
    **{f"self_attn.{p}.bias": f"self_attn.{p}.bias" for p in ("q_proj", "v_proj", "out_proj")},
    **{f"{m}.{p}": f"{m}.{p}" for m in ("self_attn_layer_norm", "fc1", "fc2", "final_layer_norm") for p in ("weight", "bias")},
}
_DEC = {
    **{f"self_attn.{p}.{w}": f"self_attn.{p}.{w}" for p in ("q_proj", "k_proj", "v_proj") for w in ("weight", "bias")},
    "self_attn.o_proj.weight": "self_attn.o_proj.weight",
    **{f"mlp.{p}.weight": f"mlp.{p}.weight" for p in ("gate_proj", "up_proj", "down_proj")},
    "input_layernorm.weight": "input_layernorm.weight",
    "post_attention_layernorm.weight": "post_attention_layernorm.weight",
}
_AUDIO = {
    **{f"{m}.{p}": f"audio_tower.{m}.{p}" for m in ("conv1", "conv2", "layer_norm") for p in ("weight", "bias")},
    "embed_positions.weight": "audio_tower.embed_positions.weight",
    **{f"layers.{{bid}}.{hf}": f"audio_tower.layers.{{bid}}.{ours}" for hf, ours in _ENC.items()},
}
_TEXT = {
    "embed_tokens.weight": "language_model.embed_tokens.weight",
    "norm.weight": "language_model.norm.weight",
    **{f"layers.{{bid}}.{hf}": f"language_model.layers.{{bid}}.{ours}" for hf, ours in _DEC.items()},
}
_TABLE = {
    # transformers 5 nests the three parts under "model." ...
    **{f"model.audio_tower.{hf}": ours for hf, ours in _AUDIO.items()},
    **{f"model.language_model.{hf}": ours for hf, ours in _TEXT.items()},
    "model.multi_modal_projector.linear.weight": "multi_modal_projector.linear.weight",
    "model.multi_modal_projector.linear.bias": "multi_modal_projector.linear.bias",
    "lm_head.weight": "lm_head.weight",
    # ... transformers 4 (the published checkpoints) kept them at the top, the LM as a CausalLM.
    **{f"audio_tower.{hf}": ours for hf, ours in _AUDIO.items()},
    **{f"language_model.model.{hf}": ours for hf, ours in _TEXT.items()},
    "multi_modal_projector.linear.weight": "multi_modal_projector.linear.weight",
    "multi_modal_projector.linear.bias": "multi_modal_projector.linear.bias",
    "language_model.lm_head.weight": "lm_head.weight",
}
TOKENIZER_ASSETS = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "chat_template.json", "special_tokens_map.json")


class HFQwen2AudioConverter(CheckpointConverter):
    name = "hf-qwen2-audio"
    architecture = "qwen2-audio"
    markers = "config.json with model_type qwen2_audio"
    detect_specificity = DETECT_KEYED_VALUE
    tensor_table = TensorTable(_TABLE)

    @classmethod
    def detect(cls, path: Path) -> str | None:
        return detect_hf_model_type(path, ("qwen2_audio",))

    @functools.cached_property
    def _config(self) -> dict:
        return read_json_object(self.path / "config.json")

    @functools.cached_property
    def _weight_files(self) -> list[Path]:
        files = weight_files(self.path)
        if any(f.suffix != ".safetensors" for f in files):
            raise ConversionError(f"{self.path}: Qwen2-Audio is read from safetensors only (found {files[0].name})")
        return files

    def source_files(self) -> list[Path]:
        return list(self._weight_files)

    def build_config(self) -> Qwen2AudioConfig:
        config = qwen2_audio_config(self._config, f"{self.path}/config.json")
        self._check_index()
        return config

    def _check_index(self) -> None:
        """Every name of the index in the shard it names; every shard's tensors in the index."""
        from oasr.io.mapped import safetensors_names

        index = self.path / "model.safetensors.index.json"
        if not index.is_file():
            return
        weight_map = read_json_object(index)["weight_map"]
        held: dict[str, str] = {}
        for file in self._weight_files:
            for name in safetensors_names(file):
                if name in held:
                    raise ConversionError(f"{name} is in both {held[name]} and {file.name}")
                held[name] = file.name
        for name, shard in weight_map.items():
            if held.get(name) != shard:
                where = f"in {held[name]}" if name in held else "in no shard"
                raise ConversionError(f"{index.name} puts {name} in {shard}, but it is {where}")
        unlisted = sorted(set(held) - set(weight_map))
        if unlisted:
            raise ConversionError(f"{index.name} does not list {len(unlisted)} tensor(s) of the shards (e.g. {unlisted[0]})")

    def load_state_dict(self):
        from oasr.io.mapped import map_safetensors

        state = {}
        for file in self._weight_files:  # each a private read-only mapping: pages come in as read
            state.update(map_safetensors(file))
        return state

    def tokenizer_files(self) -> dict[str, Path]:
        return {n: self.path / n for n in TOKENIZER_ASSETS if (self.path / n).is_file()}

    def build_specs(self, config: Qwen2AudioConfig):
        from oasr.specs import DecodingDefaults, FeatureSpec, TokenizerSpec

        files = self.tokenizer_files()
        fe = feature_extractor_settings(self.path)
        features = FeatureSpec(
            kind="whisper_logmel",
            sample_rate=int(fe.get("sampling_rate", 16000)),
            n_mels=int(fe.get("feature_size", config.n_mels)),
            n_fft=int(fe.get("n_fft", 400)),
            hop_length=int(fe.get("hop_length", 160)),
            chunk_seconds=float(fe.get("chunk_length", 30)),
        )
        if features.n_mels != config.n_mels:
            raise ConversionError(f"{self.path}: the feature extractor gives {features.n_mels} mel bins, the encoder takes {config.n_mels}")
        if round(features.chunk_seconds * features.sample_rate / features.hop_length) != 2 * config.audio_ctx:
            raise ConversionError(f"{self.path}: a {features.chunk_seconds:g} s window does not fill the encoder's {2 * config.audio_ctx} frames")
        gen = read_json_object(self.path / "generation_config.json") if (self.path / "generation_config.json").is_file() else {}
        eos = stop_ids(gen.get("eos_token_id", self._config.get("text_config", {}).get("eos_token_id")), f"{self.path}/generation_config.json")
        options: dict[str, Any] = {"eos_ids": eos, "max_new_tokens": int(gen.get("max_new_tokens") or MAX_NEW_TOKENS)}
        tokenizer = TokenizerSpec(kind="qwen2_audio" if "tokenizer.json" in files else "none", files=tuple(sorted(files)) if "tokenizer.json" in files else ())
        decoding = DecodingDefaults(family="speech_llm", eos_id=eos[0] if eos else None, options=options)
        return tokenizer, files if "tokenizer.json" in files else {}, features, decoding

    def notes(self) -> list[str]:
        if (self.path / "tokenizer.json").is_file():
            return []
        return [f"{self.path} has no tokenizer.json: the model cannot turn tokens into text"]


def stop_ids(value: Any, where: str) -> list[int]:
    if value is None:
        return []
    ids = value if isinstance(value, list) else [value]
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise ConversionError(f"{where}: eos_token_id must be a token id or a list of them, not {value!r}")
    return list(ids)


def qwen2_audio_config(cfg: Mapping[str, Any], where: str) -> Qwen2AudioConfig:
    """config.json -> the model config, omitted fields from transformers' defaults; what oasr's
    model does not compute (sliding windows, other activations or rope scalings) is refused."""
    from oasr.models.qwen2_audio import Qwen2AudioConfig

    try:
        text = {**QWEN2_DEFAULTS, **dict(cfg.get("text_config") or {})}
        audio = {**ENCODER_DEFAULTS, **dict(cfg.get("audio_config") or {})}
        rope = dict(text.get("rope_parameters") or {})
        theta = float(rope.get("rope_theta", text["rope_theta"]))
        if rope.get("rope_type", "default") != "default" or text.get("rope_scaling"):
            raise ValueError(f"rope scaling {rope.get('rope_type') or text.get('rope_scaling')!r} (only the default rope is computed)")
        if text["use_sliding_window"]:
            raise ValueError("use_sliding_window (sliding-window attention is not computed)")
        if text["hidden_act"] != "silu" or audio["activation_function"] != "gelu" or audio["scale_embedding"]:
            raise ValueError("an activation or embedding scale other than Qwen2-Audio's (silu, gelu, none)")
        ints = {k: text[k] for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "max_position_embeddings")}
        ints.update({k: audio[k] for k in ("num_mel_bins", "encoder_layers", "encoder_attention_heads", "encoder_ffn_dim", "d_model", "max_source_positions")})
        for key, value in ints.items():
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{key} is {value!r}, not a positive integer")
        heads = int(text["num_attention_heads"])
        kv = int(text["num_key_value_heads"] or heads)
        if text["hidden_size"] % heads or heads % kv or audio["d_model"] % audio["encoder_attention_heads"]:
            raise ValueError("head counts that do not divide the widths")
        return Qwen2AudioConfig(
            n_mels=audio["num_mel_bins"],
            audio_ctx=audio["max_source_positions"],
            audio_state=audio["d_model"],
            audio_heads=audio["encoder_attention_heads"],
            audio_layers=audio["encoder_layers"],
            audio_ffn=audio["encoder_ffn_dim"],
            vocab_size=text["vocab_size"],
            hidden_size=text["hidden_size"],
            intermediate_size=text["intermediate_size"],
            num_layers=text["num_hidden_layers"],
            num_heads=heads,
            num_kv_heads=kv,
            rope_theta=theta,
            rms_norm_eps=float(text["rms_norm_eps"]),
            max_positions=text["max_position_embeddings"],
            audio_token_id=int(cfg.get("audio_token_index", cfg.get("audio_token_id", AUDIO_TOKEN_ID))),
            tie_word_embeddings=bool(text["tie_word_embeddings"]),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ConversionError(f"{where}: unsupported Qwen2-Audio config: {e}") from e
