"""Modules that hold quantized weights and run them: an integer GEMM on the CPU, dequantisation elsewhere.

On the CPU the weight goes once, on the layer's first call (loading only maps the file), into
a prepacked int8 matrix (``torch.ops.quantized.linear_prepack``); each call quantizes the
activations dynamically to uint8 and multiplies in integers (``linear_dynamic``). The engine is
torch's default (fbgemm on x86), and for modules that see long inputs (a model's
``quant_amx_rows``: Whisper's encoder and token table) on a CPU with AMX, oneDNN's, whose AMX
kernel is 1.6-4x faster from a few dozen rows up (each module packs the ones its calls use). int4 weights are unpacked and requantized per output channel to int8 for
that kernel (torch's own int4 CPU kernel, ``_weight_int4pack_mm_for_cpu``, measured 30-80x
slower than an fp32 GEMM on Whisper base's shapes). Without such a kernel (CUDA, or a CPU build
without it) each call dequantises the weight into the activation dtype and runs a float GEMM.

The stored tensors (``weight``, ``weight_scale``) stay buffers in the state dict as read from the
bundle; the prepacked copy is not part of it.
"""

from __future__ import annotations

import atexit
import functools
import logging
import threading
import warnings

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import cpu
from ..io.mapped import release
from .schemes import GROUP_SIZE, dequantize_int4, dequantize_int8, int4_groups, int4_to_int8

log = logging.getLogger("oasr")


@functools.cache  # asked on every integer product
def _reduce_range() -> bool:
    """7-bit activations unless the CPU has VNNI: without it the u8 x s8 pair sums saturate int16."""
    return not {"avx512_vnni", "avx_vnni"} & cpu.flags()


def _prepack(q: Tensor, scale: Tensor, engine: str | None = None):
    """int8 [out, in] + fp32 scale [out] -> the packed weight (no bias) of the quantized engine
    (``engine``, or torch's default), or None without one. The caller holds ``_PACK_LOCK``."""
    default = torch.backends.quantized.engine
    try:
        # torch 2.13 deprecates creating qint8 tensors (pytorch#184982) but has no other way to
        # reach its integer linear; the packed weight below is all that is kept of it.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*quantized tensor creation.*")
            warnings.filterwarnings("ignore", message=".*deprecated.*", category=UserWarning)
            qweight = _quantized_view(q.contiguous(), scale)
            if engine is not None:
                torch.backends.quantized.engine = engine  # read by the prepack only
            return torch.ops.quantized.linear_prepack(qweight, None)
    except (RuntimeError, AttributeError, NotImplementedError) as e:
        log.info("no integer GEMM on this CPU build (%s); quantized layers dequantise on the fly", e)
        return None
    finally:
        torch.backends.quantized.engine = default


def _quantized_view(q: Tensor, scale: Tensor) -> Tensor:
    """The qint8 tensor the prepack takes, on ``q``'s own bytes. ``_make_per_channel_quantized_tensor``
    copies them, and oneDNN's packed weight keeps that copy (its unpacked weight) as long as it
    lives: twice the memory of every oneDNN layer. On the stored bytes it keeps the bundle's
    mapping instead, whose pages go back once packed (``release``)."""
    qweight = torch._empty_per_channel_affine_quantized(
        [0], scales=scale.double(), zero_points=torch.zeros(q.shape[0], dtype=torch.long), axis=0, dtype=torch.qint8
    )
    return qweight.set_(q.untyped_storage(), q.storage_offset(), q.shape, q.stride())


def _has_amx_int8() -> bool:
    """oneDNN's int8 kernel runs in AMX tiles on this CPU, and torch has it."""
    return "amx_int8" in cpu.flags() and "onednn" in torch.backends.quantized.supported_engines


def _int8_linear(x: Tensor, module: "_Quantized", out_features: int, consume: bool = False) -> Tensor | None:
    """x [..., in] -> x W^T [..., out] fp32 through ``module``'s integer kernel, activations
    quantized per row; None when there is no such kernel (the prepack failed). ``consume``: the
    caller is done with ``x``, which is then scaled in place (x is left holding garbage).

    The kernel quantizes its whole input with one scale, so the rows (token positions) with the
    smallest range get the fewest levels; Whisper's rows differ several-fold (base's decoder
    logit cosine on jfk: 0.998 with one scale, 0.9999 per row). Scaling each row to unit peak first, and back after, makes that one scale
    a per-row one; the product is linear, so only the rounding changes. Long inputs (a batch of
    encoder windows) go in blocks of rows so the scaled copy stays small.
    """
    rows = x.reshape(-1, x.shape[-1]).float()
    if rows.shape[0] <= _BLOCK_ROWS:
        packed = module._kernel(rows.shape[0])
        return None if packed is None else _int8_rows(rows, packed, consume).view(*x.shape[:-1], out_features)
    blocks = rows.split(_BLOCK_ROWS)
    kernels = [module._kernel(block.shape[0]) for block in blocks]  # all before a block is consumed
    if any(k is None for k in kernels):
        return None
    y = torch.empty(rows.shape[0], out_features)
    for out, block, packed in zip(y.split(_BLOCK_ROWS), blocks, kernels):
        out.copy_(_int8_rows(block, packed, consume))
    return y.view(*x.shape[:-1], out_features)


