"""oneDNN's kernel caches are bounded for every command's process (oasr_cli.kernel_caches)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from oasr_cli.kernel_caches import VARIABLES

CHECK = """
import os, sys
from oasr_cli.main import main
code = main(sys.argv[1:])
from oasr_cli.kernel_caches import VARIABLES
print(code, *(os.environ.get(v) for v in VARIABLES))
"""


@pytest.mark.parametrize("user_capacity", [None, "8"])
def test_every_command_bounds_onednns_kernel_caches_unless_the_user_sized_them(user_capacity):
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    if user_capacity:
        env["LRU_CACHE_CAPACITY"] = user_capacity
    done = subprocess.run([sys.executable, "-c", CHECK, "models", "list"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-3:] == ["0", "64", user_capacity or "64"]
