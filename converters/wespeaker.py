"""WeSpeaker ResNet speaker encoders, from pyannote's ``pytorch_model.bin`` or WeSpeaker's own ``avg_model.pt``.

pyannote/wespeaker-voxceleb-resnet34-LM on the Hugging Face hub is a Lightning-style checkpoint
pyannote.audio made from WeSpeaker's release (its ``wespeaker/convert.py``): ``state_dict`` with
the ResNet under ``resnet.``, a ``pyannote.audio`` record naming the class
(``WeSpeakerResNet34``...) with pickled task specifications (read as inert stand-ins, as the
segmentation converter does), and ``hyper_parameters`` (the fbank options) when Lightning saved
them; without them the class defaults hold (80 mels, 25/10 ms, Hamming, no dither).

WeSpeaker's own release (``avg_model.pt``, a plain state dict, with ``config.yaml`` beside it)
carries the ResNet's names unprefixed and ``projection.weight``, the angular-margin classifier
over the training speakers, which inference never uses.

The topology (block kind, blocks per stage, channels, embedding size) is read from the tensors;
the mel bands from the hyper-parameters or ``config.yaml`` (80 otherwise), checked against the
embedding layer's width. ONNX exports are not read.
"""

from __future__ import annotations

import functools
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oasr.conversion.base import DETECT_NAMED_CONFIG, CheckpointConverter
from oasr.conversion.tensor_map import TensorTable
from oasr.errors import ConversionError

if TYPE_CHECKING:
    from oasr.models.wespeaker import WeSpeakerConfig
    import torch

log = logging.getLogger("oasr")

PYANNOTE_FILE = "pytorch_model.bin"
WESPEAKER_FILES = ("avg_model.pt", "wespeaker.pt", "final_model.pt")
PYANNOTE_CLASSES = {"WeSpeakerResNet34", "WeSpeakerResNet152", "WeSpeakerResNet221", "WeSpeakerResNet293"}
_MARKERS = ("conv1.weight", "layer1.0.conv1.weight", "seg_1.weight")
_BLOCK = re.compile(r"layer([1-4])\.(\d+)\.conv1\.weight$")

_BN = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")
_IN_BLOCK = [
    *(f"conv{i}.weight" for i in (1, 2, 3)),
    *(f"bn{i}.{p}" for i in (1, 2, 3) for p in _BN),
    "shortcut.0.weight",
    *(f"shortcut.1.{p}" for p in _BN),
]
# WeSpeaker's names are the runtime model's: stem, the four stages' blocks, the embedding layers.
_NAMES = [
    "conv1.weight",
    *(f"bn1.{p}" for p in _BN),
    *(f"layer{stage}.{{bid}}.{name}" for stage in (1, 2, 3, 4) for name in _IN_BLOCK),
    "seg_1.weight",
    "seg_1.bias",
    *(f"seg_bn_1.{p}" for p in ("running_mean", "running_var", "num_batches_tracked")),  # affine-free
    "seg_2.weight",
    "seg_2.bias",
]


def _wespeaker_state(file: Path) -> dict | None:
    """A plain WeSpeaker ResNet state dict (its own names), or None."""
    import torch

    from oasr.io.checkpoint import load_torch_file

    try:
        state = load_torch_file(file)
    except ConversionError:
        return None
    if not isinstance(state, dict) or not all(k in state for k in _MARKERS):
        return None
    if not all(isinstance(k, str) and isinstance(t, torch.Tensor) for k, t in state.items()):
        return None
    return state


def _pyannote_checkpoint(file: Path) -> dict | None:
    """pyannote's checkpoint of a WeSpeaker ResNet, or None."""
    from oasr_converters.pyannote import read_pyannote_checkpoint

    try:
        data = read_pyannote_checkpoint(file)
    except Exception:  # not ours to report: another converter may read it
        return None
    architecture = (data.get("pyannote.audio") or {}).get("architecture") or {}
    if architecture.get("class") not in PYANNOTE_CLASSES or "resnet.conv1.weight" not in data["state_dict"]:
        return None
    return data


