"""Tensors of a TorchScript archive, read as data: its code is never loaded or run.

A TorchScript file is a zip: ``<name>/data.pkl`` pickles the module tree (objects of
``__torch__.*`` classes whose attributes are submodules, tensors and plain values), tensors live
in ``<name>/data/<key>`` as raw little-endian storages, and ``<name>/code/`` holds the program.
``data.pkl`` is read by an unpickler that knows a closed set of names: the module classes become
inert attribute holders, tensors are rebuilt from the stored bytes, and any other global is
refused. The result is the archive's state dict with the dotted names ``torch.jit.load`` would give.

Sizes are checked before bytes are read: a storage member must declare exactly the bytes its
tensor needs, no member may inflate more than ``MAX_RATIO`` times its stored size (torch stores
members uncompressed; a higher ratio is a zip bomb), and all members together may not inflate
past ``MAX_RATIO`` times the archive's size. Members are then read with that limit, so a header
that lies cannot make the reader hold more. ``check_zip_sizes`` applies the same limits to any
zip (torch.save checkpoints are zips too) before another reader opens it.
"""

from __future__ import annotations

import io
import lzma
import math
import pickle
import struct
import zipfile
import zlib
from pathlib import Path

import torch
from torch import Tensor

from ..errors import ConversionError, OasrError, UnsafeCheckpointError

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

MAX_RATIO = 100  # inflated / stored bytes allowed for one member (torch writes ratio 1)
SMALL_MEMBER = 1 << 20  # a member this small is read whatever its ratio
MAX_PICKLE = 64 << 20  # data.pkl holds the module tree, not weights
_MAX_DEPTH = 200  # module nesting
_MAX_VISITS = 100_000  # objects visited while naming tensors (shared submodules count once per name)

# What zipfile raises on a damaged archive or member (bad headers, a broken deflate stream,
# an encrypted or unsupported member), besides BadZipFile.
_ZIP_ERRORS = (
    OSError, EOFError, zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, struct.error,
    NotImplementedError, RuntimeError, zlib.error, lzma.LZMAError,
)
# What unpickling arbitrary bytes raises (a MemoryError: a length field no file could fill).
_PICKLE_ERRORS = (
    pickle.UnpicklingError, EOFError, KeyError, ValueError, TypeError, AttributeError, IndexError,
    OverflowError, RuntimeError, MemoryError,
)


class _ScriptObject:
    """A TorchScript module or object: only its pickled attributes are kept."""

    def __setstate__(self, state):
        if not isinstance(state, dict):
            raise UnsafeCheckpointError(f"TorchScript object {type(self).__name__} has a non-dict state")
        self.__dict__["attributes"] = state


def _as_list(items):  # torch.jit._pickle.build_intlist and friends: a typed list, plain here
    return list(items)


