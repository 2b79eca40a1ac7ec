"""demucs as the reference for the HTDemucs tests: random-weight packages written as demucs writes them.

demucs 4.0.1 is installed without its dependencies (`make install-test`). Its model code imports
torchaudio (PyPI's does not load beside the CPU torch used here), and demucs.states imports dora and
omegaconf for training; stand-in modules take their places before the import, as for torchcrepe.
"""

from __future__ import annotations

import sys
import types
from fractions import Fraction
from pathlib import Path

import pytest

SOURCES_4 = ["drums", "bass", "other", "vocals"]
SOURCES_6 = ["drums", "bass", "other", "vocals", "guitar", "piano"]
# The released htdemucs shape (nfft 4096, depth 4, 5 transformer layers) with fewer channels and a
# short segment: every code path of the full model, at a fraction of its cost.
SMALL = dict(channels=8, t_heads=4, t_layers=5, segment=Fraction(3, 2), samplerate=44100)


def demucs():
    """(demucs.htdemucs, demucs.apply); skips when demucs is not installed."""
    for name in ("torchaudio", "dora", "dora.log", "omegaconf"):
        sys.modules.setdefault(name, types.ModuleType(name))
    if not hasattr(sys.modules["dora.log"], "fatal"):
        sys.modules["dora.log"].fatal = lambda *a, **k: (_ for _ in ()).throw(SystemExit(" ".join(map(str, a))))
        sys.modules["dora.log"].bold = str
    if not hasattr(sys.modules["omegaconf"], "OmegaConf"):
        sys.modules["omegaconf"].OmegaConf = type("OmegaConf", (), {})
    pytest.importorskip("einops", reason="einops (demucs' dependency) is not installed (make install-test)")
    pytest.importorskip("openunmix", reason="openunmix (demucs' dependency) is not installed (make install-test)")
    htdemucs = pytest.importorskip("demucs.htdemucs", reason="demucs is not installed (make install-test)")
    import demucs.apply

    return htdemucs, demucs.apply


def random_htdemucs(sources=SOURCES_4, seed: int = 0, **kwargs):
    """A demucs HTDemucs in eval mode whose weights are all random (LayerScales too, so every
    branch counts)."""
    import torch

    htdemucs, _ = demucs()
    torch.manual_seed(seed)
    model = htdemucs.HTDemucs(sources=list(sources), **{**SMALL, **kwargs}).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model


def save_package(model, path: Path, half: bool = True) -> Path:
    """model -> a demucs .th exactly as demucs.states.serialize_model writes it (klass by reference)."""
    import torch

    args, kwargs = model._init_args_kwargs
    dtype = torch.half if half else None
    state = {k: p.data.to(device="cpu", dtype=dtype) for k, p in model.state_dict().items()}
    package = {"klass": model.__class__, "args": args, "kwargs": kwargs, "state": state, "training_args": {"seed": 42}}
    torch.save(package, path)
    return path


def load_reference(path: Path):
    """demucs' own load of a package (its torch.load runs the pickle; trusted test files only)."""
    import torch

    from demucs.states import set_state

    package = torch.load(path, "cpu", weights_only=False)
    model = package["klass"](*package["args"], **package["kwargs"])
    set_state(model, package["state"])
    return model.eval()
