"""The audio tasks as both file loops run them: the command line's input runner (``oasr
transcribe a.wav b.wav``, ``oasr_cli/inputs.py``) and the corpus loop (``oasr batch``,
``oasr.corpus``). One entry per task (its models, its work on samples, its file formats) and one
``run_file``, so the two loops cannot drift apart.

``run_file`` opens the recording with ``open_audio``: a long one is decoded into a temporary
file and read a window at a time (``io/samples.py``), never held as one array, which is what
keeps an hour as cheap as five minutes.
"""

from __future__ import annotations

import dataclasses
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..errors import InputError

Progress = Callable[[float, float], None]  # progress(done_seconds, total_seconds)


@dataclass(frozen=True)
class FileTask:
    """One task on audio files. Its functions are module-level, so a ``Work`` naming the task
    travels to worker processes and Ray actors."""

    name: str
    # The models to load, from the names the caller gave ({"model": ..., "segmentation_model": ...};
    # None: the default), as (name or path, its task in oasr.tasks.TASKS) pairs.
    models: Callable[[dict[str, str | None]], tuple[tuple[str, str], ...]]
    # (loaded models, samples, options, device, dtype, progress) -> the result
    compute: Callable[[tuple, Any, Any, str, str, Progress | None], Any]
    # (result, format, writer options or None) -> the text of one file
    render: Callable[[Any, str, Any], str]


def run_file(
    task: FileTask,
    source: str | Path,
    models: tuple,
    options: Any,
    *,
    device: str = "auto",
    dtype: str = "auto",
    progress_for: Callable[[float], AbstractContextManager[Progress | None]] | None = None,
    plot: Callable[[Any, Any], None] | None = None,
) -> tuple[Any, float]:
    """``task`` on the recording at ``source`` (``"-"``: stdin): (its result, named after the file,
    and the seconds of audio). ``progress_for(seconds)``: a context giving the progress callback
    while the task runs; ``plot(result, samples)``: a picture drawn from the same samples."""
    from ..io.audio import duration, open_audio

    samples = open_audio(source)  # a long recording stays on disk, read a window at a time
    seconds = duration(samples)
    with (progress_for(seconds) if progress_for is not None else nullcontext(None)) as progress:
        result = task.compute(models, samples, options, device, dtype, progress)
    if not result.source:
        result = dataclasses.replace(result, source=str(source))
    if plot is not None:
        plot(result, samples)
    return result, seconds


# The public functions (``oasr.transcribe``...), looked up when called, as every caller of the API
# does: whoever replaces one there (a stand-in in a test) replaces it for both loops.


# --- transcribe ----------------------------------------------------------------------------------


def _transcribe_models(names):
    return ((names.get("model") or "auto", "transcribe"),)


def _transcribe(models, samples, options, device, dtype, progress):
    import oasr

    # a progress callback with a ``segment`` attribute hears each segment too (the CLI's -v)
    heard = getattr(progress, "segment", None)
    extra = {"on_segment": heard} if heard is not None else {}
    return oasr.transcribe(samples, models[0], options, device=device, dtype=dtype, progress=progress, **extra)


def _render_transcript(transcript, fmt, writer_options):
    from ..formats import render

    return render(transcript, fmt, writer_options)


# --- diarize -------------------------------------------------------------------------------------


def _diarize_models(names):
    from .diarize import EMBEDDING_MODEL, SEGMENTATION_MODEL

    segmentation = (names.get("segmentation_model") or SEGMENTATION_MODEL, "speaker-segmentation")
    return (segmentation, (names.get("embedding_model") or EMBEDDING_MODEL, "speaker-embedding"))


def _diarize(models, samples, options, device, dtype, progress):
    import oasr

    segmenter, encoder = models
    return oasr.diarize(samples, options, segmentation_model=segmenter, embedding_model=encoder, device=device, progress=progress)


def _render_turns(turns, fmt, writer_options):
    from ..formats.turns import render_turns

    return render_turns(turns, fmt)


# --- pitch ---------------------------------------------------------------------------------------


def _pitch_models(names):
    return ((names.get("model") or "auto", "pitch"),)


def _pitch(models, samples, options, device, dtype, progress):
    import oasr

    return oasr.pitch(samples, models[0], options, device=device, dtype=dtype, progress=progress)


def _render_pitch(track, fmt, writer_options):
    from ..formats.pitch import render_pitch

    return render_pitch(track, fmt)


FILE_TASKS = {
    task.name: task
    for task in (
        FileTask("transcribe", _transcribe_models, _transcribe, _render_transcript),
        FileTask("diarize", _diarize_models, _diarize, _render_turns),
        FileTask("pitch", _pitch_models, _pitch, _render_pitch),
    )
}


def file_task(name: str) -> FileTask:
    found = FILE_TASKS.get(name)
    if found is None:
        raise InputError(f"the audio tasks are {', '.join(FILE_TASKS)}; not {name!r}")
    return found
