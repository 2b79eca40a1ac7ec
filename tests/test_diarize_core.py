"""The model-free half of diarization, with a synthetic embedder whose speakers are known by
construction (so a failure is the pipeline's, not a weak embedder's), and the attribution of
speakers to transcript segments."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from oasr.errors import InputError
from oasr.formats import render
from oasr.metrics.der import score_file
from oasr.options import DiarizeOptions, TranscribeOptions, WhisperDecoding
from oasr.pipelines.diarize import clustering
from oasr.pipelines.diarize.attribution import attribute_speakers
from oasr.pipelines.diarize.timeline import diarize_regions, sliding_windows, smooth
from oasr.results import Segment, SpeakerTurn, Transcript, Word

# Who speaks when: (start, end, speaker), pauses between some turns.
SCRIPT = [(0.5, 6.0, 0), (6.0, 11.0, 1), (11.5, 20.0, 0), (20.0, 24.0, 2), (24.5, 33.0, 1), (33.0, 40.0, 2)]


def synthetic_embedder(script, noise=0.35, seed=0, dim=64):
    """Embeds a window as the unit vector of the time-weighted mix of its speakers' voices plus
    noise: near speaker changes the embedding is a blend, as a real one is."""
    rng = np.random.default_rng(seed)
    voices = rng.normal(size=(1 + max(s for *_, s in script), dim))

    def embed(windows):
        out = []
        for a, b in windows:
            mix = sum(max(0.0, min(b, e) - max(a, s)) * voices[k] for s, e, k in script)
            v = mix / np.linalg.norm(mix) + noise * rng.normal(size=dim) / np.sqrt(dim)
            out.append(v / np.linalg.norm(v))
        return np.asarray(out)

    return embed


def der(turns, script=SCRIPT):
    reference = [SpeakerTurn(s, e, f"ref{k}") for s, e, k in script]
    return score_file(reference, turns, [(0, 40)], collar=0.25).der


@pytest.mark.parametrize("method", ["spectral", "agglomerative"])
def test_recovers_known_speakers(method):
    regions = [(0.5, 11.0), (11.5, 24.0), (24.5, 40.0)]
    turns = diarize_regions(regions, 40.0, synthetic_embedder(SCRIPT), DiarizeOptions(clustering=method))
    assert sorted({t.speaker for t in turns}) == ["SPEAKER_00", "SPEAKER_01", "SPEAKER_02"]
    assert turns[0].speaker == "SPEAKER_00"  # numbered in order of first speech
    assert der(turns) < 0.05
    # Turns are sorted, inside the speech, and one speaker never overlaps another's turn.
    assert all(a.end <= b.start for a, b in zip(turns, turns[1:]))
    assert turns[0].start >= 0.5 and turns[-1].end <= 40.0


def test_speaker_count_options_are_honoured():
    regions = [(0.5, 11.0), (11.5, 24.0), (24.5, 40.0)]
    embed = synthetic_embedder(SCRIPT)
    for method in ("spectral", "agglomerative"):
        for kwargs, allowed in (
            ({"num_speakers": 2}, {2}),
            ({"num_speakers": 4}, {4}),
            ({"max_speakers": 2}, {1, 2}),
            ({"min_speakers": 4}, {4, 5, 6, 7, 8}),
            ({"min_speakers": 2, "max_speakers": 3}, {3}),
        ):
            options = DiarizeOptions(clustering=method, min_speaker_windows=1, **kwargs)
            speakers = {t.speaker for t in diarize_regions(regions, 40.0, embed, options)}
            assert len(speakers) in allowed, (method, kwargs)


def test_one_voice_is_one_speaker_and_silence_is_nothing():
    one = [(0.0, 30.0, 0)]
    for method in ("spectral", "agglomerative"):
        turns = diarize_regions([(0.0, 30.0)], 30.0, synthetic_embedder(one, noise=0.5), DiarizeOptions(clustering=method))
        assert {t.speaker for t in turns} == {"SPEAKER_00"}
    assert diarize_regions([], 30.0, synthetic_embedder(one), DiarizeOptions()) == []
    # A lone short burst is still a turn (embedded whole).
    burst = diarize_regions([(1.0, 1.3)], 5.0, synthetic_embedder([(1.0, 1.3, 0)]), DiarizeOptions())
    assert [(t.start, t.end) for t in burst] == [(1.0, 1.3)]


def test_windows():
    windows = sliding_windows([(0.0, 4.0), (5.0, 6.0), (7.0, 7.2)], window=1.5, step=0.5, min_window=0.4)
    assert windows[:2] == [(0.0, 1.5), (0.5, 2.0)] and windows[4] == (2.0, 3.5)
    assert windows[5] == (2.5, 4.0)  # the last window ends with the region
    assert (5.0, 6.0) in windows and all(a < 7.0 for a, _ in windows)  # short region: whole; tiny: none


def test_smoothing():
    frames = np.full(600, -1)
    frames[0:200], frames[200:230], frames[230:400] = 0, 1, 0  # a 0.3 s flicker inside speaker 0
    frames[420:600] = 0  # back after a 0.2 s pause
    assert smooth(frames, min_turn=0.5, merge_gap=0.5) == [[0, 0, 600]]
    assert smooth(frames, min_turn=0.0, merge_gap=0.0) == [[0, 0, 200], [1, 200, 230], [0, 230, 400], [0, 420, 600]]


def test_clustering_helpers():
    labels = np.array([0, 0, 0, 1, 2, 2, 2, 2])
    assert clustering.dissolve_small(labels, 3).tolist() == [0, 0, 0, -1, 2, 2, 2, 2]
    assert clustering.dissolve_small(np.array([0, 1]), 3, keep=1).tolist() in ([-1, 1], [0, -1])
    values = np.array([0.0, 0.01, 0.02, 0.9, 0.95])
    assert clustering.estimate_count(values, 1, 4) == 3
    assert clustering.estimate_count(np.array([0.0, 0.3, 0.45, 0.8, 0.9]), 1, 4) == 1  # gaps after large values


def test_options_validation():
    with pytest.raises(InputError, match="clustering"):
        DiarizeOptions(clustering="kmeans")
    with pytest.raises(InputError, match="not both"):
        DiarizeOptions(num_speakers=2, max_speakers=3)
    with pytest.raises(InputError, match="--max-speakers must be at least --min-speakers"):
        DiarizeOptions(min_speakers=3, max_speakers=2)
    with pytest.raises(InputError, match="step"):
        DiarizeOptions(window=1.0, step=2.0)
    with pytest.raises(InputError, match="--diarize needs timestamps"):
        TranscribeOptions(diarize=True, decoding=WhisperDecoding(without_timestamps=True))


def _segment(i, words, text=None):
    ws = tuple(Word(w, s, e, 0.9) for w, s, e in words)
    return Segment(i, ws[0].start, ws[-1].end, text or "".join(w.word for w in ws), (1, 2, 3), ws, seek=0, temperature=0.0, avg_logprob=-0.2, compression_ratio=1.2, no_speech_prob=0.01)


def test_attribution_splits_at_word_boundaries():
    turns = [SpeakerTurn(0.0, 2.0, "A"), SpeakerTurn(2.2, 5.0, "B")]
    segments = [
        _segment(0, [(" Hello", 0.1, 0.5), (" there.", 0.6, 1.9), (" Hi", 2.1, 2.6), (" you.", 2.7, 3.0)]),
        _segment(1, [(" Again.", 3.5, 4.0)]),
        Segment(2, 6.0, 7.0, " (pause)", (5,), None, seek=0, temperature=0.0, avg_logprob=-0.2, compression_ratio=1.0, no_speech_prob=0.1),  # no words, after the last turn
    ]
    out = attribute_speakers(segments, turns, encode=lambda text: [len(text)])
    assert [(s.id, s.speaker, s.text, s.start, s.end) for s in out] == [
        (0, "A", " Hello there.", 0.1, 1.9),
        (1, "B", " Hi you.", 2.1, 3.0),  # " Hi" starts in the pause but overlaps B most
        (2, "B", " Again.", 3.5, 4.0),
        (3, "B", " (pause)", 6.0, 7.0),  # the nearest turn
    ]
    assert out[0].tokens == (len(" Hello there."),) and out[2].tokens == (1, 2, 3)  # unsplit: as decoded
    assert all(w.speaker == s.speaker for s in out for w in s.words or ())
    assert attribute_speakers(segments, turns, keep_words=False)[0].words is None
    # The writers show the speakers: txt prefix, srt prefix, vtt voice tags, json fields.
    transcript = Transcript("".join(s.text for s in out), tuple(out), "en", None, 8.0)
    assert render(transcript, "txt").splitlines()[:2] == ["[A] Hello there.", "[B] Hi you."]
    assert "[B] Hi you." in render(transcript, "srt")
    assert "<v A>Hello there." in render(transcript, "vtt")
    words_off = dataclasses.replace(transcript, segments=tuple(attribute_speakers(segments, turns, keep_words=False)))
    assert '"speaker": "B"' in render(words_off, "json") and "<v B>Hi you." in render(words_off, "vtt")
