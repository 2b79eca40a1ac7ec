"""The speaker-count and speaker-name flags ``oasr diarize`` and ``oasr transcribe --diarize`` share."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from oasr.options import MAX_SPEAKERS

from .options import checked

SPEAKERS = "Speakers"

NumSpeakersOpt = Annotated[
    Optional[int], typer.Option("--num-speakers", metavar="N", help=f"Exactly N speakers, 1..{MAX_SPEAKERS} (skips the estimate).", rich_help_panel=SPEAKERS)
]
MinSpeakersOpt = Annotated[
    int, typer.Option("--min-speakers", metavar="N", help=f"The estimated count is at least N (1..{MAX_SPEAKERS}).", rich_help_panel=SPEAKERS)
]
MaxSpeakersOpt = Annotated[
    Optional[int], typer.Option("--max-speakers", metavar="N", help=f"The estimated count is at most N (up to {MAX_SPEAKERS}).", rich_help_panel=SPEAKERS)
]
SpeakerNamesOpt = Annotated[
    Optional[str],
    typer.Option(
        "--speaker-names",
        metavar="A,B,...",
        help="Label the speakers with these names, in order of first appearance (the first to speak is A); speakers beyond them keep SPEAKER_NN.",
        rich_help_panel=SPEAKERS,
    ),
]


def names(flag: Optional[str]) -> tuple[str, ...]:
    """--speaker-names A,B -> ("A", "B"); None -> ()."""
    return () if flag is None else tuple(n.strip() for n in flag.split(","))


def diarization_options(num_speakers: Optional[int], min_speakers: int, max_speakers: Optional[int], speaker_names: Optional[str]) -> Any:
    """The DiarizeOptions these flags ask for; None when none was given (the defaults)."""
    from oasr.options import DiarizeOptions

    if num_speakers is None and min_speakers == 1 and max_speakers is None and speaker_names is None:
        return None
    return checked(DiarizeOptions, num_speakers=num_speakers, min_speakers=min_speakers, max_speakers=max_speakers, speaker_names=names(speaker_names))