def infer_config(state: dict[str, torch.Tensor], fbank: dict[str, Any], where: Path) -> WeSpeakerConfig:
    """The topology from the tensors (WeSpeaker's names), the front end from ``fbank`` options."""
    from oasr.models.wespeaker import WeSpeakerConfig

    blocks = [0, 0, 0, 0]
    for name in state:
        m = _BLOCK.match(name)
        if m:
            stage, index = int(m.group(1)) - 1, int(m.group(2))
            blocks[stage] = max(blocks[stage], index + 1)
    if 0 in blocks:
        raise ConversionError(f"{where}: a ResNet stage has no blocks ({blocks}); not a WeSpeaker ResNet")
    try:
        config = WeSpeakerConfig(
            block="bottleneck" if "layer1.0.conv3.weight" in state else "basic",
            num_blocks=tuple(blocks),
            m_channels=int(state["conv1.weight"].shape[0]),
            feat_dim=int(fbank.get("num_mel_bins", 80)),
            embedding_size=int(state["seg_1.weight"].shape[0]),
            two_emb_layer="seg_2.weight" in state,
            sample_rate=int(fbank.get("sample_rate", 16000)),
            frame_length_ms=float(fbank.get("frame_length", 25.0)),
            frame_shift_ms=float(fbank.get("frame_shift", 10.0)),
            window=str(fbank.get("window_type", "hamming")),
        )
        config.fbank_options().check()
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ConversionError(f"{where}: unreadable WeSpeaker options ({e})") from e
    width = state["seg_1.weight"].shape[1]
    if width != 2 * config.stats_dim:
        raise ConversionError(
            f"{where}: the embedding layer reads {width} statistics; {config.feat_dim} mel bands and "
            f"{config.m_channels} channels give {2 * config.stats_dim}"
        )
    unsupported = {
        k: fbank[k]
        for k, ok in (("use_energy", False), ("fbank_centering_span", None), ("snip_edges", True), ("round_to_power_of_two", True))
        if k in fbank and fbank[k] != ok
    }
    if unsupported:
        raise ConversionError(f"{where}: fbank options the runtime does not implement: {unsupported}")
    if float(fbank.get("dither", 0.0)) != 0.0:
        log.info("%s: trained with dither %s; inference runs without (as WeSpeaker's own inference)", where, fbank["dither"])
    return config


