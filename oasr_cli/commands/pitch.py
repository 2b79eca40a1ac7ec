"""oasr pitch [-m MODEL] -f AUDIO [-f AUDIO ...]

Policy only: flags -> PitchOptions, the format asked for and the optional plot, then one
``run_inputs`` (``oasr_cli.inputs``: where each track goes, the inputs, the progress bar). Tracking
is ``oasr.pitch``; the file formats ``oasr.formats.pitch``.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Optional

import typer

from oasr.options import PITCH_DECODERS, PITCH_FMAX, PITCH_FMIN, PITCH_MAX_BATCH, PITCH_MAX_HOP, PITCH_MIN_DB, PITCH_MIN_HOP, PitchOptions

from ..inputs import InputFlags, InputJob, audio_command, flag_values, plan_outputs, plot_option, plot_writer, run_inputs
from ..options import ModelOpt, format_option, from_flags, number_or_none


DEFAULTS = PitchOptions()
Decoder = Enum("Decoder", {name: name for name in PITCH_DECODERS}, type=str)

TRACKING = "Tracking"
OUTPUT = "Output"

EXAMPLES = """Examples:

The F0 of a recording as CSV on stdout (crepe-tiny):
  oasr pitch voice.wav

The more accurate model, every 5 ms, into voice.json:
  oasr pitch -m crepe-full --hop 5 -o voice.json voice.wav

Also draw the contour over a spectrogram (needs the plot extra):
  oasr pitch --plot voice.png -o voice.csv voice.wav

A batch, one track per recording in tracks/:
  oasr pitch --output-dir tracks *.wav
"""


@audio_command("track")
def pitch(
    model: ModelOpt = "auto",
    hop: Annotated[float, typer.Option("--hop", metavar="MS", help=f"Milliseconds between frames ({PITCH_MIN_HOP:g}..{PITCH_MAX_HOP:g}, a multiple of 0.0625).", rich_help_panel=TRACKING)] = DEFAULTS.hop,
    decoder: Annotated[
        Decoder,
        typer.Option("--decoder", help="weighted: CREPE's local average around the argmax; viterbi: torchcrepe's smoothing; argmax: the bin centre.", rich_help_panel=TRACKING),
    ] = Decoder(DEFAULTS.decoder),
    fmin: Annotated[float, typer.Option("--fmin", metavar="HZ", help=f"Lowest frequency considered ({PITCH_FMIN:g} at least).", rich_help_panel=TRACKING)] = DEFAULTS.fmin,
    fmax: Annotated[float, typer.Option("--fmax", metavar="HZ", help=f"Highest frequency considered ({PITCH_FMAX:g} at most).", rich_help_panel=TRACKING)] = DEFAULTS.fmax,
    voicing_threshold: Annotated[
        float,
        typer.Option("--voicing-threshold", metavar="P", help="A frame is voiced when its confidence reaches P (0..1); 0 keeps every frame.", rich_help_panel=TRACKING),
    ] = DEFAULTS.voicing_threshold,
    silence_db: number_or_none("--silence-db", metavar="DB", help=f"Frames quieter than DB dBFS ({PITCH_MIN_DB:g}..0) are unvoiced with confidence 0; none: no gating.", panel=TRACKING) = DEFAULTS.silence_db,
    batch_size: Annotated[
        Optional[int], typer.Option("--batch-size", metavar="N", help=f"Frames per forward pass (1..{PITCH_MAX_BATCH}). Default: by model size and device.", rich_help_panel=TRACKING)
    ] = None,
    output_format: format_option("pitch", "csv (time,frequency,confidence; 0 Hz when unvoiced) or json (with provenance). Default: from -o's extension, else csv.") = None,
    plot: plot_option("the F0 contour over a spectrogram") = None,
    *,
    flags: InputFlags,
) -> None:
    """Track the pitch (F0) of monophonic audio with CREPE: CSV or JSON, one row per frame.

    The CSV goes to stdout unless -o FILE or --output-dir DIR is given; '-' reads the audio from stdin. The default model is crepe-tiny; -m crepe-full is more accurate and about 30 times slower.

    Several inputs run as a batch with the model loaded once: a file that fails is reported on one line and the batch goes on, then exits 1 (--fail-fast stops at the first failure).
    """
    from oasr.formats.pitch import pitch_json
    from oasr.formats.registry import extensions

    plan = plan_outputs(flags, flag_values(output_format), extensions("pitch"), default="csv")
    options = from_flags(PitchOptions, locals())
    job = InputJob(
        task="pitch",
        models=((model, "pitch"),),
        options=options,
        json_line=lambda track: pitch_json(track, indent=None),
        describe=lambda track: f"{len(track.times)} frame(s)",
        plot=plot_writer(plot, flags, _contour),
    )
    run_inputs(flags, plan, job)


def _contour(track, samples) -> bytes:
    from oasr.formats.pitch_plot import plot_png

    return plot_png(track, samples)
