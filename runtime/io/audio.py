"""Audio in: WAV/FLAC/Ogg/AIFF through soundfile, everything else through PyAV, stdin; mono, resampled.

``load_audio(source)`` returns mono float32 samples in [-1, 1] at 16 kHz (or ``sample_rate``):

- a file whose first bytes name a format libsndfile reads natively (WAV, RF64, W64, FLAC,
  Ogg Vorbis/Opus, AIFF, AU, CAF, ...): soundfile, given the open file (so libsndfile decides
  by content, never by the name's suffix); channels are averaged and the rate is converted with
  soxr's band-limited HQ resampler;
- anything else (MP3, MP4/M4A, WebM/Matroska, AAC, WMA, AMR, ...), and a file soundfile refuses:
  PyAV (FFmpeg's libraries in a pip wheel, so no ffmpeg program is needed), decoded frame by
  frame: each frame converted to float (PyAV's ``AudioResampler``), its channels
  averaged as above and resampled by soxr's streaming HQ resampler, so an M4A and a FLAC of the
  same recording give the same samples; a corrupt packet is skipped, as ffmpeg skips it;
- when PyAV cannot decode it either and an ``ffmpeg`` program is on PATH, that program is tried
  last (a system build may carry a codec the wheel lacks);
- ``"-"``: stdin, copied in blocks into an unnamed temporary file (never held whole in memory;
  at most ``OASR_MAX_STDIN_MB`` megabytes, default 1024, 0 for no limit), then decoded as a file
  named "stdin". Memory is then what the decoded samples take, as for a path. A path that cannot
  seek (a FIFO, ``/dev/stdin``, a shell's ``<(...)``) is read the same way.

``open_audio(source, channels=k)`` keeps k channels, [k, n], made from the recording's as
``fit_channels`` says (demucs' rule: mono repeated, more cut to the first k, one the mean).

``open_audio(source)`` decodes the same samples, but a recording longer than ``SPOOL_SAMPLES``
(10 minutes at 16 kHz) goes to an unnamed temporary file as it is decoded (a long WAV or FLAC
read a block at a time) and comes back as a ``SampleFile`` that pipelines read a window at a time
(``io/samples.py``), so an hour costs the process no more memory than ten minutes.

Decoding is bounded: a recording longer than ``max_seconds`` (``set_max_seconds``, default 24 h;
the CLI's ``--max-audio-seconds``; the server's per-request limit) is refused from the length its
header states, before anything is decoded, and again while decoding, as soon as more samples come
than that (a header can lie); a sample rate outside 1 kHz .. 768 kHz is refused, since a 1 Hz
header would turn a few kilobytes into hours of resampled audio.

Every failure a user can cause (a missing, empty, non-audio, corrupt or over-long input) is an
``InputError`` with a one-line message that names the file ("stdin" for ``-``) and the reason.
Decoders print nothing: libsndfile never sees an MP3 (its mpg123 writes notes on stderr), and
PyAV keeps FFmpeg's log quiet.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ..errors import InputError
from . import samples as _samples
from .samples import SampleFile, SampleSink

log = logging.getLogger("oasr")

SAMPLE_RATE = 16000
STDIN = "-"
STDIN_NAME = "stdin"  # what messages call "-"
MAX_STDIN_ENV = "OASR_MAX_STDIN_MB"
DEFAULT_MAX_STDIN_MB = 1024
COPY_BLOCK = 1 << 20  # bytes copied from stdin at a time
DEFAULT_MAX_SECONDS = 24 * 3600.0  # the longest recording decoded unless told otherwise
MAX_SECONDS_ENV = "OASR_MAX_AUDIO_SECONDS"  # the default of a process (a batch's workers get it so)
MIN_RATE, MAX_RATE = 1000, 768000  # sample rates a recording may have (Hz)
_UNSET = object()
_max_seconds = _UNSET  # set_max_seconds's; unset: OASR_MAX_AUDIO_SECONDS, else the default

# First bytes of the formats libsndfile reads natively (its own detection is by content; these
# only pick the decoder). Everything else goes to PyAV first.
SOUNDFILE_MAGIC = (
    b"RIFF", b"RIFX", b"RF64", b"BW64", b"riff",  # WAV, RF64, Sony Wave64
    b"FORM",  # AIFF / AIFC / 8SVX
    b"fLaC", b"OggS", b"caff", b".snd", b"dns.", b"NIST", b"Creative Voice File",
)

# Suffixes of containers libsndfile does not read (named in the message when nothing decodes them).
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


def max_stdin_bytes() -> int | None:
    """The most bytes ``-`` reads from stdin (``OASR_MAX_STDIN_MB``, default 1024 MB); None: no limit."""
    raw = os.environ.get(MAX_STDIN_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_STDIN_MB << 20
    try:
        megabytes = float(raw)
    except ValueError:
        megabytes = -1.0
    if not megabytes >= 0 or megabytes == float("inf"):
        raise InputError(f"{MAX_STDIN_ENV}={raw!r}: expected a number of megabytes (0 for no limit)")
    return None if megabytes == 0 else max(1, int(megabytes * (1 << 20)))


def set_max_seconds(seconds: float | None) -> float | None:
    """Make ``seconds`` (None: no limit) the longest recording decoded from now on; returns the
    limit it replaces."""
    global _max_seconds
    if seconds is not None and not seconds > 0:
        raise InputError(f"the audio length limit must be a positive number of seconds, not {seconds!r}")
    previous, _max_seconds = _process_limit(), seconds
    return previous


def max_seconds() -> float | None:
    """The longest recording decoded now: ``set_max_seconds``'s, else ``OASR_MAX_AUDIO_SECONDS``,
    else ``DEFAULT_MAX_SECONDS``; None: no limit."""
    return _process_limit()


def _process_limit() -> float | None:  # (open_audio's max_seconds argument hides the public name)
    if _max_seconds is not _UNSET:
        return _max_seconds
    raw = os.environ.get(MAX_SECONDS_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise InputError(f"{MAX_SECONDS_ENV}={raw!r}: expected a positive number of seconds")
    return seconds


class _Limits:
    """What a decode may produce: at most ``seconds`` of audio, at a sane sample rate."""

    def __init__(self, seconds: float | None, sample_rate: int):
        self.seconds = seconds
        self.samples = None if seconds is None else int(seconds * sample_rate) + sample_rate  # a second of slack for resampler edges

    def check_rate(self, rate) -> None:
        if not (isinstance(rate, (int, float)) and MIN_RATE <= rate <= MAX_RATE):
            raise _Refused(f"states a sample rate of {rate} Hz, outside {MIN_RATE} .. {MAX_RATE} Hz")

    def check_length(self, seconds: float) -> None:
        if self.seconds is not None and seconds > self.seconds:
            raise _Refused(self.too_long(seconds))

    def too_long(self, seconds: float | None = None) -> str:
        if seconds is None:
            return f"decodes to more than {self.seconds:g} s of audio, the limit (--max-audio-seconds)"
        return f"is {seconds:.0f} s long, more than the limit of {self.seconds:g} s (--max-audio-seconds)"


class _Refused(Exception):
    """A decoder refused the input on purpose (too long, a bad rate); the message follows its name."""


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
    """Mono float32 samples in [-1, 1] at ``sample_rate`` from a path, ``"-"`` (stdin) or bytes,
    as one array however long the recording (``open_audio`` keeps a long one on disk)."""
    return np.asarray(open_audio(source, sample_rate))


_DEFAULT = object()  # max_seconds not given: the process's limit (set_max_seconds)


def open_audio(source: str | Path | bytes, sample_rate: int = SAMPLE_RATE, channels: int = 1, *, max_seconds=_DEFAULT) -> "np.ndarray | SampleFile":
    """As ``load_audio``, but a recording longer than ``SPOOL_SAMPLES`` is decoded into an unnamed
    temporary file and returned as a ``SampleFile`` (sliced like an array, read a window at a time).
    ``channels`` > 1: [channels, n] samples, made by ``fit_channels``. ``max_seconds``: the
    longest recording accepted (default: ``set_max_seconds``'s; None: no limit)."""
    limits = _Limits(_process_limit() if max_seconds is _DEFAULT else max_seconds, sample_rate)
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _open_bytes(bytes(source), sample_rate, "<bytes>", channels, limits)
    if str(source) == STDIN:
        with spool_stdin() as file:
            return _decode(file, STDIN_NAME, sample_rate, suffix="", channels=channels, limits=limits)
    path = check_audio_path(source)
    try:
        file = _open_fifo(path) if _is_fifo(path) else open(path, "rb")
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from e
    with file:
        if not file.seekable():  # a FIFO, /dev/stdin, a shell's <(...): read like stdin
            with _spool(file, str(path)) as copy:
                return _decode(copy, str(path), sample_rate, suffix=path.suffix, channels=channels, limits=limits)
        return _decode(file, str(path), sample_rate, suffix=path.suffix, path=path, channels=channels, limits=limits)


FIFO_WAIT_SECONDS = 10.0  # how long a named pipe may take to bring its first byte


def _is_fifo(path: Path) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        return False


def _open_fifo(path: Path) -> BinaryIO:
    """A named pipe opened without waiting for a writer (a plain open blocks until one comes,
    forever for a FIFO nobody writes to), then given ``FIFO_WAIT_SECONDS`` to bring data."""
    import select

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        ready, _, _ = select.select([fd], [], [], FIFO_WAIT_SECONDS)
        if not ready:
            raise InputError(f"{path} is a named pipe (FIFO) that no program wrote to within {FIFO_WAIT_SECONDS:g} s")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def load_audio_bytes(data: bytes, sample_rate: int = SAMPLE_RATE, *, name: str = "<bytes>", max_seconds=_DEFAULT) -> "np.ndarray | SampleFile":
    """Decode an encoded audio file held in memory (a long one comes back as a ``SampleFile``,
    on disk; ``max_seconds`` as for ``open_audio``)."""
    limits = _Limits(_process_limit() if max_seconds is _DEFAULT else max_seconds, sample_rate)
    return _open_bytes(data, sample_rate, name, 1, limits)


def _open_bytes(data: bytes, sample_rate: int, name: str, channels: int, limits: "_Limits") -> "np.ndarray | SampleFile":
    if not data:
        raise InputError(f"{name} is empty (no audio bytes)")
    return _decode(io.BytesIO(data), name, sample_rate, suffix="", channels=channels, limits=limits)


def spool_stdin() -> BinaryIO:
    """stdin's bytes in an unnamed temporary file (open, at its start), copied a block at a time;
    at most ``max_stdin_bytes()`` of them, else an InputError saying how to go past the limit."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # stdin replaced by a text stream (tests, embedding)
        raise InputError("stdin is not a binary stream; pipe the audio into oasr ('-f -')")
    if sys.stdin.isatty():
        raise InputError("'-' reads audio from stdin, but stdin is a terminal; pipe a file in (oasr ... -f - < audio.wav)")
    return _spool(stream, STDIN_NAME)


def _spool(stream: BinaryIO, name: str) -> BinaryIO:
    """The bytes of a stream that cannot seek (a pipe) in an unnamed temporary file, at its start."""
    limit = max_stdin_bytes()
    spool = tempfile.TemporaryFile(prefix="oasr-stdin-")
    try:
        total = 0
        while True:
            try:
                block = stream.read(COPY_BLOCK)
            except OSError as e:
                raise InputError(f"cannot read {name}: {e.strerror or e}") from e
            if not block:
                break
            total += len(block)
            if limit is not None and total > limit:
                raise InputError(
                    f"{name} holds more than {limit / (1 << 20):g} MB, the limit for audio read from a pipe "
                    f"({MAX_STDIN_ENV}; 0 for none): pass the file by its path, or raise the limit"
                )
            spool.write(block)
        if total == 0:
            raise InputError(f"{name} is empty (no audio bytes)")
        spool.seek(0)
    except BaseException:
        spool.close()
        raise
    return spool


def read_stdin() -> bytes:
    """Every byte on stdin (binary), up to the ``OASR_MAX_STDIN_MB`` limit. ``load_audio("-")``
    does not hold them in memory; this is for callers that want the bytes themselves."""
    with spool_stdin() as file:
        return file.read()


# ------------------------------------------------------------------------------------------------


class _Undecodable(Exception):
    """A decoder could not read the input; the message is its one-line reason."""


def fit_channels(data: np.ndarray, channels: int) -> np.ndarray:
    """[c, n] -> [channels, n] as demucs' convert_audio_channels: kept when equal, the mean for
    one, a single channel repeated, more cut to the first ``channels``; fewer (but several) is
    an InputError."""
    have = data.shape[0]
    if have == channels:
        return data
    if channels == 1:
        return data.mean(axis=0, keepdims=True, dtype=np.float32)
    if have == 1:
        return np.repeat(data, channels, axis=0)
    if have > channels:
        return data[:channels]
    raise InputError(f"the audio has {have} channels; {channels} cannot be made from them")


def _fitted(planes: np.ndarray, channels: int) -> np.ndarray:
    """[c, n] planes -> [n] (channels 1: the mean) or [channels, n], float32 and contiguous."""
    out = fit_channels(planes, channels)
    return np.ascontiguousarray(out[0] if channels == 1 else out, dtype=np.float32)


def _decode(file: BinaryIO, name: str, sample_rate: int, *, suffix: str, path: Path | None = None, channels: int = 1, limits: "_Limits") -> "np.ndarray | SampleFile":
    """Samples of the open ``file``: soundfile for its native formats, else (or when it refuses)
    PyAV, else the ffmpeg program when there is one; an InputError with the reason when none can,
    or when the recording is refused by ``limits``."""
    try:
        return _decode_any(file, name, sample_rate, suffix=suffix, path=path, channels=channels, limits=limits)
    except _Refused as e:
        raise InputError(f"{name} {e}") from None
    except _samples.TooLong:
        raise InputError(f"{name} {limits.too_long()}") from None


def _decode_any(file: BinaryIO, name: str, sample_rate: int, *, suffix: str, path: Path | None, channels: int, limits: "_Limits") -> "np.ndarray | SampleFile":
    head = file.read(64)
    file.seek(0)
    if not head:
        raise InputError(f"{name} is empty (no audio bytes)")
    reasons: list[str] = []
    if head.startswith(SOUNDFILE_MAGIC):
        try:
            return _checked(_read_soundfile(file, sample_rate, channels, limits), name)
        except _Undecodable as e:
            reasons.append(str(e))
            file.seek(0)
    try:
        return _checked(_read_pyav(path if path is not None else file, sample_rate, channels, limits), name)
    except _Undecodable as e:
        reasons.append(str(e))
    if ffmpeg_path() is not None and not _looks_like_text(head):
        if path is not None:
            return _checked(_decode_with_ffmpeg(path, name, sample_rate, channels, limits), name)
        file.seek(0)
        with tempfile.TemporaryDirectory(prefix="oasr-audio-") as tmp:  # ffmpeg seeks in some containers
            copy = Path(tmp) / "input"
            with open(copy, "wb") as out:
                shutil.copyfileobj(file, out, COPY_BLOCK)
            return _checked(_decode_with_ffmpeg(copy, name, sample_rate, channels, limits), name)
    raise InputError(_undecodable_message(name, head, suffix, reasons[0]))


def _undecodable_message(name: str, head: bytes, suffix: str, reason: str) -> str:
    if _looks_like_text(head):
        return f"cannot decode {name}: it is a text file, not audio"
    kind = _container(head, suffix)
    what = f"{kind} that cannot be decoded" if kind else "not audio in a format soundfile or FFmpeg (PyAV) reads"
    return f"cannot decode {name}: {what} ({reason})"


def _looks_like_text(head: bytes) -> bool:
    if not head or b"\x00" in head:
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        try:  # a multi-byte character cut at the end of the head
            text = head[:-3].decode("utf-8")
        except UnicodeDecodeError:
            return False
    return all(c.isprintable() or c in "\t\r\n\f" for c in text)


STREAM_BLOCK = 1 << 16  # frames read at a time from a long file
UNKNOWN_FRAMES = 1 << 62  # libsndfile's frame count when the header states none


_caught = threading.local()  # .box: a list while this thread decodes through soundfile


def _keep_signal_exceptions(unraisable) -> None:
    """sys.unraisablehook while oasr decodes: a KeyboardInterrupt or SystemExit raised inside
    libsndfile's read callback (a signal's handler: Ctrl-C, a batch worker's SIGTERM) is kept for
    ``_signals_from_callbacks`` to raise, not printed and lost; anything else goes on as before."""
    box = getattr(_caught, "box", None)
    if box is not None and isinstance(unraisable.exc_value, (KeyboardInterrupt, SystemExit)):
        box.append(unraisable.exc_value)
    else:
        _previous_hook(unraisable)


_previous_hook = sys.unraisablehook


@contextlib.contextmanager
def _signals_from_callbacks():
    """cffi swallows an exception raised in a callback ("Exception ignored from cffi callback",
    a traceback on stderr) and libsndfile then fails as if the file were corrupt: a signal that
    lands while soundfile reads our file object is raised here instead, as it would be anywhere
    else."""
    global _previous_hook
    if sys.unraisablehook is not _keep_signal_exceptions:  # installed once; it passes the rest on
        _previous_hook, sys.unraisablehook = sys.unraisablehook, _keep_signal_exceptions
    _caught.box = box = []
    try:
        yield
    except BaseException:
        if not box:
            raise
    finally:
        _caught.box = None
    if box:
        raise box[0]


def _read_soundfile(file: BinaryIO, sample_rate: int, channels: int = 1, limits: _Limits | None = None) -> "np.ndarray | SampleFile":
    import soundfile as sf

    limits = limits or _Limits(None, sample_rate)
    try:
        with _signals_from_callbacks(), sf.SoundFile(file) as f:
            limits.check_rate(f.samplerate)
            if f.frames < UNKNOWN_FRAMES:  # else the header does not say (a streamed FLAC): the sink counts
                limits.check_length(f.frames / f.samplerate)
            if f.frames * sample_rate / f.samplerate * channels <= _samples.SPOOL_SAMPLES:
                data = f.read(dtype="float32", always_2d=True)
                return _to_mono(data, f.samplerate, sample_rate, channels)
            return _stream_soundfile(f, sample_rate, channels, limits)
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError, EOFError) as e:
        reason = getattr(e, "error_string", "") or str(e)
        raise _Undecodable(_one_line(f"soundfile: {reason}") if reason else "soundfile cannot read it") from e


def _stream_soundfile(f, sample_rate: int, channels: int, limits: _Limits) -> SampleFile:
    """A long file a block at a time: channels averaged (or fitted), rate converted by soxr's
    streaming HQ resampler, the samples written to disk as they come."""
    stated = f.frames if f.frames < UNKNOWN_FRAMES else 0
    sink = SampleSink(int(stated * sample_rate / f.samplerate), channels, limits.samples)
    resampler = None if f.samplerate == sample_rate else _ResampleStream(f.samplerate, sample_rate, channels)
    try:
        for block in f.blocks(blocksize=STREAM_BLOCK, dtype="float32", always_2d=True):
            fitted = _fitted(block.T, channels)
            sink.extend([fitted if resampler is None else resampler.resample_chunk(fitted)])
        if resampler is not None:
            sink.extend([resampler.resample_chunk(None, last=True)])
    except BaseException:
        sink.discard()
        raise
    return sink.result()


def _to_mono(data: np.ndarray, rate: int, sample_rate: int, channels: int = 1) -> np.ndarray:
    """[n, c] frames -> mono [n'] (or [channels, n']) at ``sample_rate``."""
    mono = _fitted(data.T, channels)
    if rate != sample_rate and mono.shape[-1]:
        import soxr

        mono = soxr.resample(mono.T, rate, sample_rate, quality="HQ").T
    return np.ascontiguousarray(mono, dtype=np.float32)


class _ResampleStream:
    """soxr's streaming HQ resampler on [n] (one channel) or [channels, n] pieces."""

    def __init__(self, rate: int, sample_rate: int, channels: int):
        import soxr

        self.channels = channels
        self.stream = soxr.ResampleStream(rate, sample_rate, channels, dtype="float32", quality="HQ")

    def resample_chunk(self, piece: np.ndarray | None, last: bool = False) -> np.ndarray:
        if piece is None:
            piece = np.zeros((0,) if self.channels == 1 else (self.channels, 0), dtype=np.float32)
        if self.channels == 1:
            return self.stream.resample_chunk(np.ascontiguousarray(piece), last=last)
        return self.stream.resample_chunk(np.ascontiguousarray(piece.T), last=last).T


