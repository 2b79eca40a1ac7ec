"""pyannote segmentation-3.0 (PyanNet) in torch: SincNet -> 4 x BiLSTM -> 2 x Linear -> powerset classifier.

The network reads 10 s chunks of 16 kHz audio and returns, per frame (270 samples, 16.875 ms), the
log-probabilities of 7 powerset classes over 3 local speakers: nobody, each speaker alone, and
each pair (at most two at once). ``powerset_to_multilabel`` turns them into per-speaker activity.

SincNet's first layer is a bank of band-pass filters computed from two learned frequencies per
filter (``low_hz_``, ``band_hz_``), as asteroid-filterbanks' ``ParamSincFB`` computes them: a
cosine (even) and a sine (odd) windowed sinc filter per band, 80 filters in all. Tensor names
follow pyannote's own checkpoint (``sincnet.conv1d.0.filterbank.low_hz_``, ``lstm.weight_ih_l0``...).
Shapes: B chunks, S samples, T frames, C powerset classes, K local speakers.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .base import BaseModelConfig, OasrModel


@dataclass(frozen=True)
class PyannoteSegmentationConfig(BaseModelConfig):
    sample_rate: int = 16000
    chunk_seconds: float = 10.0  # the chunk length the model was trained on
    sinc_filters: int = 80  # cosine + sine filters (half of them carry parameters)
    sinc_kernel: int = 251
    sinc_stride: int = 10
    min_low_hz: float = 50.0
    min_band_hz: float = 50.0
    # True: the filters are a stored tensor (``filterbank.filters_``) besides the frequencies. The
    # ONNX export carries them as onnxruntime computed them in float32, whose sines of arguments
    # up to ~400 rad differ from torch's by up to 3.6e-6, which the network amplifies to ~3e-3 in
    # its log-probabilities: keeping the exported values is what holds parity with the export.
    stored_filters: bool = False
    conv_channels: int = 60
    lstm_hidden: int = 128
    lstm_layers: int = 4
    linear_hidden: int = 128
    linear_layers: int = 2
    num_speakers: int = 3  # local speakers per chunk
    max_speakers_per_frame: int = 2

    @property
    def num_classes(self) -> int:
        return len(powerset_classes(self.num_speakers, self.max_speakers_per_frame))

    @property
    def frame_step(self) -> int:
        """Samples between output frames: the strides of the sinc conv and the three pools."""
        return self.sinc_stride * 27

    @property
    def receptive_field(self) -> int:
        """Samples one output frame sees (991 for the default layout)."""
        size = 1
        for kernel, stride in reversed(_layers(self)):
            size = (size - 1) * stride + kernel
        return size

    def num_frames(self, samples: int) -> int:
        n = samples
        for kernel, stride in _layers(self):
            n = (n - kernel) // stride + 1
        return max(n, 0)


def _layers(config: PyannoteSegmentationConfig) -> list[tuple[int, int]]:
    """(kernel, stride) of SincNet's convolutions and poolings, in order."""
    return [(config.sinc_kernel, config.sinc_stride), (3, 3), (5, 1), (3, 3), (5, 1), (3, 3)]


def powerset_classes(num_speakers: int, max_per_frame: int) -> list[tuple[int, ...]]:
    """The powerset's classes in pyannote's order: (), (0,), (1,), (2,), (0, 1), (0, 2), (1, 2)."""
    return [c for size in range(max_per_frame + 1) for c in itertools.combinations(range(num_speakers), size)]


def powerset_mapping(num_speakers: int, max_per_frame: int) -> Tensor:
    """[C, K] 0/1: which local speakers each powerset class holds."""
    classes = powerset_classes(num_speakers, max_per_frame)
    mapping = torch.zeros(len(classes), num_speakers)
    for i, members in enumerate(classes):
        mapping[i, list(members)] = 1.0
    return mapping


def powerset_to_multilabel(log_probs: Tensor, mapping: Tensor, soft: bool = False) -> Tensor:
    """[..., C] powerset log-probabilities -> [..., K] speaker activity: hard (the most likely
    class's members, 0/1) or soft (each speaker's probability summed over the classes holding it)."""
    if soft:
        return torch.exp(log_probs) @ mapping
    return mapping[log_probs.argmax(dim=-1)]


class ParamSincFB(nn.Module):
    """Band-pass filters from learned (low, band) frequencies: [F, 1, kernel]."""

    def __init__(self, config: PyannoteSegmentationConfig):
        super().__init__()
        self.sample_rate, self.min_low_hz, self.min_band_hz = config.sample_rate, config.min_low_hz, config.min_band_hz
        bands = config.sinc_filters // 2
        self.low_hz_ = nn.Parameter(torch.zeros(bands, 1))
        self.band_hz_ = nn.Parameter(torch.zeros(bands, 1))
        # Half a Hamming window and the time axis left of the centre, in radians per Hz.
        window, n = sinc_axes(config)
        self.register_buffer("window_", window)
        self.register_buffer("n_", n)
        if config.stored_filters:
            self.register_buffer("filters_", torch.zeros(config.sinc_filters, 1, config.sinc_kernel))
        else:
            self.filters_ = None

    def forward(self) -> Tensor:
        if self.filters_ is not None:
            return self.filters_
        low = self.min_low_hz + self.low_hz_.abs()
        high = torch.clamp(low + self.min_band_hz + self.band_hz_.abs(), self.min_low_hz, self.sample_rate / 2)
        return sinc_filters(low, high, self.n_, self.window_)


