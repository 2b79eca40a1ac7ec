"""Write a ``.safetensors`` file straight from the tensors' memory.

safetensors' own ``save_file`` first copies every tensor into one ``bytes`` (the model's size
again, in memory and in time) and needs torch for torch tensors; this writes the same bytes
from each tensor's buffer, torch tensors and numpy arrays alike. The layout is safetensors':
an 8-byte little-endian header length, the JSON header (padded with spaces to 8 bytes), the
data ordered by dtype (largest first, in safetensors' dtype order) then by name. A test keeps
the output byte-identical to safetensors'.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any, Mapping

import numpy as np

# safetensors' Dtype enum, in its declaration order: data is laid out by it, descending.
_ORDER = ("BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64", "I64", "U64")
_CODES = {
    "bool": "BOOL", "uint8": "U8", "int8": "I8", "float8_e5m2": "F8_E5M2", "float8_e4m3fn": "F8_E4M3",
    "int16": "I16", "uint16": "U16", "float16": "F16", "bfloat16": "BF16", "int32": "I32", "uint32": "U32",
    "float32": "F32", "float64": "F64", "int64": "I64", "uint64": "U64",
}


def _raw(t: Any) -> tuple[str, tuple[int, ...], memoryview]:
    """(safetensors dtype, shape, the bytes in C order and little-endian), copying only what is
    not contiguous already."""
    if isinstance(t, np.ndarray):
        name, shape = t.dtype.name, t.shape
        flat = np.ascontiguousarray(t, dtype=t.dtype.newbyteorder("<")).reshape(-1)
    else:  # a torch tensor: its bytes as uint8 (numpy has no bfloat16)
        import torch

        name, shape = str(t.dtype).removeprefix("torch."), tuple(t.shape)
        flat = t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()
    if name not in _CODES:
        raise ValueError(f"safetensors cannot store dtype {name}")
    return _CODES[name], tuple(shape), memoryview(flat.view(np.uint8))


def write_safetensors(tensors: Mapping[str, Any], file: Path, metadata: Mapping[str, str] | None = None) -> None:
    """``safetensors.torch.save_file``'s bytes and arguments, for torch tensors and numpy arrays."""
    entries = sorted(((name, *_raw(t)) for name, t in tensors.items()), key=lambda e: (-_ORDER.index(e[1]), e[0]))
    header: dict[str, Any] = {"__metadata__": dict(metadata)} if metadata else {}
    offset = 0
    for name, code, shape, data in entries:
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [offset, offset + data.nbytes]}
        offset += data.nbytes
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(file, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for *_, data in entries:
            f.write(data)
