"""Audio in: any file soundfile reads, other containers through ffmpeg, stdin; mono, resampled.

``load_audio(source)`` returns mono float32 samples in [-1, 1] at 16 kHz (or ``sample_rate``):

- a path that soundfile (libsndfile) decodes: WAV, FLAC, OGG/Vorbis/Opus, MP3, AIFF, ...;
  channels are averaged and the rate is converted with soxr's band-limited HQ resampler;
- any other container (mp4, m4a, webm, mkv, aac, ...) through the ``ffmpeg`` program when it is on
  PATH (decoded to 32-bit float mono at the target rate on its stdout); without ffmpeg, a one-line
  ``InputError`` saying so;
- ``"-"``: the bytes on stdin, buffered, then decoded the same way (``load_audio_bytes``).

Every failure a user can cause (a missing, empty, non-audio file) is an ``InputError`` whose
one-line message names the file.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from ..errors import InputError

SAMPLE_RATE = 16000
STDIN = "-"

# Suffixes of containers libsndfile does not read; a clearer message when ffmpeg is missing.
FFMPEG_SUFFIXES = frozenset(
    {".mp4", ".m4a", ".m4b", ".mov", ".webm", ".mkv", ".mka", ".aac", ".wma", ".wmv", ".avi",
     ".3gp", ".amr", ".ac3", ".flv", ".ts", ".opus"}
)


def duration(samples: np.ndarray, sample_rate: int = SAMPLE_RATE) -> float:
    """Seconds of audio in ``samples``."""
    return len(samples) / float(sample_rate)


def ffmpeg_path() -> str | None:
    """The ``ffmpeg`` program found on PATH now, or None."""
    return shutil.which("ffmpeg")


def check_audio_path(path: str | Path) -> Path:
    """``path`` as a Path when it names a non-empty regular file; else an InputError naming it.

    The cheap checks only (no decoding), so a batch can reject typos before a model loads.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise InputError(f"no such file: {path}")
    if path.is_dir():
        raise InputError(f"{path} is a directory, not an audio file")
    try:
        size = path.stat().st_size
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from e
    if size == 0 and path.is_file():
        raise InputError(f"{path} is empty (0 bytes)")
    return path