def _read_pyav(source, sample_rate: int, channels: int = 1, limits: _Limits | None = None) -> "np.ndarray | SampleFile":
    """Decode the first audio stream of ``source`` (a path or a seekable binary file) with PyAV:
    frame by frame to float, channels averaged (or fitted), resampled by a streaming soxr into one array."""
    try:
        import av
    except ImportError as e:  # a declared dependency; a broken install still gets one line
        raise _Undecodable(f"PyAV, which decodes it, does not import ({e}; pip install av)") from e
    with _ffmpeg_errors() as logs:
        return _read_pyav_logged(av, source, sample_rate, logs, channels, limits or _Limits(None, sample_rate))


@contextlib.contextmanager
def _ffmpeg_errors():
    """FFmpeg's error messages collected (for the reason a decode failed), never printed: the
    log level is raised to errors only while this runs, then put back."""
    import av.logging

    previous = av.logging.get_level()
    av.logging.set_level(av.logging.ERROR)
    try:
        with av.logging.Capture() as logs:
            yield logs
    finally:
        av.logging.set_level(previous)


def _read_pyav_logged(av, source, sample_rate: int, logs: list, channels: int, limits: _Limits) -> "np.ndarray | SampleFile":
    try:
        container = av.open(str(source) if isinstance(source, Path) else source, mode="r", metadata_errors="ignore")
    except (av.FFmpegError, UnicodeDecodeError, ValueError, OSError) as e:
        raise _Undecodable(_av_reason(e, logs)) from e
    with container:
        stream = next((s for s in container.streams if s.type == "audio"), None)
        if stream is None:
            kinds = ", ".join(sorted({s.type for s in container.streams})) or "none"
            raise _Undecodable(f"no audio stream in the {container.format.name} container (streams: {kinds})")
        if stream.sample_rate:  # 0: not stated; the frames' own rates are checked as they come
            limits.check_rate(stream.sample_rate)
        expected = _expected_samples(container, stream, sample_rate)
        limits.check_length(expected / sample_rate)
        out = SampleSink(expected, channels, limits.samples)
        decoder = _FrameDecoder(sample_rate, channels, limits)
        skipped, last_error = 0, None
        try:
            for packet in container.demux(stream):
                try:
                    frames = packet.decode()
                except av.error.InvalidDataError as e:  # a corrupt packet: skip it, as ffmpeg does
                    skipped, last_error = skipped + 1, e
                    continue
                for frame in frames:
                    out.extend(decoder.push(frame))
        except (av.FFmpegError, ValueError) as e:
            raise _Undecodable(_av_reason(e, logs)) from e
        out.extend(decoder.finish())
    if skipped:
        log.warning("skipped %d corrupt packet(s) while decoding (%s)", skipped, _av_reason(last_error, logs))
    if not len(out) and last_error is not None:
        raise _Undecodable(_av_reason(last_error, logs))
    return out.result()


