"""VITS (Kim et al. 2021) as Piper trains it: phoneme ids -> waveform, end to end.

Inference, one utterance at a time (B = 1, so no padding masks are needed):
  text encoder  ids [1, T] -> hidden [1, H, T], prior mean and log-std [1, D, T]
  durations     the stochastic predictor in reverse (noise scaled by ``noise_w``), or the
                deterministic one: frames per phoneme = ceil(exp(logw) * length_scale)
  expansion     each phoneme's prior repeated for its frames: [1, D, F]; z_p = mean + noise *
                exp(log-std) * ``noise_scale``
  flow          residual coupling layers in reverse: z_p -> z [1, D, F]
  generator     HiFi-GAN: z -> audio [1, F * hop] in [-1, 1]
A multi-speaker voice adds a speaker embedding [1, G, 1] that conditions the duration
predictor, every flow layer and the generator. Noise comes from the caller's torch.Generator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor, nn

from ...errors import BundleError
from ..base import BaseModelConfig, OasrModel
from .duration import DurationPredictor, StochasticDurationPredictor
from .flow import CouplingFlow
from .generator import Generator
from .text_encoder import TextEncoder


@dataclass(frozen=True)
class VitsConfig(BaseModelConfig):
    n_vocab: int  # phoneme ids the embedding holds
    hidden_channels: int = 192  # text encoder width (H)
    inter_channels: int = 192  # latent channels (D)
    filter_channels: int = 768  # text encoder feed-forward width
    n_heads: int = 2
    n_layers: int = 6
    kernel_size: int = 3  # text encoder feed-forward kernel
    window_size: int = 4  # relative attention reaches +-4 positions
    use_sdp: bool = True  # stochastic duration predictor (else the deterministic one)
    dp_filter_channels: int = 192
    dp_kernel_size: int = 3
    sdp_flows: int = 4  # ConvFlows in training (inference runs one fewer)
    flow_layers: int = 4  # coupling layers
    flow_kernel_size: int = 5
    flow_dilation_rate: int = 1
    flow_wavenet_layers: int = 4
    resblock: str = "2"  # HiFi-GAN block type, "1" or "2"
    resblock_kernel_sizes: tuple[int, ...] = (3, 5, 7)
    resblock_dilation_sizes: tuple[tuple[int, ...], ...] = ((1, 2), (2, 6), (3, 12))
    upsample_rates: tuple[int, ...] = (8, 8, 4)
    upsample_initial_channel: int = 256
    upsample_kernel_sizes: tuple[int, ...] = (16, 16, 8)
    n_speakers: int = 1
    gin_channels: int = 0  # speaker embedding width; 0 for a single-speaker voice

    def __post_init__(self):
        for name in ("resblock_kernel_sizes", "upsample_rates", "upsample_kernel_sizes"):
            object.__setattr__(self, name, tuple(int(v) for v in getattr(self, name)))
        object.__setattr__(self, "resblock_dilation_sizes", tuple(tuple(int(v) for v in d) for d in self.resblock_dilation_sizes))
        if self.resblock not in ("1", "2"):
            raise BundleError(f"VITS resblock type {self.resblock!r} is not '1' or '2'")
        if len(self.upsample_rates) != len(self.upsample_kernel_sizes) or len(self.resblock_kernel_sizes) != len(self.resblock_dilation_sizes):
            raise BundleError("VITS config: upsample rates/kernels or resblock kernels/dilations differ in length")
        if (self.n_speakers > 1) != (self.gin_channels > 0):
            raise BundleError(f"VITS config: {self.n_speakers} speaker(s) with a {self.gin_channels}-channel speaker embedding")

    @property
    def hop_length(self) -> int:
        """Audio samples per latent frame."""
        hop = 1
        for r in self.upsample_rates:
            hop *= r
        return hop


class Vits(OasrModel):
    """ids [1, T] (long) -> audio [1, S] (float, in [-1, 1]); see the module docstring."""

    config_class = VitsConfig
    capabilities: ClassVar[frozenset[str]] = frozenset({"tts"})
    display_name: ClassVar[str] = "VITS (Piper)"
    quant_refusal: ClassVar[str | None] = (
        "VITS is convolutions nearly end to end (the HiFi-GAN generator, the flows and the duration "
        "predictor) and weight-only int8 applies to linear layers only"
    )

    def __init__(self, config: VitsConfig):
        super().__init__(config)
        c = config
        self.enc_p = TextEncoder(c.n_vocab, c.hidden_channels, c.inter_channels, c.filter_channels, c.n_heads,
                                 c.n_layers, c.kernel_size, c.window_size)
        if c.use_sdp:
            self.dp = StochasticDurationPredictor(c.hidden_channels, c.dp_filter_channels, c.dp_kernel_size, c.sdp_flows, c.gin_channels)
        else:
            self.dp = DurationPredictor(c.hidden_channels, c.dp_filter_channels, c.dp_kernel_size, c.gin_channels)
        self.flow = CouplingFlow(c.inter_channels, c.hidden_channels, c.flow_kernel_size, c.flow_dilation_rate,
                                 c.flow_wavenet_layers, c.flow_layers, c.gin_channels)
        self.dec = Generator(c.inter_channels, c.resblock, c.resblock_kernel_sizes, c.resblock_dilation_sizes,
                             c.upsample_rates, c.upsample_initial_channel, c.upsample_kernel_sizes, c.gin_channels)
        if c.n_speakers > 1:
            self.emb_g = nn.Embedding(c.n_speakers, c.gin_channels)

    def speaker(self, speaker_id: int | None) -> Tensor | None:
        """[1, G, 1] conditioning of a multi-speaker voice; None for a single speaker."""
        if self.config.n_speakers <= 1:
            return None
        sid = torch.tensor([speaker_id or 0], device=self.emb_g.weight.device)
        return self.emb_g(sid).unsqueeze(-1)

    def durations(self, hidden: Tensor, g: Tensor | None, noise_w: float, length_scale: float,
                  generator: torch.Generator | None) -> Tensor:
        """Frames per phoneme [T] (long)."""
        noise = None
        if self.config.use_sdp:
            noise = torch.randn(hidden.shape[0], 2, hidden.shape[2], generator=generator, device=hidden.device, dtype=hidden.dtype)
            noise = noise * noise_w
        logw = self.dp(hidden, g, noise)
        return torch.ceil(torch.exp(logw) * length_scale)[0, 0].long()

    def forward(self, ids: Tensor, *, noise_scale: float = 0.667, length_scale: float = 1.0, noise_w: float = 0.8,
                speaker_id: int | None = None, generator: torch.Generator | None = None) -> Tensor:
        g = self.speaker(speaker_id)
        hidden, mean, log_std = self.enc_p(ids)
        frames = self.durations(hidden, g, noise_w, length_scale, generator)
        if int(frames.sum()) == 0:  # as Piper: at least one frame, whose prior is zero
            mean = log_std = mean.new_zeros(1, mean.shape[1], 1)
        else:
            mean = mean.repeat_interleave(frames, dim=2)
            log_std = log_std.repeat_interleave(frames, dim=2)
        noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
        z_p = mean + noise * torch.exp(log_std) * noise_scale
        z = self.flow.reverse(z_p, g)
        return self.dec(z, g)[:, 0]
