"""oasr diarize AUDIO... [-o out.rttm]

Policy only: flags -> DiarizeOptions and the format asked for, then one ``run_batch``
(``oasr_cli.batch``: where the turns go, the batch, the progress bar). Diarization is
``oasr.diarize``; the file formats ``oasr.formats.turns``.
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Annotated, Optional

import typer

from oasr.formats.turns import TURN_FORMATS
from oasr.options import (
    CLUSTERING,
    DIARIZE_MAX_WINDOW,
    DIARIZE_MIN_STEP,
    DIARIZE_MIN_WINDOW,
    MAX_SPEAKERS,
    MAX_TURN_SECONDS,
    DiarizeOptions,
)

from ..batch import BatchFlags, Job, batch_command, flag_values, plan_outputs, run_batch
from ..options import checked, from_flags, model_spec

DEFAULTS = DiarizeOptions()
TurnFormat = Enum("TurnFormat", {name: name for name in TURN_FORMATS}, type=str)
Clustering = Enum("Clustering", {name: name for name in CLUSTERING}, type=str)

SPEAKERS = "Speakers"
SEGMENTATION = "Segmentation"
MODELS = "Models"
OUTPUT = "Output"

EXAMPLES = """Examples:

Who spoke when, as RTTM on stdout:
  oasr diarize meeting.wav

A meeting of exactly three speakers, as CSV (start,end,speaker):
  oasr diarize --num-speakers 3 -F csv meeting.wav

One RTTM of a batch, then its diarization error rate against a reference:
  oasr diarize -o hyp.rttm *.wav
  oasr eval der --ref ref.rttm --hyp hyp.rttm
"""


@batch_command("diarize")
def diarize(
    num_speakers: Annotated[
        Optional[int], typer.Option("--num-speakers", metavar="N", help=f"Exactly N speakers, 1..{MAX_SPEAKERS} (skips the estimate).", rich_help_panel=SPEAKERS)
    ] = None,
    min_speakers: Annotated[
        int, typer.Option("--min-speakers", metavar="N", help=f"The estimated count is at least N (1..{MAX_SPEAKERS}).", rich_help_panel=SPEAKERS)
    ] = DEFAULTS.min_speakers,
    max_speakers: Annotated[
        Optional[int],
        typer.Option("--max-speakers", metavar="N", help=f"The estimated count is at most N (up to {MAX_SPEAKERS}). Default: 8 (spectral), none (agglomerative).", rich_help_panel=SPEAKERS),
    ] = None,
    clustering: Annotated[
        Clustering,
        typer.Option("--clustering", help="spectral: the speaker count from the eigengap; agglomerative: merge until --threshold.", rich_help_panel=SPEAKERS),
    ] = Clustering(DEFAULTS.clustering),
    threshold: Annotated[
        float,
        typer.Option("--threshold", metavar="DIST", help="agglomerative: cosine distance (0..2) at which speakers stop merging; lower finds more speakers.", rich_help_panel=SPEAKERS),
    ] = DEFAULTS.threshold,
    window: Annotated[float, typer.Option("--window", metavar="SECONDS", help=f"Speech per speaker embedding ({DIARIZE_MIN_WINDOW:g}..{DIARIZE_MAX_WINDOW:g}).", rich_help_panel=SEGMENTATION)] = DEFAULTS.window,
    step: Annotated[float, typer.Option("--step", metavar="SECONDS", help=f"Time between embedding windows (at least {DIARIZE_MIN_STEP:g}, at most --window).", rich_help_panel=SEGMENTATION)] = DEFAULTS.step,
    min_turn: Annotated[
        float, typer.Option("--min-turn", metavar="SECONDS", help=f"Shorter turns next to another speaker's are given to it (0..{MAX_TURN_SECONDS:g}).", rich_help_panel=SEGMENTATION)
    ] = DEFAULTS.min_turn,
    merge_gap: Annotated[
        float, typer.Option("--merge-gap", metavar="SECONDS", help=f"Turns of one speaker closer than this are joined (0..{MAX_TURN_SECONDS:g}).", rich_help_panel=SEGMENTATION)
    ] = DEFAULTS.merge_gap,
    vad_threshold: Annotated[
        float, typer.Option("--vad-threshold", metavar="P", help="Speech probability (0..1) at which Silero VAD starts a speech region.", rich_help_panel=SEGMENTATION)
    ] = DEFAULTS.vad.threshold,
    vad_model: Annotated[
        Optional[str],
        typer.Option("--vad-model", metavar="MODEL", help="The voice activity model: a registry name (oasr models list --task vad), bundle or checkpoint. Default: the one oasr.diarize uses.", rich_help_panel=MODELS, callback=model_spec),
    ] = None,
    embedding_model: Annotated[
        Optional[str],
        typer.Option("--embedding-model", metavar="MODEL", help="The speaker embedding model: a registry name (oasr models list --task speaker-embedding), bundle or checkpoint. Default: the one oasr.diarize uses.", rich_help_panel=MODELS, callback=model_spec),
    ] = None,
    output_format: Annotated[
        Optional[TurnFormat],
        typer.Option("--output-format", "-F", help="rttm, json (with provenance) or csv (start,end,speaker; several inputs: one CSV with a file column first). Default: from -o's extension, else rttm.", rich_help_panel=OUTPUT, show_default=False),
    ] = None,
    *,
    flags: BatchFlags,
) -> None:
    """Who spoke when: speaker turns from Silero VAD, GE2E speaker embeddings and clustering.

    RTTM goes to stdout unless -o FILE or --output-dir DIR is given. Several inputs run as a batch with the models loaded once; their RTTM turns can share one -o FILE (each line names its file), and on stdout CSV turns make one CSV with a file column. A file that fails is reported on one line and the batch goes on, then exits 1 (--fail-fast stops at the first failure).
    """
    from oasr.formats.turns import render_turns, turns_csv, turns_json
    from oasr.pipelines.diarize import EMBEDDING_MODEL, VAD_MODEL

    plan = plan_outputs(flags, flag_values(output_format), {f: f for f in TURN_FORMATS}, default="rttm", shared_file_format="rttm")
    options = from_flags(DiarizeOptions, locals(), vad=checked(dataclasses.replace, DEFAULTS.vad, threshold=vad_threshold))

    def run(models, samples, progress):
        import oasr

        vad, encoder = models
        return oasr.diarize(samples, options, vad_model=vad, embedding_model=encoder, device=flags.device, progress=progress)

    job = Job(
        models=((vad_model or VAD_MODEL, "vad"), (embedding_model or EMBEDDING_MODEL, "speaker-embedding")),
        run=run,
        render=render_turns,
        json_line=lambda turns: turns_json(turns, indent=None),
        describe=lambda turns: f"{len(turns.speakers)} speaker(s), {len(turns.turns)} turn(s)",
        joined={  # RTTM lines name their file; one CSV of several inputs has a file column
            "rttm": lambda turns, first: render_turns(turns, "rttm"),
            "csv": lambda turns, first: turns_csv(turns, file_column=True, header=first),
        },
    )
    run_batch(flags, plan, job)
