"""GE2E speaker encoder (Wan et al. 2018) as Resemblyzer's ``VoiceEncoder``: 3 x LSTM -> Linear -> ReLU -> L2.

It reads a power mel spectrogram (40 bands, 25 ms windows, 10 ms hop, no log) of one partial
utterance (160 frames, 1.6 s) and returns a unit-norm, non-negative embedding. Tensor names
follow Resemblyzer's ``model_state``. Shapes: B partials, T frames, M mel bands, E embedding size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.nn.functional as F
from torch import Tensor, nn

from .base import BaseModelConfig, OasrModel


@dataclass(frozen=True)
class GE2EConfig(BaseModelConfig):
    n_mels: int = 40
    hidden_size: int = 256
    num_layers: int = 3
    embedding_size: int = 256
    partial_frames: int = 160  # mel frames per partial utterance, the length it was trained on


class GE2E(OasrModel):
    config_class = GE2EConfig
    capabilities = frozenset({"speaker_embedding"})
    quant_refusal = (
        "a 1.4 M-parameter LSTM encoder: int8 weights would save 4 MB, and no rule for quantizing "
        "its recurrent weights has been validated against the float embeddings"
    )

    def __init__(self, config: GE2EConfig):
        super().__init__(config)
        self.lstm = nn.LSTM(config.n_mels, config.hidden_size, config.num_layers, batch_first=True)
        self.linear = nn.Linear(config.hidden_size, config.embedding_size)

    def forward(self, mels: Tensor) -> Tensor:
        """mels [B, T, M] power mel frames -> [B, E] L2-normalised embeddings (the last hidden state)."""
        _, (hidden, _) = self.lstm(mels)
        embeds = F.relu(self.linear(hidden[-1]))
        # An all-zero embedding (silence can give one) stays zero instead of becoming NaN.
        return F.normalize(embeds, dim=1, eps=1e-12)


def ge2e_specs(config: GE2EConfig):
    """TokenizerSpec, FeatureSpec and DecodingDefaults of every GE2E source."""
    from ..specs import DecodingDefaults, FeatureSpec, TokenizerSpec

    features = FeatureSpec(
        kind="ge2e_mel",
        sample_rate=16000,
        n_mels=config.n_mels,
        n_fft=400,  # 25 ms
        hop_length=160,  # 10 ms
        chunk_seconds=config.partial_frames * 160 / 16000,
    )
    return TokenizerSpec(kind="none"), features, DecodingDefaults(family="speaker_embedding")
