"""oasr diarize AUDIO... [-o out.rttm]

Policy only: flags -> DiarizeOptions, where the turns go (stdout, -o FILE, --output-dir), batch
behaviour (go on past a bad file, summarise, exit 1) and the progress bar. Diarization is
``oasr.diarize``; the file formats ``oasr.formats.turns``.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from oasr.errors import InputError
from oasr.options import CLUSTERING, DiarizeOptions

from ..options import (
    AudioFilesOpt,
    Device,
    DeviceOpt,
    FailFastOpt,
    JsonOpt,
    OutputDirOpt,
    OutputOpt,
    QuietOpt,
    VerboseOpt,
)
from ..output import setup_logging, use_color
from .transcribe import _Batch, _fatal_errors, _file_progress, _progress

log = logging.getLogger("oasr")

DEFAULTS = DiarizeOptions()
FORMATS = ("rttm", "json", "csv")
TurnFormat = Enum("TurnFormat", {name: name for name in FORMATS}, type=str)
Clustering = Enum("Clustering", {name: name for name in CLUSTERING}, type=str)

SPEAKERS = "Speakers"
SEGMENTATION = "Segmentation"
MODELS = "Models"
OUTPUT = "Output"
DASH = "-"


def diarize(
    audio: Annotated[
        Optional[list[str]],
        typer.Argument(help="Audio files ('-' reads stdin).", metavar="AUDIO", show_default=False),
    ] = None,
    files: AudioFilesOpt = None,
    num_speakers: Annotated[
        Optional[int], typer.Option("--num-speakers", metavar="N", help="Exactly N speakers (skips the estimate).", rich_help_panel=SPEAKERS)
    ] = None,
    min_speakers: Annotated[
        int, typer.Option("--min-speakers", metavar="N", help="The estimated count is at least N.", rich_help_panel=SPEAKERS)
    ] = DEFAULTS.min_speakers,
    max_speakers: Annotated[
        Optional[int],
        typer.Option("--max-speakers", metavar="N", help="The estimated count is at most N. Default: 8 (spectral), none (agglomerative).", rich_help_panel=SPEAKERS),
    ] = None,
    clustering: Annotated[
        Clustering,
        typer.Option("--clustering", help="spectral: the speaker count from the eigengap; agglomerative: merge until --threshold.", rich_help_panel=SPEAKERS),
    ] = Clustering(DEFAULTS.clustering),
    threshold: Annotated[
        float,
        typer.Option("--threshold", metavar="DIST", help="agglomerative: cosine distance (0..2) at which speakers stop merging; lower finds more speakers.", rich_help_panel=SPEAKERS),
    ] = DEFAULTS.threshold,
    window: Annotated[float, typer.Option("--window", metavar="SECONDS", help="Speech per speaker embedding.", rich_help_panel=SEGMENTATION)] = DEFAULTS.window,
    step: Annotated[float, typer.Option("--step", metavar="SECONDS", help="Time between embedding windows.", rich_help_panel=SEGMENTATION)] = DEFAULTS.step,
    min_turn: Annotated[
        float, typer.Option("--min-turn", metavar="SECONDS", help="Shorter turns next to another speaker's are given to it.", rich_help_panel=SEGMENTATION)
    ] = DEFAULTS.min_turn,
    merge_gap: Annotated[
        float, typer.Option("--merge-gap", metavar="SECONDS", help="Turns of one speaker closer than this are joined.", rich_help_panel=SEGMENTATION)
    ] = DEFAULTS.merge_gap,
    vad_threshold: Annotated[
        float, typer.Option("--vad-threshold", metavar="P", help="Speech probability (0..1) at which Silero VAD starts a speech region.", rich_help_panel=SEGMENTATION)
    ] = DEFAULTS.vad.threshold,
    vad_model: Annotated[
        str, typer.Option("--vad-model", metavar="MODEL", help="The voice activity model: a registry name, bundle or checkpoint.", rich_help_panel=MODELS)
    ] = "silero-vad",
    embedding_model: Annotated[
        str, typer.Option("--embedding-model", metavar="MODEL", help="The speaker embedding model: a registry name, bundle or checkpoint.", rich_help_panel=MODELS)
    ] = "ge2e-speaker",
    output_format: Annotated[
        Optional[TurnFormat],
        typer.Option("--output-format", "-F", help="rttm, json (with provenance) or csv (start,end,speaker). Default: from -o's extension, else rttm.", rich_help_panel=OUTPUT, show_default=False),
    ] = None,
    output: OutputOpt = None,
    output_dir: OutputDirOpt = None,
    json_out: JsonOpt = False,
    device: DeviceOpt = Device.auto,
    fail_fast: FailFastOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Who spoke when: speaker turns from Silero VAD, GE2E speaker embeddings and clustering.

    RTTM goes to stdout unless -o FILE or --output-dir DIR is given. Several inputs run as a batch with the models loaded once; their RTTM turns can share one -o FILE (each line names its file). A file that fails is reported on one line and the batch goes on, then exits 1 (--fail-fast stops at the first failure).
    """
    sources = [*(files or []), *(audio or [])]
    fmt, routes = _plan_outputs(sources, output_format, output, output_dir, json_out)
    try:
        options = DiarizeOptions(
            clustering=clustering.value,
            num_speakers=num_speakers,
            min_speakers=min_speakers,
            max_speakers=max_speakers,
            threshold=threshold,
            window=window,
            step=step,
            min_turn=min_turn,
            merge_gap=merge_gap,
            vad=dataclasses.replace(DEFAULTS.vad, threshold=vad_threshold),
        )
    except InputError as e:  # a bad flag value, named in the message
        raise typer.BadParameter(str(e)) from e
    setup_logging(quiet, verbose)
    batch = _DiarizeBatch(sources, routes, fmt, fail_fast)
    batch.run((vad_model, embedding_model), options, device.value, show_progress=not quiet and use_color(sys.stderr))
    if batch.failed:
        if len(sources) > 1:
            typer.echo(f"oasr: {len(batch.failed)} of {len(sources)} file(s) failed: {', '.join(batch.failed)}", err=True)
        raise typer.Exit(1)


