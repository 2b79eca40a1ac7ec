"""Reading foreign weight files safely: tensors only, never executed pickles."""

from __future__ import annotations

import pickle
import re
import warnings
from pathlib import Path
from typing import Any

from ..errors import ConversionError, UnsafeCheckpointError


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def load_torch_file(path: Path) -> Any:
    """``torch.load`` restricted to tensors and plain containers, memory-mapped when possible."""
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's notes on pickle protocols are noise; the refusal is ours
        try:
            try:
                return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError as e:
                if "zip" not in str(e) and "mmap" not in str(e):
                    raise
                # Legacy (non-zip) torch files cannot be memory-mapped; read them whole.
                return torch.load(path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as e:
            found = re.search(r"WeightsUnpickler error:\s*([^\n.]+)", str(e))
            what = f" ({found.group(1).strip()})" if found else ""
            raise UnsafeCheckpointError(f"{path} holds pickled objects beyond tensors; refusing to unpickle it{what}") from e
        except (RuntimeError, EOFError, OSError, ValueError) as e:
            raise ConversionError(f"{path} is not a readable torch checkpoint: {_first_line(e)}") from e


def load_safetensors_file(path: Path) -> dict:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(path)
    except (SafetensorError, OSError, ValueError) as e:
        raise ConversionError(f"{path} is truncated or corrupted: {e}") from e
