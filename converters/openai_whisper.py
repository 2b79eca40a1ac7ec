"""openai-whisper ``.pt`` checkpoints: ``{"dims": {...}, "model_state_dict": {...}}``.

oasr's Whisper uses openai's tensor names, so the table is the identity, written out so that
every name the format may hold is stated and a stray tensor is refused.
"""

from __future__ import annotations

import functools
import operator
import re
from pathlib import Path

from oasr.io.checkpoint import load_torch_file
from oasr.conversion.base import DETECT_ASSET_LAYOUT, CheckpointConverter
from oasr.errors import ConversionError
from oasr.models.whisper_config import WhisperConfig, whisper_specs
from oasr.conversion.tensor_map import TensorTable
from oasr.tokenizers.whisper import find_tokenizer_assets

_BLOCK = [
    "attn.query.weight", "attn.query.bias", "attn.key.weight", "attn.value.weight", "attn.value.bias",
    "attn.out.weight", "attn.out.bias", "attn_ln.weight", "attn_ln.bias",
    "mlp.0.weight", "mlp.0.bias", "mlp.2.weight", "mlp.2.bias", "mlp_ln.weight", "mlp_ln.bias",
]
_CROSS = [name.replace("attn", "cross_attn", 1) for name in _BLOCK[:9]]
_NAMES = [
    "encoder.conv1.weight", "encoder.conv1.bias", "encoder.conv2.weight", "encoder.conv2.bias",
    "encoder.positional_embedding", "encoder.ln_post.weight", "encoder.ln_post.bias",
    *(f"encoder.blocks.{{bid}}.{n}" for n in _BLOCK),
    "decoder.token_embedding.weight", "decoder.positional_embedding", "decoder.ln.weight", "decoder.ln.bias",
    *(f"decoder.blocks.{{bid}}.{n}" for n in _BLOCK + _CROSS),
]

_DIMS = tuple(f.name for f in WhisperConfig.__dataclass_fields__.values())
_BLOCK_ID = re.compile(r"(encoder|decoder)\.blocks\.([0-9]+)\.")


def check_whisper_config(config: WhisperConfig, where: str) -> None:
    """Refuse dims no Whisper has (before a model is built from them): positive integers, heads
    that divide the width, one width for encoder and decoder, an even encoder width of 4 or more
    (its sinusoidal position table)."""
    for name in _DIMS:
        value = getattr(config, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConversionError(f"{where}: {name} is {value!r}, not a positive integer")
    for state, head in (("n_audio_state", "n_audio_head"), ("n_text_state", "n_text_head")):
        if getattr(config, state) % getattr(config, head):
            raise ConversionError(f"{where}: {head} {getattr(config, head)} does not divide {state} {getattr(config, state)}")
    if config.n_audio_state != config.n_text_state:
        raise ConversionError(
            f"{where}: n_audio_state {config.n_audio_state} differs from n_text_state {config.n_text_state} "
            "(the decoder attends to the encoder's states)"
        )
    if config.n_audio_state % 2 or config.n_audio_state < 4:
        raise ConversionError(f"{where}: n_audio_state {config.n_audio_state} is not an even width of 4 or more")



class OpenAIWhisperConverter(CheckpointConverter):
    name = "openai-whisper"
    architecture = "whisper"
    markers = "a .pt file (or a directory holding exactly one) with dims and model_state_dict"
    detect_specificity = DETECT_ASSET_LAYOUT
    tensor_table = TensorTable({n: n for n in _NAMES})

    @classmethod
    def detect(cls, path: Path) -> str | None:
        file = cls._checkpoint_file(path)
        return f"{file.name} (a torch checkpoint)" if file else None

    @staticmethod
    def _checkpoint_file(path: Path) -> Path | None:
        path = Path(path)
        if path.is_file():
            return path if path.suffix == ".pt" else None
        found = sorted(path.glob("*.pt")) if path.is_dir() else []
        return found[0] if len(found) == 1 else None

    @property
    def file(self) -> Path:
        file = self._checkpoint_file(self.path)
        if file is None:
            raise ConversionError(f"{self.path}: expected one .pt file")
        return file

    @functools.cached_property
    def _checkpoint(self) -> dict:
        from torch import Tensor

        ckpt = load_torch_file(self.file)
        if not isinstance(ckpt, dict) or "dims" not in ckpt or "model_state_dict" not in ckpt:
            raise ConversionError(f"{self.file} is not an openai-whisper checkpoint: no dims and model_state_dict")
        if not isinstance(ckpt["dims"], dict):
            raise ConversionError(f"{self.file}: dims is a {type(ckpt['dims']).__name__}, not a mapping")
        state = ckpt["model_state_dict"]
        if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(t, Tensor) for k, t in state.items()):
            raise ConversionError(f"{self.file}: model_state_dict is not a mapping of names to tensors")
        return ckpt

    def source_files(self) -> list[Path]:
        return [self.file]

    def build_config(self) -> WhisperConfig:
        dims = self._checkpoint["dims"]
        missing = [k for k in _DIMS if k not in dims]
        if missing:
            raise ConversionError(f"{self.file}: dims lacks {', '.join(missing)}")
        values = {}
        for k in _DIMS:
            try:
                if isinstance(dims[k], bool):
                    raise TypeError
                values[k] = operator.index(dims[k])
            except (TypeError, ValueError, RuntimeError):
                raise ConversionError(f"{self.file}: dims {k} is {dims[k]!r:.40}, not an integer") from None
        config = WhisperConfig(**values)
        check_whisper_config(config, f"{self.file} dims")
        self._check_against_tensors(config)
        return config

    def _check_against_tensors(self, config: WhisperConfig) -> None:
        """The dims must describe the tensors: the model built from them (and the position table
        computed from them) is then no larger than the checkpoint itself."""
        state = self._checkpoint["model_state_dict"]
        for side, want in (("encoder", config.n_audio_layer), ("decoder", config.n_text_layer)):
            ids = {int(m.group(2)) for k in state if (m := _BLOCK_ID.match(k)) and m.group(1) == side}
            if len(ids) != want or ids != set(range(want)):
                raise ConversionError(f"{self.file}: dims say {want} {side} layers; model_state_dict holds {len(ids)}")
        shapes = {
            "encoder.positional_embedding": (config.n_audio_ctx, config.n_audio_state),
            "decoder.positional_embedding": (config.n_text_ctx, config.n_text_state),
            "decoder.token_embedding.weight": (config.n_vocab, config.n_text_state),
            "encoder.conv1.weight": (config.n_audio_state, config.n_mels, 3),
        }
        for name, shape in shapes.items():
            if name in state and tuple(state[name].shape) != shape:
                raise ConversionError(
                    f"{self.file}: {name} has shape {list(state[name].shape)}; dims describe {list(shape)}"
                )

    def load_state_dict(self):
        return dict(self._checkpoint["model_state_dict"])

    def _tokenizer_files(self) -> dict[str, Path]:
        # openai's own tokenizer files ship inside its package; a copy beside the checkpoint is used.
        return find_tokenizer_assets(self.file.parent)

    def build_specs(self, config):
        files = self._tokenizer_files()
        tokenizer, features, decoding = whisper_specs(config, files)
        return tokenizer, files, features, decoding

    def notes(self) -> list[str]:
        if self._tokenizer_files():
            return []
        return [
            f"no tokenizer assets beside {self.file.name} (tokenizer.json, or vocab.json + merges.txt): "
            "the model converts but cannot turn tokens into text"
        ]
