"""openai-whisper ``.pt`` checkpoints: ``{"dims": {...}, "model_state_dict": {...}}``.

oasr's Whisper uses openai's tensor names, so the table is the identity, written out so that
every name the format may hold is stated and a stray tensor is refused.
"""

from __future__ import annotations

import functools
from pathlib import Path

from oasr.io.checkpoint import load_torch_file
from oasr.conversion.base import DETECT_ASSET_LAYOUT, CheckpointConverter
from oasr.errors import ConversionError
from oasr.models.whisper import WhisperConfig, whisper_specs
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
        ckpt = load_torch_file(self.file)
        if not isinstance(ckpt, dict) or "dims" not in ckpt or "model_state_dict" not in ckpt:
            raise ConversionError(f"{self.file} is not an openai-whisper checkpoint: no dims and model_state_dict")
        return ckpt

    def source_files(self) -> list[Path]:
        return [self.file]

    def build_config(self) -> WhisperConfig:
        dims = self._checkpoint["dims"]
        missing = [k for k in _DIMS if k not in dims]
        if missing:
            raise ConversionError(f"{self.file}: dims lacks {', '.join(missing)}")
        return WhisperConfig(**{k: int(dims[k]) for k in _DIMS})

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
