"""oasr eval der --ref REF.rttm --hyp HYP.rttm [--uem F] [--collar 0.25] [--skip-overlap] [--json]
oasr eval sdr --ref DIR --est DIR [--json]

Policy only: read the files, call ``oasr.metrics.der``, print a table (or JSON) on stdout.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..options import JsonOpt, new_app

app = new_app("eval", "Score outputs against references.")

MAX_COLLAR = 10.0  # seconds: scoring conventions use 0 to 0.5; a wider collar leaves little to score

DER_EXAMPLES = """Examples:

Score a diarization against a reference, with the standard 0.25 s collar:
  oasr diarize -o hyp.rttm meeting.wav
  oasr eval der --ref ref.rttm --hyp hyp.rttm

Only inside the scored regions, overlap left out, as JSON:
  oasr eval der --ref ref.rttm --hyp hyp.rttm --uem ref.uem --skip-overlap --json
"""


@app.command("der", no_args_is_help=True, epilog=DER_EXAMPLES)
def der(
    ref: Annotated[Path, typer.Option("--ref", metavar="REF.rttm", help="Reference speaker turns (RTTM).", show_default=False)],
    hyp: Annotated[Path, typer.Option("--hyp", metavar="HYP.rttm", help="Hypothesis speaker turns (RTTM), e.g. from oasr diarize.", show_default=False)],
    uem: Annotated[
        Optional[Path],
        typer.Option("--uem", metavar="FILE", help="Score only inside these regions (UEM). Default: from the first to the last turn of either side."),
    ] = None,
    collar: Annotated[
        float,
        typer.Option("--collar", metavar="SECONDS", help=f"Unscored zone around each reference boundary, its whole width, 0..{MAX_COLLAR:g} (half each side, as pyannote.metrics; md-eval's -c 0.25 is --collar 0.5)."),
    ] = 0.25,
    skip_overlap: Annotated[bool, typer.Option("--skip-overlap", help="Do not score where reference speakers overlap.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Diarization error rate: missed speech, false alarm and speaker confusion, per file and pooled.

    Hypothesis speakers are mapped one-to-one onto reference speakers to maximise shared time (Hungarian algorithm); the pooled DER sums the seconds of every file. Agrees with pyannote.metrics' DiarizationErrorRate.
    """
    from oasr.errors import InputError
    from oasr.formats.rttm import read_rttm, read_uem
    from oasr.metrics.der import diarization_error_rate

    if not (math.isfinite(collar) and 0 <= collar <= MAX_COLLAR):
        raise typer.BadParameter(f"must be >= 0 and at most {MAX_COLLAR:g} seconds, not {collar:g}", param_hint="'--collar'")
    reference, hypothesis = read_rttm(ref), read_rttm(hyp)
    if not reference:
        raise InputError(f"{ref}: no SPEAKER lines")
    regions = read_uem(uem) if uem is not None else None
    report = diarization_error_rate(reference, hypothesis, regions, collar=collar, skip_overlap=skip_overlap)
    if report.unscored:
        print(f"oasr: warning: not in the reference, not scored: {', '.join(report.unscored)}", file=sys.stderr)
    if json_out:
        from ..output import print_json

        print_json(report.to_dict())
        return
    sys.stdout.write(_table(report))


def _table(report) -> str:
    rows = [("file", "DER%", "missed%", "false alarm%", "confusion%", "scored s")]
    for c in (*report.files, report.pooled):
        t = c.total or 1.0
        rows.append(
            (
                "pooled" if c.file == "*" else c.file,
                f"{100 * c.der:.2f}",
                f"{100 * c.missed / t:.2f}",
                f"{100 * c.false_alarm / t:.2f}",
                f"{100 * c.confusion / t:.2f}",
                f"{c.total:.2f}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))) for row in rows]
    return "\n".join(lines) + "\n"


SDR_EXAMPLES = """Examples:

Score the stems oasr separate wrote against the true stems of the track:
  oasr separate -o out song.wav
  oasr eval sdr --ref musdb/song --est out/htdemucs/song

Many tracks at once (DIR/<track>/<stem>.wav on both sides), as JSON:
  oasr eval sdr --ref musdb/test --est out/htdemucs --json
"""


@app.command("sdr", no_args_is_help=True, epilog=SDR_EXAMPLES)
def sdr(
    ref: Annotated[Path, typer.Option("--ref", metavar="DIR", help="True stems: DIR/<stem>.wav, or DIR/<track>/<stem>.wav.", show_default=False)],
    est: Annotated[Path, typer.Option("--est", metavar="DIR", help="Estimated stems laid out as --ref (e.g. oasr separate's DIR/<model>).", show_default=False)],
    json_out: JsonOpt = False,
) -> None:
    """Source separation scores: SDR (median over 1 s windows, as museval reports it) and SI-SDR, per stem and track.

    Stems are matched by track folder and file name. SDR allows a 512-tap distortion filter (BSS Eval) and agrees with fast-bss-eval window by window; SI-SDR is over the whole stem.
    """
    from oasr.metrics.sdr import score_folders

    report = score_folders(ref, est)
    if report.missing:
        print(f"oasr: warning: no estimate, not scored: {', '.join(report.missing)}", file=sys.stderr)
    if json_out:
        from ..output import print_json

        print_json(report.to_dict())
        return
    rows = [("track", "stem", "SDR dB", "SI-SDR dB")]
    show = lambda v: "nan" if math.isnan(v) else f"{v:.2f}"  # noqa: E731
    for s in report.stems:
        rows.append((s.track, s.stem, show(s.sdr), show(s.si_sdr)))
    for track, d in report.tracks.items():
        rows.append((track, "(mean)", show(d["sdr"]), show(d["si_sdr"])))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))) for row in rows]
    sys.stdout.write("\n".join(lines) + "\n")
