"""Weight-only integer schemes: how a float weight [out, in] becomes stored integer tensors and back.

``int8``: per-output-channel symmetric. ``weight`` int8 [out, in] in -127..127 and ``weight_scale``
fp32 [out]; w = q * scale. The contract's layout (and CTranslate2's).

``int4``: group-wise symmetric along ``in``, groups of ``GROUP_SIZE`` (the last one may be short).
``weight`` uint8 [out, in / 2] holds two codes per byte, low nibble first (column 2j in the low
nibble, 2j + 1 in the high one), each code q + 8 for q in -8..7 (-8 is never produced);
``weight_scale`` fp32 [out, groups]; w = q * scale of its group.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

SCHEMES = ("int8", "int4")
GROUP_SIZE = 128


def quantize_int8(weight: Tensor) -> tuple[Tensor, Tensor]:
    """weight [out, in] float -> (q int8 [out, in], scale fp32 [out])."""
    w = weight.float()
    scale = w.abs().amax(dim=1) / 127.0
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # an all-zero row stays zero
    q = torch.round(w / scale[:, None]).clamp_(-127, 127).to(torch.int8)
    return q, scale


def dequantize_int8(q: Tensor, scale: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """q int8 [out, in], scale [out] -> weight [out, in] in ``dtype``."""
    return (q.to(torch.float32) * scale.to(torch.float32)[:, None]).to(dtype)


def int4_groups(in_features: int, group_size: int = GROUP_SIZE) -> int:
    return math.ceil(in_features / group_size)


def quantize_int4(weight: Tensor, group_size: int = GROUP_SIZE) -> tuple[Tensor, Tensor]:
    """weight [out, in] float (in even) -> (packed uint8 [out, in / 2], scale fp32 [out, groups])."""
    out_features, in_features = weight.shape
    if in_features % 2:
        raise ValueError(f"int4 packs two columns per byte; {in_features} input features is odd")
    groups = int4_groups(in_features, group_size)
    padded = torch.zeros(out_features, groups * group_size, dtype=torch.float32)
    padded[:, :in_features] = weight.float()
    g = padded.view(out_features, groups, group_size)
    scale = g.abs().amax(dim=2) / 7.0
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = torch.round(g / scale[..., None]).clamp_(-7, 7).view(out_features, -1)[:, :in_features]
    return pack_int4(q.to(torch.int8)), scale


def pack_int4(q: Tensor) -> Tensor:
    """q int8 [out, in] in -8..7 (in even) -> uint8 [out, in / 2], low nibble first, code q + 8."""
    codes = (q.to(torch.int16) + 8).to(torch.uint8)
    return codes[:, 0::2] | (codes[:, 1::2] << 4)


def unpack_int4(packed: Tensor) -> Tensor:
    """uint8 [out, in / 2] -> q int8 [out, in] in -8..7."""
    low = (packed & 0x0F).to(torch.int8) - 8
    high = (packed >> 4).to(torch.int8) - 8
    return torch.stack([low, high], dim=2).view(packed.shape[0], -1)


def dequantize_int4(packed: Tensor, scale: Tensor, group_size: int = GROUP_SIZE, dtype: torch.dtype = torch.float32) -> Tensor:
    """packed uint8 [out, in / 2], scale [out, groups] -> weight [out, in] in ``dtype``."""
    q = unpack_int4(packed).to(torch.float32)
    per_column = scale.to(torch.float32).repeat_interleave(group_size, dim=1)[:, : q.shape[1]]
    return (q * per_column).to(dtype)


def int4_to_int8(packed: Tensor, scale: Tensor, group_size: int = GROUP_SIZE) -> tuple[Tensor, Tensor]:
    """An int4 weight as the nearest per-output-channel int8 one: (q int8 [out, in], scale fp32 [out]).

    The channel scale is the largest group's, so each int4 value maps onto the int8 grid with at
    most half an int8 step of error (a step 18x finer than the int4 one).
    """
    q4 = unpack_int4(packed)
    out_features, in_features = q4.shape
    groups = scale.shape[1]
    row = scale.float().amax(dim=1) * (7.0 / 127.0)  # [out]
    factor = scale.float() / row[:, None]  # [out, groups], at most 127 / 7
    if in_features != groups * group_size:
        q4 = torch.nn.functional.pad(q4, (0, groups * group_size - in_features))
    q8 = torch.round(q4.view(out_features, groups, group_size) * factor[..., None]).to(torch.int8)
    return q8.view(out_features, -1)[:, :in_features], row
