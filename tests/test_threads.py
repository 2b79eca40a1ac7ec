"""--threads on every command, the cores a process may use, and the OpenMP wait policy."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from oasr import threads
from oasr_cli.main import app


def test_the_cores_a_process_may_use(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    quota = tmp_path / "cpu.max"
    monkeypatch.setattr(threads, "CGROUP_CPU_MAX", str(quota))
    monkeypatch.setattr(threads._cgroup_cpu_quota, "__defaults__", (str(quota),))
    assert threads.available_cores() == 4  # no cgroup file: the affinity
    quota.write_text("max 100000\n")
    assert threads.available_cores() == 4
    quota.write_text("150000 100000\n")  # 1.5 CPUs of quota: 2 threads
    assert threads.available_cores() == 2
    quota.write_text("50000 100000\n")
    assert threads.available_cores() == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3}, raising=False)
    quota.write_text("max 100000\n")
    assert threads.available_cores() == 1


def test_threads_is_on_every_command_that_runs_a_model():
    import typer

    command = typer.main.get_command(app)
    for name in ("transcribe", "pitch", "diarize", "separate", "tts", "convert", "quantize", "serve"):
        options = {opt for p in command.commands[name].params for opt in p.opts}
        assert "--threads" in options, name
    models = command.commands["models"].commands["pull"]
    assert "--threads" in {opt for p in models.params for opt in p.opts}


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_threads_sets_torchs_pool(cli, tmp_path, restore_threads, tiny_en_bundle, jfk_wav):
    code, out, err = cli("transcribe", "-m", tiny_en_bundle, "-f", jfk_wav, "--threads", "1", "--beam-size", "1", "--dtype", "float32", "-v")
    assert code == 0 and torch.get_num_threads() == 1 and "1 CPU thread(s)" in err
    code, out, err = cli("pitch", "--threads", "0", "-f", jfk_wav)
    assert code == 2 and "--threads" in err


def _cli_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS")}
    return {**env, **extra}


PROBE = "import os, sys, oasr_cli.main; import torch; print(os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules)"


def test_the_cli_sets_a_passive_wait_before_torch_loads():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=_cli_env(), check=True).stdout
    assert out.split() == ["PASSIVE", "True"]
    # the user's choice wins
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=_cli_env(OMP_WAIT_POLICY="ACTIVE"), check=True).stdout
    assert out.split()[0] == "ACTIVE"
    out = subprocess.run(
        [sys.executable, "-c", PROBE.replace("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")], capture_output=True, text=True, env=_cli_env(GOMP_SPINCOUNT="1000"), check=True
    ).stdout
    assert out.split()[0] == "1000"


def test_a_policy_set_after_torch_loaded_says_it_is_too_late(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    assert "torch" in sys.modules
    assert threads.apply_wait_policy() is False and "OMP_WAIT_POLICY" not in os.environ


def test_threads_before_torch_is_imported_go_through_the_environment():
    probe = "import os, oasr.threads as t; t.set_threads(1); print(os.environ['OMP_NUM_THREADS']); import torch; print(torch.get_num_threads())"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=_cli_env(), check=True).stdout
    assert out.split() == ["1", "1"]  # torch caps the count at the cores, so 1 is the telling value
