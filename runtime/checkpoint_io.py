"""Reading foreign weight files safely: tensors only, never executed pickles."""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path
from typing import Any

from .errors import ConversionError, UnsafeCheckpointError


def load_torch_file(path: Path) -> Any:
    """``torch.load`` restricted to tensors and plain containers, memory-mapped when possible."""
    import torch

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's note on pickle protocols is noise; the refusal is ours
            return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except pickle.UnpicklingError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UnsafeCheckpointError(
            f"{path} holds pickled objects beyond tensors; refusing to unpickle it ({first})"
        ) from e
    except RuntimeError as e:
        if "zip archive" in str(e) or "mmap" in str(e):
            # Legacy (non-zip) torch files cannot be memory-mapped; read them without mmap.
            try:
                return torch.load(path, map_location="cpu", weights_only=True)
            except pickle.UnpicklingError as e2:
                raise UnsafeCheckpointError(f"{path} holds pickled objects beyond tensors; refusing to unpickle it") from e2
            except Exception as e2:
                raise ConversionError(f"{path} is not a readable torch checkpoint: {str(e2).splitlines()[0]}") from e2
        raise ConversionError(f"{path} is not a readable torch checkpoint: {str(e).splitlines()[0]}") from e
    except (EOFError, OSError, ValueError) as e:
        raise ConversionError(f"{path} is not a readable torch checkpoint: {e}") from e


def load_safetensors_file(path: Path) -> dict:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(path)
    except (SafetensorError, OSError, ValueError) as e:
        raise ConversionError(f"{path} is truncated or corrupted: {e}") from e