def _int8_rows(rows: Tensor, packed, consume: bool = False) -> Tensor:
    """rows [M, in] fp32 -> [M, out] fp32; ``consume``: scale ``rows`` in place, not a copy."""
    peak = _row_peaks(rows)
    scaled = rows.div_(peak) if consume else rows / peak
    return torch.ops.quantized.linear_dynamic(scaled, packed, _reduce_range()).mul_(peak)


def _row_peaks(rows: Tensor) -> Tensor:
    """max |x| of each row [M, 1], at least 1e-30. From ``_PEAK_ROWS`` rows as max(amax, -amin),
    the same values without an |x| copy of the input (an encoder window's MLP: 12 MB that a
    heap keeps as a hole the next larger tensor does not fit), and 1.5-2x faster there; fewer
    rows take abs().amax, 1.2-1.6x faster there (both 15x faster than aminmax(dim=1))."""
    if rows.shape[0] >= _PEAK_ROWS:
        peak = torch.maximum(rows.amax(dim=1, keepdim=True), rows.amin(dim=1, keepdim=True).neg_())
    else:
        peak = rows.abs().amax(dim=1, keepdim=True)
    return peak.clamp_min_(1e-30)


_PENDING = object()  # the integer kernel is wanted; the weight is packed on the first call
_PACK_LOCK = threading.Lock()  # a weight is packed once, by whichever thread gets to it first
_BLOCK_ROWS = 1536  # bounds the scaled copy of a long input (an encoder window is 1500 rows)
_PEAK_ROWS = 256  # see _row_peaks
# From this many rows oneDNN's AMX kernel beats fbgemm's (1.1-4x on Whisper base's shapes; at
# 5-40 rows, a decoding step, fbgemm's is up to 2x faster), except for very wide outputs.
WIDE_ROWS = 64


class _Quantized(nn.Module):
    """Shared by the quantized modules: ``prepare`` picks the kernel once the tensors are in place."""

    scheme: str
    group_size: int

    def _float_weight(self, dtype: torch.dtype) -> Tensor:
        if self.scheme == "int8":
            return dequantize_int8(self.weight, self.weight_scale, dtype)
        return dequantize_int4(self.weight, self.weight_scale, self.group_size, dtype)[:, : self.in_features]

    def _kernel(self, rows: int = 1):
        """The packed weight for an input of ``rows`` rows (oneDNN's from ``_wide_rows`` rows up
        where the CPU has AMX, else the default engine's), or None. A weight is packed on the
        first call that needs it or ahead by ``pack_ahead``, so loading maps the file and no more."""
        if self._wide is not None and rows >= self._wide_rows:
            if self._wide is _PENDING:
                with _PACK_LOCK:
                    if self._wide is _PENDING:  # not packed by the other thread meanwhile
                        self._wide = _prepack(*self._int8_weight(), engine="onednn")
                        self._release_stored()
            if self._wide is not None:
                return self._wide
        if self._packed is _PENDING:
            with _PACK_LOCK:
                if self._packed is _PENDING:
                    self._packed = _prepack(*self._int8_weight())
                    self._release_stored()
        return self._packed

    def _release_stored(self) -> None:
        """A kernel holds its own copy now: the stored weight's pages go back to the file it is
        mapped from, if it is (it stays readable: a later use, a token lookup or the other
        kernel's packing, reads them again)."""
        release(self.weight)

    def _int8_weight(self) -> tuple[Tensor, Tensor]:
        """int8 [out, in] and a scale per output channel (int4 is requantized so)."""
        if self.scheme == "int8":
            return self.weight, self.weight_scale.float()
        return int4_to_int8(self.weight, self.weight_scale, self.group_size)

    def prepare(self, wide_rows: int = 0) -> None:
        """Use the integer kernel when the weight is on the CPU, dequantise on the fly elsewhere.
        ``wide_rows``: inputs of this many rows or more take oneDNN's AMX kernel (0: none do)."""
        on_cpu = self.weight.device.type == "cpu"
        self._packed = _PENDING if on_cpu else None
        self._wide = _PENDING if on_cpu and wide_rows > 0 and _has_amx_int8() else None
        self._wide_rows = wide_rows

    def extra_repr(self) -> str:
        group = f", group_size={self.group_size}" if self.scheme == "int4" else ""
        return f"in_features={self.in_features}, out_features={self.out_features}, scheme={self.scheme}{group}"


