"""Audio in (oasr.io.audio): every soundfile format, PyAV containers, any rate and channel count, stdin,
the ffmpeg fallback, bad input."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from oasr.io.audio import SAMPLE_RATE, check_audio_path, duration, load_audio, load_audio_bytes
from oasr.errors import InputError


@pytest.fixture(scope="module")
def jfk(jfk_wav) -> np.ndarray:
    return load_audio(jfk_wav)


def _snr_db(reference: np.ndarray, other: np.ndarray) -> float:
    noise = np.sqrt(np.mean((reference - other) ** 2))
    return float(20 * np.log10(np.sqrt(np.mean(reference**2)) / max(noise, 1e-12)))


def _one_line_error(excinfo, *needles: str) -> str:
    message = str(excinfo.value)
    assert "\n" not in message, message
    for needle in needles:
        assert needle in message, message
    return message


# --- formats, rates, channels ---------------------------------------------------------------------


def test_wav_is_mono_float32_at_16k(jfk, jfk_wav):
    raw, rate = sf.read(jfk_wav, dtype="float32")
    assert rate == SAMPLE_RATE and raw.ndim == 1
    assert jfk.dtype == np.float32 and jfk.ndim == 1 and jfk.flags.c_contiguous
    np.testing.assert_array_equal(jfk, raw)  # 16 kHz mono: untouched
    assert duration(jfk) == pytest.approx(11.0)


def test_mp3_decodes_to_the_same_samples(jfk, data_dir):
    mp3 = load_audio(data_dir / "asr" / "jfk.mp3")
    assert len(mp3) == len(jfk)  # gapless: the encoder delay is trimmed
    assert np.corrcoef(mp3, jfk)[0, 1] > 0.999
    assert _snr_db(jfk, mp3) > 30


@pytest.mark.parametrize("fmt, subtype, min_snr", [("FLAC", "PCM_16", 80), ("OGG", "VORBIS", 10), ("WAV", "FLOAT", 140)])
def test_soundfile_formats(jfk, tmp_path, fmt, subtype, min_snr):
    path = tmp_path / f"jfk.{fmt.lower()}"
    sf.write(path, jfk, SAMPLE_RATE, format=fmt, subtype=subtype)
    out = load_audio(path)
    assert len(out) == len(jfk)
    assert np.corrcoef(out, jfk)[0, 1] > 0.99
    assert _snr_db(jfk, out) > min_snr


def test_44k1_stereo_copy_gives_the_same_samples(jfk, tmp_path):
    import soxr

    up = soxr.resample(jfk, SAMPLE_RATE, 44100, quality="VHQ")
    path = tmp_path / "jfk-44k1-stereo.wav"
    sf.write(path, np.stack([up, up], axis=1), 44100, subtype="PCM_16")
    out = load_audio(path)
    assert len(out) == len(jfk)
    assert np.max(np.abs(out - jfk)) < 0.01
    assert _snr_db(jfk, out) > 65  # soxr HQ: ~72 dB here (16-bit copy); linear interpolation: ~50


def test_resampling_is_band_limited(tmp_path):
    """A 12 kHz tone at 44.1 kHz is above the 8 kHz Nyquist of 16 kHz: removed, not aliased to 4 kHz."""
    rate = 44100
    t = np.arange(rate) / rate
    sf.write(tmp_path / "high.wav", (0.5 * np.sin(2 * np.pi * 12000 * t)).astype(np.float32), rate, subtype="FLOAT")
    out = load_audio(tmp_path / "high.wav")
    assert np.sqrt(np.mean(out[1000:-1000] ** 2)) < 1e-3  # input RMS 0.35


def test_stereo_is_averaged(tmp_path):
    left = np.linspace(-0.5, 0.5, 1600, dtype=np.float32)
    right = np.full(1600, 0.25, dtype=np.float32)
    path = tmp_path / "two.wav"
    sf.write(path, np.stack([left, right], axis=1), SAMPLE_RATE, subtype="FLOAT")
    np.testing.assert_allclose(load_audio(path), (left + right) / 2, atol=1e-7)


@pytest.mark.parametrize("rate", [8000, 22050, 48000])
def test_any_rate_is_resampled(tmp_path, rate):
    t = np.arange(int(rate * 0.5)) / rate
    tone = (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    path = tmp_path / f"tone-{rate}.flac"
    sf.write(path, tone, rate)
    out = load_audio(path)
    assert len(out) == pytest.approx(SAMPLE_RATE * 0.5, abs=1)
    expected = 0.5 * np.sin(2 * np.pi * 440 * np.arange(len(out)) / SAMPLE_RATE)
    middle = slice(800, -800)  # away from the edges' filter transients
    assert np.max(np.abs(out[middle] - expected[middle])) < 1e-3
    assert len(load_audio(path, sample_rate=rate)) == len(tone)


def test_bytes_are_decoded_like_the_file(jfk, data_dir):
    mp3 = (data_dir / "asr" / "jfk.mp3").read_bytes()
    np.testing.assert_array_equal(load_audio(mp3), load_audio(data_dir / "asr" / "jfk.mp3"))
    np.testing.assert_array_equal(load_audio_bytes((data_dir / "asr" / "jfk.wav").read_bytes()), jfk)


# --- stdin ------------------------------------------------------------------------------------------


class _Stdin:
    def __init__(self, data: bytes, tty: bool = False):
        self.buffer = io.BytesIO(data)
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def test_stdin_dash(monkeypatch, jfk, jfk_wav):
    monkeypatch.setattr(sys, "stdin", _Stdin(jfk_wav.read_bytes()))
    np.testing.assert_array_equal(load_audio("-"), jfk)


def test_stdin_in_a_real_pipe(data_dir):
    code = "from oasr.io.audio import load_audio; x = load_audio('-'); print(len(x), x.dtype)"
    with open(data_dir / "asr" / "jfk.mp3", "rb") as f:
        proc = subprocess.run([sys.executable, "-c", code], stdin=f, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["176000", "float32"]


def test_empty_stdin_and_terminal_stdin(monkeypatch):
    monkeypatch.setattr(sys, "stdin", _Stdin(b""))
    with pytest.raises(InputError) as e:
        load_audio("-")
    _one_line_error(e, "stdin", "empty")
    monkeypatch.setattr(sys, "stdin", _Stdin(b"", tty=True))
    with pytest.raises(InputError) as e:
        load_audio("-")
    _one_line_error(e, "stdin", "terminal")


# --- bad input: one-line InputError naming the file -----------------------------------------------------


def test_missing_file(tmp_path):
    with pytest.raises(InputError) as e:
        load_audio(tmp_path / "nope.wav")
    _one_line_error(e, "no such file", "nope.wav")


def test_empty_file(tmp_path):
    (tmp_path / "blank.wav").write_bytes(b"")
    with pytest.raises(InputError) as e:
        load_audio(tmp_path / "blank.wav")
    _one_line_error(e, "blank.wav", "is empty")


def test_wav_without_samples(tmp_path):
    sf.write(tmp_path / "zero.wav", np.zeros(0, dtype=np.float32), SAMPLE_RATE)
    with pytest.raises(InputError) as e:
        load_audio(tmp_path / "zero.wav")
    _one_line_error(e, "zero.wav", "no audio samples")


@pytest.mark.parametrize("name, data", [("notes.wav", b"this is text, not audio\n" * 20), ("noise.mp3", bytes(range(256)) * 8)])
def test_non_audio_file(tmp_path, monkeypatch, name, data):
    monkeypatch.setenv("PATH", str(tmp_path / "no-ffmpeg-here"))
    (tmp_path / name).write_bytes(data)
    with pytest.raises(InputError) as e:
        load_audio(tmp_path / name)
    _one_line_error(e, "cannot decode", name)


def test_directory_is_not_audio(tmp_path):
    with pytest.raises(InputError) as e:
        check_audio_path(tmp_path)
    _one_line_error(e, "directory")


# --- containers through PyAV (no ffmpeg program needed) ------------------------------------------------


MP4_HEAD = b"\x00\x00\x00\x20ftypM4A \x00\x00\x02\x00M4A isommp42" + b"\x00" * 200


def _encode(path: Path, samples: np.ndarray, rate: int, codec: str, container: str, channels: int = 1) -> Path:
    """``samples`` (mono float32 at ``rate``) encoded with PyAV into ``path`` (each channel the same)."""
    from fractions import Fraction

    import av

    layout = "mono" if channels == 1 else "stereo"
    with av.open(str(path), "w", format=container) as out:
        stream = out.add_stream(codec, rate=rate, layout=layout)
        stream.bit_rate = 128000
        size = stream.codec_context.frame_size or 1024
        convert = av.AudioResampler(format=stream.codec_context.format.name, layout=layout, rate=rate)
        planes = np.stack([samples] * channels).astype(np.float32)

        def mux(frames):
            for frame in frames:
                for packet in stream.encode(frame):
                    out.mux(packet)

        for start in range(0, planes.shape[1], size):
            frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(planes[:, start : start + size]), format="fltp", layout=layout)
            frame.sample_rate, frame.pts, frame.time_base = rate, start, Fraction(1, rate)
            mux(convert.resample(frame))
        mux(convert.resample(None))
        for packet in stream.encode(None):
            out.mux(packet)
    return path


@pytest.mark.parametrize(
    "name, codec, container, rate, channels, min_snr",
    [
        ("jfk.m4a", "aac", "mp4", 16000, 1, 40),  # measured 46.7 dB
        ("jfk-44k1-stereo.mp4", "aac", "mp4", 44100, 2, 45),  # 54.7 dB: averaged and resampled
        ("jfk.webm", "libopus", "webm", 48000, 2, 25),  # 29.6 dB: Opus at 128 kb/s
        ("jfk.mka", "flac", "matroska", 22050, 1, 65),  # 72.7 dB: lossless but for the two resamplings
    ],
)
def test_containers_decode_without_ffmpeg(jfk, tmp_path, monkeypatch, name, codec, container, rate, channels, min_snr):
    """M4A, MP4, WebM and Matroska made by PyAV from the real clip decode on a machine without an
    ffmpeg program, to the WAV's samples."""
    import soxr

    monkeypatch.setenv("PATH", str(tmp_path / "no-ffmpeg-here"))
    source = jfk if rate == SAMPLE_RATE else soxr.resample(jfk, SAMPLE_RATE, rate, quality="VHQ")
    path = _encode(tmp_path / name, source, rate, codec, container, channels)
    out = load_audio(path)
    assert out.dtype == np.float32 and out.ndim == 1 and out.flags.c_contiguous and out.flags.writeable
    assert abs(len(out) - len(jfk)) < 2048  # AAC may pad its last frame
    n = min(len(out), len(jfk))
    assert np.corrcoef(out[:n], jfk[:n])[0, 1] > 0.999
    assert _snr_db(jfk[:n], out[:n]) > min_snr
    # the same bytes from memory decode to the same samples
    np.testing.assert_array_equal(load_audio_bytes(path.read_bytes(), name=name), out)


