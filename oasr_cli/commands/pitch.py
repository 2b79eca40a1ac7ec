"""oasr pitch [-m MODEL] -f AUDIO [-f AUDIO ...]

Policy only: flags -> PitchOptions, where each track goes (stdout, -o FILE, --output-dir), the
optional plot, batch behaviour (go on past a bad file, summarise, exit 1) and the progress bar.
Tracking is ``oasr.pitch``; the file formats ``oasr.formats.pitch``.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from oasr.errors import InputError
from oasr.options import PITCH_DECODERS, PitchOptions

from ..options import (
    AudioFilesOpt,
    Device,
    DeviceOpt,
    Dtype,
    DtypeOpt,
    FailFastOpt,
    JsonOpt,
    ModelOpt,
    OutputDirOpt,
    OutputOpt,
    QuietOpt,
    VerboseOpt,
)
from ..batch import Batch, file_progress, plan_single_format
from ..output import setup_logging, use_color

log = logging.getLogger("oasr")

DEFAULTS = PitchOptions()
FORMATS = ("csv", "json")
PitchFormat = Enum("PitchFormat", {name: name for name in FORMATS}, type=str)
Decoder = Enum("Decoder", {name: name for name in PITCH_DECODERS}, type=str)

TRACKING = "Tracking"
OUTPUT = "Output"


def _optional_db(text: Any) -> float | None:
    """A level in dBFS, or none/off to switch silence gating off."""
    if text is None or isinstance(text, (int, float)):
        return text
    if text.strip().lower() in ("none", "off"):
        return None
    try:
        return float(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a number (or 'none' to switch gating off)") from None


def pitch(
    audio: Annotated[
        Optional[list[str]],
        typer.Argument(help="More audio files, after those given with -f.", metavar="AUDIO", show_default=False),
    ] = None,
    files: AudioFilesOpt = None,
    model: ModelOpt = "auto",
    hop: Annotated[float, typer.Option("--hop", metavar="MS", help="Milliseconds between frames (a multiple of 0.0625).", rich_help_panel=TRACKING)] = DEFAULTS.hop,
    decoder: Annotated[
        Decoder,
        typer.Option("--decoder", help="weighted: CREPE's local average around the argmax; viterbi: torchcrepe's smoothing; argmax: the bin centre.", rich_help_panel=TRACKING),
    ] = Decoder(DEFAULTS.decoder),
    fmin: Annotated[float, typer.Option("--fmin", metavar="HZ", help="Lowest frequency considered (31.7 at least).", rich_help_panel=TRACKING)] = DEFAULTS.fmin,
    fmax: Annotated[float, typer.Option("--fmax", metavar="HZ", help="Highest frequency considered (2006 at most).", rich_help_panel=TRACKING)] = DEFAULTS.fmax,
    voicing_threshold: Annotated[
        float,
        typer.Option("--voicing-threshold", metavar="P", help="A frame is voiced when its confidence reaches P (0..1); 0 keeps every frame.", rich_help_panel=TRACKING),
    ] = DEFAULTS.voicing_threshold,
    silence_db: Annotated[
        Optional[float],
        typer.Option("--silence-db", parser=_optional_db, metavar="DB", help="Frames quieter than DB dBFS are unvoiced with confidence 0; none: no gating.", rich_help_panel=TRACKING),
    ] = DEFAULTS.silence_db,
    batch_size: Annotated[
        Optional[int], typer.Option("--batch-size", metavar="N", help="Frames per forward pass. Default: by model size and device.", rich_help_panel=TRACKING)
    ] = None,
    output_format: Annotated[
        Optional[PitchFormat],
        typer.Option("--output-format", "-F", help="csv (time,frequency,confidence; 0 Hz when unvoiced) or json (with provenance). Default: from -o's extension, else csv.", rich_help_panel=OUTPUT, show_default=False),
    ] = None,
    output: OutputOpt = None,
    output_dir: OutputDirOpt = None,
    plot: Annotated[
        Optional[Path],
        typer.Option("--plot", metavar="FILE.png", help="Also draw the F0 contour over a spectrogram into FILE.png (one input; needs matplotlib).", rich_help_panel=OUTPUT),
    ] = None,
    json_out: JsonOpt = False,
    device: DeviceOpt = Device.auto,
    dtype: DtypeOpt = Dtype.auto,
    fail_fast: FailFastOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Track the pitch (F0) of monophonic audio with CREPE: CSV or JSON, one row per frame.

    The CSV goes to stdout unless -o FILE or --output-dir DIR is given; '-' reads the audio from stdin. The default model is crepe-tiny; -m crepe-full is more accurate and about 30 times slower.

    Several inputs run as a batch with the model loaded once: a file that fails is reported on one line and the batch goes on, then exits 1 (--fail-fast stops at the first failure).
    """
    sources = [*(files or []), *(audio or [])]
    fmt, routes = _plan_outputs(sources, output_format, output, output_dir, json_out)
    if plot is not None and len(sources) != 1:
        raise typer.BadParameter(f"--plot draws one input, not {len(sources)}")
    try:
        options = PitchOptions(
            hop=hop,
            decoder=decoder.value,
            fmin=fmin,
            fmax=fmax,
            voicing_threshold=voicing_threshold,
            silence_db=silence_db,
            batch_size=batch_size,
        )
    except InputError as e:  # a bad flag value, named in the message
        raise typer.BadParameter(str(e)) from e
    setup_logging(quiet, verbose)
    if plot is not None:
        from oasr.formats.pitch_plot import require_matplotlib

        require_matplotlib()  # before any work: a missing extra is one line, exit 1

    batch = _PitchBatch(sources, routes, fmt, plot, fail_fast, model, options, device.value, dtype.value)
    batch.run(show_progress=not quiet and use_color(sys.stderr))
    batch.exit_if_failed()


