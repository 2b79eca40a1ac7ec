"""NeMo ``.nemo`` archives (``save_to``'s tar, or the gzipped tar of NeMo before 1.7), and the
folder ``save_to`` leaves with ``pack_nemo_file=False`` (``model_config.yaml`` beside
``model_weights.ckpt``).

The archive is checked and extracted into a temporary folder by ``oasr.io.nemo.archive`` (held
while the converter lives, removed when it is closed or collected); ``model_weights.ckpt`` is
read with ``torch.load(weights_only=True)``, artifacts (``nemo:<name>`` entries, the SentencePiece
``tokenizer.model``) are found among the extracted members.
"""

from __future__ import annotations

import functools
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oasr.conversion.base import CheckpointConverter
from oasr.io.nemo.archive import CONFIG_NAME, WEIGHTS_NAME, NemoArchive, looks_like_tar

from .nemo import NemoSource

if TYPE_CHECKING:
    from torch import Tensor

SUFFIX = ".nemo"


class NemoArchiveConverter(NemoSource, CheckpointConverter):
    name = "nemo"
    markers = f"a {SUFFIX} archive (a tar holding {CONFIG_NAME} and {WEIGHTS_NAME}), or a folder holding both"

    @classmethod
    def detect(cls, path: Path) -> str | None:
        path = Path(path)
        if path.is_file():
            return f"{path.name} (a NeMo {SUFFIX} archive)" if path.suffix == SUFFIX and looks_like_tar(path) else None
        if path.is_dir() and (path / CONFIG_NAME).is_file() and (path / WEIGHTS_NAME).is_file():
            return f"{CONFIG_NAME} beside {WEIGHTS_NAME} (an unpacked NeMo archive)"
        return None

    @functools.cached_property
    def _folder(self) -> Path:
        """Where the members are: the unpacked folder itself, or the archive extracted."""
        if self.path.is_dir():
            return self.path
        archive = NemoArchive(self.path)
        self._archive = archive
        weakref.finalize(self, archive.close)  # the temporary folder goes with the converter
        archive.config_file, archive.weights_file  # both present, or a one-line error now
        return archive.folder

    def close(self) -> None:
        archive = self.__dict__.get("_archive")
        if archive is not None:
            archive.close()

    @functools.cached_property
    def nemo_config(self) -> dict[str, Any]:
        from oasr.io.nemo.config import read_config_yaml

        return read_config_yaml(self._folder / CONFIG_NAME)

    @property
    def artifact_folder(self) -> Path:
        return self._folder

    def nemo_tensors(self) -> dict[str, Tensor]:
        from oasr.io.nemo import read_state_dict

        return read_state_dict(self._folder / WEIGHTS_NAME)

    def source_files(self) -> list[Path]:
        if self.path.is_dir():
            return [self.path / CONFIG_NAME, self.path / WEIGHTS_NAME]
        return [self.path]
