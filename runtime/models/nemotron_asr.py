"""NVIDIA's Nemotron ASR (transformers ``nemotron3_5_asr``): a cache-aware streaming FastConformer
RNN-T whose encoder output is fused with a language prompt before the joint.

What differs from ``FastConformer`` (whose attention, feed-forwards, heads and decoding it reuses):
the subsampling convolutions are causal (zero padding of kernel - 1 before and stride - 1 after,
on the time and the frequency axis), the conv module's depthwise convolution is causal (kernel - 1
frames of left padding) with a LayerNorm, attention is ``chunked_limited`` (left context
``sliding_window - 1``, the default lookahead as right context), and ``encode`` ends with the
prompt fusion: a one-hot of ``num_prompts`` language slots is concatenated to every frame and a
ReLU MLP (``prompt_kernel``) maps it back to the model width. The whole recording is encoded at
once (offline), which is what a streaming pass over cached chunks reproduces.
Shapes: B batch, F mel channels, T frames, C model width, P prompt slots.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .fastconformer import FastConformer, FastConformerConfig
from .fastconformer.encoder import ConformerEncoder, ConvModule
from .time_conv import depthwise_over_time


@dataclass(frozen=True)
class NemotronAsrConfig(FastConformerConfig):
    num_prompts: int = 128  # language slots of the prompt one-hot
    prompt_hidden: int = 2048  # the fusion MLP's width
    default_prompt_id: int = 101  # the slot used when no language is asked for ("auto": detect)


class CausalConvModule(ConvModule):
    """The conv module with a causal depthwise conv: kernel - 1 zero frames before, none after."""

    def __init__(self, cfg: FastConformerConfig):
        super().__init__(cfg)
        self.depthwise_conv.padding = (0,)  # the left padding is added in _depthwise

    def _depthwise(self, x: Tensor) -> Tensor:
        """[B, T, C] -> [B, T, C]: each frame from itself and the kernel - 1 frames before it."""
        return depthwise_over_time(self.depthwise_conv, x, left=self.depthwise_conv.kernel_size[0] - 1)


class CausalConvSubsampling(nn.Module):
    """[B, T, F] -> [B, T', C]: a causal stride-2 conv, then causal depthwise stride-2 + pointwise
    pairs, ReLU after each stage; frames past a row's length zeroed after every conv."""

    def __init__(self, cfg: FastConformerConfig):
        super().__init__()
        self.stages = int(math.log2(cfg.subsampling_factor))
        k, ch = cfg.subsampling_kernel, cfg.subsampling_conv_channels
        self.kernel = k
        layers: list[nn.Module] = [nn.Conv2d(1, ch, k, stride=2), nn.ReLU()]
        for _ in range(self.stages - 1):
            layers += [nn.Conv2d(ch, ch, k, stride=2, groups=ch), nn.Conv2d(ch, ch, 1), nn.ReLU()]
        self.conv = nn.Sequential(*layers)
        freq = cfg.n_mels
        for _ in range(self.stages):
            freq = (freq + k - 1 + 1 - k) // 2 + 1
        self.out = nn.Linear(ch * freq, cfg.d_model)

    def forward(self, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        x = x.unsqueeze(1)  # [B, 1, T, F]
        k = self.kernel
        for layer in self.conv:
            if isinstance(layer, nn.Conv2d) and layer.stride[0] != 1:
                x = F.pad(x, (k - 1, 1, k - 1, 1))  # (freq before, after, time before, after)
                lengths = (lengths + k - 1 + 1 - k) // 2 + 1
            x = layer(x)
            if isinstance(layer, nn.Conv2d):
                keep = torch.arange(x.shape[2], device=x.device) < lengths[:, None]
                x = x * keep[:, None, :, None].to(x.dtype)
        b, c, t, f = x.shape
        return self.out(x.transpose(1, 2).reshape(b, t, c * f)), lengths


class NemotronEncoder(ConformerEncoder):
    """The FastConformer encoder with causal subsampling and causal depthwise convolutions."""

    def __init__(self, cfg: FastConformerConfig):
        super().__init__(cfg)
        self.pre_encode = CausalConvSubsampling(cfg)
        for layer in self.layers:
            layer.conv = CausalConvModule(cfg)


class NemotronAsr(FastConformer):
    config_class: ClassVar = NemotronAsrConfig
    display_name: ClassVar = "Nemotron ASR"
    # FastConformer's rules were measured on Parakeet only; the causal convs and prompt kernel not.
    quant_refusal: ClassVar = "its rules were validated on Parakeet FastConformers only, not on Nemotron's causal encoder"

    def __init__(self, config: NemotronAsrConfig):
        super().__init__(config)
        self.encoder = NemotronEncoder(config)
        c = config.d_model
        self.prompt_kernel = nn.Sequential(nn.Linear(c + config.num_prompts, config.prompt_hidden), nn.ReLU(), nn.Linear(config.prompt_hidden, c))

    def encode(self, features: Tensor, lengths: Tensor, prompt_id: int | None = None) -> tuple[Tensor, Tensor]:
        """features [B, F, T], lengths [B] -> prompt-fused frames [B, T', C], lengths [B]."""
        encoded, lengths = self.encoder(features, lengths)
        return self.fuse_prompt(encoded, prompt_id), lengths

    def fuse_prompt(self, encoded: Tensor, prompt_id: int | None = None) -> Tensor:
        """encoded [B, T, C] (the encoder's output) -> [B, T, C] conditioned on the language slot."""
        slot = self.config.default_prompt_id if prompt_id is None else prompt_id
        one_hot = torch.zeros(*encoded.shape[:2], self.config.num_prompts, dtype=encoded.dtype, device=encoded.device)
        one_hot[..., slot] = 1
        return self.prompt_kernel(torch.cat([encoded, one_hot], dim=-1))
