"""Precision as a plan: what a model runs in, from what was asked, what is stored, the device and the CPU.

``compute_plan`` is one pure function of plain data (no probing, no files): ``oasr.loading``
gathers its inputs (the bundle's config, ``oasr.cpu.this_cpu()``), asks it, and executes the
plan it returns. The rules, each measured (the figures: ``benchmarks/precision.md``):

- ``auto`` on a CPU runs int8 weights, an int8 variant of a full-precision bundle made once by
  the hub, for the families that declare ``auto_int8_on_cpu``;
- beside int8 weights, the long attentions (a family's ``bf16_attention``) run in bf16 where the
  CPU multiplies bf16 natively (AMX-BF16 or AVX-512 BF16); without AMX tiles, which SDPA's fused
  kernel uses, as explicit products over ``ATTENTION_ROWS`` query rows at a time;
- a bf16 model is never picked on a CPU: slower than fp32 there and less accurate;
- fp32 linear maps go through oneDNN's GEMM on a CPU not made by Intel (torch's MKL is slower
  there), at the cost of the fp32 weights' size again in memory;
- on a GPU the float parts run in fp16 (bf16 when stored so); an explicit dtype is that dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

from .cpu import CpuInfo
from .errors import InputError

FLOATS = ("float32", "float16", "bfloat16")
ASKED = ("auto", "stored", *FLOATS, "int8")
VARIANT_SCHEME = "int8"  # the scheme of the variant ``auto`` and ``int8`` run
# Query rows per block of the bf16 attentions without AMX: 100 and 200 ran alike on Whisper base.
ATTENTION_ROWS = 100
_NATIVE_BF16 = frozenset({"amx_bf16", "avx512_bf16"})


@dataclass(frozen=True)
class Stored:
    """What a bundle holds, and what its family declares it can do on a CPU."""

    dtype: str  # the float dtype of the stored weights ("float32", ...)
    scheme: str | None = None  # the quantization scheme of a quantized bundle; None: full precision
    auto_int8: bool = False  # the family runs int8 under auto on a CPU (``auto_int8_on_cpu``)
    quantizable: bool = False  # the family has validated quantization rules (``quant_refusal`` is None)
    bf16_attention: bool = False  # the family can run its long attentions in bf16 (``attend_in``)
    refusal: str = ""  # why the family cannot be quantized, when it cannot


@dataclass(frozen=True)
class ComputePlan:
    """How a bundle runs: the weights, the float dtype and the CPU kernels."""

    dtype: str  # the float parts (every float tensor): "float32", "float16" or "bfloat16"
    weights: str | None = None  # the scheme of the integer weights that run; None: float weights
    variant: bool = False  # the weights come from the hub's variant of the bundle (oasr.hub.variants)
    attention_dtype: str | None = None  # "bfloat16": the long attentions in bf16 (``model.attend_in``)
    attention_rows: int | None = None  # ... as explicit products over this many query rows (no AMX)
    onednn: bool = False  # the fp32 linear maps through oneDNN's GEMM (``oasr.onednn.pack_linears``)
    fallback: ComputePlan | None = None  # what runs when the variant cannot be made; None: the error stands


def compute_plan(asked: str | None, stored: Stored, device: str, cpu: CpuInfo | None = None) -> ComputePlan:
    """The plan for a bundle that holds ``stored``, asked as ``asked`` on ``device`` ("cpu",
    "cuda", ...), with ``cpu`` the host CPU (needed when ``device`` is "cpu").

    ``asked``:

    - ``None``: not asked. It means one thing on every device: the device's float default
      (fp32 on a CPU; fp16 on a GPU, bf16 when stored so) with the weights as stored, and the
      CPU kernels that keep the same numbers (oneDNN's fp32 GEMM). What ``load_pretrained`` and
      ``from_pretrained`` give by default: the model as converted.
    - ``"auto"``: ``None``, plus the speed policy of the module docstring where the device has
      one (on a CPU: int8 weights and bf16 attentions for the families measured to hold their
      accuracy so). What every command and pipeline asks by default.
    - ``"stored"``: the float dtype of the weights; ``"float32"``/``"float16"``/``"bfloat16"``:
      that dtype (a quantized bundle keeps its integer weights).
    - ``"int8"``: int8 weights (the hub's variant of a full-precision bundle, made once) with
      the device's float default and nothing else changed; an error for a family without
      validated quantization rules or a bundle quantized otherwise.
    """
    on_cpu = device == "cpu"
    if on_cpu and cpu is None:
        raise ValueError("a plan for the CPU needs the CPU (oasr.cpu.this_cpu())")
    if asked not in (None, *ASKED):
        raise InputError(f"unknown dtype {asked!r}; choose {', '.join(ASKED)}")
    if asked in FLOATS or asked == "stored":
        dtype = stored.dtype if asked == "stored" else asked
    elif on_cpu:
        dtype = "float32"  # bf16 models are slower on CPUs, fp16 has no CPU kernels worth it
    else:
        dtype = "bfloat16" if stored.dtype == "bfloat16" else "float16"
    weights = _as_stored(dtype, stored, on_cpu, cpu)
    if asked == "int8":
        if stored.scheme not in (None, VARIANT_SCHEME):
            raise InputError(f"dtype int8: this bundle is quantized {stored.scheme}; load its full-precision source")
        if stored.scheme is None and not stored.quantizable:
            raise InputError(f"dtype int8: this model cannot be quantized ({stored.refusal})")
        return ComputePlan(dtype, weights=VARIANT_SCHEME, variant=stored.scheme is None)
    if asked != "auto" or not on_cpu:
        return weights
    if stored.scheme is None and not (stored.auto_int8 and stored.quantizable):
        return weights  # a family whose int8 accuracy was not checked stays float
    rows = None if "amx_bf16" in cpu.flags else ATTENTION_ROWS
    bf16 = stored.bf16_attention and bool(_NATIVE_BF16 & cpu.flags)
    return ComputePlan(
        dtype,
        weights=stored.scheme or VARIANT_SCHEME,
        variant=stored.scheme is None,
        attention_dtype="bfloat16" if bf16 else None,
        attention_rows=rows if bf16 else None,
        fallback=weights if stored.scheme is None else None,
    )


def _as_stored(dtype: str, stored: Stored, on_cpu: bool, cpu: CpuInfo | None) -> ComputePlan:
    """The bundle's own weights in ``dtype``: oneDNN's fp32 GEMM off Intel for float weights."""
    onednn = on_cpu and stored.scheme is None and dtype == "float32" and cpu.onednn
    return ComputePlan(dtype, weights=stored.scheme, onednn=onednn and cpu.vendor not in ("GenuineIntel", ""))
