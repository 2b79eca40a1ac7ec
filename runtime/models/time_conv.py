"""A depthwise convolution over time on frames laid out [B, T, C], as the encoders keep them."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn


def depthwise_over_time(conv: nn.Conv1d, x: Tensor, left: int = 0, right: int = 0) -> Tensor:
    """x [B, T, C] -> ``conv`` (a depthwise ``Conv1d``, its own padding kept) over time, [B, T', C],
    with ``left`` and ``right`` frames of zeros added first.

    [B, T, C] is channels-last memory for a [B, C, 1, T] image: oneDNN runs the conv on it as it
    lies, 4 to 20 times faster on the CPU than ``Conv1d`` on the [B, C, T] transpose, which it
    reorders first (0.42 against 6.7 ms for 1024 channels, kernel 9, 750 frames). As a
    [B, C, T, 1] image the same memory is reordered too."""
    if left or right:
        x = F.pad(x, (0, 0, left, right))
    image = x.transpose(1, 2).unsqueeze(2)  # [B, C, 1, T]
    out = F.conv2d(image, conv.weight.unsqueeze(2), conv.bias, padding=(0, conv.padding[0]), groups=conv.groups)
    return out.squeeze(2).transpose(1, 2)
