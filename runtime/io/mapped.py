"""safetensors files as memory-mapped tensors: nothing copied, pages read when a tensor is.

A large checkpoint's shards can then be held together without their bytes resident: the kernel
reads a tensor's pages when it is used and may drop them again (they are clean, backed by the
file). ``read_streamed`` reads through such a mapping: a tensor used as stored (no cast) stays a
view of it, never copied, and once a kernel has copied one into its own layout (a packed integer
weight) ``release`` gives its pages back; a cast tensor's source pages go back once it is made,
so a load peaks at the result's bytes plus one tensor, not at the file's size on top of it.
"""

from __future__ import annotations

import json
import mmap
import struct
import weakref
from pathlib import Path
from typing import Callable, Iterator

import torch

from ..errors import ConversionError

_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool,
}
MAX_HEADER = 100 << 20  # safetensors' own limit on the JSON header


def _header(file: Path, error: type[Exception]) -> tuple[int, dict]:
    try:
        with open(file, "rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            if size > MAX_HEADER:
                raise ValueError(f"a {size}-byte header")
            header = json.loads(f.read(size))
        if not isinstance(header, dict):
            raise ValueError("the header is not an object")
    except (OSError, ValueError, struct.error, UnicodeDecodeError, RecursionError) as e:
        raise error(f"{file} is truncated or corrupted: {e}") from e
    header.pop("__metadata__", None)
    return 8 + size, header


def safetensors_names(file: Path) -> list[str]:
    """The tensor names a safetensors file holds (its header only)."""
    return list(_header(Path(file), ConversionError)[1])


def _entries(file: Path, error: type[Exception]) -> Iterator[tuple[str, torch.dtype, list[int], int, int]]:
    start, header = _header(file, error)
    length = file.stat().st_size
    for name, info in header.items():
        try:
            dtype = _DTYPES[info["dtype"]]
            shape = [int(n) for n in info["shape"]]
            begin, end = (int(n) for n in info["data_offsets"])
        except (KeyError, TypeError, ValueError) as e:
            raise error(f"{file}: the entry of {name} is malformed ({e!r})") from e
        count = 1
        for n in shape:
            count *= n
        if not (0 <= begin <= end and start + end <= length) or end - begin != count * torch.empty(0, dtype=dtype).element_size():
            raise error(f"{file} is truncated or corrupted: {name}'s bytes lie outside the file or disagree with its shape")
        yield name, dtype, shape, start + begin, start + end


def map_safetensors(file: Path, error: type[Exception] = ConversionError) -> dict[str, torch.Tensor]:
    """Every tensor of ``file`` as a view of one private read-only mapping of it (no copy)."""
    file = Path(file)
    entries = list(_entries(file, error))
    size = file.stat().st_size
    storage = torch.UntypedStorage.from_file(str(file), shared=False, nbytes=size) if size else None
    out = {}
    for name, dtype, shape, begin, end in entries:
        raw = torch.empty(0, dtype=torch.uint8).set_(storage, begin, (end - begin,)) if end > begin else torch.empty(0, dtype=torch.uint8)
        if begin % raw.new_empty(0, dtype=dtype).element_size():
            raw = raw.clone()  # an unaligned entry: views need aligned offsets
        out[name] = raw.view(dtype).view(shape)
    return out


def read_streamed(file: Path, convert: Callable[[str, torch.Tensor], torch.Tensor], error: type[Exception]) -> dict[str, torch.Tensor]:
    """Every tensor of ``file``, each passed through ``convert(name, mapped view)``. A tensor it
    returns as it is (no cast needed) stays a view of a private mapping of the file, never copied
    (its pages read when used; ``release`` gives them back); any other result must be a tensor of
    its own memory (a cast or a copy), and the source's pages are given back once it is made."""
    file = Path(file)
    entries = list(_entries(file, error))
    if file.stat().st_size == 0:
        return {}
    mapped = _private_mapping(file)
    out = {}
    for name, dtype, shape, begin, end in entries:
        source = mapped[begin:end]
        aligned = begin % torch.empty(0, dtype=dtype).element_size() == 0
        tensor = (source if aligned else source.clone()).view(dtype).view(shape)
        result = convert(name, tensor)
        if aligned and result.data_ptr() == tensor.data_ptr() and result.dtype == tensor.dtype:
            out[name] = result  # used as stored: the mapping is its memory
            continue
        if result.untyped_storage().data_ptr() == tensor.untyped_storage().data_ptr():
            result = result.clone()  # a view that is not the whole tensor: its own memory
        out[name] = result
        release(source)
    return out


# The private mappings ``read_streamed`` made, by the address range of their bytes, for ``release``; a
# mapping lives as long as a tensor viewing it (the tensor holds the buffer).
_KEPT: "weakref.WeakValueDictionary[tuple[int, int], mmap.mmap]" = weakref.WeakValueDictionary()


def _private_mapping(file: Path) -> torch.Tensor:
    """The bytes of ``file`` as a uint8 tensor over a copy-on-write mapping (never written back)."""
    with open(file, "rb") as f:
        mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    raw = torch.frombuffer(mapping, dtype=torch.uint8)
    _KEPT[(raw.data_ptr(), raw.data_ptr() + raw.numel())] = mapping
    return raw


def release(tensor: torch.Tensor) -> None:
    """Give back the resident pages of ``tensor`` if it is a view ``read_streamed`` kept mapped
    that no one wrote: they are read from the file again if it is used. Any other
    tensor is left alone. Call it only once the bytes have been copied where they are used."""
    start, end = tensor.data_ptr(), tensor.data_ptr() + tensor.numel() * tensor.element_size()
    for (lo, hi), mapping in list(_KEPT.items()):
        if lo <= start and end <= hi and hasattr(mapping, "madvise"):
            page = mmap.PAGESIZE
            first = -(-(start - lo) // page) * page  # whole pages inside the tensor: a neighbour's bytes stay
            last = (end - lo) // page * page
            if last > first:
                mapping.madvise(mmap.MADV_DONTNEED, first, last - first)
            return
