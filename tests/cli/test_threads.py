"""--threads on every command, the cores a process may use, and the OpenMP wait policy."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf
import torch

from oasr import cpu, threads
from oasr_cli.main import app


def test_the_cores_a_process_may_use(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    quota = tmp_path / "cpu.max"
    monkeypatch.setattr(cpu, "CGROUP_CPU_MAX", str(quota))
    monkeypatch.setattr(cpu.cgroup_cpu_quota, "__defaults__", (str(quota),))
    assert cpu.available_cores() == 4  # no cgroup file: the affinity
    quota.write_text("max 100000\n")
    assert cpu.available_cores() == 4
    quota.write_text("150000 100000\n")  # 1.5 CPUs of quota: 2 threads
    assert cpu.available_cores() == 2
    quota.write_text("50000 100000\n")
    assert cpu.available_cores() == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3}, raising=False)
    quota.write_text("max 100000\n")
    assert cpu.available_cores() == 1


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


PROBE = "import os, sys, oasr_cli.main; import torch; print(os.environ.get('GOMP_SPINCOUNT'), 'torch' in sys.modules)"


def test_the_cli_sets_a_short_spin_before_torch_loads():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=_cli_env(), check=True).stdout
    assert out.split() == [threads.DEFAULT_SPIN_COUNT, "True"]
    # the user's choice wins
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=_cli_env(GOMP_SPINCOUNT="1000"), check=True).stdout
    assert out.split()[0] == "1000"
    out = subprocess.run(
        [sys.executable, "-c", PROBE.replace("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")], capture_output=True, text=True, env=_cli_env(OMP_WAIT_POLICY="PASSIVE"), check=True
    ).stdout
    assert out.split()[0] == "PASSIVE"
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=_cli_env(OMP_WAIT_POLICY="PASSIVE"), check=True).stdout
    assert out.split()[0] == "None"  # a policy of the user's is not mixed with a spin count


def test_a_policy_set_after_torch_loaded_says_it_is_too_late(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    assert "torch" in sys.modules
    assert threads.apply_wait_policy() is False and "GOMP_SPINCOUNT" not in os.environ


def test_threads_before_torch_is_imported_go_through_the_environment():
    probe = "import os, oasr.threads as t; t.set_threads(1); print(os.environ['OMP_NUM_THREADS']); import torch; print(torch.get_num_threads())"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=_cli_env(), check=True).stdout
    assert out.split() == ["1", "1"]  # torch caps the count at the cores, so 1 is the telling value


def _stat(tmp_path, rows: dict[int, tuple[int, int]]):
    """A /proc/stat with, per CPU, (busy, idle) ticks: busy split between user and system."""
    lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
    lines += [f"cpu{n} {busy - busy // 3} 0 {busy // 3} {idle} 0 0 0 0 0 0" for n, (busy, idle) in rows.items()]
    path = tmp_path / "stat"
    path.write_text("\n".join(lines) + "\nintr 1 2 3\n")
    return str(path)


@pytest.fixture
def fake_load(monkeypatch, tmp_path, restore_threads):
    """The load the module sees: ticks on CPUs 0 and 1 (of the affinity {0, 1}), a clock and this
    process's CPU time, all set by the test."""
    state = {"wall": 100.0, "own": 5.0, "rows": {0: (0, 0), 1: (0, 0), 2: (0, 0)}}
    hz = os.sysconf("SC_CLK_TCK")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(cpu, "cgroup_cpu_quota", lambda path=None: None)
    monkeypatch.setattr(threads, "_USER_OMP_THREADS", False)
    monkeypatch.setattr(threads, "_most", None)
    monkeypatch.setattr(threads.time, "monotonic", lambda: state["wall"])
    monkeypatch.setattr(threads.time, "process_time", lambda: state["own"])

    monkeypatch.setattr(threads, "PROC_STAT", _stat(tmp_path, state["rows"]))

    def advance(seconds: float, own: float, busy: dict[int, float]):
        """``seconds`` pass: this process uses ``own`` CPU seconds; CPU n is busy ``busy[n]`` of them."""
        state["wall"] += seconds
        state["own"] += own
        for n, b in busy.items():
            old_busy, old_idle = state["rows"][n]
            state["rows"][n] = (old_busy + round(b * hz), old_idle + round((seconds - b) * hz))
        _stat(tmp_path, state["rows"])

    return advance


def test_the_default_count_follows_the_cores_others_leave_free(fake_load):
    threads.apply_wait_policy()
    fake_load(0.5, own=0.5, busy={0: 0.5, 1: 0.0})  # only this process ran
    assert threads.set_threads() == 2 and torch.get_num_threads() == 2
    fake_load(10.0, own=10.0, busy={0: 10.0, 1: 10.0})  # another process holds a core
    assert threads.fit_threads() == 1 and torch.get_num_threads() == 1
    fake_load(10.0, own=10.0, busy={0: 10.0, 1: 10.0, 2: 10.0})  # CPU 2 is not this process's
    assert threads.fit_threads() == 1
    fake_load(10.0, own=10.0, busy={0: 6.0, 1: 6.0})  # the other process is gone
    assert threads.fit_threads() == 2 and torch.get_num_threads() == 2
    fake_load(10.0, own=16.0, busy={0: 10.0, 1: 9.0})  # 3 s of others' work: under half a core
    assert threads.fit_threads() == 2
    fake_load(0.01, own=0.0, busy={0: 0.01, 1: 0.01})  # too short a look to tell: unchanged
    assert threads.fit_threads() == 2


def test_a_count_given_is_the_most_used(fake_load):
    threads.apply_wait_policy()
    fake_load(1.0, own=1.0, busy={0: 1.0, 1: 0.0})
    assert threads.set_threads(1) == 1  # fewer than the cores: kept while they are free
    fake_load(10.0, own=10.0, busy={0: 10.0, 1: 0.0})
    assert threads.fit_threads() == 1 and torch.get_num_threads() == 1
    assert threads.set_threads(2) == 2
    fake_load(10.0, own=10.0, busy={0: 10.0, 1: 10.0})  # another process holds a core
    assert threads.fit_threads() == 1 and torch.get_num_threads() == 1


def test_the_load_is_read_from_proc_stat():
    look = threads._look()
    if look is None:
        pytest.skip("no /proc/stat or CPU affinity on this system")
    assert look.busy > 0 and look.own > 0


def test_whisper_refits_the_count_before_each_window(monkeypatch, tiny_en_bundle, jfk_wav):
    import oasr
    from oasr.decoding.whisper.options import WhisperDecoding
    from oasr.options import TranscribeOptions
    from oasr.pipelines.transcribe.whisper import sequential as whisper

    calls = []
    monkeypatch.setattr(whisper, "fit_threads", lambda: calls.append(1))
    audio, _ = sf.read(jfk_wav, dtype="float32")
    thrice = np.concatenate([audio, audio, audio])  # 33 s: two windows
    oasr.transcribe(thrice, tiny_en_bundle, TranscribeOptions(decoding=WhisperDecoding(beam_size=1, temperatures=(0.0,))), dtype="float32")
    assert len(calls) == 2
