"""Word error rate for the tests: a plain English normalisation and a word-level edit distance.

Normalisation: lowercase, apostrophes removed inside words ("didn't" -> "didnt"), every other
non-alphanumeric character a space, spaces collapsed. Both sides get the same treatment, so
the numbers are comparable between engines, not with published (Whisper-normalised) WERs.
"""

from __future__ import annotations

import re

_APOSTROPHES = re.compile(r"['’]")
_NON_WORD = re.compile(r"[^\w]+")


def normalise(text: str) -> list[str]:
    text = _APOSTROPHES.sub("", text.lower())
    return _NON_WORD.sub(" ", text).split()


def edit_distance(reference: list[str], hypothesis: list[str]) -> int:
    """Substitutions + deletions + insertions (Levenshtein over words), O(len(ref) * len(hyp))."""
    previous = list(range(len(hypothesis) + 1))
    for i, ref_word in enumerate(reference, start=1):
        current = [i] + [0] * len(hypothesis)
        for j, hyp_word in enumerate(hypothesis, start=1):
            current[j] = min(
                previous[j] + 1,  # deletion
                current[j - 1] + 1,  # insertion
                previous[j - 1] + (ref_word != hyp_word),  # substitution or match
            )
        previous = current
    return previous[-1]


def wer(reference: str, hypothesis: str) -> float:
    """Word error rate of ``hypothesis`` against ``reference`` (0.0 is perfect; may exceed 1)."""
    ref, hyp = normalise(reference), normalise(hypothesis)
    if not ref:
        return float(bool(hyp))
    return edit_distance(ref, hyp) / len(ref)
