"""HiFi-GAN generator: latent [B, D, F] frames -> waveform [B, 1, F * prod(upsample_rates)] in [-1, 1].

Each stage: leaky ReLU (0.1), a transposed convolution upsampling by its rate, then the mean of
the multi-receptive-field residual blocks (one per kernel size). Type "1" blocks are pairs of a
dilated and a plain convolution per dilation, type "2" one dilated convolution per dilation.

Inside, a signal is [B, C, 1, T] in the channels-last layout, and each ``nn.Conv1d`` (weights as
trained) runs as a 2-D convolution of height 1 (``conv``). oneDNN computes that layout as it is;
given [B, C, T] it reorders every input into its blocked layout and every output back, a third of
the generator's CPU time. The transposed convolutions run as ordinary ones (``upsample``). The
sums are the same fp32 sums in other orders (differences of the order of 1e-6 in the samples).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

LRELU_SLOPE = 0.1
FINAL_SLOPE = 0.01  # the last leaky ReLU uses torch's default slope, as the trained model did


def _same(kernel: int, dilation: int) -> int:
    return (kernel * dilation - dilation) // 2


def conv(layer: nn.Conv1d, x: Tensor) -> Tensor:
    """``layer`` on x [B, C, 1, T] -> [B, O, 1, T'], in x's layout."""
    return F.conv2d(x, layer.weight.unsqueeze(2), layer.bias, (1, layer.stride[0]), (0, layer.padding[0]), (1, layer.dilation[0]))


def upsample(layer: nn.ConvTranspose1d, x: Tensor) -> Tensor:
    """``layer`` (stride s, kernel K = s + 2 * padding) on x [B, C, 1, T] -> [B, O, 1, T * s].

    Computed as an ordinary convolution with s * O outputs: output sample m * s + q of channel o
    is its channel q * O + o at column m, a sum over inputs m - r .. m + r. In the channels-last
    layout that result already is the upsampled signal, so the last reshape moves no data.
    oneDNN's transposed convolution took 2 to 4 times as long on the joe voice's last two stages
    (most of it setting up its kernel for each new length).
    """
    stride, pad = layer.stride[0], layer.padding[0]
    weight = layer.weight  # [C, O, K]
    kernel = weight.shape[2]
    if kernel != stride + 2 * pad or layer.output_padding[0] or layer.dilation[0] != 1 or layer.groups != 1:
        return F.conv_transpose2d(x, weight.unsqueeze(2), layer.bias, (1, stride), (0, pad))
    reach = (stride + pad - 1) // stride  # r: inputs either side of m that reach phase 0..s-1
    # taps[q][i]: the kernel index joining input m + i - r to output m * s + q; K (a zero) if none
    taps = [[e - d * stride if 0 <= e - d * stride < kernel else kernel for d in range(-reach, reach + 1)]
            for e in range(pad, pad + stride)]
    padded = F.pad(weight, (0, 1))  # [C, O, K + 1], the last tap zero
    phases = padded[:, :, torch.tensor(taps, device=weight.device)]  # [C, O, s, 2r + 1]
    phases = phases.permute(2, 1, 0, 3).reshape(stride * weight.shape[1], weight.shape[0], 1, 2 * reach + 1)
    bias = None if layer.bias is None else layer.bias.repeat(stride)
    y = F.conv2d(x, phases, bias, 1, (0, reach))  # [B, s * O, 1, T]
    b, _, _, t = y.shape
    return y.permute(0, 2, 3, 1).reshape(b, 1, t * stride, weight.shape[1]).permute(0, 3, 1, 2)


class ResBlock1(nn.Module):
    def __init__(self, channels: int, kernel: int, dilations: tuple[int, ...]):
        super().__init__()
        self.convs1 = nn.ModuleList(nn.Conv1d(channels, channels, kernel, dilation=d, padding=_same(kernel, d)) for d in dilations)
        self.convs2 = nn.ModuleList(nn.Conv1d(channels, channels, kernel, padding=_same(kernel, 1)) for _ in dilations)

    def forward(self, x: Tensor) -> Tensor:
        for i, (c1, c2) in enumerate(zip(self.convs1, self.convs2)):
            y = conv(c2, F.leaky_relu(conv(c1, F.leaky_relu(x, LRELU_SLOPE)), LRELU_SLOPE))
            x = x + y if i == 0 else x.add_(y)  # the input is the other blocks' too: not written
        return x


class ResBlock2(nn.Module):
    def __init__(self, channels: int, kernel: int, dilations: tuple[int, ...]):
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv1d(channels, channels, kernel, dilation=d, padding=_same(kernel, d)) for d in dilations)

    def forward(self, x: Tensor) -> Tensor:
        for i, layer in enumerate(self.convs):
            y = conv(layer, F.leaky_relu(x, LRELU_SLOPE))
            x = x + y if i == 0 else x.add_(y)  # the input is the other blocks' too: not written
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
        x = conv(self.conv_pre, x.unsqueeze(2).contiguous(memory_format=torch.channels_last))
        if g is not None:
            x = x + self.cond(g).unsqueeze(2)
        n = self.n_kernels
        for i, up in enumerate(self.ups):
            x = upsample(up, F.leaky_relu(x, LRELU_SLOPE))
            blocks = self.resblocks[i * n : (i + 1) * n]
            total = blocks[0](x)
            for block in blocks[1:]:
                total.add_(block(x))
            x = total.div_(n)
        return conv(self.conv_post, F.leaky_relu(x, FINAL_SLOPE)).tanh().squeeze(2)
