"""The tasks ``oasr batch`` runs, one entry each: which models it loads, where an input's outputs
go, and the work on one input. An audio task's work on one file is the single-file command's own
(``oasr.pipelines.file_tasks.run_file``), so a batch output is byte for byte the command's and
a long recording is read a window at a time in both.

A task that lands later is one more ``register(CorpusTask(...))`` here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import InputError
from ..pipelines.file_tasks import file_task, run_file
from .manifest import Item


@dataclass(frozen=True)
class Work:
    """What a batch does to each input, as plain data: it travels to worker processes and Ray actors."""

    task: str
    outdir: str
    models: tuple[tuple[str, str], ...] = ()  # (name or path as given, its task in oasr.tasks.TASKS), each loaded once per worker
    options: Any = None  # the task's options dataclass (TranscribeOptions, DiarizeOptions, PitchOptions, ...)
    formats: tuple[str, ...] = ()  # output formats, one file each
    writer: Any = None  # transcribe: WriterOptions (subtitle layout)
    device: str = "auto"
    dtype: str = "auto"
    force: bool = False  # convert/quantize: redo an up-to-date destination
    env: dict[str, str] = field(default_factory=dict)  # OASR_* / HF_* of the caller, set in every worker


@dataclass(frozen=True)
class Outcome:
    """What the work on one input produced."""

    outputs: list[Path]
    duration: float | None = None  # seconds of audio
    status: str = "done"  # or "skipped" (a convert/quantize destination already up to date)


@dataclass(frozen=True)
class CorpusTask:
    name: str
    # The models to load, from the names the caller gave ({"model": ..., "segmentation_model": ...}; None: the default).
    models: Callable[[dict[str, str | None]], tuple[tuple[str, str], ...]]
    options: Callable[[], Any]  # the task's default options
    # Output paths of an input (the single-file command's --output-dir layout under OUTDIR).
    outputs: Callable[[Work, Item], list[Path]]
    # (loaded models, work, input, its options) -> the outputs written (each atomically).
    run: Callable[[tuple, Work, Item, Any], Outcome]
    row_options: tuple[str, ...] = ()  # the ROW_OPTIONS a manifest row may set
    folders: bool = False  # inputs are checkpoint folders, not audio files
    default_formats: tuple[str, ...] = ()
    # A task whose own run skips an up-to-date output (convert, quantize): the journal does not.
    skips_itself: bool = False


TASKS: dict[str, CorpusTask] = {}


def register(task: CorpusTask) -> CorpusTask:
    TASKS[task.name] = task
    return task


def corpus_task(name: str) -> CorpusTask:
    found = TASKS.get(name)
    if found is None:
        raise InputError(f"oasr batch runs {', '.join(TASKS)}; not {name!r}")
    return found


def item_options(task: CorpusTask, work: Work, item: Item) -> Any:
    """The task's options for ``item``: the batch's, with the manifest row's options applied."""
    if not item.options:
        return work.options
    refused = sorted(set(item.options) - set(task.row_options))
    if refused:
        takes = ", ".join(task.row_options) or "none"
        raise InputError(f"{item.path}: {task.name} takes no per-row {', '.join(refused)} (it takes: {takes})")
    return dataclasses.replace(work.options, **item.options)  # validated again by the options class


def _audio_outputs(extension: Callable[[str], str]) -> Callable[[Work, Item], list[Path]]:
    """OUTDIR/<input's folder under the corpus root>/<stem>.<ext> for each format (the stem:
    ``Item.output_stem``, the input's extension kept where two inputs differ only in theirs)."""

    def outputs(work: Work, item: Item) -> list[Path]:
        rel = Path(item.name)
        return [Path(work.outdir) / rel.parent / f"{item.output_stem}.{extension(fmt)}" for fmt in work.formats]

    return outputs


def _transcript_extension(fmt: str) -> str:
    from ..formats import extension

    return extension(fmt)


def _same(fmt: str) -> str:
    return fmt


def _options(name: str) -> Callable[[], Any]:
    def default():
        from .. import options

        return getattr(options, name)()

    return default


# --- transcribe, diarize, pitch: the single-file commands' own work on each file ---------------------


def _audio_task(name: str, outputs: Callable[[Work, Item], list[Path]]) -> Callable[[tuple, Work, Item, Any], Outcome]:
    """The work on one audio input: ``oasr.pipelines.file_tasks.run_file``, as the CLI's input
    runner does it, then one file per format, each atomic."""

    def run(models: tuple, work: Work, item: Item, options: Any) -> Outcome:
        from ..io.files import write_with_parents

        task = file_task(name)
        result, seconds = run_file(task, item.path, models, options, device=work.device, dtype=work.dtype)
        paths = outputs(work, item)
        for fmt, path in zip(work.formats, paths):
            write_with_parents(path, task.render(result, fmt, work.writer).encode("utf-8"))
        return Outcome(paths, seconds)

    return run


def _register_audio(name: str, options: str, outputs, row_options: tuple[str, ...], default_format: str) -> None:
    models = file_task(name).models
    register(CorpusTask(name, models, _options(options), outputs, _audio_task(name, outputs), row_options, default_formats=(default_format,)))


