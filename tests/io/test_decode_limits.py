"""Bounded decoding (issue 31): a recording's length is checked from its header before decoding
and counted while decoding; absurd sample rates are refused."""

from __future__ import annotations

import io
import subprocess
import sys
import time

import numpy as np
import pytest
import soundfile as sf

from cli_checks import one_line_error
from oasr.errors import InputError
from oasr.io import audio
from oasr.io.audio import load_audio_bytes, open_audio


def _wav(rate: int, n: int) -> bytes:
    out = io.BytesIO()
    sf.write(out, np.zeros(n, "int16"), rate, format="WAV", subtype="PCM_16")
    return out.getvalue()


def _flac(seconds: float, rate: int = 8000, *, hide_length: bool = False) -> bytes:
    out = io.BytesIO()
    sf.write(out, np.zeros(int(seconds * rate), "int16"), rate, format="FLAC")
    data = bytearray(out.getvalue())
    if hide_length:  # STREAMINFO's 36-bit total-samples field zeroed: "unknown", as a streamed FLAC says
        data[21] &= 0xF0
        data[22:26] = b"\0\0\0\0"
    return bytes(data)


@pytest.mark.parametrize("rate", [1, 999, 800_000])
def test_sample_rate_outside_the_range_is_refused_at_once(rate):
    started = time.perf_counter()
    with pytest.raises(InputError, match=f"sample rate of {rate} Hz, outside 1000 .. 768000 Hz"):
        load_audio_bytes(_wav(rate, 16000), name="x.wav")
    assert time.perf_counter() - started < 1


def test_header_length_checked_before_decoding():
    data = _flac(120)
    started = time.perf_counter()
    with pytest.raises(InputError, match="x.flac is 120 s long, more than the limit of 60 s"):
        load_audio_bytes(data, name="x.flac", max_seconds=60)
    assert time.perf_counter() - started < 0.5
    assert len(load_audio_bytes(data, max_seconds=121)) == 120 * 16000


def test_a_header_that_does_not_say_is_counted_while_decoding():
    data = _flac(120, hide_length=True)
    with pytest.raises(InputError, match="decodes to more than 60 s of audio"):
        load_audio_bytes(data, name="x.flac", max_seconds=60)
    assert len(load_audio_bytes(data, max_seconds=200)) == 120 * 16000


def test_pyav_route_is_bounded_too(tmp_path):
    av = pytest.importorskip("av")
    path = tmp_path / "x.mka"  # Matroska: never libsndfile's
    with av.open(str(path), "w") as out:
        stream = out.add_stream("pcm_s16le", rate=8000, layout="mono")
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 8000), "int16"), format="s16", layout="mono")
        frame.sample_rate = 8000
        for i in range(90):
            frame.pts = i * 8000
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    with pytest.raises(InputError, match="more than the limit of 30 s|more than 30 s of audio"):
        open_audio(path, max_seconds=30)
    assert len(open_audio(path, max_seconds=120)) == 90 * 16000


def test_process_limit_env_and_default(monkeypatch):
    monkeypatch.setattr(audio, "_max_seconds", audio._UNSET)
    monkeypatch.delenv(audio.MAX_SECONDS_ENV, raising=False)
    assert audio.max_seconds() == audio.DEFAULT_MAX_SECONDS == 86400
    monkeypatch.setenv(audio.MAX_SECONDS_ENV, "15")
    with pytest.raises(InputError, match="limit of 15 s"):
        load_audio_bytes(_flac(20))
    monkeypatch.setenv(audio.MAX_SECONDS_ENV, "soon")
    with pytest.raises(InputError, match="OASR_MAX_AUDIO_SECONDS='soon'"):
        load_audio_bytes(_flac(1))
    monkeypatch.delenv(audio.MAX_SECONDS_ENV)
    previous = audio.set_max_seconds(10)
    try:
        with pytest.raises(InputError, match="limit of 10 s"):
            load_audio_bytes(_flac(20))
    finally:
        audio.set_max_seconds(previous)
    with pytest.raises(InputError):
        audio.set_max_seconds(0)


def test_cli_refusals_are_one_line_exit_1(tmp_path, random_whisper_bundle):
    """A model that loads, then the file refused by its header: one line, exit 1, no output."""
    (tmp_path / "one_hz.wav").write_bytes(_wav(1, 16000))
    (tmp_path / "long.flac").write_bytes(_flac(30))
    for name, flags, needle in (("one_hz.wav", [], "1 Hz, outside"), ("long.flac", ["--max-audio-seconds", "10"], "limit of 10 s (--max-audio-seconds)")):
        run = subprocess.run(
            [sys.executable, "-m", "oasr_cli", "transcribe", "-m", str(random_whisper_bundle), "--device", "cpu", *flags, "--output-dir", str(tmp_path / "out"), str(tmp_path / name)],
            capture_output=True, text=True, timeout=300,
        )
        errors = [line for line in run.stderr.splitlines() if line.startswith("oasr: error:")]
        assert run.returncode == 1 and len(errors) == 1 and needle in errors[0], run.stderr
        assert "Traceback" not in run.stderr and not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
