"""The few array operations conversion needs, on numpy arrays or torch tensors alike.

A converter that reads its source without torch (CTranslate2's ``model.bin``) hands numpy
arrays through the whole conversion, so ``oasr convert`` of it never imports torch (about a
second of a process that otherwise takes one); the others hand torch tensors. numpy has no
bfloat16: such arrays become torch tensors first (``to_torch``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

FINITE_CHUNK = 1 << 22  # elements per isfinite pass: a 4 MB mask at most, whatever the tensor's size


def is_numpy(t: Any) -> bool:
    return isinstance(t, np.ndarray)


def dtype_name(t: Any) -> str:
    """"float16", "int8", ... for either kind."""
    return t.dtype.name if is_numpy(t) else str(t.dtype).removeprefix("torch.")


def is_floating(t: Any) -> bool:
    return t.dtype.kind == "f" if is_numpy(t) else t.is_floating_point()


def numel(t: Any) -> int:
    return t.size if is_numpy(t) else t.numel()


def nbytes(t: Any) -> int:
    return t.nbytes if is_numpy(t) else t.numel() * t.element_size()


def to_torch(t: Any):
    """A torch tensor sharing ``t``'s memory (a read-only array is copied: torch wants writable memory)."""
    if not is_numpy(t):
        return t
    import torch

    return torch.from_numpy(t if t.flags.writeable else t.copy())


def cast(t: Any, dtype: str) -> Any:
    """``t`` in the floating dtype named (integers unchanged); bfloat16 goes through torch."""
    if not is_floating(t) or dtype_name(t) == dtype:
        return t
    if is_numpy(t) and dtype != "bfloat16":
        return t.astype(dtype)
    import torch

    return to_torch(t).to(getattr(torch, dtype))


def count_nonzero(t: Any) -> int:
    return int(np.count_nonzero(t)) if is_numpy(t) else int(t.count_nonzero())


def split0(t: Any, parts: int) -> tuple:
    """Equal views along dim 0 (the caller checks that it divides)."""
    return tuple(np.split(t, parts, axis=0)) if is_numpy(t) else tuple(t.chunk(parts, dim=0))


def _same_memory(a: Any, b: Any) -> bool:
    if is_numpy(a) != is_numpy(b) or a.dtype != b.dtype or a.shape != b.shape:
        return False
    if is_numpy(a):
        return a.strides == b.strides and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    return a.stride() == b.stride() and a.data_ptr() == b.data_ptr() and a.device == b.device


def equal(a: Any, b: Any) -> bool:
    """Same shape and values, ``b`` compared in ``a``'s dtype; at once for two views of one memory (an alias)."""
    if _same_memory(a, b):
        return True
    if a.shape != b.shape:
        return False
    if is_numpy(a) and is_numpy(b):
        return bool(np.array_equal(a, b.astype(a.dtype, copy=False)))
    import torch

    a, b = to_torch(a), to_torch(b)
    return torch.equal(a, b.to(a.dtype))


def allclose_f32(given: Any, reference: Any, atol: float) -> bool:
    """``given`` within ``atol`` of ``reference`` (fp32), compared in fp32."""
    if is_numpy(given) and is_numpy(reference):
        return given.shape == reference.shape and bool(np.allclose(given.astype(np.float32), reference, atol=atol, rtol=0))
    import torch

    return bool(torch.allclose(to_torch(given).float(), to_torch(reference).float(), atol=atol, rtol=0))


def all_finite(t: Any) -> bool:
    """No inf or NaN, checked in chunks so the mask stays small."""
    if not is_numpy(t):
        import torch

        if not t.is_contiguous():
            return bool(torch.isfinite(t).all())
        return all(bool(torch.isfinite(part).all()) for part in t.view(-1).split(FINITE_CHUNK))
    # inf and NaN are the values whose exponent bits are all ones: a mask and a compare on the
    # bits run about 3x faster than np.isfinite on float16, which converts each value first.
    bits, exponent = _EXPONENT[t.dtype.itemsize]
    flat = t.reshape(-1).view(bits)
    return not any(
        np.any((flat[i : i + FINITE_CHUNK] & exponent) == exponent) for i in range(0, flat.size, FINITE_CHUNK)
    )


_EXPONENT = {2: (np.uint16, 0x7C00), 4: (np.uint32, 0x7F800000), 8: (np.uint64, 0x7FF0000000000000)}
