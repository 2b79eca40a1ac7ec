"""Tensors of a TorchScript archive, read as data: its code is never loaded or run.

A TorchScript file is a zip: ``<name>/data.pkl`` pickles the module tree (objects of
``__torch__.*`` classes whose attributes are submodules, tensors and plain values), tensors live
in ``<name>/data/<key>`` as raw little-endian storages, and ``<name>/code/`` holds the program.
``data.pkl`` is read by an unpickler that knows a closed set of names: the module classes become
inert attribute holders, tensors are rebuilt from the stored bytes, and any other global is
refused. The result is the archive's state dict with the dotted names ``torch.jit.load`` would give.
"""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path

import torch
from torch import Tensor

from ..errors import ConversionError, UnsafeCheckpointError

_STORAGE_DTYPES = {
    "FloatStorage": torch.float32,
    "DoubleStorage": torch.float64,
    "HalfStorage": torch.float16,
    "BFloat16Storage": torch.bfloat16,
    "LongStorage": torch.int64,
    "IntStorage": torch.int32,
    "ShortStorage": torch.int16,
    "CharStorage": torch.int8,
    "ByteStorage": torch.uint8,
    "BoolStorage": torch.bool,
}


class _ScriptObject:
    """A TorchScript module or object: only its pickled attributes are kept."""

    def __setstate__(self, state):
        if not isinstance(state, dict):
            raise UnsafeCheckpointError(f"TorchScript object {type(self).__name__} has a non-dict state")
        self.__dict__["attributes"] = state


def _rebuild_tensor(storage: Tensor, offset: int, size, stride, *_flags) -> Tensor:
    """torch._utils._rebuild_tensor_v2: a view of the storage (requires_grad, hooks, metadata unused)."""
    return storage.as_strided(tuple(size), tuple(stride), offset)


def _as_list(items):  # torch.jit._pickle.build_intlist and friends: a typed list, plain here
    return list(items)


class _DataUnpickler(pickle.Unpickler):
    def __init__(self, data: bytes, archive: zipfile.ZipFile, prefix: str):
        super().__init__(io.BytesIO(data))
        self.archive, self.prefix = archive, prefix
        self.classes: dict[str, type] = {}

    def find_class(self, module: str, name: str):
        if module.startswith("__torch__."):
            key = f"{module}.{name}"
            if key not in self.classes:
                self.classes[key] = type(name, (_ScriptObject,), {"__module__": module})
            return self.classes[key]
        if module == "torch" and name in _STORAGE_DTYPES:
            return _STORAGE_DTYPES[name]
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuild_tensor
        if (module, name) == ("collections", "OrderedDict"):
            return dict
        if module == "torch.jit._pickle" and name.startswith("build_") and name.endswith("list"):
            return _as_list
        raise UnsafeCheckpointError(f"the TorchScript archive's data names {module}.{name}; only tensors are read")

    def persistent_load(self, pid):
        kind, dtype, key, _location, numel = pid
        if kind != "storage" or not isinstance(dtype, torch.dtype):
            raise UnsafeCheckpointError(f"unexpected persistent record {kind!r} in the TorchScript archive")
        raw = bytearray(self.archive.read(f"{self.prefix}data/{key}"))
        if not raw:
            return torch.empty(0, dtype=dtype)
        storage = torch.frombuffer(raw, dtype=dtype)
        if storage.numel() != numel:
            raise ConversionError(f"storage {key} of the archive holds {storage.numel()} values, not {numel}")
        return storage


def _archive_prefix(archive: zipfile.ZipFile) -> str:
    tops = {n.split("/", 1)[0] for n in archive.namelist() if n.count("/") == 1 and n.endswith("/data.pkl")}
    if len(tops) != 1:
        raise ConversionError("not a TorchScript archive: expected one <name>/data.pkl")
    return tops.pop() + "/"


def torchscript_code_paths(path: Path) -> list[str]:
    """Paths of the archive's code files (which modules it defines), relative to ``code/``; [] if not one."""
    try:
        with zipfile.ZipFile(path) as archive:
            prefix = _archive_prefix(archive) + "code/"
            return [n[len(prefix) :] for n in archive.namelist() if n.startswith(prefix) and n.endswith(".py")]
    except (OSError, zipfile.BadZipFile, ConversionError):
        return []


def read_torchscript_tensors(path: Path) -> dict[str, Tensor]:
    """Every tensor attribute of the archive's module tree, by dotted name (``encoder.0.conv.weight``)."""
    try:
        with zipfile.ZipFile(path) as archive:
            prefix = _archive_prefix(archive)
            root = _DataUnpickler(archive.read(f"{prefix}data.pkl"), archive, prefix).load()
    except (OSError, zipfile.BadZipFile, pickle.UnpicklingError, EOFError, KeyError, ValueError, TypeError,
            RuntimeError) as e:  # RuntimeError: a tensor reaching past its storage
        raise ConversionError(f"{path} is not a readable TorchScript archive: {e}") from e
    tensors: dict[str, Tensor] = {}
    _collect(root, "", tensors)
    return tensors


def _collect(obj, prefix: str, out: dict[str, Tensor]) -> None:
    if isinstance(obj, Tensor):
        out[prefix.rstrip(".")] = obj
    elif isinstance(obj, _ScriptObject):
        for name, value in obj.attributes.items():
            _collect(value, f"{prefix}{name}.", out)
