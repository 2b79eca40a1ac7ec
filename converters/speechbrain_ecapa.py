"""SpeechBrain's ECAPA-TDNN speaker encoder (``speechbrain/spkrec-ecapa-voxceleb`` and its kin):
a folder with ``embedding_model.ckpt`` (a plain state dict), ``hyperparams.yaml`` and, optionally,
``mean_var_norm_emb.ckpt`` (the training embeddings' global mean, SpeechBrain's embedding
normalisation).

The topology is read from the tensors (channels, kernel sizes, Res2Net scale, SE and attention
widths, embedding size); the dilations, which no tensor shows, from ``hyperparams.yaml``'s
``embedding_model`` section (read as data: its ``!new:`` / ``!ref`` tags are not followed), the
ECAPA defaults (1, 2, 3, 4, 1) otherwise. The front end must be SpeechBrain's ``Fbank`` with
sentence mean normalisation without variance normalisation, as in every SpeechBrain ECAPA recipe;
anything else is refused by name. The classifier and label encoder beside it (the training
speakers) are not read.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oasr.conversion.base import DETECT_NAMED_CONFIG, CheckpointConverter
from oasr.conversion.tensor_map import TensorTable
from oasr.errors import ConversionError
from oasr.io.checkpoint import load_torch_file

if TYPE_CHECKING:
    from oasr.models.ecapa_tdnn import EcapaConfig
    import torch

WEIGHTS = "embedding_model.ckpt"
HYPERPARAMS = "hyperparams.yaml"
EMBEDDING_NORM = "mean_var_norm_emb.ckpt"
_BN = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")
_TDNN = ("conv.conv.weight", "conv.conv.bias", *(f"norm.norm.{p}" for p in _BN))
_MAX_SCALE = 64  # Res2Net groups named in the table
_NAMES = [
    *(f"blocks.{{bid}}.{n}" for n in _TDNN),  # the first TDNN block
    *(f"blocks.{{bid}}.{part}.{n}" for part in ("tdnn1", "tdnn2") for n in _TDNN),
    *(f"blocks.{{bid}}.res2net_block.blocks.{j}.{n}" for j in range(_MAX_SCALE) for n in _TDNN),
    *(f"blocks.{{bid}}.se_block.conv{i}.conv.{p}" for i in (1, 2) for p in ("weight", "bias")),
    *(f"blocks.{{bid}}.shortcut.conv.{p}" for p in ("weight", "bias")),
    *(f"mfa.{n}" for n in _TDNN),
    *(f"asp.tdnn.{n}" for n in _TDNN),
    "asp.conv.conv.weight",
    "asp.conv.conv.bias",
    *(f"asp_bn.norm.{p}" for p in _BN),
    "fc.conv.weight",
    "fc.conv.bias",
    "embedding_mean",
]
_SE_BLOCK = re.compile(r"blocks\.(\d+)\.se_block\.conv1\.conv\.weight$")
_RES2NET = re.compile(r"blocks\.1\.res2net_block\.blocks\.(\d+)\.conv\.conv\.weight$")


def read_hyperparams(file: Path) -> dict[str, Any]:
    """hyperparams.yaml as plain data: a tagged node (``!new:cls``, ``!ref <x>``, ``!name:f``)
    becomes its mapping, sequence or string; nothing is imported or resolved."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def plain(loader, suffix, node):
        if isinstance(node, yaml.MappingNode):
            return {"__tag__": suffix, **loader.construct_mapping(node, deep=True)}
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_scalar(node)

    Loader.add_multi_constructor("!", plain)
    try:
        data = yaml.load(file.read_text(encoding="utf-8"), Loader=Loader)  # noqa: S506 (a SafeLoader subclass)
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ConversionError(f"{file}: unreadable YAML ({e})") from e
    return data if isinstance(data, dict) else {}


def _state(file: Path) -> dict | None:
    import torch

    try:
        state = load_torch_file(file)
    except ConversionError:
        return None
    if not isinstance(state, dict) or "blocks.0.conv.conv.weight" not in state or "fc.conv.weight" not in state:
        return None
    if not all(isinstance(k, str) and isinstance(t, torch.Tensor) for k, t in state.items()):
        return None
    return state


