"""Silero VAD v6, 16 kHz, from the silero-vad package's ``silero_vad.jit``, read as data.

The TorchScript archive holds the 16 kHz network (``_model.*``) and an 8 kHz one
(``_model_8k.*``); its tensors are read without loading or running its code
(``oasr.io.torchscript``). The 16 kHz network is kept: oasr resamples every input to 16 kHz.

The package's ``silero_vad_16k.safetensors`` is not used: its weights differ from the ones the
package runs (``load_silero_vad()``, TorchScript and every ONNX file agree with each other), and
speech probabilities from it differ from the package's by up to 0.4.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

from oasr.conversion.base import DETECT_NAMED_CONFIG, CheckpointConverter
from oasr.errors import ConversionError
from oasr.conversion.tensor_map import TensorTable

if TYPE_CHECKING:
    from oasr.models.silero_vad import SileroVadConfig

FILE_NAME = "silero_vad.jit"
_CODE_MARKER = "__torch__/vad/model/vad_annotator.py"  # Silero's VAD module, by its source path

_TABLE = {
    "_model.stft.forward_basis_buffer": "stft_conv.weight",
    **{f"_model.encoder.{i}.reparam_conv.{p}": f"conv{i + 1}.{p}" for i in range(4) for p in ("weight", "bias")},
    "_model.decoder.rnn.weight_ih": "lstm.weight_ih_l0",
    "_model.decoder.rnn.weight_hh": "lstm.weight_hh_l0",
    "_model.decoder.rnn.bias_ih": "lstm.bias_ih_l0",
    "_model.decoder.rnn.bias_hh": "lstm.bias_hh_l0",
    "_model.decoder.decoder.2.weight": "final_conv.weight",
    "_model.decoder.decoder.2.bias": "final_conv.bias",
}


class SileroVadConverter(CheckpointConverter):
    name = "silero-vad"
    architecture = "silero-vad"
    markers = f"{FILE_NAME} (a TorchScript archive of Silero's vad_annotator module), or a folder holding it"
    # The archive's own module path names the network.
    detect_specificity = DETECT_NAMED_CONFIG
    tensor_table = TensorTable(_TABLE)
    # The 8 kHz twin network, and the wrapper's streaming state (empty tensors between calls).
    expected_unused_prefixes = ("_model_8k.", "_state", "_context")

    @classmethod
    def detect(cls, path: Path) -> str | None:
        file = cls._archive_file(path)
        if file is None:
            return None
        from oasr.io.torchscript import torchscript_code_paths  # imports torch: only once a file of the name is there

        if _CODE_MARKER not in torchscript_code_paths(file):
            return None
        return f"{file.name} (a Silero VAD TorchScript archive)"

    @staticmethod
    def _archive_file(path: Path) -> Path | None:
        path = Path(path)
        if path.is_file():
            return path if path.suffix == ".jit" else None
        if path.is_dir() and (path / FILE_NAME).is_file():
            return path / FILE_NAME
        return None

    @property
    def file(self) -> Path:
        file = self._archive_file(self.path)
        if file is None:
            raise ConversionError(f"{self.path}: expected {FILE_NAME}")
        return file

    @functools.cached_property
    def _state(self) -> dict:
        from oasr.io.torchscript import read_torchscript_tensors

        return read_torchscript_tensors(self.file)

    def source_files(self) -> list[Path]:
        return [self.file]

    def build_config(self) -> SileroVadConfig:
        from oasr.models.silero_vad import SileroVadConfig

        state = self._state
        missing = [n for n in _TABLE if n not in state]
        if missing:
            raise ConversionError(f"{self.file} lacks {', '.join(missing[:3])}: not a Silero VAD v5/v6 archive")
        basis, hh = state["_model.stft.forward_basis_buffer"], state["_model.decoder.rnn.weight_hh"]
        if basis.dim() != 3 or hh.dim() != 2 or hh.shape[1] < 1:
            raise ConversionError(
                f"{self.file}: the STFT basis {list(basis.shape)} or the LSTM's weight_hh {list(hh.shape)} "
                "has the wrong rank: not a Silero VAD v5/v6 archive"
            )
        n_fft = basis.shape[-1]
        if n_fft != 256:
            raise ConversionError(f"{self.file}: an STFT of {n_fft} samples is not the 16 kHz network's (256)")
        return SileroVadConfig(hidden_size=hh.shape[1])

    def load_state_dict(self):
        return dict(self._state)

    def build_specs(self, config):
        from oasr.models.silero_vad import silero_vad_specs

        tokenizer, features, decoding = silero_vad_specs(config)
        return tokenizer, {}, features, decoding
