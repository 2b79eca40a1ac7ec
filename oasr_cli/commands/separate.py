"""oasr separate SONG [SONG ...] [-m htdemucs] [-o DIR] [--two-stems X | --stems a,b] ...

Policy only: flags -> SeparateOptions and where each stem goes (``DIR/<model>/<track>/<stem>.<ext>``
as demucs lays it out, or a --filename template), then one ``oasr.separate`` per song with the
model loaded once. The input runner's rules (``oasr_cli.inputs``): every input is checked before
the model loads, a failed song is one line and the rest go on (--fail-fast stops), exit 1 at the end.
stdout lists the files written (--json: a JSON report per song, JSON Lines for several).
"""

from __future__ import annotations

import json
import logging
import string
import sys
import time
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from oasr.options import SEPARATE_CLIPS, SEPARATE_MAX_BATCH, SEPARATE_MAX_SHIFTS, SeparateOptions
from oasr.threads import set_threads

from ..options import MAX_AUDIO_SECONDS, DeviceOpt, Device, Dtype, DtypeOpt, FailFastOpt, JsonOpt, MaxAudioOpt, ModelOpt, QuietOpt, ThreadsOpt, VerboseOpt, format_choices, from_flags, usage

log = logging.getLogger("oasr")

DEFAULTS = SeparateOptions()
DEFAULT_TEMPLATE = "{track}/{stem}.{ext}"
TEMPLATE_FIELDS = ("track", "trackext", "stem", "ext", "model")
Clip = Enum("Clip", {name: name for name in SEPARATE_CLIPS}, type=str)
Format = format_choices("stems")

SEPARATION = "Separation"
OUTPUT = "Output"

EXAMPLES = """Examples:

Four stems of a song into separated/htdemucs/song/{drums,bass,other,vocals}.wav:
  oasr separate song.mp3

Vocals and the accompaniment only, as 24-bit FLAC, into stems/:
  oasr separate --two-stems vocals --format flac --int24 -o stems song.wav

The fine-tuned bag, two shifts, files named song_vocals.wav:
  oasr separate -m htdemucs_ft --shifts 2 --filename "{track}_{stem}.{ext}" *.wav
"""


def model_label(model: str, loaded=None) -> str:
    """The <model> folder, as demucs names it after its model: the registry name (``auto`` and a
    bundle of the oasr cache too: the name it came from), or a checkpoint's or bundle's own name."""
    path = Path(model)
    if not (path.suffix in (".th", ".yaml", ".yml") or len(path.parts) > 1 or path.exists()):
        if model != "auto" or loaded is None:
            return model
    origin = _origin_name(loaded) if loaded is not None else None
    if origin:
        return origin
    return path.stem if path.suffix in (".th", ".yaml", ".yml") else path.resolve().name


def _origin_name(loaded) -> str | None:
    """The registry name a loaded bundle of the oasr cache was fetched as, else None."""
    from oasr.hub.resolve import bundle_origin

    identity = getattr(loaded, "identity", None)
    record = bundle_origin(identity.bundle) if identity is not None and identity.bundle else None
    name = (record or {}).get("name")
    return name if name and name != "local" else None  # "local": converted from a path, named by it


def _fetched(model: str, accept_license: bool, quiet: bool) -> str:
    """The bundle of ``model``, fetched with its licence accepted (what -m then loads)."""
    import oasr
    from oasr_cli.output import hub_progress, interactive

    with hub_progress(interactive(quiet)) as progress:
        return str(oasr.resolve_model(model, task="separate", accept_license=accept_license, progress=progress))


def stem_paths(out: Path, template: str, model: str, song: str, names, ext: str) -> dict[str, Path]:
    """stem -> DIR/<model>/<template filled in>, each a plain path inside DIR/<model>."""
    from oasr.errors import InputError
    from oasr.io.files import inside

    name = "stdin" if song == "-" else Path(song).name
    track, _, trackext = name.rpartition(".") if "." in name else (name, "", "")
    folder = out / model
    paths = {}
    for stem in names:
        rendered = template.format(track=track, trackext=trackext, stem=stem, ext=ext, model=model)
        paths[stem] = inside(folder, rendered, what="--filename", error=InputError)
    return paths


def _check_template(template: str) -> None:
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as e:
        raise usage(f"--filename {template!r}: {e}") from e
    unknown = [f for f in fields if f not in TEMPLATE_FIELDS]
    if unknown:
        raise usage(f"--filename knows {{{'}, {'.join(TEMPLATE_FIELDS)}}}, not {{{unknown[0]}}}")
    if "stem" not in fields:
        raise usage("--filename must contain {stem}: every stem needs its own file")