def sinc_axes(config: PyannoteSegmentationConfig) -> tuple[Tensor, Tensor]:
    """Half a Hamming window [kernel // 2] and the time axis left of the centre in radians per Hz
    [1, kernel // 2], in float32 as asteroid computes them."""
    half = config.sinc_kernel // 2
    window = torch.from_numpy(np.hamming(config.sinc_kernel)[:half]).float()
    # Divided before the multiplication, as asteroid does: the other order rounds n_ up to 4e-9
    # apart, which moves pyannote's checkpoint's log-probabilities by 3e-3 from its ONNX export.
    return window, 2 * math.pi * (torch.arange(-half, 0.0).view(1, -1) / config.sample_rate)


def sinc_filters(low: Tensor, high: Tensor, n: Tensor, window: Tensor) -> Tensor:
    """[F/2, 1] low and high cut-offs (Hz) -> [F, 1, kernel]: the cosine filters, then the sine ones,
    each normalised by twice its bandwidth."""
    band = high - low
    ft_low, ft_high = low @ n, high @ n
    cos_left = (torch.sin(ft_high) - torch.sin(ft_low)) / (n / 2) * window
    sin_left = (torch.cos(ft_low) - torch.cos(ft_high)) / (n / 2) * window
    cos = torch.cat([cos_left, 2 * band, cos_left.flip(1)], dim=1)
    sin = torch.cat([sin_left, torch.zeros_like(band), -sin_left.flip(1)], dim=1)
    return (torch.cat([cos, sin]) / (2 * torch.cat([band, band]))).unsqueeze(1)


class _Filterbank(nn.Module):
    """Holds the filterbank under pyannote's name (``conv1d.0.filterbank``)."""

    def __init__(self, config: PyannoteSegmentationConfig):
        super().__init__()
        self.filterbank = ParamSincFB(config)
        self.stride = config.sinc_stride

    def forward(self, x: Tensor) -> Tensor:
        return F.conv1d(x, self.filterbank(), stride=self.stride)


class SincNet(nn.Module):
    """waveforms [B, 1, S] -> features [B, conv_channels, T]."""

    def __init__(self, config: PyannoteSegmentationConfig):
        super().__init__()
        c = config.conv_channels
        self.wav_norm1d = nn.InstanceNorm1d(1, affine=True)
        self.conv1d = nn.ModuleList([_Filterbank(config), nn.Conv1d(config.sinc_filters, c, 5), nn.Conv1d(c, c, 5)])
        self.norm1d = nn.ModuleList([nn.InstanceNorm1d(n, affine=True) for n in (config.sinc_filters, c, c)])

    def forward(self, waveforms: Tensor) -> Tensor:
        x = self.wav_norm1d(waveforms)
        for i, (conv, norm) in enumerate(zip(self.conv1d, self.norm1d)):
            x = conv(x)
            if i == 0:
                x = x.abs()  # the sinc responses' magnitude (SincNet issue #4)
            x = F.leaky_relu(norm(F.max_pool1d(x, 3, 3)))
        return x


class PyannoteSegmentation(OasrModel):
    config_class = PyannoteSegmentationConfig
    capabilities = frozenset({"speaker_segmentation"})
    display_name = "pyannote segmentation"
    computed_buffers = ("sincnet.conv1d.0.filterbank.window_", "sincnet.conv1d.0.filterbank.n_")
    quant_refusal = (
        "a 1.5 M-parameter SincNet + LSTM segmenter: int8 weights would save about 4 MB, and no rule "
        "has been validated to keep its powerset log-probabilities within 1e-4 of the float model"
    )

    def __init__(self, config: PyannoteSegmentationConfig):
        super().__init__(config)
        self.sincnet = SincNet(config)
        self.lstm = nn.LSTM(
            config.conv_channels, config.lstm_hidden, config.lstm_layers, batch_first=True, bidirectional=True
        )
        sizes = [2 * config.lstm_hidden] + [config.linear_hidden] * config.linear_layers
        self.linear = nn.ModuleList([nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])])
        self.classifier = nn.Linear(sizes[-1], config.num_classes)

    def computed_buffer_values(self) -> dict[str, Tensor]:
        window, n = sinc_axes(self.config)
        return {self.computed_buffers[0]: window, self.computed_buffers[1]: n}

    def forward(self, waveforms: Tensor) -> Tensor:
        """waveforms [B, 1, S] or [B, S] -> powerset log-probabilities [B, T, C]."""
        if waveforms.dim() == 2:
            waveforms = waveforms.unsqueeze(1)
        x = self.sincnet(waveforms).transpose(1, 2)  # [B, T, channels]
        x, _ = self.lstm(x)
        for linear in self.linear:
            x = F.leaky_relu(linear(x))
        return F.log_softmax(self.classifier(x), dim=-1)

    def multilabel(self, log_probs: Tensor, soft: bool = False) -> Tensor:
        """[..., C] powerset log-probabilities -> [..., K] speaker activity (``powerset_to_multilabel``)."""
        mapping = powerset_mapping(self.config.num_speakers, self.config.max_speakers_per_frame)
        return powerset_to_multilabel(log_probs, mapping.to(log_probs.device, log_probs.dtype), soft)


def segmentation_specs(config: PyannoteSegmentationConfig):
    """TokenizerSpec, FeatureSpec and DecodingDefaults of every pyannote segmentation source."""
    from ..specs import DecodingDefaults, FeatureSpec, TokenizerSpec

    features = FeatureSpec(
        kind="raw_audio",
        sample_rate=config.sample_rate,
        n_mels=0,
        n_fft=config.receptive_field,
        hop_length=config.frame_step,
        chunk_seconds=config.chunk_seconds,
    )
    return TokenizerSpec(kind="none"), features, DecodingDefaults(family="speaker_segmentation")
