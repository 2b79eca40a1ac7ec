"""NeMo distributed checkpoints: a folder with ``.metadata`` and ``*.distcp`` shards (written by
``torch.distributed.checkpoint``, e.g. by Lightning's ``ModelParallelStrategy`` for FSDP2 or
tensor-parallel training), read on one process into one bundle.

The tensors are Lightning's ``state_dict.*`` entries (all tensor entries when there are none);
the model config is the ``cfg`` hyper-parameter of Lightning's ``meta.pt`` beside the shards, or
a ``model_config.yaml`` in the folder. ``tokenizer.model`` is looked for in the folder.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oasr.conversion.base import CheckpointConverter
from oasr.errors import ConversionError
from oasr.io.nemo.archive import CONFIG_NAME
from oasr.io.nemo.config import read_config_yaml

from .nemo import NemoSource

if TYPE_CHECKING:
    from torch import Tensor


class NemoDistcpConverter(NemoSource, CheckpointConverter):
    name = "nemo-distcp"
    markers = "a folder with .metadata and *.distcp shards, and NeMo's config (meta.pt or model_config.yaml)"

    @classmethod
    def detect(cls, path: Path) -> str | None:
        path = Path(path)
        if not (path / ".metadata").is_file():  # looked at before the reader loads: it imports torch
            return None
        from oasr.io.nemo.distcp import LIGHTNING_META, METADATA_NAME, SHARD_SUFFIX, is_distributed_checkpoint

        if not is_distributed_checkpoint(path):
            return None
        config = next((n for n in (LIGHTNING_META, CONFIG_NAME) if (path / n).is_file()), None)
        if config is None:
            return None
        return f"{METADATA_NAME} and {SHARD_SUFFIX} shards with {config} (a distributed NeMo checkpoint)"

    @functools.cached_property
    def nemo_config(self) -> dict[str, Any]:
        from oasr.io.nemo.distcp import LIGHTNING_META
        from oasr.io.nemo.lightning import hyper_parameters_config
        from oasr.io.nemo.pickled import load_torch_pickle

        if (self.path / CONFIG_NAME).is_file():
            return read_config_yaml(self.path / CONFIG_NAME)
        meta = self.path / LIGHTNING_META
        if meta.is_file():
            data = load_torch_pickle(meta)
            config = hyper_parameters_config(data, str(meta)) if isinstance(data, dict) else None
            if config is not None:
                return config
        raise ConversionError(
            f"{self.path}: no NeMo model config beside the shards ({LIGHTNING_META} with hyper_parameters, or {CONFIG_NAME})"
        )

    @property
    def artifact_folder(self) -> Path:
        return self.path

    def nemo_tensors(self) -> dict[str, Tensor]:
        from oasr.io.nemo.distcp import read_distributed_checkpoint

        return read_distributed_checkpoint(self.path)

    def source_files(self) -> list[Path]:
        from oasr.io.nemo.distcp import LIGHTNING_META, METADATA_NAME, SHARD_SUFFIX

        shards = sorted(self.path.glob(f"*{SHARD_SUFFIX}"))
        config = [self.path / n for n in (LIGHTNING_META, CONFIG_NAME) if (self.path / n).is_file()]
        return [self.path / METADATA_NAME, *shards, *config]
