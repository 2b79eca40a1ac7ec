"""Distributed checkpoints (``torch.distributed.checkpoint``): a folder with ``.metadata`` and
``__<rank>_<n>.distcp`` shards, read on one process, with no process group, into one state dict.

Lightning's ``ModelParallelStrategy`` (FSDP2 / tensor parallel) saves ``{"state_dict": ...,
"optimizer_0": ...}`` this way, flattened to ``state_dict.<name>``, and pickles the rest of the
checkpoint (epoch, ``hyper_parameters``) into ``meta.pt`` beside the shards.

``.metadata`` is a pickle that torch reads with plain ``pickle.load``; here it is read by a
closed unpickler that knows only torch's own checkpoint-metadata classes. Before anything is
allocated, every shard a tensor's chunks name must be a plain file inside the folder and hold
the byte range the metadata gives it, and the tensors together may not need more bytes than the
shards hold (torch stores them uncompressed). The tensors are then filled by ``dcp.load``
(which reads each chunk with ``torch.load(weights_only=True)``), chunks of one tensor from
several ranks joined into one.
"""

from __future__ import annotations

import io
import math
import pickle
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ...errors import ConversionError, UnsafeCheckpointError
from ..files import inside

METADATA_NAME = ".metadata"
SHARD_SUFFIX = ".distcp"
LIGHTNING_META = "meta.pt"  # Lightning's rest-of-the-checkpoint beside the shards
LIGHTNING_PREFIX = "state_dict."
MAX_METADATA = 256 << 20

_DCP = "torch.distributed.checkpoint.metadata"
_ALLOWED = {
    (_DCP, n)
    for n in (
        "Metadata", "TensorStorageMetadata", "BytesStorageMetadata", "ChunkStorageMetadata",
        "TensorProperties", "MetadataIndex", "StorageMeta", "_MEM_FORMAT_ENCODING",
    )
} | {
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch", "Size"),
    ("torch.serialization", "_get_layout"),
    ("pathlib", "PosixPath"), ("pathlib", "WindowsPath"), ("pathlib", "PurePosixPath"), ("pathlib", "PureWindowsPath"),
    ("collections", "OrderedDict"),
}


def is_distributed_checkpoint(folder: Path) -> bool:
    folder = Path(folder)
    return folder.is_dir() and (folder / METADATA_NAME).is_file() and any(folder.glob(f"*{SHARD_SUFFIX}"))


class _MetadataUnpickler(pickle.Unpickler):
    """torch's checkpoint-metadata dataclasses, torch dtypes and sizes; nothing else."""

    def find_class(self, module: str, name: str):
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        raise UnsafeCheckpointError(f"{module}.{name}")


def read_metadata(folder: Path):
    path = Path(folder) / METADATA_NAME
    try:
        size = path.stat().st_size
        if size > MAX_METADATA:
            raise ConversionError(f"{path} is {size} bytes, too large for checkpoint metadata")
        with open(path, "rb") as f:
            metadata = _MetadataUnpickler(io.BytesIO(f.read())).load()
    except UnsafeCheckpointError as e:
        raise UnsafeCheckpointError(f"{path} names {e} beyond torch's checkpoint metadata; refusing to unpickle it") from e
    except OSError as e:
        raise ConversionError(f"cannot read {path}: {e.strerror or e}") from e
    except Exception as e:  # corrupt pickles raise whatever the parser meets first
        raise ConversionError(f"{path} is not readable checkpoint metadata: {type(e).__name__}: {e}") from e
    from torch.distributed.checkpoint.metadata import Metadata

    if not isinstance(metadata, Metadata) or not isinstance(metadata.state_dict_metadata, dict):
        raise ConversionError(f"{path} is not torch.distributed.checkpoint metadata")
    return metadata


def read_distributed_checkpoint(folder: Path, prefix: str | None = None) -> dict[str, Tensor]:
    """The checkpoint's tensors in one state dict. ``prefix`` (e.g. ``state_dict.``) keeps only the
    entries under it, named without it; None: Lightning's ``state_dict.`` when there is one, else all."""
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    folder = Path(folder)
    metadata = read_metadata(folder)
    entries = {k: v for k, v in metadata.state_dict_metadata.items() if isinstance(v, TensorStorageMetadata)}
    if prefix is None:
        prefix = LIGHTNING_PREFIX if any(k.startswith(LIGHTNING_PREFIX) for k in entries) else ""
    wanted = {k: v for k, v in entries.items() if k.startswith(prefix)}
    if not wanted:
        raise ConversionError(f"{folder}: the distributed checkpoint holds no tensors{f' under {prefix!r}' if prefix else ''}")
    _check_storage(folder, metadata, wanted)
    state = {}
    for key, meta in wanted.items():
        dtype = meta.properties.dtype
        if not isinstance(dtype, torch.dtype) or not all(isinstance(d, int) and d >= 0 for d in meta.size):
            raise ConversionError(f"{folder}: {key} has no valid dtype or size in the metadata")
        state[key] = torch.empty(tuple(meta.size), dtype=dtype)
    _load(folder, metadata, state)
    return {k[len(prefix):]: v for k, v in state.items()}


def _check_storage(folder: Path, metadata, wanted: dict) -> None:
    """Each chunk of a wanted tensor inside a shard file that holds its byte range; the tensors
    no larger, together, than the shards that store them."""
    sizes: dict[str, int] = {}
    stored = 0
    for index, info in (metadata.storage_data or {}).items():
        fqn = getattr(index, "fqn", None)
        if fqn not in wanted:
            continue
        if getattr(info, "transform_descriptors", None):
            raise ConversionError(f"{folder}: {fqn} is stored through transforms {info.transform_descriptors}; not supported")
        name = info.relative_path
        if name not in sizes:
            shard = inside(folder, name, what=f"{folder}: the shard", error=ConversionError, nested=False)
            if not shard.is_file():
                raise ConversionError(f"{folder}: the shard {name} that holds {fqn} is missing")
            sizes[name] = shard.stat().st_size
        offset, length = info.offset, info.length
        if not (isinstance(offset, int) and isinstance(length, int) and offset >= 0 and length >= 0):
            raise ConversionError(f"{folder}: {fqn} has no valid byte range in the metadata")
        if offset + length > sizes[name]:
            raise ConversionError(f"{folder}: the shard {name} is truncated: {fqn} needs bytes up to {offset + length}, it has {sizes[name]}")
        stored += length
    needed = 0
    for key, meta in wanted.items():
        if not meta.chunks:
            raise ConversionError(f"{folder}: {key} has no stored chunks")
        item = meta.properties.dtype.itemsize if isinstance(meta.properties.dtype, torch.dtype) else 1
        needed += math.prod(meta.size) * item
    if needed > stored:
        raise ConversionError(
            f"{folder}: the metadata describes {needed} bytes of tensors but the shards store only {stored}; "
            "the checkpoint is truncated or corrupt"
        )


def _load(folder: Path, metadata, state: dict[str, Tensor]) -> None:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import FileSystemReader

    class _Reader(FileSystemReader):
        def read_metadata(self, *args: Any, **kwargs: Any):
            return metadata  # already read, by the closed unpickler

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "torch.distributed is unavailable, assuming a single process": intended
        try:
            dcp.load(state, storage_reader=_Reader(folder), no_dist=True)
        except UnsafeCheckpointError:
            raise
        except Exception as e:
            text = str(e).strip().splitlines()
            raise ConversionError(f"{folder}: the distributed checkpoint cannot be read: {text[0] if text else type(e).__name__}") from e