class _FrameDecoder:
    """PyAV audio frames -> mono float32 at ``sample_rate``, in pieces: PyAV's resampler for the
    sample format only (planar float, layout and rate kept), the channels' mean (or
    ``fit_channels``), soxr's HQ streaming resampler for the rate."""

    def __init__(self, sample_rate: int, channels: int, limits: _Limits):
        self.sample_rate = sample_rate
        self.channels = channels
        self.limits = limits
        self.setup: tuple | None = None  # (format, layout, rate) of the frames seen
        self.converter = None
        self.resampler = None

    def push(self, frame) -> list[np.ndarray]:
        setup = (frame.format.name, frame.layout.name, frame.sample_rate)
        pieces: list[np.ndarray] = []
        if setup != self.setup:  # first frame, or the stream changed its format mid-way
            self.limits.check_rate(frame.sample_rate)
            pieces += self._flush(rate_changes=self.setup is None or setup[2] != self.setup[2])
            import av

            self.setup = setup
            self.converter = av.AudioResampler(format="fltp")
            if self.resampler is None and frame.sample_rate != self.sample_rate:
                self.resampler = _ResampleStream(frame.sample_rate, self.sample_rate, self.channels)
        for converted in self.converter.resample(frame):
            pieces.append(self._resample(self._mono(converted)))
        return pieces

    def finish(self) -> list[np.ndarray]:
        return self._flush(rate_changes=True)

    def _flush(self, *, rate_changes: bool) -> list[np.ndarray]:
        pieces = []
        if self.converter is not None:
            for converted in self.converter.resample(None):
                pieces.append(self._resample(self._mono(converted)))
            self.converter = None
        if rate_changes and self.resampler is not None:
            pieces.append(self.resampler.resample_chunk(None, last=True))
            self.resampler = None
        return pieces

    def _mono(self, frame) -> np.ndarray:
        return _fitted(frame.to_ndarray(), self.channels)  # planes: [channels, samples] float32

    def _resample(self, mono: np.ndarray) -> np.ndarray:
        return mono if self.resampler is None else self.resampler.resample_chunk(mono)


