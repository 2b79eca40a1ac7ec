"""What pip installs besides the packages: the man pages and shell completions, as data files."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_carries_man_pages_and_completions(tmp_path):
    """A built wheel puts man/*.1 in share/man/man1 and each completion where its shell looks."""
    if importlib.util.find_spec("setuptools") is None:
        pytest.skip("setuptools is not installed (needed to build without isolation)")
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("runtime", "converters", "oasr_cli", "man", "completions"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(tmp_path / "out"), str(src)],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    (wheel,) = (tmp_path / "out").glob("oasr_toolchain-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    data = {n.split(".data/data/", 1)[1] for n in names if ".data/data/" in n}
    pages = {f"share/man/man1/{p.name}" for p in (ROOT / "man").glob("*.1")}
    assert "share/man/man1/oasr.1" in pages and pages <= data
    for prog in ("oasr", "oasr-convert"):
        assert f"share/bash-completion/completions/{prog}.bash" in data
        assert f"share/zsh/site-functions/_{prog}" in data
        assert f"share/fish/vendor_completions.d/{prog}.fish" in data
    assert not [n for n in names if n.startswith("oasr_cli/docs") or n.startswith("scripts/")]  # the generator is not shipped
