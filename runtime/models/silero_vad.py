"""Silero VAD v6 (16 kHz) in torch: an STFT convolution, four encoder convolutions, an LSTM, a decoder.

The network reads 512-sample chunks (32 ms), each preceded by the last 64 samples of the chunk
before (zeros for the first), and carries its LSTM state from chunk to chunk. Every chunk's
encoder output depends on that chunk alone, so the encoder runs over all chunks of a file in
one batch and only the LSTM steps through them in order (one ``nn.LSTM`` call). Tensor names
follow the package's ``silero_vad_16k.safetensors`` except the LSTM cell, which is an
``nn.LSTM`` layer here. Shapes: B files, N chunks, S samples per chunk with its context.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .base import BaseModelConfig, OasrModel


@dataclass(frozen=True)
class SileroVadConfig(BaseModelConfig):
    sample_rate: int = 16000
    chunk_samples: int = 512
    context_samples: int = 64
    n_fft: int = 256  # the STFT convolution's kernel
    hop_length: int = 128
    stft_pad: int = 64  # samples mirrored past the end of each chunk before the STFT
    hidden_size: int = 128


class SileroVad(OasrModel):
    config_class = SileroVadConfig
    capabilities = frozenset({"vad"})
    quant_refusal = (
        "a 0.3 M-parameter convolution + LSTM detector: int8 weights would save under 1 MB, and "
        "no rule has been validated to keep its speech probabilities within 1e-4 of the float model"
    )

    def __init__(self, config: SileroVadConfig):
        super().__init__(config)
        bins = config.n_fft // 2 + 1
        # Real and imaginary DFT rows stacked: [2 * bins, 1, n_fft].
        self.stft_conv = nn.Conv1d(1, 2 * bins, config.n_fft, stride=config.hop_length, bias=False)
        self.conv1 = nn.Conv1d(bins, 128, 3, padding=1)
        self.conv2 = nn.Conv1d(128, 64, 3, stride=2, padding=1)
        self.conv3 = nn.Conv1d(64, 64, 3, stride=2, padding=1)
        self.conv4 = nn.Conv1d(64, config.hidden_size, 3, padding=1)
        self.lstm = nn.LSTM(config.hidden_size, config.hidden_size, batch_first=True)
        self.final_conv = nn.Conv1d(config.hidden_size, 1, 1)

    def encode(self, chunks: Tensor) -> Tensor:
        """chunks [N, S] (context + chunk samples) -> [N, hidden] features, each chunk on its own."""
        x = F.pad(chunks, (0, self.config.stft_pad), mode="reflect").unsqueeze(1)
        x = self.stft_conv(x)  # [N, 2 * bins, frames]
        bins = x.shape[1] // 2
        x = torch.sqrt(x[:, :bins].square() + x[:, bins:].square())
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.relu(self.conv3(x))
        x = F.relu(self.conv4(x))  # [N, hidden, 1]
        return x.mean(dim=-1)

    def forward(
        self, chunks: Tensor, state: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """chunks [B, N, S] in time order -> speech probabilities [B, N], LSTM state ([1, B, hidden] x 2).

        ``state`` is the one returned by the previous call over the same streams (None: a fresh start).
        """
        b, n, s = chunks.shape
        features = self.encode(chunks.reshape(b * n, s)).reshape(b, n, -1)
        hidden, state = self.lstm(features, state)
        logits = self.final_conv(F.relu(hidden).transpose(1, 2))  # [B, 1, N]
        return torch.sigmoid(logits[:, 0]), state


def silero_vad_specs(config: SileroVadConfig):
    """TokenizerSpec, FeatureSpec and DecodingDefaults of every Silero VAD source."""
    from ..specs import DecodingDefaults, FeatureSpec, TokenizerSpec

    features = FeatureSpec(
        kind="raw_audio",
        sample_rate=config.sample_rate,
        n_mels=0,
        n_fft=config.n_fft,
        hop_length=config.hop_length,
        chunk_seconds=config.chunk_samples / config.sample_rate,
    )
    return TokenizerSpec(kind="none"), features, DecodingDefaults(family="vad")
