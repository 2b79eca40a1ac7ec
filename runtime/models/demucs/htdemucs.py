"""HTDemucs (Rouard, Massa & Défossez 2023, demucs v4): hybrid transformer source separation.

One network (``HTDemucsNet``) runs two U-Nets side by side on a segment of stereo audio:

- the spectral branch takes the STFT (``spectral.py``) as real channels (complex-as-channels:
  [B, 2 * audio_channels, nfft / 2, T]), normalised by its mean and std; each encoder layer
  divides the frequency axis by ``stride``;
- the time branch takes the waveform [B, audio_channels, L], normalised the same way; each
  encoder layer divides time by ``stride``;
- where the frequency axis has shrunk to one bin the two branches merge (the time layer is then
  only a conv whose output is added in); in the released models it never does, and both reach
  the cross-domain transformer (``transformer.py``) separately;
- the decoders mirror the encoders with skips; the spectral output, de-normalised, is read as
  S sources' complex spectrograms and inverted, and added to the time output.

A segment is ``segment_samples`` long (7.8 s at 44.1 kHz in the released models); a shorter one
is zero-padded on the right to it and the output cut back, as demucs does. Longer audio is the
pipeline's to split (``oasr.pipelines.separate``).

``HTDemucs`` is what a bundle holds: one or more networks (a bag, such as htdemucs_ft's four
specialists) with an [S, members] weight matrix: each source's estimate is the weighted mean of
the members' estimates of it. A single model is a bag of one with weights 1.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...errors import BundleError
from ..base import BaseModelConfig, OasrModel
from .layers import HDecLayer, HEncLayer
from .spectral import inverse_spectrogram, spectrogram
from .transformer import CrossTransformerEncoder

NORM_EPS = 1e-5  # added to the std the input is divided by


@dataclass(frozen=True)
class HTDemucsNetConfig:
    """One network's shape, as demucs' HTDemucs keyword arguments name it (inference ones only)."""

    sources: tuple[str, ...]
    samplerate: int
    segment_samples: int  # int(segment * samplerate) with demucs' exact Fraction segment
    audio_channels: int = 2
    channels: int = 48
    channels_time: int = 0  # 0: as `channels`
    growth: float = 2
    nfft: int = 4096
    depth: int = 4
    rewrite: bool = True
    freq_emb: float = 0.2
    emb_scale: float = 10.0
    kernel_size: int = 8
    time_stride: int = 2
    stride: int = 4
    context: int = 1
    context_enc: int = 0
    norm_starts: int = 4
    norm_groups: int = 4
    dconv_mode: int = 1
    dconv_depth: int = 2
    dconv_comp: float = 8
    bottom_channels: int = 0
    t_layers: int = 5
    t_hidden_scale: float = 4.0
    t_heads: int = 8
    t_norm_in: bool = True
    t_norm_in_group: int = 0
    t_group_norm: int = 0
    t_norm_first: bool = True
    t_norm_out: int = 1
    t_max_period: float = 10000.0
    t_layer_scale: bool = True
    t_gelu: bool = True
    t_weight_pos_embed: float = 1.0
    t_cross_first: bool = False

    def __post_init__(self):
        object.__setattr__(self, "sources", tuple(self.sources))
        if not self.sources or not all(isinstance(s, str) and s for s in self.sources):
            raise BundleError(f"HTDemucs sources must be non-empty names, got {self.sources!r}")
        if self.nfft % 4 or self.nfft < 16:
            raise BundleError(f"HTDemucs nfft {self.nfft} is not a multiple of 4 of at least 16")
        if self.segment_samples < 1 or self.samplerate < 1:
            raise BundleError(f"HTDemucs segment ({self.segment_samples} samples at {self.samplerate} Hz) is empty")


@dataclass(frozen=True)
class HTDemucsConfig(BaseModelConfig):
    """A bag of networks sharing sources, rate and channels; ``weights[m][s]``: member m's weight for source s."""

    members: tuple[HTDemucsNetConfig, ...]
    weights: tuple[tuple[float, ...], ...]

    def __post_init__(self):
        members = tuple(m if isinstance(m, HTDemucsNetConfig) else _net_config(m) for m in self.members)
        object.__setattr__(self, "members", members)
        object.__setattr__(self, "weights", tuple(tuple(float(w) for w in row) for row in self.weights))
        if not members:
            raise BundleError("an HTDemucs bundle holds no network")
        first = members[0]
        for m in members[1:]:
            if (m.sources, m.samplerate, m.audio_channels) != (first.sources, first.samplerate, first.audio_channels):
                raise BundleError("the networks of an HTDemucs bag differ in sources, sample rate or channels")
        if len(self.weights) != len(members) or any(len(row) != len(first.sources) for row in self.weights):
            raise BundleError(
                f"an HTDemucs bag of {len(members)} network(s) and {len(first.sources)} sources needs a "
                f"{len(members)} x {len(first.sources)} weight matrix"
            )
        for s, name in enumerate(first.sources):
            if sum(row[s] for row in self.weights) <= 0:
                raise BundleError(f"the bag's weights for {name!r} sum to zero or less")

    @property
    def sources(self) -> tuple[str, ...]:
        return self.members[0].sources

    @property
    def samplerate(self) -> int:
        return self.members[0].samplerate

    @property
    def audio_channels(self) -> int:
        return self.members[0].audio_channels

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]):
        if set(data) != {"members", "weights"}:
            raise BundleError(f"an HTDemucs config has members and weights, not {', '.join(sorted(data))}")
        return cls(members=tuple(data["members"]), weights=tuple(data["weights"]))