class SpeechBrainEcapaConverter(CheckpointConverter):
    name = "speechbrain-ecapa"
    architecture = "ecapa-tdnn"
    markers = f"a SpeechBrain speaker model folder: {WEIGHTS} (ECAPA_TDNN) with {HYPERPARAMS} beside it"
    detect_specificity = DETECT_NAMED_CONFIG
    tensor_table = TensorTable({n: n for n in _NAMES})

    @classmethod
    def detect(cls, path: Path) -> str | None:
        file = cls._file(path)
        if file is None or not (file.parent / HYPERPARAMS).is_file() or _state(file) is None:
            return None
        return f"{file.name} beside {HYPERPARAMS} (a SpeechBrain ECAPA-TDNN)"

    @staticmethod
    def _file(path: Path) -> Path | None:
        path = Path(path)
        if path.is_file():
            return path if path.name == WEIGHTS else None
        return path / WEIGHTS if (path / WEIGHTS).is_file() else None

    @property
    def file(self) -> Path:
        file = self._file(self.path)
        if file is None:
            raise ConversionError(f"{self.path}: expected {WEIGHTS} with {HYPERPARAMS} beside it")
        return file

    @functools.cached_property
    def _state(self) -> dict:
        state = _state(self.file)
        if state is None:
            raise ConversionError(f"{self.file} is not a SpeechBrain ECAPA_TDNN state dict (no blocks.0.conv.conv.weight, fc.conv.weight)")
        return state

    @functools.cached_property
    def _hyperparams(self) -> dict:
        return read_hyperparams(self.file.parent / HYPERPARAMS)

    def source_files(self) -> list[Path]:
        norm = self.file.parent / EMBEDDING_NORM
        return [self.file, self.file.parent / HYPERPARAMS, *([norm] if norm.is_file() else [])]

    def _check_front_end(self, hp: dict) -> None:
        where = self.file.parent / HYPERPARAMS
        features = hp.get("compute_features") or {}
        if isinstance(features, dict) and not str(features.get("__tag__", "speechbrain.lobes.features.Fbank")).endswith("Fbank"):
            raise ConversionError(f"{where}: compute_features is {features['__tag__']}; only SpeechBrain's Fbank is supported")
        extra = {k: features[k] for k in ("deltas", "context", "f_min", "f_max", "n_fft", "win_length", "hop_length") if isinstance(features, dict) and k in features}
        if any(extra.get(k) for k in ("deltas", "context")) or extra.get("f_min", 0) or extra.get("n_fft", 400) != 400:
            raise ConversionError(f"{where}: fbank options the runtime does not implement: {extra}")
        norm = hp.get("mean_var_norm") or {}
        if isinstance(norm, dict) and (norm.get("norm_type", "sentence") != "sentence" or norm.get("std_norm", True) is not False):
            raise ConversionError(
                f"{where}: mean_var_norm is norm_type={norm.get('norm_type')!r} std_norm={norm.get('std_norm')!r}; "
                "only sentence mean normalisation (std_norm: False) is supported"
            )

    def build_config(self) -> EcapaConfig:
        from oasr.models.ecapa_tdnn import EcapaConfig

        state, hp = self._state, self._hyperparams
        self._check_front_end(hp)
        model = hp.get("embedding_model") if isinstance(hp.get("embedding_model"), dict) else {}
        if not str(model.get("__tag__", "ECAPA_TDNN")).endswith("ECAPA_TDNN"):
            raise ConversionError(f"{self.file}: {HYPERPARAMS} names {model['__tag__']}; only ECAPA_TDNN is supported")
        se_blocks = sorted(int(m.group(1)) for k in state if (m := _SE_BLOCK.match(k)))
        if not se_blocks or se_blocks != list(range(1, len(se_blocks) + 1)):
            raise ConversionError(f"{self.file}: SE-Res2Net blocks {se_blocks} are not numbered 1..n")
        n = len(se_blocks) + 2
        channels = [state["blocks.0.conv.conv.weight"].shape[0]]
        kernels = [state["blocks.0.conv.conv.weight"].shape[2]]
        for i in se_blocks:
            channels.append(state[f"blocks.{i}.tdnn1.conv.conv.weight"].shape[0])
            kernels.append(state[f"blocks.{i}.res2net_block.blocks.0.conv.conv.weight"].shape[2])
        channels.append(state["mfa.conv.conv.weight"].shape[0])
        kernels.append(state["mfa.conv.conv.weight"].shape[2])
        dilations = model.get("dilations") or ((1, 2, 3, 4, 1) if n == 5 else None)
        if dilations is None:
            raise ConversionError(f"{self.file}: {HYPERPARAMS} gives no dilations for {n} layers")
        try:
            config = EcapaConfig(
                n_mels=int(state["blocks.0.conv.conv.weight"].shape[1]),
                channels=tuple(int(c) for c in channels),
                kernel_sizes=tuple(int(k) for k in kernels),
                dilations=tuple(int(d) for d in dilations),
                attention_channels=int(state["asp.tdnn.conv.conv.weight"].shape[0]),
                res2net_scale=1 + sum(1 for k in state if _RES2NET.match(k)),
                se_channels=int(state["blocks.1.se_block.conv1.conv.weight"].shape[0]),
                global_context=state["asp.tdnn.conv.conv.weight"].shape[1] == 3 * channels[-1],
                embedding_size=int(state["fc.conv.weight"].shape[0]),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ConversionError(f"{self.file}: not an ECAPA_TDNN this runtime reads ({e})") from e
        if len(config.dilations) != n:
            raise ConversionError(f"{self.file}: {len(config.dilations)} dilations for {n} layers")
        return config

    def load_state_dict(self) -> dict[str, torch.Tensor]:
        import torch

        state = dict(self._state)
        norm = self.file.parent / EMBEDDING_NORM
        if norm.is_file():
            stats = load_torch_file(norm)
            mean = stats.get("glob_mean") if isinstance(stats, dict) else None
            if not isinstance(mean, torch.Tensor) or mean.shape != state["fc.conv.bias"].shape:
                raise ConversionError(f"{norm}: expected glob_mean of {tuple(state['fc.conv.bias'].shape)}")
            state["embedding_mean"] = mean.float()
        else:
            state["embedding_mean"] = torch.zeros_like(state["fc.conv.bias"])
        return state

    def notes(self) -> list[str]:
        norm = self.file.parent / EMBEDDING_NORM
        return [] if norm.is_file() else [f"no {EMBEDDING_NORM}: embedding_mean is zero"]

    def build_specs(self, config):
        from oasr.models.ecapa_tdnn import ecapa_specs

        tokenizer, features, decoding = ecapa_specs(config)
        return tokenizer, {}, features, decoding
