"""Weight accounting: every source tensor used or allowed to be dropped, every model tensor filled.

Every load goes through ``check_weights`` (native or foreign). It needs only names and shapes of
the model: a meta-built module (``oasr.models.weights.meta_model``) or a converter's torch-free
layout (``CheckpointConverter.layout``), and works on torch tensors or numpy arrays alike.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import ConversionError, LoadError
from ..specs import LoadReport
from . import arrays
from .tensor_map import translate

if TYPE_CHECKING:
    from .base import CheckpointConverter

log = logging.getLogger("oasr")


def check_weights(
    model: Any,
    state_dict: Mapping[str, Any],
    converter: type[CheckpointConverter] | None = None,
) -> tuple[dict[str, Any], LoadReport]:
    """Translate source names and account for every tensor; raise unless the model is filled exactly.

    Without a converter the names are the model's own (a native bundle). Returns the model's
    stored tensors (computed buffers excluded) and the LoadReport.
    """
    model_name = getattr(model, "model_name", type(model).__name__)
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
            f"{len(unknown)} source tensor(s) fit nothing in the {model_name} model "
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
        if not arrays.allclose_f32(given, computed[name], atol=2e-3):
            raise LoadError(
                f"{name} in the source differs from the values {model_name} computes; "
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
        if tuple(tensors[name].shape) != tuple(shape):
            raise LoadError(f"{name}: the source has shape {tuple(tensors[name].shape)}, the model wants {tuple(shape)}")
    return tensors, report


def check_tensor_dtypes(tensors: Mapping[str, Any]) -> str:
    """The one floating dtype of a state dict, as a name ("float16")."""
    kinds = {arrays.dtype_name(t) for t in tensors.values() if arrays.is_floating(t)}
    if len(kinds) != 1:
        raise ConversionError(f"expected one floating dtype in the weights, found {sorted(kinds) or 'none'}")
    return kinds.pop()
