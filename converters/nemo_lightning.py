"""PyTorch Lightning ``.ckpt`` files of NeMo models (training snapshots: ``state_dict``, the model
config as the ``cfg`` hyper-parameter, optimiser and loop states, which are left out).

Read with ``torch.load(weights_only=True)`` and inert stand-ins for the OmegaConf and other
classes the file pickles (``oasr.io.nemo.pickled``): nothing is imported or run. A SentencePiece
model is looked for beside the checkpoint under the base name its config gives.
"""

from __future__ import annotations

import functools
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oasr.conversion.base import CheckpointConverter
from oasr.errors import ConversionError

from .nemo import NemoSource

if TYPE_CHECKING:
    from oasr.io.nemo.lightning import LightningCheckpoint
    from torch import Tensor

SUFFIX = ".ckpt"
MAX_PICKLE = 64 << 20  # data.pkl holds the object tree, tensors are stored apart
_MARKERS = (b"hyper_parameters", b"state_dict")


def _pickle_bytes(path: Path) -> bytes | None:
    """The object tree (``<name>/data.pkl``) of a torch zip checkpoint, or None."""
    try:
        with zipfile.ZipFile(path) as z:
            names = [n for n in z.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
            if len(names) != 1:
                return None
            info = z.getinfo(names[0])
            if info.file_size > MAX_PICKLE:
                return None
            with z.open(info) as f:
                return f.read(MAX_PICKLE)
    except (OSError, zipfile.BadZipFile, ValueError, EOFError, RuntimeError, NotImplementedError):
        return None


class NemoLightningConverter(NemoSource, CheckpointConverter):
    name = "nemo-lightning"
    markers = f"a Lightning {SUFFIX} whose hyper_parameters hold a NeMo model config"

    @classmethod
    def detect(cls, path: Path) -> str | None:
        path = Path(path)
        if not (path.is_file() and path.suffix == SUFFIX):
            return None
        tree = _pickle_bytes(path)
        if tree is None or not all(m in tree for m in _MARKERS) or b"nemo.collections." not in tree:
            return None
        return f"{path.name} (a Lightning checkpoint whose hyper-parameters name a NeMo model)"

    @functools.cached_property
    def _checkpoint(self) -> LightningCheckpoint:
        from oasr.io.nemo.lightning import read_lightning_checkpoint

        return read_lightning_checkpoint(self.path)

    @property
    def nemo_config(self) -> dict[str, Any]:
        config = self._checkpoint.config
        if config is None:
            raise ConversionError(f"{self.path}: the Lightning checkpoint holds no hyper_parameters (no model config)")
        return config

    @property
    def artifact_folder(self) -> Path:
        return self.path.parent

    def nemo_tensors(self) -> dict[str, Tensor]:
        return self._checkpoint.state_dict

    def source_files(self) -> list[Path]:
        return [self.path]
