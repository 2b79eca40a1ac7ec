"""What the plugin tests share: the plugin distributions of this folder on the path, in this
process (``plugin``) or in a child ``oasr`` (``plugin_cli``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PLUGINS = Path(__file__).resolve().parent  # this folder holds the plugin distributions
PACKAGES = ("oasr_tinyctc", "oasr_testplugin")


def _refresh_plugins():
    import oasr.conversion.detect as detect
    from oasr import plugins

    plugins.clear()
    detect.converters.cache_clear()


@pytest.fixture
def plugin(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.setenv("OASR_CACHE", str(tmp_path / "oasr-cache"))
    _refresh_plugins()
    yield
    monkeypatch.undo()
    _refresh_plugins()
    for name in PACKAGES:
        sys.modules.pop(name, None)


@pytest.fixture
def plugin_cli(tmp_path):
    """``run(*args, env=..., cwd=...)``: ``python -m oasr_cli ARGS`` with the plugins installed, in
    ``cwd`` (default: the test's folder) with a cache of its own unless ``env`` names one."""

    def run(*args, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
        full = {**os.environ, "OASR_CACHE": str(tmp_path / "cache"), **(env or {}),
                "PYTHONPATH": os.pathsep.join([str(PLUGINS), os.environ.get("PYTHONPATH", "")])}
        return subprocess.run([sys.executable, "-m", "oasr_cli", *map(str, args)], capture_output=True, text=True, env=full, cwd=cwd or tmp_path)

    return run
