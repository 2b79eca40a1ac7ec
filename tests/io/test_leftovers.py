"""Issue 17, item 8 (and the permissions of item 10): no leftovers.

Temporaries are named ``.DST.tmp-<pid>-<host>-<random>`` (``.old-`` for a destination moved
aside), removed on every exit path (an exception, KeyboardInterrupt, a lost race), and those of
a killed process are swept on the next write to the same destination: only ours, only stale ones.
A failed ``-o a/b/c.txt`` creates no folder; bundles and files get 0644 / 0755 under umask 022.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import oasr
from oasr.io import files
from oasr.io.files import atomic_directory, atomic_write_text, sweep_stale, temp_sibling
from oasr.results import Segment, Transcript


def _ours(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp-" in p.name or ".old-" in p.name)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _bundle(folder: Path, text: str) -> None:
    (folder / "oasr_config.json").write_text(text)
    (folder / "tokenizer").mkdir()
    (folder / "tokenizer" / "t.json").write_text(text)


# --- sweeping what a killed run left -----------------------------------------------------------------

_KILLED = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from oasr.io.files import atomic_directory

    dst, ready = Path(sys.argv[1]), Path(sys.argv[2])
    with atomic_directory(dst) as tmp:
        (tmp / "model.safetensors").write_bytes(b"x" * 100000)
        ready.write_text("in the middle")
        time.sleep(60)
    """
)


def test_a_sigkilled_write_leaves_a_temporary_that_the_next_run_sweeps(tmp_path):
    dst = tmp_path / "DST"
    dst.mkdir()
    _bundle(dst, "old")
    ready = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, str(dst), str(ready)])
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert ready.exists(), "the child never reached the middle of its write"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    (leftover,) = _ours(tmp_path)
    assert leftover.startswith(f".DST.tmp-{proc.pid}-")
    assert (dst / "oasr_config.json").read_text() == "old"  # the destination as it was

    with atomic_directory(dst) as tmp:
        _bundle(tmp, "new")
    assert _ours(tmp_path) == [] and (dst / "oasr_config.json").read_text() == "new"


def test_only_our_stale_temporaries_are_swept(tmp_path):
    dst = tmp_path / "DST"
    dead, host = _dead_pid(), files._HOST
    stale = [
        f".DST.tmp-{dead}-{host}-0123abcd",  # a dead process of this host
        f".DST.old-{dead}-{host}-0123abce",
    ]
    aged = [
        ".DST.tmp-89abcdef",  # the naming before pids, an hour old
        f".DST.old-{dead}-ffffff-0123abd2",  # another host's, an hour old
    ]
    kept = [
        f".DST.tmp-{os.getpid()}-{host}-0123abcf",  # alive (this very process), even an hour old
        f".DST.tmp-{dead}-ffffff-0123abd0",  # another host's: its pid means nothing here (and it is fresh)
        ".DST.tmp-fedcba98",  # the old naming, fresh
        ".DST.tmp-notours",  # not our pattern
        f".OTHER.tmp-{dead}-{host}-0123abd1",  # another destination's
        "DST.tmp-1-abcdef-01234567",  # not hidden: not ours
    ]
    for name in [*stale, *aged, *kept]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "f").write_text("x")
    hour_ago = time.time() - files.STALE_SECONDS - 60
    for name in [*aged, kept[0]]:
        os.utime(tmp_path / name / "f", (hour_ago, hour_ago))
        os.utime(tmp_path / name, (hour_ago, hour_ago))
    dst.mkdir()  # present: nothing to put back

    removed = sweep_stale(dst)
    assert sorted(p.name for p in removed) == sorted([*stale, *aged])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*kept, "DST"])


def test_a_destination_moved_aside_by_a_killed_run_is_put_back(tmp_path):
    """Killed between its two renames (where the system cannot swap in one step): DST absent,
    the previous bundle at .DST.old-<pid>-...: the next run restores it before anything else."""
    dst = tmp_path / "DST"
    aside = tmp_path / f".DST.old-{_dead_pid()}-{files._HOST}-00000001"
    aside.mkdir()
    _bundle(aside, "previous")
    sweep_stale(dst)
    assert (dst / "oasr_config.json").read_text() == "previous" and _ours(tmp_path) == []


