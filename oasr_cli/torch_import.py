"""torch's import, for the command's process, without Python's cyclic garbage collector.

``import torch`` makes about 170,000 objects that live as long as the process. The collector,
seeing them pile up, walks all of them three times during the import (150 ms of full collections
on a 2-core AMD EPYC, and 60 ms more of younger ones: a tenth of a short transcription's 2.4 s).
Little of it is garbage (a full collection right after the import finds 7,000 cyclic objects,
under 1 MB), so the import runs with the collector off, and what exists once it is done is
frozen out of later collections (``gc.freeze``): those then walk only what the work makes.

The collector is the process's, so this is the command line's policy: a program that imports
oasr as a library keeps its own.
"""

from __future__ import annotations

import gc
import importlib.abc
import importlib.util
import sys


class _WithoutCollector:
    """torch's own loader, running the module's code with the collector off, then freezing."""

    def __init__(self, loader):
        self._loader = loader

    def __getattr__(self, name):  # resource readers and the rest: the wrapped loader's own
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            self._loader.exec_module(module)
        finally:
            module.__loader__ = module.__spec__.loader = self._loader  # the import is over: torch's own again
            if was_enabled:
                gc.freeze()
                gc.enable()


class _TorchFinder(importlib.abc.MetaPathFinder):
    """Finds torch as the other finders do, once, and hands its spec back with the loader wrapped."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "torch":
            return None
        sys.meta_path.remove(self)  # once, and the search below must not meet this finder
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _WithoutCollector(spec.loader)
        return spec


def import_without_collector() -> bool:
    """Make the process's coming ``import torch`` run without the collector; False when torch
    is already imported (or this was asked for before)."""
    if "torch" in sys.modules or any(isinstance(f, _TorchFinder) for f in sys.meta_path):
        return False
    sys.meta_path.insert(0, _TorchFinder())
    return True
