"""A test-only CTC architecture shipped the way a third-party package ships one.

Everything oasr needs comes through entry points (``../oasr_tinyctc-0.1.dist-info``): the
architecture (``oasr.models``), its converter (``oasr.converters``), its tokenizer kind
(``oasr.tokenizers``) and a decoding family of its own (``oasr.decoding``, in ``runs.py``: its
options section, engine and verify rule); no file of the runtime or the CLI names any of them. The network is a pooling of the log-mel
frames followed by one linear layer: with weights set by the tests, each label answers to a
tone at its own frequency, so synthetic audio has a known transcript and known word times.

The foreign format: a folder with ``tinyctc.json`` (``labels``: blank first, a space separates
words; ``n_mels``, ``stride``, ``language``; ``decoding``: ``ctc``, the default, or the plugin's
own ``tone_runs``) and ``weights.safetensors`` (``W`` [labels, n_mels],
``b`` [labels]).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn

from oasr.conversion.base import DETECT_NAMED_CONFIG, CheckpointConverter
from oasr.conversion.tensor_map import TensorTable
from oasr.models.base import BaseModelConfig, OasrModel
from oasr.specs import DecodingDefaults, FeatureSpec, TokenizerSpec


@dataclasses.dataclass(frozen=True)
class TinyCtcConfig(BaseModelConfig):
    n_mels: int = 80
    labels: int = 8
    stride: int = 2


class TinyCtc(OasrModel):
    config_class = TinyCtcConfig
    capabilities = frozenset({"transcribe", "timestamps", "word_timestamps"})

    def __init__(self, config: TinyCtcConfig):
        super().__init__(config)
        self.proj = nn.Linear(config.n_mels, config.labels)

    @property
    def output_stride(self) -> int:
        return self.config.stride

    def ctc_log_probs(self, features: torch.Tensor, lengths: torch.Tensor):
        """features [B, n_mels, T] -> log-probabilities [B, T // stride, labels], their lengths."""
        pooled = nn.functional.avg_pool1d(features, self.config.stride)
        return self.proj(pooled.transpose(1, 2)).log_softmax(-1), lengths // self.config.stride


class TinyCtcConverter(CheckpointConverter):
    name = "tinyctc"
    architecture = "tinyctc"
    markers = "tinyctc.json beside weights.safetensors"
    detect_specificity = DETECT_NAMED_CONFIG
    tensor_table = TensorTable({"W": "proj.weight", "b": "proj.bias"})

    @classmethod
    def detect(cls, path: Path) -> str | None:
        return "tinyctc.json (the test plugin's format)" if (Path(path) / "tinyctc.json").is_file() else None

    def _meta(self) -> dict:
        return json.loads((self.path / "tinyctc.json").read_text())

    def source_files(self) -> list[Path]:
        return [self.path / "weights.safetensors", self.path / "tinyctc.json"]

    def build_config(self) -> TinyCtcConfig:
        meta = self._meta()
        return TinyCtcConfig(n_mels=meta["n_mels"], labels=len(meta["labels"]), stride=meta["stride"])

    def load_state_dict(self):
        return load_file(self.path / "weights.safetensors")

    def build_specs(self, config):
        meta = self._meta()
        tokenizer = TokenizerSpec(kind="tinyctc-labels", files=("tinyctc.json",))
        features = FeatureSpec(kind="whisper_logmel", n_mels=config.n_mels, chunk_seconds=0.0)
        decoding = DecodingDefaults(family=meta.get("decoding", "ctc"), blank_id=0, options={"language": meta["language"]})
        return tokenizer, {"tinyctc.json": self.path / "tinyctc.json"}, features, decoding


class LabelTokenizer:
    """One label per id; a label's text is itself, a space starts a word."""

    def __init__(self, labels: list[str]):
        self.labels = labels
        self._ids = {label: i for i, label in enumerate(labels)}

    def token_text(self, token_id: int) -> str:
        return "" if token_id == 0 else self.labels[token_id]

    def decode(self, ids) -> str:
        return "".join(self.token_text(i) for i in ids)

    def encode(self, text: str) -> list[int]:
        return [self._ids[c] for c in text if c in self._ids]


def load_tokenizer(files, spec) -> LabelTokenizer:
    return LabelTokenizer(json.loads(Path(files["tinyctc.json"]).read_text())["labels"])
