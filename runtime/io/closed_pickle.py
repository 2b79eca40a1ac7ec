"""Pickles inside torch zip archives, read by a closed unpickler: only named globals are built.

Both a TorchScript file and a ``torch.save`` checkpoint are zips holding ``<name>/data.pkl`` (the
object tree) and ``<name>/data/<key>`` (raw little-endian storages). ``ClosedUnpickler`` knows a
closed set of names: torch's storage types and ``_rebuild_tensor_v2`` (tensors are rebuilt from
the stored bytes), ``collections.OrderedDict`` (a plain dict), and whatever its caller adds in
``extra``; any other global is refused by name before anything is built or run. A caller may map
names onto inert stand-ins (``ClassName``: a class pickled by reference becomes its dotted name).

Sizes are checked before bytes are read: a storage member must declare exactly the bytes its
tensor needs, no member may inflate more than ``MAX_RATIO`` times its stored size (torch stores
members uncompressed; a higher ratio is a zip bomb), and all members together may not inflate
past ``MAX_RATIO`` times the archive's size. Members are then read with that limit, so a header
that lies cannot make the reader hold more. ``check_zip_sizes`` applies the same limits to any
zip before another reader opens it.
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
from typing import Any, Callable, Mapping

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
MAX_PICKLE = 64 << 20  # data.pkl holds the object tree, not weights

# What zipfile raises on a damaged archive or member (bad headers, a broken deflate stream,
# an encrypted or unsupported member), besides BadZipFile.
ZIP_ERRORS = (
    OSError, EOFError, zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, struct.error,
    NotImplementedError, RuntimeError, zlib.error, lzma.LZMAError,
)
# What unpickling arbitrary bytes raises (a MemoryError: a length field no file could fill).
PICKLE_ERRORS = (
    pickle.UnpicklingError, EOFError, KeyError, ValueError, TypeError, AttributeError, IndexError,
    OverflowError, RuntimeError, MemoryError, RecursionError,
)


class ClassName(str):
    """A global the pickle names by reference (a class), kept as its dotted name; never built or called."""

    def __call__(self, *args, **kwargs):
        raise UnsafeCheckpointError(f"the checkpoint asks to build a {self} object; only its data is read")


def is_index(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


class Members:
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


class ClosedUnpickler(pickle.Unpickler):
    """Unpickles ``data.pkl`` of an archive: tensors from its storages, ``extra`` names, nothing else.

    ``extra``: (module, name) -> the object that name stands for. ``what`` names the file kind in
    messages ("TorchScript archive", "demucs checkpoint").
    """

    def __init__(self, data: bytes, members: Members, prefix: str, *, what: str,
                 extra: Mapping[tuple[str, str], Any] | None = None):
        super().__init__(io.BytesIO(data))
        self.members, self.prefix, self.where, self.what = members, prefix, members.where, what
        self.extra = dict(extra or {})
        self.storages: dict[str, tuple[torch.dtype, Tensor]] = {}

    def find_class(self, module: str, name: str):
        if (module, name) in self.extra:
            return self.extra[(module, name)]
        if module == "torch" and name in _STORAGE_DTYPES:
            return _STORAGE_DTYPES[name]
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return self.rebuild_tensor
        if (module, name) == ("collections", "OrderedDict"):
            return dict
        raise UnsafeCheckpointError(f"the {self.what}'s data names {module}.{name}; only tensors are read")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5):
            raise ConversionError(f"{self.where}: unexpected persistent record {pid!r:.80}")
        kind, dtype, key, _location, numel = pid
        if kind != "storage" or not isinstance(dtype, torch.dtype):
            raise UnsafeCheckpointError(f"unexpected persistent record {kind!r:.80} in the {self.what}")
        if not isinstance(key, str) or not is_index(numel):
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
        if not (is_index(offset) and len(size) == len(stride) and all(map(is_index, size + stride))):
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
            members = Members(archive, str(path), Path(path).stat().st_size)
            for info in archive.infolist():
                members.check(info)
    except ZIP_ERRORS:
        return  # not readable as a zip (a legacy torch file can look like one): its reader decides


def archive_prefix(archive: zipfile.ZipFile, what: str) -> str:
    """``<name>/`` of the archive's one ``<name>/data.pkl``."""
    tops = {n.split("/", 1)[0] for n in archive.namelist() if n.count("/") == 1 and n.endswith("/data.pkl")}
    if len(tops) != 1:
        raise ConversionError(f"not a {what}: expected one <name>/data.pkl")
    return tops.pop() + "/"


def read_archive_pickle(path: Path, make: Callable[[bytes, Members, str], ClosedUnpickler], what: str) -> Any:
    """The object tree of the archive at ``path``, unpickled by ``make(data, members, prefix)``.
    Every failure is an OasrError: a refused name (UnsafeCheckpointError), a damaged archive or
    pickle (ConversionError naming ``what``)."""
    try:
        with zipfile.ZipFile(path) as archive:
            prefix = archive_prefix(archive, what)
            members = Members(archive, str(path), Path(path).stat().st_size)
            data = members.read(f"{prefix}data.pkl", limit=MAX_PICKLE)
            return make(data, members, prefix).load()
    except OasrError:
        raise
    except (*ZIP_ERRORS, *PICKLE_ERRORS) as e:
        raise ConversionError(f"{path} is not a readable {what}: {first_line(e)}") from e