def _plan_outputs(sources, requested, output, output_dir, json_out) -> tuple[str, list[Path | None]]:
    """The format, and for each source its output path (None: stdout; one shared path: RTTM)."""

    def usage(message: str, hint: str | None = None) -> typer.BadParameter:
        return typer.BadParameter(message, param_hint=hint)

    from oasr.formats.turns import turn_format_from_suffix

    if not sources:
        raise usage("give at least one audio file (AUDIO, or - for stdin)")
    if sources.count(DASH) > 1:
        raise usage("stdin ('-') can be read only once")
    fmt = requested.value if requested is not None else None
    to_stdout = output is not None and str(output) == DASH
    out_file = output if output is not None and not to_stdout else None
    if out_file is not None and output_dir is not None:
        raise usage("give -o FILE or --output-dir DIR, not both")
    if json_out:
        if out_file is not None or output_dir is not None:
            raise usage("--json prints JSON on stdout; to write JSON files use -F json with -o or --output-dir")
        if fmt not in (None, "json"):
            raise usage("--json prints the JSON format; drop -F (or use -F json)")
        fmt = "json"
    if output_dir is not None:
        fmt = fmt or "rttm"
        if output_dir.exists() and not output_dir.is_dir():
            raise usage(f"{output_dir} exists and is not a directory", "'--output-dir'")
        seen: dict[Path, str] = {}
        routes: list[Path | None] = []
        for src in sources:
            path = output_dir / f"{'stdin' if src == DASH else Path(src).stem}.{fmt}"
            if path in seen:
                raise usage(f"{seen[path]} and {src} would both write {path}; process them separately")
            seen[path] = src
            routes.append(path)
        return fmt, routes
    if out_file is not None:
        if out_file.is_dir():
            raise usage(f"{out_file} is a directory; use --output-dir {out_file}", "'-o' / '--output'")
        fmt = fmt or turn_format_from_suffix(out_file)
        if fmt is None:
            raise usage(f"cannot tell the format from {out_file.name!r}; add -F {'|'.join(FORMATS)}", "'-o' / '--output'")
        if len(sources) > 1 and fmt != "rttm":
            raise usage(f"-o {out_file} takes one input in {fmt}; several share one file only as RTTM (or use --output-dir DIR)")
        return fmt, [out_file for _ in sources]
    return fmt or "rttm", [None for _ in sources]