def _is_index(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


class _Members:
    """The archive's members, each read at most once and only after its declared size is checked."""

    def __init__(self, archive: zipfile.ZipFile, where: str, archive_bytes: int):
        self.archive, self.where = archive, where
        self.budget = max(SMALL_MEMBER, MAX_RATIO * archive_bytes)
        self.spent = 0

    def read(self, name: str, expected: int | None = None, limit: int | None = None) -> bytes:
        try:
            info = self.archive.getinfo(name)
        except KeyError:
            raise ConversionError(f"{self.where} lacks the member {name}") from None
        self.check(info, expected, limit)
        with self.archive.open(info) as f:
            data = f.read(info.file_size)  # zipfile never yields more than the declared size
        if len(data) != info.file_size:
            raise ConversionError(f"{self.where}: member {name} holds {len(data)} bytes, not the {info.file_size} it declares")
        return data

    def check(self, info: zipfile.ZipInfo, expected: int | None = None, limit: int | None = None) -> None:
        """Refuse ``info`` by its declared size (and count it against the budget), before reading."""
        name, declared = info.filename, info.file_size
        if expected is not None and declared != expected:
            raise ConversionError(f"{self.where}: member {name} declares {declared} bytes; its tensor needs {expected}")
        if limit is not None and declared > limit:
            raise ConversionError(f"{self.where}: member {name} declares {declared} bytes, more than the {limit} allowed")
        if declared > SMALL_MEMBER and declared > MAX_RATIO * info.compress_size:
            raise ConversionError(
                f"{self.where}: member {name} would inflate {info.compress_size} stored bytes to {declared} "
                f"(more than {MAX_RATIO}:1); refusing it as a zip bomb"
            )
        if self.spent + declared > self.budget:
            raise ConversionError(
                f"{self.where}: its members declare more than {self.budget} bytes ({MAX_RATIO} x the archive's size); "
                "refusing it as a zip bomb"
            )
        self.spent += declared


class _DataUnpickler(pickle.Unpickler):
    def __init__(self, data: bytes, members: _Members, prefix: str):
        super().__init__(io.BytesIO(data))
        self.members, self.prefix, self.where = members, prefix, members.where
        self.classes: dict[str, type] = {}
        self.storages: dict[str, tuple[torch.dtype, Tensor]] = {}

    def find_class(self, module: str, name: str):
        if module == "__torch__" or module.startswith("__torch__."):
            key = f"{module}.{name}"
            if key not in self.classes:
                self.classes[key] = type(name, (_ScriptObject,), {"__module__": module})
            return self.classes[key]
        if module == "torch" and name in _STORAGE_DTYPES:
            return _STORAGE_DTYPES[name]
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return self.rebuild_tensor
        if (module, name) == ("collections", "OrderedDict"):
            return dict
        if module == "torch.jit._pickle" and name.startswith("build_") and name.endswith("list"):
            return _as_list
        raise UnsafeCheckpointError(f"the TorchScript archive's data names {module}.{name}; only tensors are read")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5):
            raise ConversionError(f"{self.where}: unexpected persistent record {pid!r:.80}")
        kind, dtype, key, _location, numel = pid
        if kind != "storage" or not isinstance(dtype, torch.dtype):
            raise UnsafeCheckpointError(f"unexpected persistent record {kind!r:.80} in the TorchScript archive")
        if not isinstance(key, str) or not _is_index(numel):
            raise ConversionError(f"{self.where}: storage record {key!r:.80} with {numel!r:.80} values is malformed")
        if key in self.storages:
            seen_dtype, storage = self.storages[key]
            if seen_dtype != dtype or storage.numel() != numel:
                raise ConversionError(f"{self.where}: storage {key} is named with two dtypes or sizes")
            return storage
        raw = bytearray(self.members.read(f"{self.prefix}data/{key}", expected=numel * dtype.itemsize))
        storage = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        self.storages[key] = (dtype, storage)
        return storage

    def rebuild_tensor(self, storage, offset, size, stride, *_flags) -> Tensor:
        """torch._utils._rebuild_tensor_v2: a view of the storage (requires_grad, hooks, metadata unused).

        The view must lie inside its storage and hold no more elements than it (a stride-0 view
        of a few bytes could otherwise stand for terabytes once copied).
        """
        if not isinstance(storage, Tensor) or storage.dim() != 1:
            raise ConversionError(f"{self.where}: a tensor is rebuilt from {type(storage).__name__}, not a storage")
        size, stride = tuple(size), tuple(stride)
        if not (_is_index(offset) and len(size) == len(stride) and all(map(_is_index, size + stride))):
            raise ConversionError(f"{self.where}: a tensor has a malformed offset, size or stride")
        numel = math.prod(size)
        if numel:
            extent = offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1
            if extent > storage.numel() or numel > storage.numel():
                raise ConversionError(
                    f"{self.where}: a tensor of size {list(size)} reaches past its storage of {storage.numel()} values"
                )
        return storage.as_strided(size, stride, offset)


def check_zip_sizes(path: Path) -> None:
    """Refuse a zip archive (a TorchScript file, a torch.save checkpoint) whose members declare
    sizes no honest archive has, before anything is read: a member inflating more than
    ``MAX_RATIO`` times its stored bytes (beyond ``SMALL_MEMBER``), or members together declaring
    more than ``MAX_RATIO`` times the archive's size. torch.load reads each record's declared
    size into memory whole, so a 1 MB file could otherwise cost gigabytes. Not a zip: no-op."""
    try:
        if not zipfile.is_zipfile(path):
            return
        with zipfile.ZipFile(path) as archive:
            members = _Members(archive, str(path), Path(path).stat().st_size)
            for info in archive.infolist():
                members.check(info)
    except _ZIP_ERRORS:
        return  # not readable as a zip (a legacy torch file can look like one): its reader decides


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
    except (*_ZIP_ERRORS, ConversionError):
        return []


def read_torchscript_tensors(path: Path) -> dict[str, Tensor]:
    """Every tensor attribute of the archive's module tree, by dotted name (``encoder.0.conv.weight``)."""
    where = str(path)
    try:
        with zipfile.ZipFile(path) as archive:
            prefix = _archive_prefix(archive)
            members = _Members(archive, where, Path(path).stat().st_size)
            data = members.read(f"{prefix}data.pkl", limit=MAX_PICKLE)
            root = _DataUnpickler(data, members, prefix).load()
    except OasrError:
        raise
    except (*_ZIP_ERRORS, *_PICKLE_ERRORS) as e:
        raise ConversionError(f"{path} is not a readable TorchScript archive: {_first_line(e)}") from e
    tensors: dict[str, Tensor] = {}
    _collect(root, "", tensors, where, [0], set())
    return tensors


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _collect(obj, prefix: str, out: dict[str, Tensor], where: str, visits: list[int], path: set[int]) -> None:
    visits[0] += 1
    if visits[0] > _MAX_VISITS or len(path) > _MAX_DEPTH:
        raise ConversionError(f"{where}: its module tree is too large or too deep to be a model's")
    if isinstance(obj, Tensor):
        out[prefix.rstrip(".")] = obj
    elif isinstance(obj, _ScriptObject):
        if id(obj) in path:
            raise ConversionError(f"{where}: its module tree contains itself (at {prefix.rstrip('.') or 'the root'})")
        path.add(id(obj))
        for name, value in obj.__dict__.get("attributes", {}).items():
            if not isinstance(name, str):
                raise ConversionError(f"{where}: an attribute of {prefix.rstrip('.') or 'the root'} is named by a {type(name).__name__}")
            _collect(value, f"{prefix}{name}.", out, where, visits, path)
        path.discard(id(obj))
