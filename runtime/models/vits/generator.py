"""HiFi-GAN generator: latent [B, D, F] frames -> waveform [B, 1, F * prod(upsample_rates)] in [-1, 1].

Each stage: leaky ReLU (0.1), a transposed convolution upsampling by its rate, then the mean of
the multi-receptive-field residual blocks (one per kernel size). Type "1" blocks are pairs of a
dilated and a plain convolution per dilation, type "2" one dilated convolution per dilation.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

LRELU_SLOPE = 0.1
FINAL_SLOPE = 0.01  # the last leaky ReLU uses torch's default slope, as the trained model did


def _same(kernel: int, dilation: int) -> int:
    return (kernel * dilation - dilation) // 2


class ResBlock1(nn.Module):
    def __init__(self, channels: int, kernel: int, dilations: tuple[int, ...]):
        super().__init__()
        self.convs1 = nn.ModuleList(nn.Conv1d(channels, channels, kernel, dilation=d, padding=_same(kernel, d)) for d in dilations)
        self.convs2 = nn.ModuleList(nn.Conv1d(channels, channels, kernel, padding=_same(kernel, 1)) for _ in dilations)

    def forward(self, x: Tensor) -> Tensor:
        for c1, c2 in zip(self.convs1, self.convs2):
            x = x + c2(F.leaky_relu(c1(F.leaky_relu(x, LRELU_SLOPE)), LRELU_SLOPE))
        return x


class ResBlock2(nn.Module):
    def __init__(self, channels: int, kernel: int, dilations: tuple[int, ...]):
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv1d(channels, channels, kernel, dilation=d, padding=_same(kernel, d)) for d in dilations)

    def forward(self, x: Tensor) -> Tensor:
        for conv in self.convs:
            x = x + conv(F.leaky_relu(x, LRELU_SLOPE))
        return x


class Generator(nn.Module):
    def __init__(self, in_channels: int, resblock: str, kernel_sizes, dilations, upsample_rates,
                 initial_channels: int, upsample_kernels, gin_channels: int = 0):
        super().__init__()
        self.n_kernels = len(kernel_sizes)
        self.conv_pre = nn.Conv1d(in_channels, initial_channels, 7, padding=3)
        if gin_channels:
            self.cond = nn.Conv1d(gin_channels, initial_channels, 1)
        block = ResBlock1 if resblock == "1" else ResBlock2
        self.ups = nn.ModuleList()
        self.resblocks = nn.ModuleList()
        channels = initial_channels
        for rate, kernel in zip(upsample_rates, upsample_kernels):
            self.ups.append(nn.ConvTranspose1d(channels, channels // 2, kernel, rate, padding=(kernel - rate) // 2))
            channels //= 2
            for k, d in zip(kernel_sizes, dilations):
                self.resblocks.append(block(channels, k, tuple(d)))
        self.conv_post = nn.Conv1d(channels, 1, 7, padding=3, bias=False)

    def forward(self, x: Tensor, g: Tensor | None = None) -> Tensor:
        x = self.conv_pre(x)
        if g is not None:
            x = x + self.cond(g)
        n = self.n_kernels
        for i, up in enumerate(self.ups):
            x = up(F.leaky_relu(x, LRELU_SLOPE))
            blocks = self.resblocks[i * n : (i + 1) * n]
            total = blocks[0](x)
            for block in blocks[1:]:
                total = total + block(x)
            x = total / n
        return self.conv_post(F.leaky_relu(x, FINAL_SLOPE)).tanh()