def load_audio(source: str | Path | bytes, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """Mono float32 samples in [-1, 1] at ``sample_rate`` from a path, ``"-"`` (stdin) or bytes."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return load_audio_bytes(bytes(source), sample_rate)
    if str(source) == STDIN:
        return load_audio_bytes(read_stdin(), sample_rate, name="stdin")
    path = check_audio_path(source)
    try:
        data, rate = _read_soundfile(str(path))
    except _NotSoundfile as e:
        samples = _decode_with_ffmpeg(path, str(path), sample_rate, cause=e)
    else:
        samples = _to_mono(data, rate, sample_rate)
    return _checked(samples, str(path))


def load_audio_bytes(data: bytes, sample_rate: int = SAMPLE_RATE, *, name: str = "<bytes>") -> np.ndarray:
    """Decode an encoded audio file held in memory (what ``-`` reads from stdin)."""
    if not data:
        raise InputError(f"{name} is empty (no audio bytes)")
    try:
        samples, rate = _read_soundfile(io.BytesIO(data))
    except _NotSoundfile as e:
        if ffmpeg_path() is None:
            raise InputError(_no_ffmpeg_message(name, data[:64], "", e)) from e
        # ffmpeg needs to seek in some containers (an mp4 with its index at the end): a temp file.
        with tempfile.TemporaryDirectory(prefix="oasr-audio-") as tmp:
            path = Path(tmp) / "input"
            path.write_bytes(data)
            mono = _decode_with_ffmpeg(path, name, sample_rate, cause=e)
    else:
        mono = _to_mono(samples, rate, sample_rate)
    return _checked(mono, name)


def read_stdin() -> bytes:
    """Every byte on stdin (binary), buffered until end of file."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # stdin replaced by a text stream (tests, embedding)
        raise InputError("stdin is not a binary stream; pipe the audio into oasr ('-f -')")
    if sys.stdin.isatty():
        raise InputError("'-' reads audio from stdin, but stdin is a terminal; pipe a file in (oasr ... -f - < audio.wav)")
    return stream.read()


# ------------------------------------------------------------------------------------------------


class _NotSoundfile(Exception):
    """soundfile could not decode the input (not a format libsndfile reads)."""


def _read_soundfile(file) -> tuple[np.ndarray, int]:
    import soundfile as sf

    try:
        data, rate = sf.read(file, dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError, EOFError) as e:
        raise _NotSoundfile(_one_line(str(e))) from e
    return data, rate


def _to_mono(data: np.ndarray, rate: int, sample_rate: int) -> np.ndarray:
    mono = data.mean(axis=1, dtype=np.float32) if data.shape[1] > 1 else data[:, 0]
    if rate != sample_rate and len(mono):
        import soxr

        mono = soxr.resample(mono, rate, sample_rate, quality="HQ")
    return np.ascontiguousarray(mono, dtype=np.float32)


def _checked(samples: np.ndarray, name: str) -> np.ndarray:
    if samples.size == 0:
        raise InputError(f"{name} holds no audio samples")
    if not np.all(np.isfinite(samples)):
        raise InputError(f"{name} holds non-finite samples (NaN or infinity); the file is corrupt")
    return samples


def _container(head: bytes, suffix: str) -> str | None:
    """A name for a container libsndfile cannot read, from its first bytes or its suffix."""
    if head[4:8] == b"ftyp":
        return "an MP4/M4A container"
    if head[:4] == b"\x1aE\xdf\xa3":
        return "a WebM/Matroska container"
    if head[:2] in (b"\xff\xf1", b"\xff\xf9"):
        return "ADTS AAC"
    if head[:4] == b"0&\xb2u":
        return "an ASF/WMA container"
    if suffix.lower() in FFMPEG_SUFFIXES:
        return f"a {suffix.lower()} file"
    return None


def _no_ffmpeg_message(name: str, head: bytes, suffix: str, cause: Exception) -> str:
    kind = _container(head, suffix)
    if kind is not None:
        return (
            f"cannot decode {name}: {kind} needs ffmpeg, which is not installed "
            "(install ffmpeg, or convert the audio to wav, flac, ogg or mp3)"
        )
    return (
        f"cannot decode {name}: not an audio format soundfile reads (wav, flac, ogg, mp3, ...) "
        f"and ffmpeg, which reads more, is not installed ({cause})"
    )


def _decode_with_ffmpeg(path: Path, name: str, sample_rate: int, *, cause: Exception) -> np.ndarray:
    ffmpeg = ffmpeg_path()
    if ffmpeg is None:
        with open(path, "rb") as f:
            head = f.read(64)
        raise InputError(_no_ffmpeg_message(name, head, path.suffix, cause)) from cause
    cmd = [
        ffmpeg, "-nostdin", "-hide_banner", "-loglevel", "error", "-threads", "0",
        "-i", str(path), "-vn", "-f", "f32le", "-acodec", "pcm_f32le", "-ac", "1", "-ar", str(sample_rate), "-",
    ]
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    except OSError as e:
        raise InputError(f"cannot decode {name}: ffmpeg ({ffmpeg}) did not run: {e.strerror or e}") from e
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
        detail = _one_line(lines[-1]) if lines else f"exit status {proc.returncode}"
        raise InputError(f"cannot decode {name}: not audio that soundfile or ffmpeg reads (ffmpeg: {detail})") from cause
    usable = len(proc.stdout) - len(proc.stdout) % 4
    return np.frombuffer(proc.stdout[:usable], dtype="<f4").astype(np.float32)


def _one_line(text: str) -> str:
    return " ".join(text.split())


__all__ = [
    "SAMPLE_RATE",
    "STDIN",
    "check_audio_path",
    "duration",
    "ffmpeg_path",
    "load_audio",
    "load_audio_bytes",
    "read_stdin",
]
