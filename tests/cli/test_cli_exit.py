"""The console scripts end the process without Python's teardown once torch is loaded (it took
0.5-0.7 s of freeing objects one by one after the work was done), yet exit handlers still run,
buffered output still arrives and the exit code is kept."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import atexit, sys
{imports}
from oasr_cli.main import exit_process

class Teardown:
    def __del__(self):
        sys.stdout.write(" teardown")

kept = Teardown()  # a module global: freed only by the interpreter's teardown
atexit.register(lambda: sys.stdout.write(" handler"))
sys.stdout.write("output")  # buffered: stdout is a pipe
exit_process(3)
"""


def _run(imports: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT.format(imports=imports)], capture_output=True, text=True, timeout=120)


def test_with_torch_loaded_the_teardown_is_skipped_and_nothing_else():
    pytest.importorskip("torch")
    done = _run("import torch")
    assert done.returncode == 3, done.stderr
    assert done.stdout == "output handler"


def test_without_torch_it_is_a_plain_exit():
    done = _run("")
    assert done.returncode == 3, done.stderr
    assert done.stdout == "output handler teardown"
    assert "torch" not in done.stderr