def _expected_samples(container, stream, sample_rate: int) -> int:
    """Samples the decoded audio should hold, from the container's stated duration (0: unknown)."""
    seconds = 0.0
    if stream.duration is not None and stream.time_base is not None:
        seconds = float(stream.duration * stream.time_base)
    elif container.duration is not None:
        seconds = container.duration / 1_000_000  # av.time_base
    return max(0, int(seconds * sample_rate))


def _av_reason(e: BaseException | None, logs: list | tuple = ()) -> str:
    """'FFmpeg: <what its log said>: <the error>', in one line, naming no temporary file."""
    reason = (getattr(e, "strerror", None) or str(e)) if e is not None else "no audio decoded"
    entry = getattr(e, "log", None) or (logs[-1] if logs else None)  # (level, component, message)
    said = _one_line(str(entry[2])) if entry and len(entry) > 2 and entry[2] else ""
    return _one_line(f"FFmpeg: {said}: {reason}" if said and said not in reason else f"FFmpeg: {reason}")


def _checked(samples: "np.ndarray | SampleFile", name: str) -> "np.ndarray | SampleFile":
    if samples.size == 0:
        raise InputError(f"{name} holds no audio samples")
    if not all_finite(samples):
        raise InputError(f"{name} holds non-finite samples (NaN or infinity); the file is corrupt")
    return samples


