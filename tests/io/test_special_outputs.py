"""Issue 17, item 2: ``-o`` writes into special files instead of replacing them.

Atomic replace is for regular files (or a new path); a device, a FIFO or a symlink to one is
opened and written; a symlink to a regular file has its target replaced and stays a link.
Nothing here may replace the machine's /dev entries, even if the code regresses: the tests that
name /dev guard os.replace and os.rename against it.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import oasr
from oasr.io.files import atomic_write_bytes, atomic_write_text
from oasr.results import Segment, Transcript

TEXT = "Hello from the stand-in.\n"


def _guard_dev(monkeypatch) -> None:
    """os.replace / os.rename refuse anything under /dev: a regression fails, /dev stays whole."""
    for name in ("replace", "rename"):
        real = getattr(os, name)

        def guarded(src, dst, *args, _real=real, **kwargs):
            if os.path.abspath(os.fspath(dst)).startswith("/dev/") or os.path.abspath(os.fspath(src)).startswith("/dev/"):
                raise AssertionError(f"os.{_real.__name__}({src!r}, {dst!r}) would replace a device entry")
            return _real(src, dst, *args, **kwargs)

        monkeypatch.setattr(os, name, guarded)


class FifoReader:
    """Reads one FIFO to its end in a thread (daemon: a regression that never opens the FIFO
    leaves it blocked, not the test run)."""

    def __init__(self, path: Path):
        self.path, self.data = path, None
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        with open(self.path, "rb") as f:
            self.data = f.read()

    def result(self, timeout: float = 10.0) -> bytes | None:
        self.thread.join(timeout)
        return self.data


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "out.txt"
    os.mkfifo(path)
    return path


def _no_temporaries(folder: Path) -> None:
    assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == []


# --- directly ---------------------------------------------------------------------------------------


def test_a_fifo_is_written_not_replaced(fifo):
    reader = FifoReader(fifo)
    atomic_write_text(fifo, "through the pipe\n")
    assert reader.result() == b"through the pipe\n"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    _no_temporaries(fifo.parent)


def test_a_symlink_to_a_fifo_is_written_through(fifo, tmp_path):
    link = tmp_path / "link.txt"
    link.symlink_to(fifo)
    reader = FifoReader(fifo)
    atomic_write_bytes(link, b"\x00\x01bytes")
    assert reader.result() == b"\x00\x01bytes"
    assert link.is_symlink() and os.readlink(link) == str(fifo) and stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_dev_null_is_written_not_replaced(monkeypatch):
    _guard_dev(monkeypatch)
    before = os.lstat("/dev/null")
    atomic_write_text(Path("/dev/null"), "discarded\n")
    atomic_write_bytes(Path("/dev/null"), b"discarded")
    after = os.lstat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)
    assert not [n for n in os.listdir("/dev") if n.startswith(".null.")]


def test_a_symlink_to_a_regular_file_updates_its_target_and_stays_a_link(tmp_path):
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    target = real_dir / "target.txt"
    target.write_text("old\n")
    link = tmp_path / "link.txt"
    link.symlink_to(Path("real") / "target.txt")  # relative, as ln -s makes them
    atomic_write_text(link, "new\n")
    assert link.is_symlink() and os.readlink(link) == os.path.join("real", "target.txt")
    assert target.read_text() == "new\n"
    _no_temporaries(tmp_path)
    _no_temporaries(real_dir)


def test_a_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "link.txt"
    link.symlink_to(tmp_path / "made.txt")
    atomic_write_text(link, "made\n")
    assert link.is_symlink() and (tmp_path / "made.txt").read_text() == "made\n"


def test_a_regular_file_is_still_replaced_atomically(tmp_path, monkeypatch):
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    replaced = []
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: replaced.append((Path(a), Path(b))) or real(a, b))
    atomic_write_text(target, "new\n")
    assert target.read_text() == "new\n" and replaced and replaced[0][1] == target
    assert replaced[0][0].parent == target.parent and replaced[0][0].name.startswith(".out.txt.tmp-")


# --- through the command line ------------------------------------------------------------------------


@pytest.fixture
def stand_in(monkeypatch):
    """oasr.load_pretrained and oasr.transcribe replaced: no model, a fixed transcript."""
    monkeypatch.setattr(oasr, "load_pretrained", lambda spec, **kwargs: spec, raising=False)
    transcript = Transcript(TEXT.strip(), (Segment(0, 0.0, 1.0, TEXT.strip(), ()),), "en", None, 1.0)
    monkeypatch.setattr(oasr, "transcribe", lambda *args, **kwargs: transcript, raising=False)


@pytest.fixture
def wav(tmp_path) -> Path:
    path = tmp_path / "one.wav"
    sf.write(path, (0.1 * np.sin(np.arange(16000) / 10)).astype(np.float32), 16000)
    return path


def test_cli_o_fifo(cli, stand_in, wav, fifo):
    reader = FifoReader(fifo)
    code, out, err = cli("transcribe", "-m", "m", "-f", wav, "-o", fifo)
    assert code == 0, err
    assert reader.result() == TEXT.encode()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_cli_o_dev_null(cli, stand_in, wav, monkeypatch):
    _guard_dev(monkeypatch)
    code, out, err = cli("transcribe", "-m", "m", "-f", wav, "-o", "/dev/null", "-F", "txt")
    assert (code, out) == (0, ""), err
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_cli_o_symlink_to_a_file(cli, stand_in, wav, tmp_path):
    (tmp_path / "real.txt").write_text("old\n")
    (tmp_path / "link.txt").symlink_to("real.txt")
    code, _, err = cli("transcribe", "-m", "m", "-f", wav, "-o", tmp_path / "link.txt")
    assert code == 0, err
    assert (tmp_path / "link.txt").is_symlink() and (tmp_path / "real.txt").read_text() == TEXT


_CHILD = textwrap.dedent(
    """
    import os, sys
    import oasr
    from oasr.results import Segment, Transcript

    for name in ("replace", "rename"):  # never replace a /dev entry, whatever the code does
        real = getattr(os, name)
        def guarded(src, dst, *a, _real=real, **k):
            if "/dev/" in (os.path.abspath(os.fspath(src)) + os.path.abspath(os.fspath(dst))):
                raise SystemExit(f"os.replace of a /dev entry: {src} -> {dst}")
            return _real(src, dst, *a, **k)
        setattr(os, name, guarded)
    oasr.load_pretrained = lambda spec, **kwargs: spec
    oasr.transcribe = lambda *a, **k: Transcript("Hello.", (Segment(0, 0.0, 1.0, "Hello.", ()),), "en", None, 1.0)
    from oasr_cli.main import main

    sys.exit(main(sys.argv[1:]))
    """
)


@pytest.mark.skipif(not os.path.islink("/dev/stdout"), reason="no /dev/stdout link on this system")
def test_cli_o_dev_stdout_writes_to_the_pipe(wav):
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, "transcribe", "-m", "m", "-f", str(wav), "-o", "/dev/stdout", "-F", "txt"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Hello.\n"
    assert os.path.islink("/dev/stdout")
