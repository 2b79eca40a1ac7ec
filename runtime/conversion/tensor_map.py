"""Declarative tensor-name tables.

A converter declares ``{source pattern: target}``. ``{bid}`` in a pattern matches a block index
and is substituted into the target. A target is a model tensor name, or a tuple of names: the
source is then split into equal chunks along dim 0 (fused QKV), and a ``None`` chunk is
discarded after checking it is all zeros (a fused key bias that Whisper does not have).
Several sources may fill one target only when they hold equal values (tied weights).
Tensors are torch tensors or numpy arrays (``arrays``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Union

from ..errors import ConversionError
from . import arrays

if TYPE_CHECKING:
    from torch import Tensor

Target = Union[str, tuple[Union[str, None], ...]]


def _compile(pattern: str) -> re.Pattern:
    return re.compile("^" + re.escape(pattern).replace(r"\{bid\}", r"(?P<bid>\d+)") + "$")


@dataclass(frozen=True)
class TensorTable:
    rules: Mapping[str, Target]
    _compiled: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        # Compiled on first lookup: every installed converter's table is built when the converters
        # are imported, and compiling them all would cost tens of milliseconds per process.
        object.__setattr__(self, "_compiled", None)

    def _regexes(self) -> tuple:
        if self._compiled is None:
            object.__setattr__(self, "_compiled", tuple((_compile(s), t) for s, t in self.rules.items()))
        return self._compiled

    def lookup(self, name: str) -> tuple[str | None, ...] | None:
        """Target names for a source name, or None when no rule matches."""
        for regex, target in self._regexes():
            m = regex.match(name)
            if m is None:
                continue
            targets = target if isinstance(target, tuple) else (target,)
            bid = m.groupdict().get("bid")
            return tuple(t.replace("{bid}", bid) if (t is not None and bid is not None) else t for t in targets)
        return None


@dataclass
class Translation:
    tensors: dict[str, Tensor] = field(default_factory=dict)  # target name -> tensor
    mapped: list[str] = field(default_factory=list)  # source names used
    unmatched: list[str] = field(default_factory=list)  # source names no rule matched


def translate(state_dict: Mapping[str, Tensor], table: TensorTable | None) -> Translation:
    out = Translation()
    for name, tensor in state_dict.items():
        targets = (name,) if table is None else table.lookup(name)
        if targets is None:
            out.unmatched.append(name)
            continue
        chunks = (tensor,) if len(targets) == 1 else _split(name, tensor, len(targets))
        for target, chunk in zip(targets, chunks):
            if target is None:
                if arrays.count_nonzero(chunk):
                    raise ConversionError(f"{name}: a chunk expected to be zero (no such tensor in the model) is not")
                continue
            previous = out.tensors.get(target)
            if previous is not None:
                if not arrays.equal(previous, chunk):
                    raise ConversionError(f"{name} and another source tensor both fill {target} with different values")
                continue
            out.tensors[target] = chunk
        out.mapped.append(name)
    return out


def _split(name: str, tensor: Any, parts: int) -> tuple:
    if len(tensor.shape) == 0 or tensor.shape[0] % parts:
        raise ConversionError(f"{name}: dim 0 of {tuple(tensor.shape)} does not split into {parts} equal parts")
    return arrays.split0(tensor, parts)
