"""oasr diarize AUDIO... [-o out.rttm] [--plot timeline.png [--ref REF.rttm]]

Policy only: flags -> DiarizeOptions, the format asked for and the optional plot, then one
``run_inputs`` (``oasr_cli.inputs``: where the turns go, the inputs, the progress bar).
Diarization is ``oasr.diarize``; the file formats ``oasr.formats.turns``; the plot
``oasr.pipelines.diarize.plot``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from oasr.options import DIARIZE_MAX_STEP, DIARIZE_MIN_STEP, DiarizeOptions

from ..inputs import InputFlags, InputJob, audio_command, flag_values, plan_outputs, plot_option, plot_writer, run_inputs
from ..options import format_option, from_flags, model_option, usage
from ..speakers import SPEAKERS, MaxSpeakersOpt, MinSpeakersOpt, NumSpeakersOpt, SpeakerNamesOpt, names

DEFAULTS = DiarizeOptions()

SEGMENTATION = "Segmentation"
MODELS = "Models"
OUTPUT = "Output"

EXAMPLES = """Examples:

Who spoke when, as RTTM on stdout (overlapping speech gives overlapping turns):
  oasr diarize meeting.wav

A meeting of exactly three speakers, one speaker at a time, as CSV (start,end,speaker):
  oasr diarize --num-speakers 3 --exclusive -F csv meeting.wav

Two to four speakers, the first two to speak named:
  oasr diarize --min-speakers 2 --max-speakers 4 --speaker-names Alice,Bob meeting.wav

A timeline picture, with the reference drawn beneath:
  oasr diarize --plot timeline.png --ref meeting.rttm -o hyp.rttm meeting.wav

One RTTM of a batch, then its diarization error rate against a reference:
  oasr diarize -o hyp.rttm *.wav
  oasr eval der --ref ref.rttm --hyp hyp.rttm
"""


@audio_command("diarize")
def diarize(
    num_speakers: NumSpeakersOpt = None,
    min_speakers: MinSpeakersOpt = DEFAULTS.min_speakers,
    max_speakers: MaxSpeakersOpt = None,
    speaker_names: SpeakerNamesOpt = None,
    threshold: Annotated[
        Optional[float],
        typer.Option("--threshold", metavar="DIST", help="Cosine distance (0..2) at which clusters of local speakers stop merging; lower finds more speakers. Default: the value tuned for the embedding model.", rich_help_panel=SPEAKERS),
    ] = DEFAULTS.threshold,
    exclusive: Annotated[bool, typer.Option("--exclusive", help="One speaker at a time: overlapped speech goes to the most active speaker.", rich_help_panel=SEGMENTATION)] = DEFAULTS.exclusive,
    onset: Annotated[
        float,
        typer.Option("--onset", metavar="P", help="A local speaker is active where its probability reaches P (0..1); lower finds more quiet speech.", rich_help_panel=SEGMENTATION),
    ] = DEFAULTS.onset,
    step: Annotated[
        float,
        typer.Option("--step", metavar="SECONDS", help=f"Time between the 10 s segmentation windows ({DIARIZE_MIN_STEP:g}..{DIARIZE_MAX_STEP:g}); smaller is slower and smoother.", rich_help_panel=SEGMENTATION),
    ] = DEFAULTS.step,
    segmentation_model: model_option("--segmentation-model", "speaker-segmentation", "speaker segmentation model", MODELS, "oasr.diarize") = None,
    embedding_model: model_option("--embedding-model", "speaker-embedding", "speaker embedding model", MODELS, "oasr.diarize") = None,
    output_format: format_option(
        "turns", "rttm, json (with provenance) or csv (start,end,speaker; several inputs: one CSV with a file column first). Default: from -o's extension, else rttm."
    ) = None,
    plot: plot_option("the timeline (a lane per speaker)") = None,
    ref: Annotated[
        Optional[Path],
        typer.Option("--ref", metavar="REF.rttm", help="With --plot: draw this reference beneath (its turns of the input's file id, or all when it holds one file).", rich_help_panel=OUTPUT),
    ] = None,
    *,
    flags: InputFlags,
) -> None:
    """Who spoke when, overlaps included: pyannote segmentation-3.0 over 10 s windows, a speaker embedding per local speaker (CAM++; ge2e-speaker, ecapa-voxceleb or a WeSpeaker ResNet with --embedding-model), clustering across windows.

    RTTM goes to stdout unless -o FILE or --output-dir DIR is given. Several inputs run as a batch with the models loaded once; their RTTM turns can share one -o FILE (each line names its file), and on stdout CSV turns make one CSV with a file column. A file that fails is reported on one line and the batch goes on, then exits 1 (--fail-fast stops at the first failure).
    """
    from oasr.formats.registry import extensions
    from oasr.formats.turns import render_turns, turns_csv, turns_json
    from oasr.pipelines.file_tasks import file_task

    plan = plan_outputs(flags, flag_values(output_format), extensions("turns"), default="rttm", shared_file_format="rttm")
    if ref is not None and plot is None:
        raise usage("--ref is drawn by --plot; give --plot FILE.png too")
    options = from_flags(DiarizeOptions, locals(), speaker_names=names(speaker_names))
    name = "stdin" if flags.sources and flags.sources[0] == "-" else Path(flags.sources[0]).name if flags.sources else None
    draw = plot_writer(plot, flags, lambda turns, samples: _timeline(turns, reference, name))
    reference = _reference_turns(ref, flags.sources[0]) if ref is not None else None

    job = InputJob(
        task="diarize",
        models=file_task("diarize").models({"segmentation_model": segmentation_model, "embedding_model": embedding_model}),
        options=options,
        json_line=lambda turns: turns_json(turns, indent=None),
        describe=lambda turns: f"{len(turns.speakers)} speaker(s), {len(turns.turns)} turn(s)",
        joined={  # RTTM lines name their file; one CSV of several inputs has a file column
            "rttm": lambda turns, first: render_turns(turns, "rttm"),
            "csv": lambda turns, first: turns_csv(turns, file_column=True, header=first),
        },
        plot=draw,
    )
    run_inputs(flags, plan, job)


def _timeline(turns, reference, name: str | None) -> bytes:
    from oasr.pipelines.diarize.plot import timeline_png

    return timeline_png(turns, reference, name)


def _reference_turns(path: Path, source: str):
    """The reference's turns for ``source``: of its file id (the input's stem), or all of them
    when the RTTM holds one file."""
    from oasr.formats.rttm import read_rttm

    files = read_rttm(path)
    stem = Path(str(source)).stem
    if stem in files:
        return files[stem]
    if len(files) == 1:
        return next(iter(files.values()))
    raise usage(f"--ref {path} holds {len(files)} files and none is {stem!r}")