_transcript_outputs = _audio_outputs(_transcript_extension)
_named_outputs = _audio_outputs(_same)
_register_audio("transcribe", "TranscribeOptions", _transcript_outputs, ("language",), "txt")
_register_audio("diarize", "DiarizeOptions", _named_outputs, ("num_speakers",), "rttm")
_register_audio("pitch", "PitchOptions", _named_outputs, (), "csv")


# --- separate, tts: several files per input, or text in -------------------------------------------


def _separate_models(names):
    return ((names.get("model") or "htdemucs", "separate"),)


def _tts_models(names):
    return ((names.get("model") or "auto", "tts"),)


def _separate_outputs(work: Work, item: Item) -> list[Path]:
    """OUTDIR/<input's folder>/<track>/: the stems' folder (their names come with the model)."""
    return [Path(work.outdir) / Path(item.name).parent / item.output_stem]


def _separate(models, work: Work, item: Item, options) -> Outcome:
    """``oasr separate``'s stems of one song, one file each (the first of ``work.formats``, 16-bit), each atomic."""
    from ..pipelines.separate import output_names, separate
    from ..pipelines.separate.writer import StemFiles

    (folder,) = _separate_outputs(work, item)
    fmt = (work.formats or ("wav",))[0]
    names = output_names(tuple(models[0].config.sources), options)
    files = StemFiles({n: folder / f"{n}.{fmt}" for n in names}, fmt)
    result = separate(item.path, models[0], options, files=files, device=work.device, dtype=work.dtype)
    return Outcome([Path(s.path) for s in result.stems], result.duration)


def _tts(models, work: Work, item: Item, options) -> Outcome:
    """``oasr tts -f TEXT -o OUT.wav`` on one UTF-8 text file, the WAV written as it is spoken."""
    from ..formats.wav import PcmWriter, atomic_stream
    from ..io.files import make_parents, remove_empty
    from ..pipelines.tts import prepare

    try:
        text = Path(item.path).read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"{item.path}: not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise InputError(f"{item.path}: {e.strerror or e}") from None
    plan = prepare(text, models[0], options, device=work.device, dtype=work.dtype)
    (path,) = _named_outputs(work, item)
    created, samples = make_parents(path), 0
    try:
        with atomic_stream(path) as out:
            writer = PcmWriter(out, plan.sample_rate, plan.wav_tags)
            for chunk in plan.chunks():
                writer.write(chunk.samples)
                samples += len(chunk.samples)
            writer.finish()
    except BaseException:
        remove_empty(created)
        raise
    return Outcome([path], samples / plan.sample_rate)


register(
    CorpusTask(
        "separate", _separate_models, _options("SeparateOptions"),
        _separate_outputs, _separate, default_formats=("wav",),
    )
)
register(
    CorpusTask(
        "tts", _tts_models, _options("SynthesizeOptions"),
        _named_outputs, _tts, default_formats=("wav",),
    )
)


# --- convert, quantize: checkpoint folders in, bundles out ------------------------------------------


@dataclass(frozen=True)
class ConvertTaskOptions:
    """``oasr convert``'s options for every checkpoint of a batch."""

    architecture: str | None = None  # skip detection: a converter or architecture name
    dtype: str = "auto"  # auto keeps the source precision


@dataclass(frozen=True)
class QuantizeTaskOptions:
    """``oasr quantize``'s options for every model of a batch."""

    scheme: str = "int8"
    keep: tuple[str, ...] = ()  # fnmatch patterns of weights kept in floating point


def _bundle_outputs(work: Work, item: Item) -> list[Path]:
    return [Path(work.outdir) / item.name]


def _into_bundle(work: Work, item: Item, write: Callable[[Path], Any]) -> Outcome:
    """``write(dst)`` (atomic itself) into the input's bundle folder, its missing parents made
    first and taken away again when it fails."""
    from ..io.files import make_parents, remove_empty

    (dst,) = _bundle_outputs(work, item)
    created = make_parents(dst)
    try:
        result = write(dst)
    except BaseException:
        remove_empty(created)
        raise
    return Outcome([dst], status="skipped" if result.status == "skipped" else "done")


def _convert(models, work: Work, item: Item, options: ConvertTaskOptions) -> Outcome:
    from ..conversion.run import convert_one

    return _into_bundle(work, item, lambda dst: convert_one(Path(item.path), dst, architecture=options.architecture, dtype=options.dtype, force=work.force))


def _quantize(models, work: Work, item: Item, options: QuantizeTaskOptions) -> Outcome:
    from ..quant.quantize import quantize

    return _into_bundle(work, item, lambda dst: quantize(item.path, dst, scheme=options.scheme, keep=options.keep, force=work.force))


def _no_models(names):
    return ()


register(CorpusTask("convert", _no_models, ConvertTaskOptions, _bundle_outputs, _convert, folders=True, skips_itself=True))
register(CorpusTask("quantize", _no_models, QuantizeTaskOptions, _bundle_outputs, _quantize, folders=True, skips_itself=True))
