"""3D-Speaker's CAM++ speaker encoder: a plain state dict (``campplus_cn_en_common.pt``,
``campplus_voxceleb.bin``, ``campplus_cn_common.bin``), or a folder holding one.

The topology (front channels, TDNN width, the dense blocks' layer counts, growth rate and
bottleneck width, embedding size) is read from the tensors; the dense blocks' dilations, which
no tensor shows, are 3D-Speaker's (1, 2, 2) for three blocks. The front end is 3D-Speaker's
``FBank(80, mean_nor=True)``; its mel-band count is the front's input (channels x bands / 8).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING

from oasr.conversion.base import DETECT_NAMED_CONFIG, CheckpointConverter
from oasr.conversion.tensor_map import TensorTable
from oasr.errors import ConversionError
from oasr.io.checkpoint import load_torch_file

if TYPE_CHECKING:
    from oasr.models.campplus import CamPlusConfig
    import torch

SUFFIXES = (".pt", ".bin", ".ckpt")
DILATIONS = {3: (1, 2, 2)}  # 3D-Speaker's CAMPPlus: dilations by number of dense blocks
_BN = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")
_RES = [
    *(f"conv{i}.weight" for i in (1, 2)),
    *(f"bn{i}.{p}" for i in (1, 2) for p in _BN),
    "shortcut.0.weight",
    *(f"shortcut.1.{p}" for p in _BN),
]
_DENSE_LAYER = [
    *(f"nonlinear{i}.batchnorm.{p}" for i in (1, 2) for p in _BN),
    "linear1.weight",
    "cam_layer.linear_local.weight",
    *(f"cam_layer.linear{i}.{p}" for i in (1, 2) for p in ("weight", "bias")),
]
_MAX_BLOCKS = 8
_NAMES = [
    "head.conv1.weight",
    *(f"head.bn{i}.{p}" for i in (1, 2) for p in _BN),
    "head.conv2.weight",
    *(f"head.layer{s}.{{bid}}.{n}" for s in (1, 2) for n in _RES),
    "xvector.tdnn.linear.weight",
    *(f"xvector.tdnn.nonlinear.batchnorm.{p}" for p in _BN),
    *(f"xvector.block{b}.tdnnd{{bid}}.{n}" for b in range(1, _MAX_BLOCKS + 1) for n in _DENSE_LAYER),
    *(f"xvector.transit{b}.nonlinear.batchnorm.{p}" for b in range(1, _MAX_BLOCKS + 1) for p in _BN),
    *(f"xvector.transit{b}.linear.weight" for b in range(1, _MAX_BLOCKS + 1)),
    *(f"xvector.out_nonlinear.batchnorm.{p}" for p in _BN),
    "xvector.dense.linear.weight",
    *(f"xvector.dense.nonlinear.batchnorm.{p}" for p in ("running_mean", "running_var", "num_batches_tracked")),
]
_LAYER = re.compile(r"xvector\.block(\d+)\.tdnnd(\d+)\.linear1\.weight$")
_MARKERS = ("head.conv1.weight", "xvector.tdnn.linear.weight", "xvector.dense.linear.weight")


def _state(file: Path) -> dict | None:
    import torch

    try:
        state = load_torch_file(file)
    except ConversionError:
        return None
    if not isinstance(state, dict) or not all(k in state for k in _MARKERS):
        return None
    if not all(isinstance(k, str) and isinstance(t, torch.Tensor) for k, t in state.items()):
        return None
    return state


class CamPlusConverter(CheckpointConverter):
    name = "campplus"
    architecture = "campplus"
    markers = "a 3D-Speaker CAM++ state dict (head.*, xvector.*) as .pt/.bin/.ckpt, or a folder holding one"
    detect_specificity = DETECT_NAMED_CONFIG  # the tensors' own names identify it
    tensor_table = TensorTable({n: n for n in _NAMES})

    @classmethod
    def detect(cls, path: Path) -> str | None:
        file = cls._file(path)
        if file is None or _state(file) is None:
            return None
        return f"{file.name} (a 3D-Speaker CAM++ state dict)"

    @staticmethod
    def _file(path: Path) -> Path | None:
        path = Path(path)
        if path.is_file():
            return path if path.suffix in SUFFIXES else None
        if not path.is_dir():
            return None
        found = [f for f in sorted(path.iterdir()) if f.suffix in SUFFIXES and "campplus" in f.name.lower()]
        return found[0] if len(found) == 1 else None

    @property
    def file(self) -> Path:
        file = self._file(self.path)
        if file is None:
            raise ConversionError(f"{self.path}: expected one CAM++ state dict (*campplus*.pt/.bin)")
        return file

    @functools.cached_property
    def _state(self) -> dict:
        state = _state(self.file)
        if state is None:
            raise ConversionError(f"{self.file} is not a CAM++ state dict (no {', '.join(_MARKERS)})")
        return state

    def source_files(self) -> list[Path]:
        return [self.file]

    def build_config(self) -> CamPlusConfig:
        from oasr.models.campplus import CamPlusConfig

        state = self._state
        layers: dict[int, int] = {}
        for name in state:
            m = _LAYER.match(name)
            if m:
                layers[int(m.group(1))] = max(layers.get(int(m.group(1)), 0), int(m.group(2)))
        blocks = sorted(layers)
        if not blocks or blocks != list(range(1, len(blocks) + 1)) or len(blocks) not in DILATIONS:
            raise ConversionError(f"{self.file}: dense blocks {blocks}; CAM++ has {', '.join(map(str, DILATIONS))}")
        m_channels = int(state["head.conv1.weight"].shape[0])
        tdnn = state["xvector.tdnn.linear.weight"]
        local = state["xvector.block1.tdnnd1.cam_layer.linear_local.weight"]
        try:
            config = CamPlusConfig(
                feat_dim=int(tdnn.shape[1]) // m_channels * 8,
                embedding_size=int(state["xvector.dense.linear.weight"].shape[0]),
                m_channels=m_channels,
                growth_rate=int(local.shape[0]),
                bn_size=int(local.shape[1]) // int(local.shape[0]),
                init_channels=int(tdnn.shape[0]),
                block_layers=tuple(layers[b] for b in blocks),
                block_dilations=DILATIONS[len(blocks)],
            )
        except (KeyError, ValueError) as e:
            raise ConversionError(f"{self.file}: not a CAM++ this runtime reads ({e})") from e
        if tdnn.shape[1] != m_channels * (config.feat_dim // 8):
            raise ConversionError(f"{self.file}: the TDNN reads {tdnn.shape[1]} channels, not {m_channels} x bands / 8")
        return config

    def load_state_dict(self) -> dict[str, torch.Tensor]:
        return dict(self._state)

    def build_specs(self, config):
        from oasr.models.campplus import campplus_specs

        tokenizer, features, decoding = campplus_specs(config)
        return tokenizer, {}, features, decoding
