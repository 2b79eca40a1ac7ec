"""NeMo state dicts exported as ``.safetensors`` (NeMo's own tensor names) with the model's
``model_config.yaml`` beside them: a file (its folder holds the config) or a folder holding one
``.safetensors`` file and the config. Artifacts (``tokenizer.model``) are looked for in that folder.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oasr.conversion.base import CheckpointConverter
from oasr.errors import ConversionError
from oasr.io.checkpoint import load_safetensors_file
from oasr.io.nemo.archive import CONFIG_NAME
from oasr.io.nemo.config import read_config_yaml

from .nemo import NemoSource

if TYPE_CHECKING:
    from torch import Tensor

SUFFIX = ".safetensors"


def _weights(path: Path) -> Path | None:
    if path.is_file():
        return path if path.suffix == SUFFIX and (path.parent / CONFIG_NAME).is_file() else None
    if path.is_dir() and (path / CONFIG_NAME).is_file():
        found = sorted(path.glob(f"*{SUFFIX}"))
        return found[0] if len(found) == 1 else None
    return None


class NemoSafetensorsConverter(NemoSource, CheckpointConverter):
    name = "nemo-safetensors"
    markers = f"a {SUFFIX} file of NeMo tensor names with {CONFIG_NAME} beside it (or a folder holding both)"

    @classmethod
    def detect(cls, path: Path) -> str | None:
        weights = _weights(Path(path))
        return f"{weights.name} beside NeMo's {CONFIG_NAME}" if weights is not None else None

    @property
    def weights_file(self) -> Path:
        weights = _weights(self.path)
        if weights is None:
            raise ConversionError(f"{self.path}: expected {self.markers}")
        return weights

    @functools.cached_property
    def nemo_config(self) -> dict[str, Any]:
        return read_config_yaml(self.weights_file.parent / CONFIG_NAME)

    @property
    def artifact_folder(self) -> Path:
        return self.weights_file.parent

    def nemo_tensors(self) -> dict[str, Tensor]:
        from oasr.io.nemo.lightning import named_tensors

        return named_tensors(load_safetensors_file(self.weights_file), str(self.weights_file))

    def source_files(self) -> list[Path]:
        return [self.weights_file, self.weights_file.parent / CONFIG_NAME]
