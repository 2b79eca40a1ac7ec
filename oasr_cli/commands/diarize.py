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
from ..batch import Batch, file_progress, plan_single_format
from ..output import setup_logging, use_color

log = logging.getLogger("oasr")

DEFAULTS = DiarizeOptions()
FORMATS = ("rttm", "json", "csv")
TurnFormat = Enum("TurnFormat", {name: name for name in FORMATS}, type=str)
Clustering = Enum("Clustering", {name: name for name in CLUSTERING}, type=str)

SPEAKERS = "Speakers"
SEGMENTATION = "Segmentation"
MODELS = "Models"
OUTPUT = "Output"


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
    batch = _DiarizeBatch(sources, routes, fmt, fail_fast, (vad_model, embedding_model), options, device.value)
    batch.run(show_progress=not quiet and use_color(sys.stderr))
    batch.exit_if_failed()


def _plan_outputs(sources, requested, output, output_dir, json_out):
    from oasr.formats.turns import turn_format_from_suffix

    return plan_single_format(
        sources, requested.value if requested is not None else None, formats=FORMATS, default="rttm",
        output=output, output_dir=output_dir, json_out=json_out, from_suffix=turn_format_from_suffix,
        shared_file_format="rttm",
    )


class _DiarizeBatch(Batch):
    """Diarize each input; ``oasr.diarize`` keeps the models loaded between inputs. RTTM turns
    bound for one shared file are written once, at the end."""

    def __init__(self, sources, routes, fmt: str, fail_fast: bool, models: tuple[str, str], options: DiarizeOptions, device: str):
        super().__init__(sources, routes, fail_fast)
        self.fmt = fmt
        self.models, self.options, self.device = models, options, device
        shared = [path for [(_, path)] in routes if path is not None]
        self.shared = shared[0] if len(sources) > 1 and len(set(shared)) == 1 and len(shared) == len(sources) else None
        self.collected: list[str] = []  # RTTM text per input for the shared file

    def process(self, src: str, route, progress) -> None:
        import oasr
        from oasr.io.audio import duration, load_audio
        from oasr.formats.turns import render_turns, turns_json
        from oasr.io.files import atomic_write_text

        vad_model, embedding_model = self.models
        started = time.perf_counter()
        samples = load_audio(src)
        seconds = duration(samples)
        with file_progress(progress, src, seconds) as callback:
            turns = oasr.diarize(
                samples, self.options, vad_model=vad_model, embedding_model=embedding_model, device=self.device, progress=callback
            )
        turns = dataclasses.replace(turns, source=src)
        log.info(
            "%s: %.1f s of audio in %.1f s, %d speaker(s), %d turn(s)",
            src, seconds, time.perf_counter() - started, len(turns.speakers), len(turns.turns),
        )
        [(_, path)] = route
        if self.shared is not None:
            self.collected.append(render_turns(turns, "rttm"))
        elif path is not None:
            atomic_write_text(path, render_turns(turns, self.fmt))
            log.info("wrote %s", path)
        elif self.fmt == "json":  # several inputs: JSON Lines, one compact object per input
            self.emit(src, turns_json(turns, indent=None if len(self.sources) > 1 else 2) + "\n", header=False)
        else:  # RTTM lines name their file already
            self.emit(src, render_turns(turns, self.fmt), header=self.fmt != "rttm")

    def finish(self) -> None:
        from oasr.io.files import atomic_write_text

        if self.shared is not None and self.collected:
            atomic_write_text(self.shared, "".join(self.collected))
            log.info("wrote %s", self.shared)