def _plan_outputs(sources, requested, output, output_dir, json_out):
    def from_suffix(path: Path) -> str | None:
        suffix = path.suffix.lower().lstrip(".")
        return suffix if suffix in FORMATS else None

    return plan_single_format(
        sources, requested.value if requested is not None else None, formats=FORMATS, default="csv",
        output=output, output_dir=output_dir, json_out=json_out, from_suffix=from_suffix,
    )


class _PitchBatch(Batch):
    """Track each input; ``oasr.pitch`` keeps the model loaded between inputs. An optional plot for one input."""

    def __init__(self, sources, routes, fmt: str, plot: Path | None, fail_fast: bool, model: str, options: PitchOptions, device: str, dtype: str):
        super().__init__(sources, routes, fail_fast)
        self.fmt, self.plot = fmt, plot
        self.model_label, self.options, self.device, self.dtype = model, options, device, dtype

    def process(self, src: str, route, progress) -> None:
        import oasr
        from oasr.io.audio import duration, load_audio
        from oasr.formats.pitch import pitch_json, render_pitch
        from oasr.io.files import atomic_write_bytes, atomic_write_text

        started = time.perf_counter()
        samples = load_audio(src)
        seconds = duration(samples)
        with file_progress(progress, src, seconds) as callback:
            track = oasr.pitch(samples, self.model_label, self.options, device=self.device, dtype=self.dtype, progress=callback)
        track = dataclasses.replace(track, source=src)
        log.info("%s: %.1f s of audio in %.1f s, %d frame(s)", src, seconds, time.perf_counter() - started, len(track.times))
        [(_, path)] = route
        if path is not None:
            atomic_write_text(path, render_pitch(track, self.fmt))
            log.info("wrote %s", path)
        elif self.fmt == "json":  # several inputs: JSON Lines, one compact object per input
            self.emit(src, pitch_json(track, indent=None if len(self.sources) > 1 else 2) + "\n", header=False)
        else:
            self.emit(src, render_pitch(track, self.fmt))
        if self.plot is not None:
            from oasr.formats.pitch_plot import plot_png

            atomic_write_bytes(self.plot, plot_png(track, samples))
            log.info("wrote %s", self.plot)