def _net_config(data: Any) -> HTDemucsNetConfig:
    if not isinstance(data, Mapping):
        raise BundleError(f"an HTDemucs network config is {type(data).__name__}, not an object")
    names = {f.name for f in dataclasses.fields(HTDemucsNetConfig)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise BundleError(f"HTDemucs network config has unknown field(s): {', '.join(unknown)}")
    try:
        return HTDemucsNetConfig(**data)
    except TypeError as e:
        raise BundleError(f"HTDemucs network config is incomplete: {e}") from e


class ScaledEmbedding(nn.Module):
    """The frequency embedding added after the first spectral layer: ``embedding.weight * scale``."""

    def __init__(self, count: int, dim: int, scale: float):
        super().__init__()
        self.embedding = nn.Embedding(count, dim)
        self.scale = scale

    def forward(self) -> Tensor:
        return self.embedding.weight * self.scale  # [Fr, C]


class HTDemucsNet(nn.Module):
    """mix [B, audio_channels, L <= segment_samples] -> [B, S, audio_channels, L]."""

    def __init__(self, c: HTDemucsNetConfig):
        super().__init__()
        self.config = c
        self.encoder, self.decoder = nn.ModuleList(), nn.ModuleList()
        self.tencoder, self.tdecoder = nn.ModuleList(), nn.ModuleList()
        self.freq_emb = None
        chin, chin_z = c.audio_channels, 2 * c.audio_channels
        chout, chout_z = c.channels_time or c.channels, c.channels
        freqs = c.nfft // 2
        for index in range(c.depth):
            freq = freqs > 1
            ker, stri, pad, last_freq = c.kernel_size, c.stride, True, False
            if not freq:
                ker, stri = 2 * c.time_stride, c.time_stride
            if freq and freqs <= c.kernel_size:
                ker, pad, last_freq = freqs, False, True
            common = dict(norm=index >= c.norm_starts, norm_groups=c.norm_groups, rewrite=c.rewrite,
                          dconv_depth=c.dconv_depth, dconv_comp=c.dconv_comp)
            kw = dict(kernel_size=ker, stride=stri, freq=freq, pad=pad, **common)
            kwt = dict(kernel_size=c.kernel_size, stride=c.stride, freq=False, pad=True, **common)
            if last_freq:
                chout_z = max(chout, chout_z)
                chout = chout_z
            self.encoder.append(HEncLayer(chin_z, chout_z, dconv=bool(c.dconv_mode & 1), context=c.context_enc, **kw))
            if freq:
                self.tencoder.append(
                    HEncLayer(chin, chout, dconv=bool(c.dconv_mode & 1), context=c.context_enc, empty=last_freq, **kwt)
                )
            if index == 0:
                chin = c.audio_channels * len(c.sources)
                chin_z = 2 * chin
            self.decoder.insert(
                0, HDecLayer(chout_z, chin_z, dconv=bool(c.dconv_mode & 2), last=index == 0, context=c.context, **kw)
            )
            if freq:
                self.tdecoder.insert(
                    0, HDecLayer(chout, chin, dconv=bool(c.dconv_mode & 2), empty=last_freq, last=index == 0,
                                 context=c.context, **kwt)
                )
            chin, chin_z = chout, chout_z
            chout, chout_z = int(c.growth * chout), int(c.growth * chout_z)
            if freq:
                freqs = 1 if freqs <= c.kernel_size else freqs // c.stride
            if index == 0 and c.freq_emb:
                self.freq_emb = ScaledEmbedding(freqs, chin_z, c.emb_scale)
        dim = int(c.channels * c.growth ** (c.depth - 1))
        if c.bottom_channels:
            self.channel_upsampler = nn.Conv1d(dim, c.bottom_channels, 1)
            self.channel_downsampler = nn.Conv1d(c.bottom_channels, dim, 1)
            self.channel_upsampler_t = nn.Conv1d(dim, c.bottom_channels, 1)
            self.channel_downsampler_t = nn.Conv1d(c.bottom_channels, dim, 1)
            dim = c.bottom_channels
        self.crosstransformer = None
        if c.t_layers > 0:
            self.crosstransformer = CrossTransformerEncoder(
                dim, heads=c.t_heads, layers=c.t_layers, hidden_scale=c.t_hidden_scale, cross_first=c.t_cross_first,
                norm_in=c.t_norm_in, norm_in_group=c.t_norm_in_group, group_norm=c.t_group_norm,
                norm_first=c.t_norm_first, norm_out=c.t_norm_out, max_period=c.t_max_period,
                layer_scale=c.t_layer_scale, gelu=c.t_gelu, weight_pos_embed=c.t_weight_pos_embed,
            )

    def forward(self, mix: Tensor) -> Tensor:
        c = self.config
        length = mix.shape[-1]
        if length > c.segment_samples:
            raise ValueError(f"a segment of {length} samples is longer than the model's {c.segment_samples}")
        mix = F.pad(mix, (0, c.segment_samples - length))
        training_length = mix.shape[-1]
        z = spectrogram(mix, c.nfft)  # [B, C, Fq, T] complex
        B, C, Fq, T = z.shape
        # complex-as-channels [B, 2C, Fq, T], channels last ([B, Fq, T, 2C] in memory) through the
        # spectral branch: its convolutions run fastest so, each DConv row is a plain view, and the
        # decoder's output is already the layout inverse_spectrogram reads
        x = torch.view_as_real(z).permute(0, 2, 3, 1, 4).reshape(B, Fq, T, 2 * C).permute(0, 3, 1, 2)
        del z
        mean, std = x.mean(dim=(1, 2, 3), keepdim=True), x.std(dim=(1, 2, 3), keepdim=True)
        x = (x - mean) / (NORM_EPS + std)
        meant, stdt = mix.mean(dim=(1, 2), keepdim=True), mix.std(dim=(1, 2), keepdim=True)
        xt = (mix - meant) / (NORM_EPS + stdt)

        saved, saved_t, lengths, lengths_t = [], [], [], []
        for idx, encode in enumerate(self.encoder):
            lengths.append(x.shape[-1])
            inject = None
            if idx < len(self.tencoder):
                lengths_t.append(xt.shape[-1])
                tenc = self.tencoder[idx]
                xt = tenc(xt)
                if tenc.empty:
                    inject = xt  # the branches merge here
                else:
                    saved_t.append(xt)
            x = encode(x, inject)
            if idx == 0 and self.freq_emb is not None:
                x = x + c.freq_emb * self.freq_emb().t()[None, :, :, None]
            saved.append(x)

        if self.crosstransformer is not None:
            if c.bottom_channels:
                f = x.shape[2]
                x = self.channel_upsampler(x.flatten(2)).unflatten(2, (f, -1))
                xt = self.channel_upsampler_t(xt)
            x, xt = self.crosstransformer(x, xt)
            if c.bottom_channels:
                x = self.channel_downsampler(x.flatten(2)).unflatten(2, (f, -1))
                xt = self.channel_downsampler_t(xt)

        offset = c.depth - len(self.tdecoder)
        for idx, decode in enumerate(self.decoder):
            x, pre = decode(x, saved.pop(-1), lengths.pop(-1))
            if idx >= offset:
                tdec = self.tdecoder[idx - offset]
                length_t = lengths_t.pop(-1)
                if tdec.empty:
                    xt, _ = tdec(pre[:, :, 0], None, length_t)
                else:
                    xt, _ = tdec(xt, saved_t.pop(-1), length_t)

        S = len(c.sources)
        x = x.contiguous(memory_format=torch.channels_last)  # as the decoder leaves it: no copy
        spec = x.permute(0, 2, 3, 1).mul_(std).add_(mean)  # [B, Fq, T, S * C * 2], the decoder's fresh output
        x = inverse_spectrogram(torch.view_as_complex(spec.unflatten(-1, (-1, 2))), training_length)
        del spec
        xt = xt.view(B, S, -1, training_length) * stdt[:, None] + meant[:, None]
        return xt.add_(x.view(B, S, -1, training_length))[..., :length]


class HTDemucs(OasrModel):
    """A bag of HTDemucs networks (``models.M.*``) and its weight matrix; ``forward`` is member M's."""

    config_class = HTDemucsConfig
    capabilities: ClassVar[frozenset[str]] = frozenset({"separate"})
    display_name: ClassVar[str] = "HTDemucs"
    quant_refusal: ClassVar[str | None] = (
        "HTDemucs has not been validated under weight-only int8 (its convolutions, about half its weights, "
        "are not quantizable by it); run it in float"
    )

    def __init__(self, config: HTDemucsConfig):
        super().__init__(config)
        self.models = nn.ModuleList(HTDemucsNet(m) for m in config.members)

    def forward(self, mix: Tensor, member: int = 0) -> Tensor:
        return self.models[member](mix)
