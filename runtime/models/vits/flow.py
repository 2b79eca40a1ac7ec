"""VITS residual coupling flow, run in reverse: prior sample z_p [B, D, T] -> latent z [B, D, T].

Each coupling layer shifts the second half of the channels by a WaveNet-style function of the
first half (``mean_only``: no scale); a channel flip follows each layer. Layers keep their
training indices (0, 2, 4, 6; the odd ones were the flips) so the weights keep their names.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class WaveNet(nn.Module):
    """Gated dilated convolutions with residual and skip outputs: [B, H, T] -> [B, H, T]."""

    def __init__(self, hidden: int, kernel_size: int, dilation_rate: int, n_layers: int, gin_channels: int = 0):
        super().__init__()
        self.hidden = hidden
        self.in_layers = nn.ModuleList(
            nn.Conv1d(hidden, 2 * hidden, kernel_size, dilation=dilation_rate**i,
                      padding=(kernel_size * dilation_rate**i - dilation_rate**i) // 2)
            for i in range(n_layers)
        )
        # The last layer has no residual half: its output is skip channels only.
        self.res_skip_layers = nn.ModuleList(
            nn.Conv1d(hidden, 2 * hidden if i < n_layers - 1 else hidden, 1) for i in range(n_layers)
        )
        if gin_channels:
            self.cond_layer = nn.Conv1d(gin_channels, 2 * hidden * n_layers, 1)

    def forward(self, x: Tensor, g: Tensor | None = None) -> Tensor:
        h = self.hidden
        cond = self.cond_layer(g) if g is not None else None
        output = torch.zeros_like(x)
        last = len(self.in_layers) - 1
        for i, (conv, res_skip) in enumerate(zip(self.in_layers, self.res_skip_layers)):
            a = conv(x)
            if cond is not None:
                a = a + cond[:, 2 * h * i : 2 * h * (i + 1)]
            acts = res_skip(torch.tanh(a[:, :h]) * torch.sigmoid(a[:, h:]))
            if i < last:
                x = x + acts[:, :h]
                output = output + acts[:, h:]
            else:
                output = output + acts
        return output


class CouplingLayer(nn.Module):
    """Mean-only affine coupling: x1 -= f(x0) in reverse."""

    def __init__(self, channels: int, hidden: int, kernel_size: int, dilation_rate: int, n_layers: int, gin_channels: int = 0):
        super().__init__()
        self.half = channels // 2
        self.pre = nn.Conv1d(self.half, hidden, 1)
        self.enc = WaveNet(hidden, kernel_size, dilation_rate, n_layers, gin_channels)
        self.post = nn.Conv1d(hidden, self.half, 1)

    def reverse(self, x: Tensor, g: Tensor | None = None) -> Tensor:
        x0, x1 = x.split(self.half, dim=1)
        mean = self.post(self.enc(self.pre(x0), g))
        return torch.cat([x0, x1 - mean], dim=1)


class CouplingFlow(nn.Module):
    def __init__(self, channels: int, hidden: int, kernel_size: int, dilation_rate: int, n_layers: int,
                 n_flows: int, gin_channels: int = 0):
        super().__init__()
        self.flows = nn.ModuleDict(
            {str(2 * i): CouplingLayer(channels, hidden, kernel_size, dilation_rate, n_layers, gin_channels) for i in range(n_flows)}
        )

    def reverse(self, z: Tensor, g: Tensor | None = None) -> Tensor:
        for name in reversed(list(self.flows)):
            z = self.flows[name].reverse(z.flip(1), g)  # the flip that followed the layer in training
        return z