def test_temporaries_are_named_with_pid_and_random(tmp_path):
    a, b = temp_sibling(tmp_path / "x.txt"), temp_sibling(tmp_path / "x.txt")
    assert a != b and a.name.startswith(f".x.txt.tmp-{os.getpid()}-{files._HOST}-")


def test_a_file_writers_stale_temporary_is_swept(tmp_path):
    stale = tmp_path / f".out.txt.tmp-{_dead_pid()}-{files._HOST}-0000abcd"
    stale.write_text("half")
    atomic_write_text(tmp_path / "out.txt", "whole\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


# --- every exit path ------------------------------------------------------------------------------------


@pytest.mark.parametrize("exc", [RuntimeError("boom"), KeyboardInterrupt()])
def test_a_failed_or_interrupted_write_leaves_nothing(tmp_path, exc):
    dst = tmp_path / "DST"
    with pytest.raises(type(exc)):
        with atomic_directory(dst) as tmp:
            _bundle(tmp, "new")
            raise exc
    assert list(tmp_path.iterdir()) == []


def test_a_failed_file_write_leaves_nothing(tmp_path, monkeypatch):
    target = tmp_path / "out.txt"
    target.write_text("old\n")

    def fail(a, b):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        atomic_write_text(target, "new\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"] and target.read_text() == "old\n"


@pytest.mark.parametrize("swap", [True, False], ids=["exchange", "two-renames"])
def test_the_loser_of_a_race_leaves_nothing(tmp_path, monkeypatch, swap):
    """Another process's result lands between our check and our rename: ours replaces it in
    turn; one complete bundle stays, no temporary, no .old."""
    if not swap:
        monkeypatch.setattr(files, "_exchange", lambda a, b: False)
    dst = tmp_path / "DST"
    real = os.replace
    raced = []

    def racing(src, target):
        if Path(target) == dst and ".tmp-" in Path(src).name and not raced:
            raced.append(1)
            dst.mkdir()
            _bundle(dst, "the other process")  # the winner, just before us
        return real(src, target)

    monkeypatch.setattr(os, "replace", racing)
    with atomic_directory(dst) as tmp:
        _bundle(tmp, "ours")
    assert raced and (dst / "oasr_config.json").read_text() == "ours"
    assert _ours(tmp_path) == []


_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from oasr.io import files

    dst, tag, rounds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    if sys.argv[4] == "two-renames":
        files._exchange = lambda a, b: False
    for i in range(rounds):
        with files.atomic_directory(dst) as tmp:
            for n in range(3):
                (tmp / f"part{n}").write_text(f"{tag}-{i}")
    """
)


@pytest.mark.parametrize("mode", ["exchange", "two-renames"])
def test_concurrent_writers_leave_one_complete_result(tmp_path, mode):
    dst = tmp_path / "DST"
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(dst), f"w{k}", "25", mode], stderr=subprocess.PIPE, text=True)
        for k in range(4)
    ]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, errors
    assert _ours(tmp_path) == []
    texts = {(dst / f"part{n}").read_text() for n in range(3)}
    assert len(texts) == 1 and texts.pop().endswith("-24")  # one writer's last result, whole


def test_a_symlinked_destination_stays_a_link_and_leaves_no_old_link(tmp_path):
    real = tmp_path / "store" / "bundle"
    real.mkdir(parents=True)
    _bundle(real, "old")
    link = tmp_path / "DST"
    link.symlink_to(real)
    with atomic_directory(link) as tmp:
        _bundle(tmp, "new")
    assert link.is_symlink() and Path(os.readlink(link)) == real
    assert (real / "oasr_config.json").read_text() == "new"
    assert _ours(tmp_path) == [] and _ours(real.parent) == []


# --- permissions ---------------------------------------------------------------------------------------


@pytest.fixture
def umask():
    previous = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(previous)


@pytest.mark.parametrize("mask, fmode, dmode", [(0o022, 0o644, 0o755), (0o027, 0o640, 0o750)])
def test_a_bundle_gets_the_usual_permissions(tmp_path, umask, mask, fmode, dmode):
    from oasr.conversion.run import convert

    from tiny_models import write_openai_pt

    umask(mask)
    pt = write_openai_pt(tmp_path / "tiny.pt")
    convert([pt], tmp_path / "bundle")
    modes = {p.name: os.stat(p).st_mode & 0o777 for p in [tmp_path / "bundle", *(tmp_path / "bundle").rglob("*")]}
    assert modes == {"bundle": dmode, "model.safetensors": fmode, "oasr_config.json": fmode}


def test_written_files_get_the_usual_permissions_and_keep_their_own(tmp_path, umask):
    atomic_write_text(tmp_path / "new.txt", "x")
    assert os.stat(tmp_path / "new.txt").st_mode & 0o777 == 0o644
    private = tmp_path / "private.txt"
    private.write_text("x")
    private.chmod(0o600)
    atomic_write_text(private, "y")
    assert os.stat(private).st_mode & 0o777 == 0o600 and private.read_text() == "y"


# --- the command line: parent folders only when an output is written ----------------------------------


@pytest.fixture
def wav(tmp_path) -> Path:
    path = tmp_path / "one.wav"
    sf.write(path, (0.1 * np.sin(np.arange(16000) / 10)).astype(np.float32), 16000)
    return path


@pytest.fixture
def transcribe(monkeypatch):
    """oasr.load_pretrained and oasr.transcribe replaced; ``state["fail"]`` makes transcription fail."""
    state = {"fail": None, "calls": 0}

    def run(*args, **kwargs):
        state["calls"] += 1
        if state["fail"] is not None:
            raise state["fail"]
        return Transcript("Hi.", (Segment(0, 0.0, 1.0, "Hi.", ()),), "en", None, 1.0)

    monkeypatch.setattr(oasr, "load_pretrained", lambda spec, **kwargs: spec, raising=False)
    monkeypatch.setattr(oasr, "transcribe", run, raising=False)
    return state


def test_a_failed_run_creates_no_folder(cli, transcribe, wav, tmp_path):
    transcribe["fail"] = oasr.InputError("cannot transcribe this")
    code, _, err = cli("transcribe", "-m", "m", "-f", wav, "-o", tmp_path / "a" / "b" / "c.txt")
    assert code == 1 and "cannot transcribe this" in err
    assert not (tmp_path / "a").exists()
    code, _, _ = cli("transcribe", "-m", "m", "-f", wav, "--output-dir", tmp_path / "x" / "y")
    assert code == 1 and not (tmp_path / "x").exists()


def test_a_failed_write_takes_away_the_folders_it_made(cli, transcribe, wav, tmp_path, monkeypatch):
    def full(a, b):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    code, _, err = cli("transcribe", "-m", "m", "-f", wav, "-o", tmp_path / "a" / "b" / "c.txt")
    assert code == 1 and "No space left" in err
    assert not (tmp_path / "a").exists()


def test_the_parent_folders_are_made_when_the_output_is_written(cli, transcribe, wav, tmp_path):
    code, _, err = cli("transcribe", "-m", "m", "-f", wav, "-o", tmp_path / "a" / "b" / "c.txt")
    assert code == 0, err
    assert (tmp_path / "a" / "b" / "c.txt").read_text() == "Hi.\n"


def test_an_output_under_a_file_is_refused_before_any_work(cli, transcribe, wav, tmp_path):
    (tmp_path / "plain").write_text("x")
    code, _, err = cli("transcribe", "-m", "m", "-f", wav, "-o", tmp_path / "plain" / "sub" / "c.txt")
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1 and "is not a folder" in lines[0], err
    assert transcribe["calls"] == 0
