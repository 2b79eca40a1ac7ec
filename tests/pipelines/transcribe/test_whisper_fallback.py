"""openai-whisper's temperature fallback and silence rules (``pipelines/transcribe/whisper/fallback.py``),
the one copy both long-form loops decode with."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

pytest.importorskip("torch")

from oasr.decoding.whisper.options import WhisperDecoding  # noqa: E402
from oasr.pipelines.transcribe.whisper.fallback import (  # noqa: E402
    decode_with_fallback,
    holds_no_speech,
    needs_fallback,
)

D = WhisperDecoding()  # compression 2.4, logprob -1.0, no speech 0.6


@dataclass(frozen=True)
class Result:
    compression_ratio: float
    avg_logprob: float
    no_speech_prob: float = 0.0
    name: str = ""


REPETITIVE, IMPROBABLE, SILENT = 3.0, -2.0, 0.9


@pytest.mark.parametrize(
    "compression, logprob, no_speech, fallback, no_speech_skip",
    [
        (1.5, -0.5, 0.1, False, False),  # a good window
        (REPETITIVE, -0.5, 0.1, True, False),  # too repetitive
        (1.5, IMPROBABLE, 0.1, True, False),  # too improbable
        (1.5, IMPROBABLE, SILENT, False, True),  # silence: the no-speech rule decides
        (REPETITIVE, IMPROBABLE, SILENT, False, True),  # silence excuses compression too, as openai-whisper does
        (REPETITIVE, -0.5, SILENT, True, False),  # probable text is no silence
        (1.5, -0.5, SILENT, False, False),  # probable enough to keep despite the no-speech probability
    ],
)
def test_the_rules_are_openai_whispers(compression, logprob, no_speech, fallback, no_speech_skip):
    result = Result(compression, logprob, no_speech)
    assert needs_fallback(result, D) is fallback
    assert holds_no_speech(result, D) is no_speech_skip


def test_thresholds_set_to_none_switch_their_rule_off():
    off = WhisperDecoding(compression_ratio_threshold=None, logprob_threshold=None, no_speech_threshold=None)
    assert not needs_fallback(Result(REPETITIVE, IMPROBABLE, SILENT), off)
    assert not holds_no_speech(Result(REPETITIVE, IMPROBABLE, SILENT), off)
    no_logprob = WhisperDecoding(logprob_threshold=None)
    assert holds_no_speech(Result(1.5, -0.1, SILENT), no_logprob)  # the no-speech probability alone decides


def test_the_first_passing_temperature_wins_and_a_known_first_result_is_not_decoded_again():
    asked = []

    def decode_at(temperature):
        asked.append(temperature)
        return Result(1.5, -0.5, name=f"t={temperature}")

    first = Result(REPETITIVE, -0.5, name="first")
    result, temperature = decode_with_fallback(decode_at, D, first=first)
    assert (result.name, temperature, asked) == ("t=0.2", 0.2, [0.2])
    asked.clear()
    good = Result(1.5, -0.5, name="good")
    assert decode_with_fallback(decode_at, D, first=good) == (good, 0.0) and asked == []


def test_when_every_temperature_fails_the_most_probable_non_repetitive_result_is_kept():
    results = {
        0.0: Result(REPETITIVE, -1.1),
        0.2: Result(1.5, -1.6, name="improbable"),
        0.4: Result(1.5, -1.2, name="best"),
        0.6: Result(REPETITIVE, -1.05),  # more probable, but repetitive
        0.8: Result(1.5, -1.9),
        1.0: Result(1.5, -1.3),
    }
    result, temperature = decode_with_fallback(results.__getitem__, D)
    assert (result.name, temperature) == ("best", 1.0)
    every_one_repetitive = WhisperDecoding(temperatures=(0.0, 0.2))
    result, _ = decode_with_fallback(lambda t: Result(REPETITIVE, -2.0 + t), every_one_repetitive)
    assert result.avg_logprob == pytest.approx(-1.8)