FINITE_BLOCK = 1 << 22  # samples summed at once when the samples are on disk


def all_finite(samples: "np.ndarray | SampleFile") -> bool:
    """No NaN or infinity in ``samples``, without a mask the size of the input: their float64 sum
    is finite exactly then (float32 values cannot overflow it)."""
    with np.errstate(invalid="ignore", over="ignore"):  # inf + -inf is NaN: no warning for it
        if isinstance(samples, SampleFile):
            step = FINITE_BLOCK // samples.channels  # FINITE_BLOCK values a read, however many channels
            total = sum(float(np.sum(samples.read(i, i + step), dtype=np.float64)) for i in range(0, len(samples), step))
            return bool(np.isfinite(total))
        return bool(np.isfinite(np.sum(samples, dtype=np.float64)))


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


def _decode_with_ffmpeg(path: Path, name: str, sample_rate: int, channels: int, limits: _Limits) -> np.ndarray:
    ffmpeg = ffmpeg_path()
    cut = [] if limits.seconds is None else ["-t", f"{limits.seconds + 1:g}"]  # a second past the limit says it was reached
    cmd = [
        ffmpeg, "-nostdin", "-hide_banner", "-loglevel", "error", "-threads", "0",
        "-i", str(path), *cut, "-vn", "-f", "f32le", "-acodec", "pcm_f32le", "-ac", str(channels), "-ar", str(sample_rate), "-",
    ]
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    except OSError as e:
        raise InputError(f"cannot decode {name}: ffmpeg ({ffmpeg}) did not run: {e.strerror or e}") from e
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
        detail = _one_line(lines[-1]).replace(str(path), name) if lines else f"exit status {proc.returncode}"
        raise InputError(f"cannot decode {name}: not audio that soundfile, PyAV or ffmpeg reads (ffmpeg: {detail})")
    usable = len(proc.stdout) - len(proc.stdout) % (4 * channels)
    if limits.samples is not None and usable // (4 * channels) > limits.samples:
        raise _Refused(limits.too_long())
    samples = np.frombuffer(proc.stdout[:usable], dtype="<f4").astype(np.float32)
    return samples if channels == 1 else np.ascontiguousarray(samples.reshape(-1, channels).T)


def _one_line(text: str) -> str:
    return " ".join(text.split())


__all__ = [
    "MAX_STDIN_ENV",
    "all_finite",
    "SAMPLE_RATE",
    "STDIN",
    "check_audio_path",
    "duration",
    "ffmpeg_path",
    "fit_channels",
    "load_audio",
    "load_audio_bytes",
    "max_seconds",
    "open_audio",
    "set_max_seconds",
    "max_stdin_bytes",
    "read_stdin",
    "spool_stdin",
]
