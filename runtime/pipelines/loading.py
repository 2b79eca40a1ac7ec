"""The model a pipeline step runs: a LoadedModel as given, or a name/path loaded once per process."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from ..errors import CapabilityError


@functools.lru_cache(maxsize=4)
def _load(spec: str, device: str | None):
    from ..models import load_pretrained

    return load_pretrained(spec, device=device)


def require_model(model: Any, architecture: str, *, device: str | None = None):
    """``model`` (a LoadedModel, a registry name or a path) as a LoadedModel of ``architecture``.

    Names and paths are loaded on first use and kept (a few at most), so a pipeline called once
    per file does not reload its small helper models every time.
    """
    from ..models import LoadedModel

    if isinstance(model, LoadedModel):
        loaded = model
    else:
        loaded = _load(str(Path(model).expanduser()) if isinstance(model, Path) else str(model), device)
    if loaded.architecture != architecture:
        raise CapabilityError(f"this step needs a {architecture} model; {model!r} is a {loaded.architecture} model")
    return loaded