def test_mp3_of_text_is_one_quiet_line(tmp_path, capfd):
    """A text file named .mp3: no decoder notes on stderr (libmpg123 printed three), and the reason."""
    (tmp_path / "notes.mp3").write_text("hello, this is not audio\n" * 40)
    with pytest.raises(InputError) as e:
        load_audio(tmp_path / "notes.mp3")
    message = _one_line_error(e, "cannot decode", "notes.mp3", "text file, not audio")
    assert "does not exist" not in message
    assert capfd.readouterr().err == ""


def test_long_container_is_decoded_in_frames(jfk, tmp_path):
    """Three minutes of AAC: the decoder's allocations peak near the samples it returns (frames
    are written into one preallocated array, not collected and joined)."""
    import tracemalloc

    path = _encode(tmp_path / "long.m4a", np.tile(jfk, 16), SAMPLE_RATE, "aac", "mp4")
    tracemalloc.start()
    try:
        out = load_audio(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert abs(len(out) - 16 * len(jfk)) < 2048
    assert peak < 1.25 * out.nbytes, (peak, out.nbytes)


def test_corrupt_container_is_one_line_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    for name in ("talk.m4a", "talk.webm", "clip.mp4"):
        (tmp_path / name).write_bytes(MP4_HEAD if name != "talk.webm" else b"\x1aE\xdf\xa3" + b"\x00" * 200)
        with pytest.raises(InputError) as e:
            load_audio(tmp_path / name)
        message = _one_line_error(e, name, "cannot decode", "FFmpeg: ")
        assert "ffmpeg, which is not installed" not in message
        if name != "talk.webm":
            assert "moov atom not found" in message  # FFmpeg's own reason
    with pytest.raises(InputError) as e:  # the same from stdin bytes, recognised by content
        load_audio_bytes(MP4_HEAD, name="stdin")
    _one_line_error(e, "stdin", "MP4", "moov atom not found")


# --- an ffmpeg program, when installed, is the last resort --------------------------------------------------


def _fake_ffmpeg(bin_dir: Path, log: Path, fail: bool = False) -> None:
    """An ``ffmpeg`` on PATH that logs its arguments and writes 0.5 s of a known tone as f32le."""
    bin_dir.mkdir()
    script = bin_dir / "ffmpeg"
    script.write_text(
        textwrap.dedent(
            f"""\
            #!{sys.executable}
            import sys
            import numpy as np
            open({str(log)!r}, "w").write("\\n".join(sys.argv[1:]))
            if {fail!r}:
                sys.stderr.write("[mov,mp4] moov atom not found\\n{{path}}: Invalid data found when processing input\\n")
                sys.exit(1)
            rate = int(sys.argv[sys.argv.index("-ar") + 1])
            t = np.arange(rate // 2) / rate
            sys.stdout.buffer.write((0.25 * np.sin(2 * np.pi * 300 * t)).astype("<f4").tobytes())
            """
        )
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def test_container_through_ffmpeg(tmp_path, monkeypatch):
    log = tmp_path / "args.txt"
    _fake_ffmpeg(tmp_path / "bin", log)
    monkeypatch.setenv("PATH", str(tmp_path / "bin") + os.pathsep + os.environ.get("PATH", ""))
    (tmp_path / "talk.m4a").write_bytes(MP4_HEAD)
    out = load_audio(tmp_path / "talk.m4a")
    t = np.arange(SAMPLE_RATE // 2) / SAMPLE_RATE
    np.testing.assert_allclose(out, 0.25 * np.sin(2 * np.pi * 300 * t), atol=1e-6)
    args = log.read_text().split("\n")
    assert args[args.index("-i") + 1] == str(tmp_path / "talk.m4a")
    assert ["-f", "f32le"] == args[args.index("-f") : args.index("-f") + 2]
    assert args[args.index("-ac") + 1] == "1" and args[args.index("-ar") + 1] == "16000"
    assert args[-1] == "-"  # samples on stdout
    # stdin bytes soundfile cannot read go through ffmpeg too (via a temporary file)
    assert len(load_audio_bytes(MP4_HEAD, name="stdin")) == SAMPLE_RATE // 2


def test_ffmpeg_failure_is_one_line(tmp_path, monkeypatch):
    _fake_ffmpeg(tmp_path / "bin", tmp_path / "args.txt", fail=True)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    (tmp_path / "broken.mp4").write_bytes(MP4_HEAD)
    with pytest.raises(InputError) as e:
        load_audio(tmp_path / "broken.mp4")
    _one_line_error(e, "broken.mp4", "Invalid data found when processing input")


@pytest.mark.parametrize("signal_exception", [KeyboardInterrupt, lambda: SystemExit(143)])
@pytest.mark.parametrize("at_read", [1, 4])
def test_a_signal_during_decoding_is_raised_not_printed(tmp_path, capfd, signal_exception, at_read):
    """A signal handler's exception (Ctrl-C's KeyboardInterrupt, a batch worker's SystemExit on
    SIGTERM) that lands while libsndfile calls back into our file object: cffi would print it as
    "Exception ignored" and the file would read as corrupt; it comes out of the decode instead."""
    from oasr.io import audio

    path = tmp_path / "tone.wav"
    sf.write(path, np.zeros(SAMPLE_RATE, np.float32), SAMPLE_RATE)

    class Interrupted(io.BytesIO):
        calls = 0

        def readinto(self, buffer):
            Interrupted.calls += 1
            if Interrupted.calls == at_read:
                raise signal_exception()
            return super().readinto(buffer)

    expected = KeyboardInterrupt if signal_exception is KeyboardInterrupt else SystemExit
    with pytest.raises(expected):
        audio._read_soundfile(Interrupted(path.read_bytes()), SAMPLE_RATE)
    assert "Exception ignored" not in capfd.readouterr().err
    assert load_audio(path).shape == (SAMPLE_RATE,)  # the next decode is as ever
