"""Tensors of a TorchScript archive, read as data: its code is never loaded or run.

A TorchScript file is a zip: ``<name>/data.pkl`` pickles the module tree (objects of
``__torch__.*`` classes whose attributes are submodules, tensors and plain values), tensors live
in ``<name>/data/<key>`` as raw little-endian storages, and ``<name>/code/`` holds the program.
``data.pkl`` is read by the closed unpickler of ``closed_pickle.py`` (its size checks included),
told two more kinds of name: the module classes become inert attribute holders, and TorchScript's
typed-list builders plain lists; any other global is refused. The result is the archive's state
dict with the dotted names ``torch.jit.load`` would give.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from torch import Tensor

from ..errors import ConversionError, UnsafeCheckpointError
from .closed_pickle import (  # noqa: F401  (check_zip_sizes and the limits are this module's API too)
    MAX_PICKLE,
    MAX_RATIO,
    SMALL_MEMBER,
    ZIP_ERRORS,
    ClosedUnpickler,
    archive_prefix,
    check_zip_sizes,
    read_archive_pickle,
)

WHAT = "TorchScript archive"
_MAX_DEPTH = 200  # module nesting
_MAX_VISITS = 100_000  # objects visited while naming tensors (shared submodules count once per name)


class _ScriptObject:
    """A TorchScript module or object: only its pickled attributes are kept."""

    def __setstate__(self, state):
        if not isinstance(state, dict):
            raise UnsafeCheckpointError(f"TorchScript object {type(self).__name__} has a non-dict state")
        self.__dict__["attributes"] = state


def _as_list(items):  # torch.jit._pickle.build_intlist and friends: a typed list, plain here
    return list(items)


class _DataUnpickler(ClosedUnpickler):
    def __init__(self, data: bytes, members, prefix: str):
        super().__init__(data, members, prefix, what=WHAT)
        self.classes: dict[str, type] = {}

    def find_class(self, module: str, name: str):
        if module == "__torch__" or module.startswith("__torch__."):
            key = f"{module}.{name}"
            if key not in self.classes:
                self.classes[key] = type(name, (_ScriptObject,), {"__module__": module})
            return self.classes[key]
        if module == "torch.jit._pickle" and name.startswith("build_") and name.endswith("list"):
            return _as_list
        return super().find_class(module, name)


def torchscript_code_paths(path: Path) -> list[str]:
    """Paths of the archive's code files (which modules it defines), relative to ``code/``; [] if not one."""
    try:
        with zipfile.ZipFile(path) as archive:
            prefix = archive_prefix(archive, WHAT) + "code/"
            return [n[len(prefix) :] for n in archive.namelist() if n.startswith(prefix) and n.endswith(".py")]
    except (*ZIP_ERRORS, ConversionError):
        return []


def read_torchscript_tensors(path: Path) -> dict[str, Tensor]:
    """Every tensor attribute of the archive's module tree, by dotted name (``encoder.0.conv.weight``)."""
    root = read_archive_pickle(path, _DataUnpickler, WHAT)
    tensors: dict[str, Tensor] = {}
    _collect(root, "", tensors, str(path), [0], set())
    return tensors


def _collect(obj, prefix: str, out: dict[str, Tensor], where: str, visits: list[int], path: set[int]) -> None:
    visits[0] += 1
    if visits[0] > _MAX_VISITS or len(path) > _MAX_DEPTH:
        raise ConversionError(f"{where}: its module tree is too large or too deep to be a model's")
    if isinstance(obj, Tensor):
        out[prefix.rstrip(".")] = obj
    elif isinstance(obj, _ScriptObject):
        if id(obj) in path:
            raise ConversionError(f"{where}: its module tree contains itself (at {prefix.rstrip('.') or 'the root'})")
        path.add(id(obj))
        for name, value in obj.__dict__.get("attributes", {}).items():
            if not isinstance(name, str):
                raise ConversionError(f"{where}: an attribute of {prefix.rstrip('.') or 'the root'} is named by a {type(name).__name__}")
            _collect(value, f"{prefix}{name}.", out, where, visits, path)
        path.discard(id(obj))
