"""The ``zipformer`` package (PyPI 0.1.3, icefall's own modules) as a reference, importable without
its training stack: stand-ins for the modules it imports only to train or to decode with k2 tools
(``atdataset``'s SpecAugment and seeding, ``kaldifst``, ``kaldialign``, tensorboard's writer, and
the command-line ``zipformer.bin`` that reads audio through torchaudio).

Its activations are wrapped in ``torch.compile``; ``K2_ONNX_EXPORT=1`` (the package's own switch)
leaves them plain functions, so no compiler runs in the tests.
"""

from __future__ import annotations

import os
import sys
import types

import pytest


def _stub(name: str, **attrs) -> None:
    if name in sys.modules:
        return
    module = types.ModuleType(name)
    for key, value in attrs.items():
        setattr(module, key, value)
    sys.modules[name] = module


class _Unused:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("training-only stand-in")


def zipformer_package():
    """(modules.model, decode.search) of the reference package, or skip when it is not installed."""
    os.environ["K2_ONNX_EXPORT"] = "1"
    _stub("atdataset", SpecAugment=_Unused, time_warp=_Unused, fix_random_seed=lambda seed: None)
    _stub("kaldifst")
    _stub("kaldialign", align=_Unused)
    _stub("torch.utils.tensorboard", SummaryWriter=_Unused)
    # The package's __init__ imports its command-line inference (torchaudio, audio files): not the model.
    _stub("zipformer.bin", inference=types.SimpleNamespace(inference=_Unused))
    model = pytest.importorskip("zipformer.modules.model")
    from zipformer.decode import search

    return model, search
