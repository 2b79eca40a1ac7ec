"""WeSpeaker's ResNet speaker encoder (ResNet34 in pyannote 3.1): fbank -> 2-D ResNet -> TSTP -> Linear.

It reads Kaldi log mel filterbanks (``oasr.features.fbank.centered_fbank``: 80 bands, 25 ms
windows every 10 ms, the utterance's mean removed) as a one-channel image (mel bands x frames),
runs four stages of residual blocks (the last three halve both axes), and pools the last stage
over time: the mean and the unbiased standard deviation of every (channel, band) row,
concatenated (TSTP, temporal statistics pooling), optionally weighted per frame, which is how
pyannote embeds one speaker of a window. One linear layer (two with ``two_emb_layer``) gives
the embedding; it is not normalised (cosine distances only see its direction).

Tensor names follow WeSpeaker's own checkpoints (``conv1.weight``, ``layer1.0.conv1.weight``,
``layer2.0.shortcut.0.weight``, ``seg_1.weight``); pyannote's carry a ``resnet.`` prefix.
Shapes: B utterances, T fbank frames, M mel bands, C channels, F' bands and T' frames after the
ResNet, K speakers, E embedding size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .base import BaseModelConfig, OasrModel

BLOCKS = ("basic", "bottleneck")


@dataclass(frozen=True)
class WeSpeakerConfig(BaseModelConfig):
    block: str = "basic"  # "basic" (ResNet18/34) or "bottleneck" (ResNet50/101/152/221/293)
    num_blocks: tuple[int, int, int, int] = (3, 4, 6, 3)  # residual blocks per stage (ResNet34)
    m_channels: int = 32  # channels of the first stage (doubled by each later one)
    feat_dim: int = 80  # mel bands of the fbank
    embedding_size: int = 256
    two_emb_layer: bool = False  # pyannote's models: one embedding layer
    # The fbank front end (Kaldi's options, as pyannote's checkpoint hyper-parameters name them).
    sample_rate: int = 16000
    frame_length_ms: float = 25.0
    frame_shift_ms: float = 10.0
    window: str = "hamming"

    def __post_init__(self):
        object.__setattr__(self, "num_blocks", tuple(int(n) for n in self.num_blocks))  # JSON gives a list

    @property
    def expansion(self) -> int:
        return 1 if self.block == "basic" else 4

    @property
    def stats_dim(self) -> int:
        """Channels x bands of the last stage: the size of each of the two pooled statistics."""
        return (self.feat_dim // 8) * self.m_channels * 8 * self.expansion

    def fbank_options(self):
        from ..features.fbank import FbankOptions

        return FbankOptions(
            sample_rate=self.sample_rate,
            num_mel_bins=self.feat_dim,
            frame_length_ms=self.frame_length_ms,
            frame_shift_ms=self.frame_shift_ms,
            window=self.window,
        )

    def num_frames(self, fbank_frames: int) -> int:
        """Frames T' after the ResNet (each of the last three stages halves T, rounding up)."""
        for _ in range(3):
            fbank_frames = (fbank_frames - 1) // 2 + 1
        return fbank_frames


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1) -> tuple[nn.Conv2d, nn.BatchNorm2d]:
    return nn.Conv2d(cin, cout, kernel, stride=stride, padding=kernel // 2, bias=False), nn.BatchNorm2d(cout)


class BasicBlock(nn.Module):
    """3x3 -> 3x3, plus the input (through a 1x1 projection when the shape changes)."""

    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int):
        super().__init__()
        self.conv1, self.bn1 = _conv_bn(cin, planes, 3, stride)
        self.conv2, self.bn2 = _conv_bn(planes, planes, 3)
        self.shortcut = _shortcut(cin, planes * self.expansion, stride)

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class Bottleneck(nn.Module):
    """1x1 -> 3x3 -> 1x1 (4x the channels), plus the input."""

    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int):
        super().__init__()
        self.conv1, self.bn1 = _conv_bn(cin, planes, 1)
        self.conv2, self.bn2 = _conv_bn(planes, planes, 3, stride)
        self.conv3, self.bn3 = _conv_bn(planes, planes * self.expansion, 1)
        self.shortcut = _shortcut(cin, planes * self.expansion, stride)

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        return F.relu(self.bn3(self.conv3(out)) + self.shortcut(x))


def _shortcut(cin: int, cout: int, stride: int) -> nn.Sequential:
    if stride == 1 and cin == cout:
        return nn.Sequential()  # identity, no tensors
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))