def _cast_counters(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Batch-norm step counters as int64: WeSpeaker's model averaging divides them into floats."""
    return {
        k: t.round().long() if k.endswith("num_batches_tracked") and t.is_floating_point() else t for k, t in state.items()
    }


class _WeSpeakerParts:
    """What both layouts share (a mixin: the converter contract checks each concrete class)."""

    architecture = "wespeaker-resnet"
    detect_specificity = DETECT_NAMED_CONFIG  # the checkpoint's own structure names the encoder

    def build_specs(self, config):
        from oasr.models.wespeaker import wespeaker_specs

        tokenizer, features, decoding = wespeaker_specs(config)
        return tokenizer, {}, features, decoding


class PyannoteWeSpeakerConverter(_WeSpeakerParts, CheckpointConverter):
    name = "pyannote-wespeaker"
    markers = f"{PYANNOTE_FILE} of pyannote/wespeaker-voxceleb-resnet34-LM (a pyannote.audio WeSpeakerResNet checkpoint)"
    tensor_table = TensorTable({f"resnet.{n}": n for n in _NAMES})

    @classmethod
    def detect(cls, path: Path) -> str | None:
        file = cls._file(path)
        if file is None or _pyannote_checkpoint(file) is None:
            return None
        return f"{file.name} (a pyannote.audio WeSpeakerResNet checkpoint)"

    @staticmethod
    def _file(path: Path) -> Path | None:
        path = Path(path)
        if path.is_file():
            return path if path.suffix in (".bin", ".ckpt", ".pt") else None
        return path / PYANNOTE_FILE if (path / PYANNOTE_FILE).is_file() else None

    @property
    def file(self) -> Path:
        file = self._file(self.path)
        if file is None:
            raise ConversionError(f"{self.path}: expected {PYANNOTE_FILE}")
        return file

    @functools.cached_property
    def _checkpoint(self) -> dict:
        data = _pyannote_checkpoint(self.file)
        if data is None:
            raise ConversionError(f"{self.file} is not a pyannote.audio WeSpeakerResNet checkpoint")
        return data

    def source_files(self) -> list[Path]:
        return [self.file]

    def build_config(self) -> WeSpeakerConfig:
        data = self._checkpoint
        state = {k[len("resnet.") :]: t for k, t in data["state_dict"].items() if k.startswith("resnet.")}
        config = infer_config(state, dict(data.get("hyper_parameters") or {}), self.file)
        named = data["pyannote.audio"]["architecture"]["class"]
        if named == "WeSpeakerResNet34" and (config.block, config.num_blocks) != ("basic", (3, 4, 6, 3)):
            raise ConversionError(f"{self.file}: named {named} but holds a {config.block} ResNet {config.num_blocks}")
        return config

    def load_state_dict(self) -> dict[str, torch.Tensor]:
        return _cast_counters(dict(self._checkpoint["state_dict"]))


class WeSpeakerConverter(_WeSpeakerParts, CheckpointConverter):
    name = "wespeaker"
    markers = f"WeSpeaker's own {' / '.join(WESPEAKER_FILES)} (a ResNet state dict, config.yaml beside it), or a folder holding one"
    tensor_table = TensorTable({n: n for n in _NAMES})
    expected_unused_prefixes = ("projection.",)  # the training speakers' classifier (AAM softmax)

    @classmethod
    def detect(cls, path: Path) -> str | None:
        file = cls._file(path)
        if file is None or _wespeaker_state(file) is None:
            return None
        return f"{file.name} (a WeSpeaker ResNet state dict)"

    @staticmethod
    def _file(path: Path) -> Path | None:
        path = Path(path)
        if path.is_file():
            return path if path.suffix == ".pt" else None
        found = [path / n for n in WESPEAKER_FILES if (path / n).is_file()] if path.is_dir() else []
        return found[0] if found else None

    @property
    def file(self) -> Path:
        file = self._file(self.path)
        if file is None:
            raise ConversionError(f"{self.path}: expected one of {', '.join(WESPEAKER_FILES)}")
        return file

    @functools.cached_property
    def _state(self) -> dict:
        state = _wespeaker_state(self.file)
        if state is None:
            raise ConversionError(f"{self.file} is not a WeSpeaker ResNet state dict (no {', '.join(_MARKERS)})")
        return state

    def _config_yaml(self) -> dict:
        file = self.file.parent / "config.yaml"
        if not file.is_file():
            return {}
        import yaml

        try:
            data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
        except (yaml.YAMLError, UnicodeDecodeError) as e:
            raise ConversionError(f"{file}: unreadable YAML ({e})") from e
        return data if isinstance(data, dict) else {}

    def source_files(self) -> list[Path]:
        return [self.file]

    def build_config(self) -> WeSpeakerConfig:
        data = self._config_yaml()
        model = str(data.get("model", "ResNet"))
        if not model.startswith("ResNet"):
            raise ConversionError(f"{self.file}: config.yaml names {model}; only WeSpeaker's ResNets are supported")
        args = data.get("model_args") or {}
        if str(args.get("pooling_func", "TSTP")) != "TSTP":
            raise ConversionError(f"{self.file}: pooling {args['pooling_func']}; only TSTP (mean + std) is supported")
        fbank = dict(((data.get("dataset_args") or {}).get("fbank_args") or {}))
        fbank.setdefault("num_mel_bins", args.get("feat_dim", 80))
        return infer_config(self._state, fbank, self.file)

    def load_state_dict(self) -> dict[str, torch.Tensor]:
        return _cast_counters(dict(self._state))