class _DiarizeBatch(_Batch):
    """Transcribe's batch loop (cheap checks first, fatal model errors stop, others go on) for
    diarization; RTTM turns bound for one shared file are written once, at the end."""

    def __init__(self, sources: list[str], routes: list[Path | None], fmt: str, fail_fast: bool):
        super().__init__(sources, [[(fmt, path)] for path in routes], None, fail_fast)
        self.fmt = fmt
        shared = [p for p in routes if p is not None]
        self.shared = shared[0] if len(sources) > 1 and len(set(shared)) == 1 and len(shared) == len(sources) else None
        self.collected: list[str] = []  # RTTM text per input for the shared file

    def run(self, models: tuple[str, str], options: DiarizeOptions, device: str, show_progress: bool) -> None:
        from oasr.audio import STDIN, check_audio_path
        from oasr.fsutil import atomic_write_text

        pending = []
        for src, targets in zip(self.sources, self.routes):
            if src != STDIN:
                try:
                    check_audio_path(src)
                except InputError as e:
                    if self._fail(src, e):
                        return
                    continue
            for _, path in targets:
                if path is not None:
                    path.parent.mkdir(parents=True, exist_ok=True)
            pending.append((src, targets))
        if not pending:
            return
        with _progress(show_progress) as progress:
            for src, targets in pending:
                try:
                    self._diarize(src, targets, models, options, device, progress)
                except _fatal_errors():
                    raise
                except Exception as e:
                    if self._fail(src, e):
                        break
        if self.shared is not None and self.collected:
            atomic_write_text(self.shared, "".join(self.collected))
            log.info("wrote %s", self.shared)

    def _diarize(self, src, targets, models, options, device, progress) -> None:
        import oasr
        from oasr.audio import duration, load_audio
        from oasr.formats.turns import render_turns
        from oasr.fsutil import atomic_write_text

        vad_model, embedding_model = models
        started = time.perf_counter()
        samples = load_audio(src)
        seconds = duration(samples)
        with _file_progress(progress, src, seconds) as callback:
            turns = oasr.diarize(
                samples, options, vad_model=vad_model, embedding_model=embedding_model, device=device, progress=callback
            )
        turns = dataclasses.replace(turns, source=src)
        log.info(
            "%s: %.1f s of audio in %.1f s, %d speaker(s), %d turn(s)",
            src, seconds, time.perf_counter() - started, len(turns.speakers), len(turns.turns),
        )
        [(_, path)] = targets
        if path is None:
            self._print_turns(src, turns)
        elif self.shared is not None:
            self.collected.append(render_turns(turns, "rttm"))
        else:
            atomic_write_text(path, render_turns(turns, self.fmt))
            log.info("wrote %s", path)

    def _print_turns(self, src: str, turns) -> None:
        from oasr.formats.turns import render_turns, turns_json

        several = len(self.sources) > 1
        if self.fmt == "json":  # several inputs: JSON Lines, one compact object per input
            text = (turns_json(turns, indent=None) if several else turns_json(turns)) + "\n"
        else:
            text = render_turns(turns, self.fmt)
            if several and self.fmt != "rttm":  # RTTM lines name their file already
                text = ("\n" if self._printed else "") + f"==> {src} <==\n" + text
        sys.stdout.write(text)
        sys.stdout.flush()
        self._printed += 1
