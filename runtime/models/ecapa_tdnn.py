"""ECAPA-TDNN speaker encoder (Desplanques et al. 2020) as SpeechBrain's ``ECAPA_TDNN``:
fbank -> TDNN -> 3 x SE-Res2Net -> multi-layer aggregation -> attentive statistics pooling -> 192-d.

It reads SpeechBrain's 80-band fbank with the utterance's mean removed
(``oasr.features.sb_fbank``). Every convolution pads "same" by reflection, as SpeechBrain's
``Conv1d`` does; each TDNN block is conv -> ReLU -> batch norm. The embedding is not normalised;
``embedding_mean`` is the global mean of the training embeddings (``mean_var_norm_emb``) that
SpeechBrain subtracts when asked to normalise (``encode_batch(normalize=True)``).

Tensor names follow SpeechBrain's checkpoint (``blocks.0.conv.conv.weight``,
``blocks.1.res2net_block.blocks.0.norm.norm.weight``, ``asp_bn.norm.weight``, ``fc.conv.weight``).
Shapes: B utterances, T frames, M mel bands, C channels, E embedding size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .base import BaseModelConfig, OasrModel


@dataclass(frozen=True)
class EcapaConfig(BaseModelConfig):
    n_mels: int = 80
    channels: tuple[int, ...] = (1024, 1024, 1024, 1024, 3072)
    kernel_sizes: tuple[int, ...] = (5, 3, 3, 3, 1)
    dilations: tuple[int, ...] = (1, 2, 3, 4, 1)
    attention_channels: int = 128
    res2net_scale: int = 8
    se_channels: int = 128
    global_context: bool = True
    embedding_size: int = 192
    sample_rate: int = 16000

    def __post_init__(self):
        for name in ("channels", "kernel_sizes", "dilations"):  # JSON gives lists
            object.__setattr__(self, name, tuple(int(v) for v in getattr(self, name)))


class _Conv(nn.Module):
    """A 1-D convolution padded "same" by reflection (SpeechBrain's ``Conv1d``)."""

    def __init__(self, cin: int, cout: int, kernel: int = 1, dilation: int = 1):
        super().__init__()
        self.pad = dilation * (kernel - 1) // 2
        self.conv = nn.Conv1d(cin, cout, kernel, dilation=dilation)

    def forward(self, x: Tensor) -> Tensor:
        return self.conv(F.pad(x, (self.pad, self.pad), mode="reflect") if self.pad else x)


class _Norm(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.norm = nn.BatchNorm1d(channels)

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(x)


class TDNNBlock(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, dilation: int):
        super().__init__()
        self.conv = _Conv(cin, cout, kernel, dilation)
        self.norm = _Norm(cout)

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(F.relu(self.conv(x)))


class Res2NetBlock(nn.Module):
    """The channels cut into ``scale`` groups; group i > 0 goes through a TDNN block after the
    previous group's output is added (the first group passes as it is)."""

    def __init__(self, channels: int, scale: int, kernel: int, dilation: int):
        super().__init__()
        self.scale = scale
        self.blocks = nn.ModuleList(TDNNBlock(channels // scale, channels // scale, kernel, dilation) for _ in range(scale - 1))

    def forward(self, x: Tensor) -> Tensor:
        out, y = [], None
        for i, part in enumerate(torch.chunk(x, self.scale, dim=1)):
            y = part if i == 0 else self.blocks[i - 1](part if i == 1 else part + y)
            out.append(y)
        return torch.cat(out, dim=1)


class SEBlock(nn.Module):
    """Squeeze-and-excitation: channel gates from the utterance's mean frame."""

    def __init__(self, channels: int, se_channels: int):
        super().__init__()
        self.conv1 = _Conv(channels, se_channels)
        self.conv2 = _Conv(se_channels, channels)

    def forward(self, x: Tensor) -> Tensor:
        s = torch.sigmoid(self.conv2(F.relu(self.conv1(x.mean(dim=2, keepdim=True)))))
        return s * x


class SERes2NetBlock(nn.Module):
    def __init__(self, cin: int, cout: int, config: EcapaConfig, kernel: int, dilation: int):
        super().__init__()
        self.tdnn1 = TDNNBlock(cin, cout, 1, 1)
        self.res2net_block = Res2NetBlock(cout, config.res2net_scale, kernel, dilation)
        self.tdnn2 = TDNNBlock(cout, cout, 1, 1)
        self.se_block = SEBlock(cout, config.se_channels)
        self.shortcut = _Conv(cin, cout) if cin != cout else None

    def forward(self, x: Tensor) -> Tensor:
        residual = x if self.shortcut is None else self.shortcut(x)
        return self.se_block(self.tdnn2(self.res2net_block(self.tdnn1(x)))) + residual


def _statistics(x: Tensor, weights: Tensor, eps: float = 1e-12) -> tuple[Tensor, Tensor]:
    """x [B, C, T], weights [B, 1 or C, T] summing to one over T -> weighted mean and std [B, C]."""
    mean = (weights * x).sum(dim=2)
    std = torch.sqrt((weights * (x - mean.unsqueeze(2)).pow(2)).sum(dim=2).clamp(eps))
    return mean, std


class AttentiveStatisticsPooling(nn.Module):
    """Per-channel attention over time (seeing the utterance's mean and std too: global context),
    then the attention-weighted mean and std of every channel."""

    def __init__(self, channels: int, attention_channels: int, global_context: bool):
        super().__init__()
        self.global_context = global_context
        self.tdnn = TDNNBlock(channels * (3 if global_context else 1), attention_channels, 1, 1)
        self.conv = _Conv(attention_channels, channels)

    def forward(self, x: Tensor) -> Tensor:
        """x [B, C, T] -> [B, 2C]."""
        attn = x
        if self.global_context:
            t = x.shape[-1]
            mean, std = _statistics(x, torch.full_like(x[:, :1], 1.0 / t))
            attn = torch.cat([x, mean.unsqueeze(2).expand(-1, -1, t), std.unsqueeze(2).expand(-1, -1, t)], dim=1)
        attn = F.softmax(self.conv(torch.tanh(self.tdnn(attn))), dim=2)
        return torch.cat(_statistics(x, attn), dim=1)


class EcapaTdnn(OasrModel):
    config_class = EcapaConfig
    capabilities = frozenset({"speaker_embedding"})
    display_name = "ECAPA-TDNN"
    quant_refusal = (
        "a 20.8 M-parameter convolutional encoder: no rule for quantizing its convolutions has been "
        "validated against the float embeddings"
    )

    def __init__(self, config: EcapaConfig):
        super().__init__(config)
        c, k, d = config.channels, config.kernel_sizes, config.dilations
        if not len(c) == len(k) == len(d) >= 3:
            raise ValueError(f"ECAPA-TDNN needs as many channels, kernel sizes and dilations (3 or more), got {c}, {k}, {d}")
        self.blocks = nn.ModuleList([TDNNBlock(config.n_mels, c[0], k[0], d[0])])
        for i in range(1, len(c) - 1):
            self.blocks.append(SERes2NetBlock(c[i - 1], c[i], config, k[i], d[i]))
        self.mfa = TDNNBlock(c[-2] * (len(c) - 2), c[-1], k[-1], d[-1])
        self.asp = AttentiveStatisticsPooling(c[-1], config.attention_channels, config.global_context)
        self.asp_bn = _Norm(c[-1] * 2)
        self.fc = _Conv(c[-1] * 2, config.embedding_size)
        self.register_buffer("embedding_mean", torch.zeros(config.embedding_size))

    def forward(self, fbank: Tensor) -> Tensor:
        """fbank [B, T, M] (mean-normalised) -> [B, E] embeddings."""
        x = fbank.transpose(1, 2)
        outputs = []
        for layer in self.blocks:
            x = layer(x)
            outputs.append(x)
        x = self.mfa(torch.cat(outputs[1:], dim=1))
        x = self.asp_bn(self.asp(x).unsqueeze(2))
        return self.fc(x).squeeze(2)

    def min_frames(self) -> int:
        """The fewest fbank frames the reflection padding accepts (more than the widest pad)."""
        return 1 + max(d * (k - 1) // 2 for k, d in zip(self.config.kernel_sizes, self.config.dilations))

    def embed_utterance(self, wave: Tensor) -> Tensor:
        """wave [S] 16 kHz in [-1, 1] -> [E]: SpeechBrain's ``encode_batch`` of one utterance."""
        from ..features.sb_fbank import sb_fbank

        fbank = sb_fbank(wave, self.config.n_mels, self.config.sample_rate)
        return self(fbank.unsqueeze(0).to(self.fc.conv.weight.dtype))[0]


def ecapa_specs(config: EcapaConfig):
    """TokenizerSpec, FeatureSpec and DecodingDefaults of every ECAPA-TDNN source."""
    from ..specs import DecodingDefaults, FeatureSpec, TokenizerSpec

    features = FeatureSpec(
        kind="speechbrain_fbank",
        sample_rate=config.sample_rate,
        n_mels=config.n_mels,
        n_fft=400,
        hop_length=160,
        chunk_seconds=0.0,  # any length
        options={"window": "hamming", "top_db": 80.0, "normalisation": "utterance mean"},
    )
    return TokenizerSpec(kind="none"), features, DecodingDefaults(family="speaker_embedding")
