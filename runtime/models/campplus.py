"""CAM++ speaker encoder (Wang et al. 2023) as 3D-Speaker's ``speakerlab.models.campplus.DTDNN.CAMPPlus``:
fbank -> 2-D residual front (FCM) -> TDNN -> 3 dense blocks of context-aware masking layers -> statistics pooling -> 192-d.

It reads Kaldi's fbank (80 bands, Povey window, 25 ms every 10 ms, on samples in [-1, 1], no
dither) with the utterance's mean frame removed, as 3D-Speaker's ``FBank(mean_nor=True)``
computes it (``oasr.features.fbank.kaldi_fbank``). The embedding (an affine-free batch norm
over a linear layer) is not normalised: 3D-Speaker scores cosine similarity.

Tensor names follow 3D-Speaker's state dicts (``head.layer1.0.conv1.weight``,
``xvector.block1.tdnnd1.cam_layer.linear_local.weight``, ``xvector.dense.linear.weight``).
Shapes: B utterances, T frames, M mel bands, C channels, E embedding size.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .base import BaseModelConfig, OasrModel

SEGMENT = 100  # frames of the CAM layers' segment pooling (1 s)


@dataclass(frozen=True)
class CamPlusConfig(BaseModelConfig):
    feat_dim: int = 80
    embedding_size: int = 192
    m_channels: int = 32  # channels of the 2-D front
    growth_rate: int = 32
    bn_size: int = 4
    init_channels: int = 128
    block_layers: tuple[int, ...] = (12, 24, 16)
    block_dilations: tuple[int, ...] = (1, 2, 2)
    sample_rate: int = 16000

    def __post_init__(self):
        for name in ("block_layers", "block_dilations"):  # JSON gives lists
            object.__setattr__(self, name, tuple(int(v) for v in getattr(self, name)))

    def fbank_options(self):
        from ..features.fbank import FbankOptions

        return FbankOptions(sample_rate=self.sample_rate, num_mel_bins=self.feat_dim, window="povey")


def _bn_relu(channels: int) -> nn.Sequential:
    return nn.Sequential(OrderedDict(batchnorm=nn.BatchNorm1d(channels), relu=nn.ReLU()))


class BasicResBlock(nn.Module):
    """3x3 -> 3x3 with the frequency axis strided, plus the input."""

    def __init__(self, cin: int, planes: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride=(stride, 1), padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, planes, 1, stride=(stride, 1), bias=False), nn.BatchNorm2d(planes))

    def forward(self, x: Tensor) -> Tensor:
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(out + self.shortcut(x))


class FCM(nn.Module):
    """The 2-D front: fbank [B, M, T] -> [B, C * M / 8, T] (frequency strided by 8)."""

    def __init__(self, m_channels: int):
        super().__init__()
        c = m_channels
        self.conv1 = nn.Conv2d(1, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.layer1 = nn.Sequential(BasicResBlock(c, c, 2), BasicResBlock(c, c, 1))
        self.layer2 = nn.Sequential(BasicResBlock(c, c, 2), BasicResBlock(c, c, 1))
        self.conv2 = nn.Conv2d(c, c, 3, stride=(2, 1), padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x: Tensor) -> Tensor:
        out = self.layer2(self.layer1(F.relu(self.bn1(self.conv1(x.unsqueeze(1))))))
        return F.relu(self.bn2(self.conv2(out))).flatten(1, 2)


class TDNNLayer(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, stride: int):
        super().__init__()
        self.linear = nn.Conv1d(cin, cout, kernel, stride=stride, padding=(kernel - 1) // 2, bias=False)
        self.nonlinear = _bn_relu(cout)

    def forward(self, x: Tensor) -> Tensor:
        return self.nonlinear(self.linear(x))


class CAMLayer(nn.Module):
    """A local convolution gated per channel by context: the utterance's mean plus its 1 s
    segment's mean, through a bottleneck and a sigmoid."""

    def __init__(self, cin: int, cout: int, kernel: int, dilation: int):
        super().__init__()
        self.linear_local = nn.Conv1d(cin, cout, kernel, padding=(kernel - 1) // 2 * dilation, dilation=dilation, bias=False)
        self.linear1 = nn.Conv1d(cin, cin // 2, 1)
        self.linear2 = nn.Conv1d(cin // 2, cout, 1)

    def forward(self, x: Tensor) -> Tensor:
        t = x.shape[-1]
        segments = F.avg_pool1d(x, kernel_size=SEGMENT, stride=SEGMENT, ceil_mode=True)
        context = x.mean(-1, keepdim=True) + segments.repeat_interleave(SEGMENT, dim=-1)[..., :t]
        gate = torch.sigmoid(self.linear2(F.relu(self.linear1(context))))
        return self.linear_local(x) * gate


class CAMDenseTDNNLayer(nn.Module):
    def __init__(self, cin: int, cout: int, bn_channels: int, kernel: int, dilation: int):
        super().__init__()
        self.nonlinear1 = _bn_relu(cin)
        self.linear1 = nn.Conv1d(cin, bn_channels, 1, bias=False)
        self.nonlinear2 = _bn_relu(bn_channels)
        self.cam_layer = CAMLayer(bn_channels, cout, kernel, dilation)

    def forward(self, x: Tensor) -> Tensor:
        return self.cam_layer(self.nonlinear2(self.linear1(self.nonlinear1(x))))


class CAMDenseTDNNBlock(nn.ModuleDict):
    """Dense connectivity: each layer's output is appended to its input's channels."""

    def __init__(self, layers: int, cin: int, growth: int, bn_channels: int, dilation: int):
        super().__init__({f"tdnnd{i + 1}": CAMDenseTDNNLayer(cin + i * growth, growth, bn_channels, 3, dilation) for i in range(layers)})

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.values():
            x = torch.cat([x, layer(x)], dim=1)
        return x


class TransitLayer(nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.nonlinear = _bn_relu(cin)
        self.linear = nn.Conv1d(cin, cout, 1, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear(self.nonlinear(x))


class DenseLayer(nn.Module):
    """The embedding: a linear layer over the pooled statistics, then an affine-free batch norm."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.linear = nn.Conv1d(cin, cout, 1, bias=False)
        self.nonlinear = nn.Sequential(OrderedDict(batchnorm=nn.BatchNorm1d(cout, affine=False)))

    def forward(self, x: Tensor) -> Tensor:
        return self.nonlinear(self.linear(x.unsqueeze(-1)).squeeze(-1))


class StatsPool(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        """[B, C, T] -> [B, 2C]: mean and unbiased std over time."""
        return torch.cat([x.mean(dim=-1), x.std(dim=-1, correction=1)], dim=-1)


class CamPlus(OasrModel):
    config_class = CamPlusConfig
    capabilities = frozenset({"speaker_embedding"})
    display_name = "CAM++"
    quant_refusal = (
        "a 7.2 M-parameter convolutional encoder: no rule for quantizing its convolutions has been "
        "validated against the float embeddings"
    )

    def __init__(self, config: CamPlusConfig):
        super().__init__(config)
        self.head = FCM(config.m_channels)
        channels = config.m_channels * (config.feat_dim // 8)
        xvector = OrderedDict(tdnn=TDNNLayer(channels, config.init_channels, 5, stride=2))
        channels = config.init_channels
        for i, (layers, dilation) in enumerate(zip(config.block_layers, config.block_dilations)):
            xvector[f"block{i + 1}"] = CAMDenseTDNNBlock(
                layers, channels, config.growth_rate, config.bn_size * config.growth_rate, dilation
            )
            channels += layers * config.growth_rate
            xvector[f"transit{i + 1}"] = TransitLayer(channels, channels // 2)
            channels //= 2
        xvector["out_nonlinear"] = _bn_relu(channels)
        xvector["stats"] = StatsPool()
        xvector["dense"] = DenseLayer(channels * 2, config.embedding_size)
        self.xvector = nn.Sequential(xvector)

    def forward(self, fbank: Tensor) -> Tensor:
        """fbank [B, T, M] (mean-normalised) -> [B, E] embeddings."""
        return self.xvector(self.head(fbank.transpose(1, 2)))

    def min_frames(self) -> int:
        return 3  # an unbiased std needs two frames after the stride-2 TDNN

    def embed_utterance(self, wave: Tensor) -> Tensor:
        """wave [S] 16 kHz in [-1, 1] -> [E]: 3D-Speaker's ``FBank(mean_nor=True)`` then the network."""
        from ..features.fbank import kaldi_fbank

        fbank = kaldi_fbank(wave.reshape(-1), self.config.fbank_options())
        fbank = fbank - fbank.mean(dim=0, keepdim=True)
        return self(fbank.unsqueeze(0).to(self.xvector.dense.linear.weight.dtype))[0]


def campplus_specs(config: CamPlusConfig):
    """TokenizerSpec, FeatureSpec and DecodingDefaults of every CAM++ source."""
    from ..specs import DecodingDefaults, FeatureSpec, TokenizerSpec

    fbank = config.fbank_options()
    features = FeatureSpec(
        kind="kaldi_fbank",
        sample_rate=config.sample_rate,
        n_mels=config.feat_dim,
        n_fft=fbank.window_size,
        hop_length=fbank.window_shift,
        chunk_seconds=0.0,
        options={"window": "povey", "normalisation": "utterance mean"},
    )
    return TokenizerSpec(kind="none"), features, DecodingDefaults(family="speaker_embedding")