def separate(
    songs: Annotated[Optional[list[str]], typer.Argument(help="Songs to separate ('-' reads stdin).", metavar="SONG", show_default=False)] = None,
    model: ModelOpt = "htdemucs",
    out: Annotated[Path, typer.Option("--out", "-o", metavar="DIR", help="Folder of the results: DIR/<model>/<track>/<stem>.<ext>.", rich_help_panel=OUTPUT)] = Path("separated"),
    filename: Annotated[str, typer.Option("--filename", metavar="TEMPLATE", help=f"Path of each stem under DIR/<model>, from {{{'}, {'.join(TEMPLATE_FIELDS)}}}.", rich_help_panel=OUTPUT)] = DEFAULT_TEMPLATE,
    two_stems: Annotated[Optional[str], typer.Option("--two-stems", metavar="STEM", help="Write STEM and no_STEM (the sum of the others) only.", rich_help_panel=SEPARATION)] = None,
    stems: Annotated[Optional[str], typer.Option("--stems", metavar="A,B", help="Write only these stems (comma-separated).", rich_help_panel=SEPARATION)] = None,
    output_format: Annotated[Format, typer.Option("--format", help="wav or flac.", rich_help_panel=OUTPUT)] = Format.wav,
    float32: Annotated[bool, typer.Option("--float32", help="32-bit float samples (wav only).", rich_help_panel=OUTPUT)] = False,
    int24: Annotated[bool, typer.Option("--int24", help="24-bit integer samples (default: 16-bit).", rich_help_panel=OUTPUT)] = False,
    clip: Annotated[Clip, typer.Option("--clip", help="rescale: divide a stem that would clip by its peak x 1.01; clamp: cut at +-0.99; none.", rich_help_panel=OUTPUT)] = Clip(DEFAULTS.clip),
    segment: Annotated[Optional[float], typer.Option("--segment", metavar="S", help="Seconds per window (default and most: the model's).", rich_help_panel=SEPARATION)] = None,
    overlap: Annotated[float, typer.Option("--overlap", metavar="F", help="Share of a window overlapping the next (0 <= F < 1).", rich_help_panel=SEPARATION)] = DEFAULTS.overlap,
    shifts: Annotated[int, typer.Option("--shifts", metavar="N", help=f"Random shifts averaged (0..{SEPARATE_MAX_SHIFTS}); each costs one more pass.", rich_help_panel=SEPARATION)] = DEFAULTS.shifts,
    seed: Annotated[int, typer.Option("--seed", metavar="N", help="Seed of the shifts.", rich_help_panel=SEPARATION)] = DEFAULTS.seed,
    batch_size: Annotated[int, typer.Option("--batch-size", metavar="N", help=f"Windows per forward pass (1..{SEPARATE_MAX_BATCH}).", rich_help_panel=SEPARATION)] = DEFAULTS.batch_size,
    low_memory: Annotated[
        bool,
        typer.Option("--low-memory", help="Give each freed window buffer back to the system at once: about a quarter less peak memory, about 1.5x slower.", rich_help_panel=SEPARATION),
    ] = False,
    accept_license: Annotated[
        bool,
        typer.Option("--accept-license", help="Accept the licence of a non-commercial model (demucs' weights are for research use only: read it first) so it can be fetched. Example: oasr separate --accept-license song.mp3."),
    ] = False,
    json_out: JsonOpt = False,
    device: DeviceOpt = Device.auto,
    dtype: DtypeOpt = Dtype.auto,
    threads: ThreadsOpt = None,
    max_audio_seconds: MaxAudioOpt = MAX_AUDIO_SECONDS,
    fail_fast: FailFastOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Separate songs into stems (drums, bass, other, vocals; guitar and piano with htdemucs_6s) with HTDemucs.

    Each stem is written at the model's rate (44.1 kHz stereo) as it is separated, so a long track costs little memory; each file appears whole or not at all. The default model is htdemucs; -m takes a bundle, a demucs .th or bag yaml, or a registry name.

    Several songs run as a batch with the model loaded once: a song that fails is reported on one line and the batch goes on, then exits 1 (--fail-fast stops at the first failure).
    """
    from oasr_cli.inputs import InputFlags, InputRun, Plan, file_progress, load_models, progress_bar
    from oasr_cli.output import interactive, setup_logging

    songs = list(songs or [])
    if not songs:
        raise usage("no song to separate: pass SONG ('-' reads stdin)")
    if songs.count("-") > 1:
        raise usage("stdin ('-') can be read only once")
    if float32 and int24:
        raise usage("--float32 and --int24 do not go together")
    encoding = "float32" if float32 else "int24" if int24 else "int16"
    if output_format == Format.flac and float32:
        raise usage("FLAC holds integer samples only: use --int24 (or --format wav with --float32)")
    _check_template(filename)
    wanted = tuple(s.strip() for s in stems.split(",")) if stems is not None else None
    options = from_flags(SeparateOptions, locals(), stems=wanted)
    setup_logging(quiet, verbose)
    set_threads(threads)
    from oasr.io.audio import set_max_seconds

    set_max_seconds(max_audio_seconds)

    flags = InputFlags(songs, None, None, json_out, device.value, dtype.value, fail_fast, quiet, verbose, "separate", threads, max_audio_seconds)
    run = InputRun(flags, Plan([[] for _ in songs]))
    pending = run.check()
    if pending:
        import oasr
        from oasr.pipelines.separate import output_names
        from oasr.heap import return_freed_buffers
        from oasr.pipelines.separate.writer import StemFiles

        if low_memory:  # the setting is process-wide, and this process is ours
            return_freed_buffers()

        spec = _fetched(model, accept_license, quiet) if accept_license else model
        (loaded,) = load_models(((spec, "separate"),), flags)
        names = output_names(tuple(loaded.config.sources), options)
        label = model_label(model, loaded)
        with progress_bar(interactive(quiet), status=not quiet) as bar:

            def one(src: str, route) -> None:
                files = StemFiles(stem_paths(out, filename, label, src, names, output_format.value), output_format.value, encoding)
                started = time.perf_counter()
                with file_progress(bar, src, 0.0) as callback:
                    result = oasr.separate(src, loaded, options, files=files, device=flags.device, dtype=flags.dtype, progress=callback)
                log.info("%s: %.1f s of audio in %.1f s, %d stem(s)", src, result.duration, time.perf_counter() - started, len(result.stems))
                _print(result, json_out, several=len(songs) > 1)

            run.each(pending, one)
    run.exit_if_failed()


def _print(result, json_out: bool, several: bool) -> None:
    if json_out:
        data = result.to_dict()
        sys.stdout.write(json.dumps(data, indent=None if several else 2) + "\n")
    else:
        sys.stdout.write("".join(f"{stem.path}\n" for stem in result.stems))
    sys.stdout.flush()
