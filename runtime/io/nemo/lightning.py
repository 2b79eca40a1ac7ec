"""PyTorch Lightning checkpoints of NeMo models: ``state_dict`` and the model config in
``hyper_parameters["cfg"]`` (NeMo's ``ModelPT`` saves its config as the ``cfg`` hyper-parameter).

Optimiser, scheduler and loop states are read as inert data (``pickled.py``) and left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import Tensor

from ...errors import ConversionError
from .config import model_section, resolve_references
from .pickled import is_omega, load_torch_pickle, omega_path, omega_root, plain


@dataclass
class LightningCheckpoint:
    state_dict: dict[str, Tensor]
    config: dict[str, Any] | None  # the model config, references resolved; None when it holds none


def read_lightning_checkpoint(path: Path) -> LightningCheckpoint:
    data = load_torch_pickle(path)
    if not isinstance(data, dict) or "state_dict" not in data:
        raise ConversionError(f"{path} is not a Lightning checkpoint (no state_dict)")
    return LightningCheckpoint(named_tensors(data["state_dict"], f"{path}: state_dict"), hyper_parameters_config(data, str(path)))


def hyper_parameters_config(data: dict, where: str) -> dict[str, Any] | None:
    """The model config of a checkpoint's ``hyper_parameters`` (its ``cfg``, or the hyper-parameters
    themselves when they are the config), as plain data with its references resolved."""
    hparams = data.get("hyper_parameters")
    if hparams is None:
        return None
    cfg = hparams.get("cfg", hparams) if isinstance(hparams, dict) else hparams
    if is_omega(cfg):
        root = omega_root(cfg)
        path = omega_path(root, cfg) if root is not cfg else ()
        if path:  # it hangs inside the whole training config: references resolve against that
            whole = plain(root)
            if isinstance(whole, dict):
                return _at(resolve_references(whole, where), path, where)
    cfg = plain(cfg)
    if not isinstance(cfg, dict):
        raise ConversionError(f"{where}: hyper_parameters cfg is {type(cfg).__name__}, not a model config")
    return model_section(cfg, where)


def _at(tree: dict, path: tuple, where: str) -> dict:
    node: Any = tree
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        raise ConversionError(f"{where}: the hyper-parameters' cfg is not a mapping")
    return node


def named_tensors(state: Any, where: str) -> dict[str, Tensor]:
    """``state`` when it is a mapping of names to tensors; else a one-line error."""
    if not isinstance(state, dict):
        raise ConversionError(f"{where} is {type(state).__name__}, not a mapping of tensor names to tensors")
    bad = [k for k, v in state.items() if not isinstance(k, str) or not isinstance(v, Tensor)]
    if bad:
        raise ConversionError(f"{where}: {bad[0]!r} is not a named tensor ({len(bad)} such entries)")
    return dict(state)
