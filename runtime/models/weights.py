"""The one path from tensors to a model: the meta model, materialising.

The accounting every load goes through (native or foreign) is ``oasr.conversion.accounting``;
``materialize_model`` builds the module on the meta device and assigns the tensors, so weights
are never allocated twice.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Iterator, Mapping

import torch
from torch.overrides import TorchFunctionMode

from .base import BaseModelConfig, OasrModel
from .architectures import find_architecture

if TYPE_CHECKING:
    from ..quant.section import QuantizationSpec

# Parameter initialisers: functions of torch.nn.init and the in-place fills they end in.
_INIT_FUNCS = frozenset(
    [getattr(torch.nn.init, n) for n in dir(torch.nn.init) if n.endswith("_") and not n.startswith("_")]
    + [
        getattr(torch.Tensor, n)
        for n in ("normal_", "uniform_", "fill_", "zero_", "random_", "bernoulli_", "exponential_",
                  "geometric_", "log_normal_", "cauchy_")
    ]
)


class _SkipInitOnMeta(TorchFunctionMode):
    """Initialising a meta tensor fills no storage, so skip it.

    It is not free: torch routes some initialisers on meta (``normal_``, used by ``nn.Embedding``)
    through decompositions whose first call imports ``torch._dynamo``, about a second per process.
    Nothing else changes: shapes, dtypes and names, all a meta model is for, are set before.
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _INIT_FUNCS:
            target = args[0] if args else kwargs.get("tensor")
            if isinstance(target, torch.Tensor) and target.is_meta:
                return target
        return func(*args, **kwargs)


@contextlib.contextmanager
def torch_single_threaded() -> Iterator[None]:
    """One torch intra-op thread inside the block, the previous count restored after.

    For memory-bound host work (casts, copies, comparisons) a second thread gains little, while
    torch's OpenMP workers spin at every barrier when another busy thread (ours, or another
    process) holds a core: a 100 MB copy then takes several times as long. Results do not depend
    on the thread count.
    """
    threads = torch.get_num_threads()
    if threads > 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if threads > 1:
            torch.set_num_threads(threads)


def meta_model(architecture: str, config: BaseModelConfig) -> OasrModel:
    """The model with no storage: names, shapes and dtypes for free."""
    entry = find_architecture(architecture)
    with torch.device("meta"), _SkipInitOnMeta():
        return entry.model_cls(config)


def materialize_model(
    architecture: str,
    config: BaseModelConfig,
    tensors: Mapping[str, torch.Tensor],
    *,
    device: torch.device,
    dtype: torch.dtype,
    quantization: QuantizationSpec | None = None,
    skeleton: OasrModel | None = None,
) -> OasrModel:
    """Assign checked tensors to a meta-built model: cast on the host, then move to the device.

    With ``quantization`` (a format-2 bundle) the listed layers become quantized modules before
    the assignment, so integer weights and their fp32 scales land in integer slots, uncast; the
    float parts take ``dtype`` as usual. ``skeleton``: the meta model ``check_weights`` used
    (quantized layers already swapped in), reused rather than built a second time.
    """
    model = skeleton if skeleton is not None else meta_model(architecture, config)
    exact: set[str] = set()
    if quantization is not None:
        from ..quant.layers import check_dtypes, stored_names, swap_quantized

        if skeleton is None:
            swap_quantized(model, quantization)
        check_dtypes(model, tensors)
        exact = stored_names(quantization)
    with torch_single_threaded():
        full = {name: t if name in exact else _cast(t, dtype) for name, t in tensors.items()}
        full.update({name: t.to(dtype) for name, t in model.computed_buffer_values().items()})
    model.load_state_dict(full, strict=True, assign=True)
    model.requires_grad_(False)
    model = model.to(device).eval()
    if quantization is not None:
        from ..quant.layers import prepare_quantized

        prepare_quantized(model, dtype)
    return model


def _cast(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return t.to(dtype) if t.is_floating_point() else t
