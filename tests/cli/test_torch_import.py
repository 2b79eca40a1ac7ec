"""The command line imports torch without Python's cyclic garbage collector, then freezes what
exists; a program importing oasr as a library keeps its collector as it is."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("torch")

# Counts the collections of each generation that run during ``import torch``, in a fresh process.
SCRIPT = """
import gc, json, sys
{before}
ran = [0, 0, 0]
gc.callbacks.append(lambda phase, info: phase == "start" and ran.__setitem__(info["generation"], ran[info["generation"]] + 1))
import torch
gc.callbacks.clear()
print(json.dumps({{
    "collections": ran,
    "enabled": gc.isenabled(),
    "frozen": gc.get_freeze_count(),
    "loader": type(torch.__spec__.loader).__name__,
    "finders": [type(f).__name__ for f in sys.meta_path],
    "tensor": torch.ones(2).sum().item(),
}}))
"""


def _import_torch(before: str) -> dict:
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(before=before)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_command_line_imports_torch_without_the_collector_then_freezes_what_it_made():
    seen = _import_torch("import oasr_cli.main")
    assert seen["collections"][2] == 0, seen  # no full collection during the import (three without, below)
    assert seen["enabled"]  # on again for the command's work
    assert seen["frozen"] > 100_000  # torch's objects: later collections skip them
    assert seen["loader"] != "_WithoutCollector"  # torch's own loader once imported
    assert "_TorchFinder" not in seen["finders"]  # used once, then gone
    assert seen["tensor"] == 2.0


def test_a_library_import_keeps_the_collector_as_it_is():
    seen = _import_torch("import oasr, oasr.threads")
    assert seen["collections"][2] > 0, seen  # the collector walked torch's objects as they piled up
    assert seen["enabled"] and seen["frozen"] == 0


def test_a_collector_the_program_turned_off_stays_off_and_nothing_is_frozen():
    seen = _import_torch("gc.disable()\nimport oasr_cli.main")
    assert not seen["enabled"] and seen["frozen"] == 0


def test_nothing_is_set_up_once_torch_is_imported(monkeypatch):
    from oasr_cli.torch_import import _TorchFinder, import_without_collector

    import torch  # noqa: F401

    before = list(sys.meta_path)
    assert import_without_collector() is False
    assert sys.meta_path == before and not any(isinstance(f, _TorchFinder) for f in sys.meta_path)
