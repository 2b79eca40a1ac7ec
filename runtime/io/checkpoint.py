"""Reading foreign weight files safely: tensors only, never executed pickles."""

from __future__ import annotations

import pickle
import re
import struct
import warnings
from pathlib import Path
from typing import Any

from ..errors import ConversionError, UnsafeCheckpointError


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


_CORRUPT_PICKLE = (IndexError, KeyError, TypeError, AttributeError, AssertionError, MemoryError, struct.error, RecursionError)


def load_torch_file(path: Path) -> Any:
    """``torch.load`` restricted to tensors and plain containers, memory-mapped when possible;
    a zip checkpoint's members are checked against their declared sizes before anything inflates."""
    import torch

    from .torchscript import check_zip_sizes

    check_zip_sizes(path)

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
        except (RuntimeError, EOFError, OSError, ValueError, *_CORRUPT_PICKLE) as e:
            # torch's weights-only unpickler meets corrupt bytes with whatever its parser hits first
            raise ConversionError(f"{path} is not a readable torch checkpoint: {_first_line(e)}") from e


def load_safetensors_file(path: Path) -> dict:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(path)
    except (SafetensorError, OSError, ValueError) as e:
        raise ConversionError(f"{path} is truncated or corrupted: {e}") from e


def hf_repo_root(folder: Path) -> Path:
    """Where the files of ``folder`` may lead: a Hugging Face cache snapshot
    (``models--org--name/snapshots/<commit>``) holds links into its repository's ``blobs/``, so its
    repository folder; any other folder, itself."""
    folder = Path(folder)
    repo = folder.parent.parent
    if folder.parent.name == "snapshots" and repo.name.startswith("models--") and (repo / "blobs").is_dir():
        return repo
    return folder


def shard_files(folder: Path, index: Path) -> list[Path]:
    """The weight files a sharded checkpoint's index (``model.safetensors.index.json``,
    ``pytorch_model.bin.index.json``) names in its ``weight_map``, each a plain relative name inside
    ``folder``: absolute names, ``..`` and links out of the folder are refused, as is a malformed index."""
    import json

    from .files import inside

    folder, index = Path(folder), Path(index)
    try:
        data = json.loads(index.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ConversionError(f"{index} is not a readable JSON index: {_first_line(e)}") from e
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise ConversionError(f"{index}: expected an object with a non-empty weight_map (tensor name -> shard file)")
    names = set()
    for tensor, shard in weight_map.items():
        if not isinstance(shard, str):
            raise ConversionError(f"{index}: the shard of {tensor!r} is {type(shard).__name__} {shard!r}, not a file name")
        names.add(shard)
    within = hf_repo_root(folder)
    files = [inside(folder, n, what=f"{index}: the shard", error=ConversionError, within=within) for n in sorted(names)]
    absent = [f.relative_to(folder).as_posix() for f in files if not f.is_file()]
    if absent:
        raise ConversionError(f"{index} names missing shard(s): {', '.join(absent)}")
    return files