def statistics_pooling(frames: Tensor, weights: Tensor | None = None) -> Tensor:
    """frames [B, D, T'] -> [B, 2D] (mean, unbiased std over T'); with weights [B, K, W] (or
    [B, W]) per-speaker weighted statistics [B, K, 2D] (or [B, 2D]), the weights resampled to T'
    by nearest neighbour when W != T' (pyannote's ``StatsPool``)."""
    if weights is None:
        frames = frames.float()
        return torch.cat([frames.mean(dim=-1), frames.std(dim=-1, correction=1)], dim=-1)
    squeeze = weights.dim() == 2
    w = weights.unsqueeze(1) if squeeze else weights
    frames, w = frames.float(), w.float()  # fp32 sums: in fp16 the 1e-8 guards would vanish
    if w.shape[-1] != frames.shape[-1]:
        w = F.interpolate(w, size=frames.shape[-1], mode="nearest")
    w = w.unsqueeze(2)  # [B, K, 1, T']
    x = frames.unsqueeze(1)  # [B, 1, D, T']
    v1 = w.sum(dim=-1) + 1e-8  # [B, K, 1]
    mean = (x * w).sum(dim=-1) / v1
    v2 = w.square().sum(dim=-1)
    var = ((x - mean.unsqueeze(-1)).square() * w).sum(dim=-1) / (v1 - v2 / v1 + 1e-8)
    stats = torch.cat([mean, var.sqrt()], dim=-1)
    return stats[:, 0] if squeeze else stats


class WeSpeakerResNet(OasrModel):
    config_class = WeSpeakerConfig
    capabilities = frozenset({"speaker_embedding"})
    display_name = "WeSpeaker ResNet"
    quant_refusal = (
        "a 6.6 M-parameter convolutional encoder whose cost is in 3x3 convolutions, not linear layers: "
        "weight-only int8 would save about 20 MB, and no rule has been validated against the float embeddings"
    )

    def __init__(self, config: WeSpeakerConfig):
        super().__init__(config)
        if config.block not in BLOCKS:
            raise ValueError(f"WeSpeaker block {config.block!r} is not one of {BLOCKS}")
        block = BasicBlock if config.block == "basic" else Bottleneck
        c = config.m_channels
        self.conv1, self.bn1 = _conv_bn(1, c, 3)
        cin = c
        for stage, (blocks, stride) in enumerate(zip(config.num_blocks, (1, 2, 2, 2))):
            planes = c * 2**stage
            layers = []
            for i in range(blocks):
                layers.append(block(cin, planes, stride if i == 0 else 1))
                cin = planes * block.expansion
            setattr(self, f"layer{stage + 1}", nn.Sequential(*layers))
        self.seg_1 = nn.Linear(2 * config.stats_dim, config.embedding_size)
        if config.two_emb_layer:
            self.seg_bn_1 = nn.BatchNorm1d(config.embedding_size, affine=False)
            self.seg_2 = nn.Linear(config.embedding_size, config.embedding_size)

    def frames(self, fbank: Tensor) -> Tensor:
        """fbank [B, T, M] -> the last stage flattened per frame [B, C * F', T']."""
        x = F.relu(self.bn1(self.conv1(fbank.transpose(1, 2).unsqueeze(1))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return x.flatten(1, 2)

    def embed(self, frames: Tensor, weights: Tensor | None = None) -> Tensor:
        """``frames`` output [B, D, T'] (+ weights [B, W] or [B, K, W]) -> [B, E] or [B, K, E]."""
        out = self.seg_1(statistics_pooling(frames, weights).to(self.seg_1.weight.dtype))
        if self.config.two_emb_layer:
            shape = out.shape
            out = self.seg_2(self.seg_bn_1(F.relu(out).reshape(-1, shape[-1])).reshape(shape))
        return out

    def forward(self, fbank: Tensor, weights: Tensor | None = None) -> Tensor:
        """fbank [B, T, M] (+ per-frame weights [B, W] or [B, K, W]) -> embeddings [B, E] or [B, K, E]."""
        return self.embed(self.frames(fbank), weights)


def wespeaker_specs(config: WeSpeakerConfig):
    """TokenizerSpec, FeatureSpec and DecodingDefaults of every WeSpeaker source."""
    from ..specs import DecodingDefaults, FeatureSpec, TokenizerSpec

    fbank = config.fbank_options()
    features = FeatureSpec(
        kind="kaldi_fbank",
        sample_rate=config.sample_rate,
        n_mels=config.feat_dim,
        n_fft=fbank.window_size,
        hop_length=fbank.window_shift,
        chunk_seconds=0.0,  # any length; pyannote embeds 10 s windows
        audio_scale=float(1 << 15),
        options={"window": config.window, "normalisation": "utterance mean"},
    )
    return TokenizerSpec(kind="none"), features, DecodingDefaults(family="speaker_embedding")
