"""Resemblyzer's GE2E speaker encoder: ``pretrained.pt`` = ``{"step", "model_state", "optimizer_state"}``.

``model_state`` holds the encoder (``lstm.*``, ``linear.*``) and the two scalars of the GE2E
training loss (``similarity_weight``, ``similarity_bias``), which inference never uses. The
file is read with ``weights_only=True``; the optimizer state is ignored.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING

from oasr.io.checkpoint import load_torch_file
from oasr.conversion.base import DETECT_NAMED_CONFIG, CheckpointConverter
from oasr.errors import ConversionError
from oasr.conversion.tensor_map import TensorTable

if TYPE_CHECKING:
    from oasr.models.ge2e import GE2EConfig

_NAMES = [
    *(f"lstm.{kind}_{part}_l{{bid}}" for kind in ("weight", "bias") for part in ("ih", "hh")),
    "linear.weight",
    "linear.bias",
]
_LAYER = re.compile(r"lstm\.weight_ih_l(\d+)$")


def _model_state(file: Path) -> dict | None:
    """The checkpoint's ``model_state`` when it is a Resemblyzer encoder's, else None."""
    from torch import Tensor

    try:
        ckpt = load_torch_file(file)
    except ConversionError:
        return None
    state = ckpt.get("model_state") if isinstance(ckpt, dict) else None
    if not isinstance(state, dict) or "lstm.weight_ih_l0" not in state or "linear.weight" not in state:
        return None
    if not all(isinstance(k, str) and isinstance(t, Tensor) for k, t in state.items()):
        return None
    return state


class ResemblyzerConverter(CheckpointConverter):
    name = "resemblyzer"
    architecture = "ge2e"
    markers = "resemblyzer's pretrained.pt (model_state with lstm.* and linear.*), or a folder holding it"
    # The checkpoint's own structure names the encoder; it outranks the generic one-.pt-file rule.
    detect_specificity = DETECT_NAMED_CONFIG
    tensor_table = TensorTable({n: n for n in _NAMES})
    expected_unused_prefixes = ("similarity_weight", "similarity_bias")  # GE2E loss scale, training only

    @classmethod
    def detect(cls, path: Path) -> str | None:
        file = cls._checkpoint_file(path)
        if file is None or _model_state(file) is None:
            return None
        return f"{file.name} (a Resemblyzer GE2E encoder checkpoint)"

    @staticmethod
    def _checkpoint_file(path: Path) -> Path | None:
        path = Path(path)
        if path.is_file():
            return path if path.suffix == ".pt" else None
        if not path.is_dir():
            return None
        if (path / "pretrained.pt").is_file():
            return path / "pretrained.pt"
        found = sorted(path.glob("*.pt"))
        return found[0] if len(found) == 1 else None

    @property
    def file(self) -> Path:
        file = self._checkpoint_file(self.path)
        if file is None:
            raise ConversionError(f"{self.path}: expected pretrained.pt (or one .pt file)")
        return file

    @functools.cached_property
    def _state(self) -> dict:
        state = _model_state(self.file)
        if state is None:
            raise ConversionError(f"{self.file} is not a Resemblyzer checkpoint (no model_state with lstm.*, linear.*)")
        return state

    def source_files(self) -> list[Path]:
        return [self.file]

    def build_config(self) -> GE2EConfig:
        from oasr.models.ge2e import GE2EConfig

        state = self._state
        layers = sum(1 for k in state if _LAYER.match(k))
        if "lstm.weight_hh_l0" not in state:
            raise ConversionError(f"{self.file}: model_state lacks lstm.weight_hh_l0")
        ih, hh, linear = state["lstm.weight_ih_l0"], state["lstm.weight_hh_l0"], state["linear.weight"]
        if ih.dim() != 2 or hh.dim() != 2 or linear.dim() != 2 or 0 in (*ih.shape, *hh.shape, *linear.shape):
            raise ConversionError(
                f"{self.file}: lstm/linear shapes {list(ih.shape)}, {list(hh.shape)}, {list(linear.shape)} "
                "are not non-empty matrices"
            )
        hidden = hh.shape[1]
        if ih.shape[0] != 4 * hidden or linear.shape[1] != hidden:
            raise ConversionError(
                f"{self.file}: lstm/linear shapes {tuple(ih.shape)}, {tuple(hh.shape)}, {tuple(linear.shape)} "
                "do not form a GE2E encoder"
            )
        return GE2EConfig(n_mels=ih.shape[1], hidden_size=hidden, num_layers=layers, embedding_size=linear.shape[0])

    def load_state_dict(self):
        return dict(self._state)

    def build_specs(self, config):
        from oasr.models.ge2e import ge2e_specs

        tokenizer, features, decoding = ge2e_specs(config)
        return tokenizer, {}, features, decoding
