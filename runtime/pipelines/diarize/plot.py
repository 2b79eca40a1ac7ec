"""A PNG timeline of a diarization: one lane per speaker, overlaps visible (two lanes lit at once),
and optionally a reference drawn beneath with its own lanes.

matplotlib is the ``plot`` extra (``oasr.formats.pitch_plot.require_matplotlib`` says so in one
line); only the object-oriented API and the Agg canvas are used.
"""

from __future__ import annotations

import io
from typing import Sequence

from ...formats.pitch_plot import require_matplotlib
from ...results import SpeakerTurn, SpeakerTurns

LANE = 0.8  # lane height (of 1)


def _lanes(ax, turns: Sequence[SpeakerTurn], base: int, colour_of) -> list[str]:
    speakers = list(dict.fromkeys(t.speaker for t in turns))
    for i, speaker in enumerate(speakers):
        spans = [(t.start, t.end - t.start) for t in turns if t.speaker == speaker]
        ax.broken_barh(spans, (base + i + (1 - LANE) / 2, LANE), facecolors=colour_of(i), alpha=0.85)
    return speakers


def timeline_png(turns: SpeakerTurns, reference: Sequence[SpeakerTurn] | None = None, name: str | None = None) -> bytes:
    """The PNG bytes: the hypothesis lanes on top, the reference's (if given) beneath a divider;
    the title names ``name`` (else the turns' source file)."""
    require_matplotlib()
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    ref = sorted(reference or [], key=lambda t: t.start)
    n_ref = len({t.speaker for t in ref})
    n_hyp = len(turns.speakers)
    fig = Figure(figsize=(12, 1.2 + 0.45 * (n_hyp + n_ref)), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    hyp_colours, ref_colours = colormaps["tab10"], colormaps["Set2"]
    hyp_names = _lanes(ax, turns.turns, 0, hyp_colours)  # lanes from 0, the top once the axis is inverted
    ref_names = _lanes(ax, ref, len(hyp_names), ref_colours) if ref else []
    labels = list(hyp_names) + [f"ref {s}" for s in ref_names]
    ax.set_yticks([i + 0.5 for i in range(len(labels))], labels)
    if ref:
        ax.axhline(len(hyp_names), color="black", linewidth=0.8)
    end = max([turns.duration, *(t.end for t in ref)]) or 1.0
    ax.set_xlim(0, end)
    ax.set_ylim(0, max(len(labels), 1))
    ax.invert_yaxis()  # the hypothesis on top
    ax.set_xlabel("time (s)")
    ax.grid(axis="x", alpha=0.3)
    title = f"{name or turns.source or 'audio'}: {n_hyp} speaker(s), {len(turns.turns)} turn(s)"
    ax.set_title(title + (f"; reference beneath ({n_ref} speaker(s))" if ref else ""))
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png")
    return out.getvalue()
