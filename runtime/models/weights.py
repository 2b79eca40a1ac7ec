"""The one path from tensors to a model: accounting, the meta model, materialising.

``check_weights`` does the accounting every load goes through (native or foreign), and
``materialize_model`` builds the module on the meta device and assigns the tensors, so weights
are never allocated twice.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Iterator, Mapping

import torch
from torch.overrides import TorchFunctionMode

from ..conversion.base import CheckpointConverter
from ..conversion.tensor_map import translate
from ..errors import ConversionError, LoadError
from ..specs import LoadReport
from .base import BaseModelConfig, OasrModel
from .architectures import find_architecture

if TYPE_CHECKING:
    from ..quant.section import QuantizationSpec

log = logging.getLogger("oasr")

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


def check_weights(
    model: OasrModel,
    state_dict: Mapping[str, torch.Tensor],
    converter: type[CheckpointConverter] | None = None,
) -> tuple[dict[str, torch.Tensor], LoadReport]:
    """Translate source names and account for every tensor; raise unless the model is filled exactly.

    Without a converter the names are the model's own (a native bundle). Returns the model's
    stored tensors (computed buffers excluded) and the LoadReport.
    """
    tr = translate(state_dict, converter.tensor_table if converter else None)
    report = LoadReport(mapped=tr.mapped, dropped=tr.unmatched)
    expected_unused = converter.expected_unused_prefixes if converter else ()
    hints = dict(converter.capability_drop_hints) if converter else {}

    fired: list[str] = []
    unknown: list[str] = []
    for name in report.dropped:
        if name.startswith(expected_unused):
            continue
        hint = next((h for prefix, h in hints.items() if name.startswith(prefix)), None)
        if hint is not None:
            if hint not in fired:
                fired.append(hint)
                log.warning("dropping %s: %s", name, hint)
        else:
            unknown.append(name)
    if unknown:
        raise LoadError(
            f"{len(unknown)} source tensor(s) fit nothing in the {type(model).__name__} model "
            f"(e.g. {', '.join(unknown[:3])}); refusing to drop weights silently"
        )

    tensors = dict(tr.tensors)
    computed = None  # built only when the source carries a computed buffer (a bundle never does)
    for name in model.computed_buffers:
        given = tensors.pop(name, None)
        if given is None:
            continue
        if computed is None:
            computed = model.computed_buffer_values()
        if not torch.allclose(given.float(), computed[name], atol=2e-3, rtol=0):
            raise LoadError(
                f"{name} in the source differs from the values {type(model).__name__} computes; "
                "this checkpoint is not a standard one"
            )

    expected = model.expected_tensors()
    report.missing = sorted(set(expected) - set(tensors))
    if report.missing:
        detail = f" ({'; '.join(fired)})" if fired else ""
        raise LoadError(
            f"{len(report.missing)} model tensor(s) not filled by the source "
            f"(e.g. {', '.join(report.missing[:3])}){detail}"
        )
    extra = sorted(set(tensors) - set(expected))
    if extra:
        raise LoadError(f"tensor(s) with no place in the model: {', '.join(extra[:3])}")
    for name, (shape, _) in expected.items():
        if tensors[name].shape != shape:
            raise LoadError(f"{name}: the source has shape {tuple(tensors[name].shape)}, the model wants {tuple(shape)}")
    return tensors, report


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


def check_tensor_dtypes(tensors: Mapping[str, torch.Tensor]) -> str:
    """The one floating dtype of a state dict, as a name ("float16")."""
    kinds = {str(t.dtype).removeprefix("torch.") for t in tensors.values() if t.is_floating_point()}
    if len(kinds) != 1:
        raise ConversionError(f"expected one floating dtype in the weights, found {sorted(kinds) or 'none'}")
    return kinds.pop()
