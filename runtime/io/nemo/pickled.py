"""Torch pickles that carry more than tensors (Lightning checkpoints, their ``meta.pt``), read
with ``torch.load(weights_only=True)`` and inert stand-ins for the foreign classes in them.

A NeMo Lightning checkpoint pickles its hyper-parameters as OmegaConf objects (``DictConfig``,
``ListConfig``, ``AnyNode`` and their metadata), and callbacks or schedulers may add classes of
their own. Each global the file names (``torch.serialization.get_unsafe_globals_in_checkpoint``)
is allowed under its name, but what the unpickler gets is a stand-in of ours that only keeps
what it is given: no foreign code is imported or run. The OmegaConf stand-ins turn back into
plain dicts, lists and values (``plain``); any other stand-in (``builtins.dict`` and ``os.system``
alike) stays an ``Opaque`` record of the arguments it was called with.
"""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import Any

from ...errors import ConversionError, UnsafeCheckpointError
from ..checkpoint import load_torch_file
from ..config_size import MAX_VALUES

class Opaque:
    """An object of a class oasr does not know: the arguments and state it was rebuilt with."""

    qualified_name = "?"

    def __new__(cls, *args, **kwargs):
        obj = super().__new__(cls)
        obj.__dict__["args"] = args
        return obj

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        self.__dict__["state"] = state

    def __repr__(self) -> str:
        return f"<{self.qualified_name}>"


class _OmegaContainer(Opaque):
    """A DictConfig or ListConfig: its ``_content`` (and ``_parent``) are what matter."""


class _OmegaValue(Opaque):
    """A value node (AnyNode, StringNode, ...): its ``_val``."""


def _stand_in(name: str):
    """An inert class standing for the global ``name``: even ``builtins.dict`` or ``os.system``
    only builds an Opaque record of its arguments (OmegaConf pickles name types as values)."""
    if name.startswith("omegaconf."):
        base = name.rsplit(".", 1)[-1]
        kind = _OmegaContainer if base in ("DictConfig", "ListConfig") else _OmegaValue if base.endswith("Node") else Opaque
    else:
        kind = Opaque
    return type(f"StandIn_{name.replace('.', '_')}", (kind,), {"qualified_name": name})


def load_torch_pickle(path: Path) -> Any:
    """What ``torch.load(path)`` would give, rebuilt with stand-ins instead of foreign classes."""
    import torch

    path = Path(path)
    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception as e:  # a file torch's scanner cannot parse: let the loader name the problem
        names = []
        failure = e
    else:
        failure = None
    safe = [(_stand_in(n), n) for n in names]
    with warnings.catch_warnings(), torch.serialization.safe_globals(safe) if safe else contextlib.nullcontext():
        warnings.simplefilter("ignore")
        try:
            return load_torch_file(path)  # torch still refuses the modules it blocks (os, subprocess, ...)
        except UnsafeCheckpointError:
            raise
        except ConversionError:
            if failure is not None:
                raise ConversionError(f"{path} is not a readable torch checkpoint: {failure}") from failure
            raise


def plain(obj: Any, depth: int = 0, _made: list | None = None) -> Any:
    """OmegaConf stand-ins as plain dicts, lists and values; containers walked; others as they are.
    A pickle can name one object from many places: past ``MAX_VALUES`` values made, the config
    is refused rather than copied without end."""
    made = [0] if _made is None else _made
    made[0] += 1
    if made[0] > MAX_VALUES:
        raise ConversionError(f"the checkpoint's config expands to more than {MAX_VALUES} values (objects named inside each other)")
    if depth > 100:
        raise ConversionError("the checkpoint's config nests more than 100 levels deep")
    if isinstance(obj, _OmegaContainer):
        content = _state(obj).get("_content")
        return plain(content, depth + 1, made)
    if isinstance(obj, _OmegaValue):
        return plain(_state(obj).get("_val"), depth + 1, made)
    if isinstance(obj, dict):
        return {plain(k, depth + 1, made): plain(v, depth + 1, made) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v, depth + 1, made) for v in obj]
    return obj


def omega_root(obj: Any) -> Any:
    """The outermost config an OmegaConf stand-in hangs from (its ``_parent`` chain)."""
    seen = set()
    while isinstance(obj, (_OmegaContainer, _OmegaValue)) and id(obj) not in seen:
        seen.add(id(obj))
        parent = _state(obj).get("_parent")
        if parent is None:
            return obj
        obj = parent
    return obj


def omega_path(root: Any, target: Any) -> tuple | None:
    """The keys leading from the stand-in ``root`` to the stand-in ``target``, or None."""
    stack = [(root, ())]
    seen = set()
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if id(node) in seen or not isinstance(node, _OmegaContainer):
            continue
        seen.add(id(node))
        content = _state(node).get("_content")
        items = content.items() if isinstance(content, dict) else enumerate(content) if isinstance(content, list) else ()
        stack.extend((v, (*path, k)) for k, v in items)
    return None


def is_omega(obj: Any) -> bool:
    return isinstance(obj, (_OmegaContainer, _OmegaValue))


def _state(obj: Opaque) -> dict:
    state = obj.__dict__.get("state")
    if isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], dict):  # (dict state, slot state)
        state = state[0]
    return state if isinstance(state, dict) else {}
