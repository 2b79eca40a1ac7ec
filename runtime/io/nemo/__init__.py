"""NeMo's checkpoint formats, read as data: one module per format.

- ``archive``: ``.nemo`` tar archives, checked member by member and extracted into a temporary folder
- ``config``: ``model_config.yaml`` and NeMo configs as plain dicts (references resolved, artifacts found)
- ``pickled``: torch pickles holding OmegaConf and other foreign objects, rebuilt with inert stand-ins
- ``lightning``: Lightning ``.ckpt`` files (``state_dict`` + ``hyper_parameters["cfg"]``)
- ``distcp``: ``torch.distributed.checkpoint`` folders (``.metadata`` + ``*.distcp``) on one process

Nothing here imports NeMo, OmegaConf or Lightning, and the ``target`` class a config names is only
ever shown, never imported.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..checkpoint import load_torch_file

if TYPE_CHECKING:
    from torch import Tensor


def read_state_dict(path: Path) -> dict[str, Tensor]:
    """A ``model_weights.ckpt`` (``torch.save`` of the model's state dict), tensors only."""
    from .lightning import named_tensors

    data = load_torch_file(path)
    if isinstance(data, dict) and "state_dict" in data and isinstance(data["state_dict"], dict):
        data = data["state_dict"]  # a weights file saved as a Lightning-style wrapper
    return named_tensors(data, str(path))