def _stored(scheme: str, out_features: int, in_features: int, group_size: int) -> tuple[tuple, torch.dtype, tuple]:
    """(weight shape, weight dtype, scale shape) of a scheme."""
    if scheme == "int8":
        return (out_features, in_features), torch.int8, (out_features,)
    if scheme == "int4":
        return (out_features, in_features // 2), torch.uint8, (out_features, int4_groups(in_features, group_size))
    raise ValueError(f"unknown scheme {scheme!r}")


class QuantLinear(_Quantized):
    """``nn.Linear`` with an integer weight: x [..., in] -> y [..., out] in x's dtype."""

    def __init__(self, in_features: int, out_features: int, bias: bool, scheme: str, group_size: int = GROUP_SIZE):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.scheme, self.group_size = scheme, group_size
        shape, dtype, scale_shape = _stored(scheme, out_features, in_features, group_size)
        self.register_buffer("weight", torch.empty(shape, dtype=dtype))
        self.register_buffer("weight_scale", torch.empty(scale_shape, dtype=torch.float32))
        self.bias = nn.Parameter(torch.empty(out_features), requires_grad=False) if bias else None
        self._packed = self._wide = None

    def forward(self, x: Tensor, consume: bool = False) -> Tensor:
        """``consume``: the caller is done with ``x`` (the integer kernel may overwrite it)."""
        y = None if self._packed is None else _int8_linear(x, self, self.out_features, consume)
        if y is not None:
            return (y if self.bias is None else y.add_(self.bias)).to(x.dtype)
        return F.linear(x, self._float_weight(x.dtype), None if self.bias is None else self.bias.to(x.dtype))


class QuantEmbedding(_Quantized):
    """A token table stored int8 per row (a row is one token: its output channel when the table is
    tied as the output projection). ``forward`` looks rows up, ``attend`` is the tied projection."""

    scheme = "int8"
    group_size = GROUP_SIZE

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.in_features, self.out_features = embedding_dim, num_embeddings
        self.register_buffer("weight", torch.empty(num_embeddings, embedding_dim, dtype=torch.int8))
        self.register_buffer("weight_scale", torch.empty(num_embeddings, dtype=torch.float32))
        self.dtype = torch.float32
        self._packed = self._wide = None

    def prepare(self, dtype: torch.dtype = torch.float32, wide_rows: int = 0) -> None:
        """``dtype``: what ``forward`` returns (the model's float dtype)."""
        super().prepare(wide_rows)
        self.dtype = dtype

    def forward(self, tokens: Tensor) -> Tensor:
        """tokens [...] int -> vectors [..., C] in the model's float dtype."""
        rows = self.weight[tokens].to(torch.float32) * self.weight_scale[tokens].unsqueeze(-1)
        return rows.to(self.dtype)

    def attend(self, x: Tensor) -> Tensor:
        """x [..., C] -> x W^T [..., V] in x's dtype."""
        y = None if self._packed is None else _int8_linear(x, self, self.num_embeddings)
        if y is not None:
            return y.to(x.dtype)
        return x @ self._float_weight(x.dtype).T


__all__ = ["QuantEmbedding", "QuantLinear"]


def pack_ahead(model: nn.Module) -> None:
    """Pack the integer weights of ``model`` on a helper thread, in module order, while the caller
    goes on reading audio and running the first layers; a layer the caller reaches first it packs
    itself. Packing is a start-up cost of every process (Whisper base with fbgemm alone: 0.36 s,
    0.26 s of it the token table, which the first decoding step needs), and the start-up runs
    mostly on one core."""
    pending = [m for m in model.modules() if isinstance(m, _Quantized) and _PENDING in (m._packed, m._wide)]
    if not pending:
        return

    def pack() -> None:
        for module in pending:  # the kernel its first call will want: oneDNN's for long inputs
            if _exiting.is_set():
                return
            module._kernel(module._wide_rows if module._wide is _PENDING else 1)

    thread = threading.Thread(target=pack, name="oasr-int8-pack", daemon=True)
    _packers.append(thread)
    thread.start()


# A daemon thread still inside a torch kernel when the interpreter exits aborts the process
# ("terminate called without an active exception"): a process that loads a quantized model and
# exits at once (an error after loading, a short script) waits for the layer being packed.
_exiting = threading.Event()
_packers: list[threading.Thread] = []


@atexit.register
def _stop_packing() -> None:
    _exiting.set()
    for thread in _packers:
        thread.join()
