"""The model-free half of diarization: the clustering of local speakers across windows (never two
of one window together), the reconstruction with overlap and the exclusive view, on activity and
embeddings whose speakers are known by construction (so a failure is the pipeline's, not a weak
model's); and the attribution of speakers to transcript segments."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from oasr.errors import InputError
from oasr.formats import render
from oasr.metrics.der import score_file
from oasr.decoding.whisper.options import WhisperDecoding
from oasr.options import DiarizeOptions, TranscribeOptions
from oasr.pipelines.diarize import clustering, reconstruct, turns_of
from oasr.pipelines.diarize.attribution import attribute_speakers
from oasr.pipelines.diarize.local import speaker_masks
from oasr.pipelines.diarize.segmentation import Segmentation, window_starts
from oasr.results import Segment, SpeakerTurn, Transcript, Word

SR = 16000
STEP = 270  # samples per frame
T = 589  # frames per 10 s window
# Who speaks when (start, end, speaker); speakers 0 and 1 overlap in 12-14 s.
SCRIPT = [(0.5, 6.0, 0), (6.0, 14.0, 1), (12.0, 20.0, 0), (20.0, 26.0, 2), (26.5, 33.0, 1), (33.0, 40.0, 2)]


def synthetic(script=SCRIPT, duration=40.0, step=2.0, noise=0.3, seed=0, dim=32, favoured=None):
    """Segmentation and embeddings of a file whose speakers are known: each window's local
    speakers are the script's speakers active in it (in a shuffled local order, as a real model
    would number them), embedded as their voice plus noise. Active, a speaker's probability is
    0.6, the ``favoured`` speaker's 0.9."""
    rng = np.random.default_rng(seed)
    voices = rng.normal(size=(1 + max(s for *_, s in script), dim))
    samples = int(duration * SR)
    starts = window_starts(samples, 10 * SR, int(step * SR))
    activity = np.zeros((len(starts), T, 3), dtype=np.float32)
    probability = np.zeros_like(activity)
    embeddings = np.full((len(starts), 3, dim), np.nan, dtype=np.float32)
    for w, s in enumerate(starts):
        t = (s + np.arange(T) * STEP + 495) / SR
        present = sorted({k for a, b, k in script if ((t >= a) & (t < b)).any()})
        order = rng.permutation(3)
        for k, slot in zip(present, order):
            for a, b, kk in script:
                if kk == k:
                    activity[w, (t >= a) & (t < b), slot] = 1
                    probability[w, (t >= a) & (t < b), slot] = 0.9 if k == favoured else 0.6
            v = voices[k] + noise * rng.normal(size=dim)
            embeddings[w, slot] = v / np.linalg.norm(v)
    seg = Segmentation(starts=starts, activity=activity, window=10 * SR, frame_step=STEP, frame_offset=495, probability=probability)
    return seg, embeddings, samples


def diarize_synthetic(script=SCRIPT, exclusive=False, favoured=None, **kwargs):
    seg, embeddings, samples = synthetic(script, favoured=favoured)
    active = seg.activity.any(axis=1)
    labels = clustering.cluster_local_speakers(
        embeddings, active, active, threshold=kwargs.get("threshold", 0.5), min_cluster_size=kwargs.get("min_cluster_size", 2),
        **{k: v for k, v in kwargs.items() if k in ("num", "low", "high")},
    )
    options = DiarizeOptions(
        num_speakers=kwargs.get("num"), min_speakers=kwargs.get("low", 1), max_speakers=kwargs.get("high"),
        threshold=kwargs.get("threshold", 0.5), min_cluster_size=kwargs.get("min_cluster_size", 2), exclusive=exclusive,
    )
    # The pipeline's own steps 3-4 (the labels above are the ones it computes inside).
    return labels, turns_of(seg, embeddings, active, options, samples, samples / SR)


def der(turns, script=SCRIPT, skip_overlap=False):
    reference = [SpeakerTurn(s, e, f"ref{k}") for s, e, k in script]
    return score_file(reference, turns, [(0, 40)], collar=0.25, skip_overlap=skip_overlap).der


def test_recovers_known_speakers_with_overlap():
    labels, turns = diarize_synthetic()
    assert sorted({t.speaker for t in turns}) == ["SPEAKER_00", "SPEAKER_01", "SPEAKER_02"]
    assert turns[0].speaker == "SPEAKER_00"  # numbered in order of first speech
    assert der(turns) < 0.03
    # The overlap is there: two speakers at 13 s.
    assert len({t.speaker for t in turns if t.start <= 13.0 < t.end}) == 2
    assert all(a.start <= b.start for a, b in zip(turns, turns[1:]))


def test_two_speakers_of_one_window_are_never_merged():
    """Even asked for one speaker, or with a threshold that merges everything, two local speakers
    of one window get two labels (one is left over when there is only one cluster)."""
    seg, embeddings, _ = synthetic()
    active = seg.activity.any(axis=1)
    for kwargs in ({"threshold": 1.99}, {"threshold": 0.5, "num": 2}):
        labels = clustering.cluster_local_speakers(embeddings, active, active, min_cluster_size=1, **kwargs)
        for row, on in zip(labels, active):
            used = row[on & (row >= 0)]
            assert len(used) == len(set(used.tolist()))


def test_exclusive_view_has_one_speaker_at_a_time():
    _, turns = diarize_synthetic(exclusive=True)
    spans = sorted((t.start, t.end) for t in turns)
    assert all(a[1] <= b[0] + 1e-9 for a, b in zip(spans, spans[1:]))


@pytest.mark.parametrize("favoured", [0, 1])
def test_exclusive_view_gives_an_overlap_to_the_more_probable_speaker(favoured):
    """Speakers 0 and 1 are both active in 12-14 s in every window, a tie on activity: the
    exclusive view gives that stretch to the speaker the segmentation finds more probable there,
    whichever it is (not to the lower speaker number)."""
    _, turns = diarize_synthetic(exclusive=True, favoured=favoured)

    def speaker_at(time):
        return next(t.speaker for t in turns if t.start <= time < t.end)

    assert speaker_at(13.0) == speaker_at({0: 16.0, 1: 8.0}[favoured])
    assert der(turns, skip_overlap=True) < 0.03


def test_speaker_count_options_are_honoured():
    for kwargs, allowed in (({"num": 2}, {2}), ({"num": 4}, {4}), ({"high": 2}, {1, 2}), ({"low": 4}, {4, 5})):
        labels, _ = diarize_synthetic(**kwargs)
        assert int(labels.max()) + 1 in allowed, kwargs


def test_one_voice_is_one_speaker():
    labels, turns = diarize_synthetic(script=[(0.0, 40.0, 0)])
    assert {t.speaker for t in turns} == {"SPEAKER_00"}
    assert der(turns, script=[(0.0, 40.0, 0)]) < 0.01


def test_linkage_is_the_one_asked_for():
    """Unit vectors at 0, 6, 45, 84 and 90 degrees: the last merge joins {0, 6, 45} and {84, 90}
    at a cosine distance of 0.683 for average linkage (the mean of the pairs' distances) and 0.624
    for centroid linkage (between the normalised centroids), so a threshold of 0.65 separates them."""
    angles = np.radians([0, 6, 45, 84, 90])
    a = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    assert clustering.agglomerative(a, 0.65, linkage="average").tolist() == [0, 0, 0, 1, 1]
    assert clustering.agglomerative(a, 0.65, linkage="centroid").tolist() == [0, 0, 0, 0, 0]
    assert clustering.agglomerative(a, 0.6, linkage="centroid").tolist() == [0, 0, 0, 1, 1]
    with pytest.raises(ValueError, match="linkage"):
        clustering.agglomerative(a, 0.65, linkage="single")


def _voices(n: int, speakers: int = 12, dim: int = 192, seed: int = 0) -> np.ndarray:
    """n unit embeddings around ``speakers`` random voices."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((speakers, dim))
    x = centres[rng.integers(0, speakers, n)] + 0.45 * rng.standard_normal((n, dim))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_centroid_linkage_gives_scipys_clusters():
    """The reference: scipy's centroid linkage on the unit vectors, cut at the same distance."""
    from scipy.cluster.hierarchy import fcluster, linkage

    x = _voices(400)
    tree = linkage(x, method="centroid", metric="euclidean")
    counts = []
    for threshold in (0.12, 0.14, 0.2, 0.5):  # partly merged voices, then the 12 voices
        ours = clustering.agglomerative(x, threshold, linkage="centroid")
        theirs = fcluster(tree, t=float(np.sqrt(2 * threshold)), criterion="distance")
        assert ours.tolist() == clustering._relabel(theirs).tolist()
        counts.append(int(ours.max()) + 1)
    assert counts[0] > counts[1] > counts[2] == counts[3] == 12


MEMORY_CHECK = """
import resource, sys
import numpy as np
from oasr.pipelines.diarize import clustering
x = np.random.default_rng(0).standard_normal((6000, 192))
clustering.agglomerative(x[:10], 0.4, linkage="centroid")  # the libraries imported (50 MB) before measuring
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
clustering.agglomerative(x, 0.4, linkage="centroid")
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


def test_centroid_clustering_memory_does_not_grow_with_the_square_of_the_speakers():
    """6000 local speakers (two hours of audio): scipy's linkage held the 18 M pairwise
    distances twice (the peak grew by 283 MB); built from the vectors, 26 MB."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", MEMORY_CHECK], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) < 80  # MB


def test_global_activity_is_built_window_by_window():
    """Each global speaker takes the largest value of its local speakers in a window, averaged
    over the windows covering a frame; the windows' [N, T, S] whole (twice the result's bytes at
    a 2.5 s step) is never held."""
    import tracemalloc

    rng = np.random.default_rng(0)
    n, k, speakers = 400, 3, 20
    starts = np.arange(n) * int(2.5 * SR)
    values = rng.random((n, T, k)).astype(np.float32)
    seg = Segmentation(starts=starts, activity=values, window=10 * SR, frame_step=STEP, frame_offset=0)
    labels = rng.integers(-1, speakers, (n, k))
    labels[:, 1] = np.where(labels[:, 1] == labels[:, 0], -1, labels[:, 1])  # two local speakers may share none
    frames = seg.num_global_frames(starts[-1] + 10 * SR)
    tracemalloc.start()
    got = reconstruct.global_activity(seg, labels, speakers, frames)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    whole = np.zeros((n, T, speakers), dtype=np.float32)  # the reference: every window at once
    for w, c in zip(*np.nonzero(labels >= 0)):
        whole[w, :, labels[w, c]] = np.maximum(whole[w, :, labels[w, c]], values[w, :, c])
    total, covered = np.zeros((frames, speakers)), np.zeros((frames, 1))
    for w, first in enumerate(seg.first_frames):
        total[first : first + T] += whole[w]
        covered[first : first + T] += 1
    assert np.array_equal(got, total / np.maximum(covered, 1))
    assert peak < 3 * got.nbytes  # the windows at once were 2 * got.nbytes more


def test_each_encoder_is_clustered_with_its_own_tuned_settings():
    from oasr.pipelines import diarize as pipeline

    default = pipeline.tuned_settings(DiarizeOptions(), "campplus")
    assert default == pipeline.TUNED["campplus"] and pipeline.EMBEDDING_MODEL == "campplus-zh-en"
    mine = pipeline.tuned_settings(DiarizeOptions(threshold=0.3, min_cluster_size=3), "ge2e")
    assert (mine.threshold, mine.min_cluster_size) == (0.3, 3)
    assert (mine.linkage, mine.exclude_overlap) == (pipeline.TUNED["ge2e"].linkage, pipeline.TUNED["ge2e"].exclude_overlap)
    assert pipeline.tuned_settings(DiarizeOptions(), "wespeaker-resnet") == pipeline.FALLBACK


def test_reconstruction_pieces():
    # Windows: the last is flush with the end; a short file is one window.
    assert window_starts(30 * SR, 10 * SR, 4 * SR).tolist() == [0, 64000, 128000, 192000, 256000, 320000]
    assert window_starts(5 * SR, 10 * SR, SR).tolist() == [0]
    # binarize keeps the `count` most active speakers, only where they have some activity.
    activations = np.array([[0.9, 0.2, 0.0], [0.4, 0.6, 0.5], [0.0, 0.0, 0.0], [0.3, 0.0, 0.0]])
    got = reconstruct.binarize(activations, np.array([1, 2, 1, 2]))
    assert got.astype(int).tolist() == [[1, 0, 0], [0, 1, 1], [0, 0, 0], [1, 0, 0]]
    # with probabilities, the `count` most probable of the speakers with some activity
    probability = np.array([[0.3, 0.5, 0.9], [0.9, 0.2, 0.5], [0.0, 0.0, 0.0], [0.2, 0.0, 0.0]])
    got = reconstruct.binarize(activations, np.array([1, 2, 1, 2]), probability)
    assert got.astype(int).tolist() == [[0, 1, 0], [1, 0, 1], [0, 0, 0], [1, 0, 0]]


def test_count_rounds_up_early_and_short_pauses_are_filled(monkeypatch):
    """The per-frame count rounds up from COUNT_ROUNDING above a whole number (pyannote rounds
    at .5), and a speaker's pauses shorter than MIN_GAP are filled, longer ones kept."""
    starts = window_starts(20 * SR, 10 * SR, SR * 5 // 2)  # windows at 0, 2.5, 5, 7.5, 10 s
    activity = np.zeros((len(starts), T, 3), dtype=np.float32)
    activity[0, :, :2] = 1  # window 0 hears two speakers throughout, windows 1 and 2 one
    activity[1:3, :, 0] = 1
    seg = Segmentation(starts=starts, activity=activity, window=10 * SR, frame_step=STEP, frame_offset=0)
    frames = seg.num_global_frames(20 * SR)
    at = {t: int(t * SR / STEP) for t in (1.0, 6.0, 11.0, 16.0)}  # 1 s: window 0 alone; 6 s: windows 0-2
    assert {t: int(reconstruct.speaker_count(seg, frames)[g]) for t, g in at.items()} == {1.0: 2, 6.0: 2, 11.0: 1, 16.0: 0}
    monkeypatch.setattr(reconstruct, "COUNT_ROUNDING", 0.5)  # the mean 4/3 at 6 s rounds to 1 at .5
    assert {t: int(reconstruct.speaker_count(seg, frames)[g]) for t, g in at.items()} == {1.0: 2, 6.0: 1, 11.0: 1, 16.0: 0}

    binary = np.zeros((frames, 2), dtype=bool)
    binary[100:200, 0] = binary[205:300, 0] = True  # a 5-frame (84 ms) pause: filled
    binary[100:150, 1] = binary[250:300, 1] = True  # a 100-frame (1.7 s) pause: kept
    time = lambda frame: round((frame * STEP - STEP / 2) / SR, 3)  # noqa: E731  a frame's start
    turns = reconstruct.turns_from_frames(binary, seg, SR, 20.0)
    assert sorted((t.start, t.end) for t in turns) == [(time(100), time(150)), (time(100), time(300)), (time(250), time(300))]
    assert len(reconstruct.turns_from_frames(binary, seg, SR, 20.0, min_gap=0.0)) == 4


def test_overlapped_frames_are_left_out_of_embeddings():
    activity = np.zeros((1, 100, 3), dtype=np.float32)
    activity[0, 0:60, 0] = 1
    activity[0, 40:100, 1] = 1  # overlap 40-60
    activity[0, 95:100, 2] = 1  # a short speaker, all overlapped
    masks, reliable = speaker_masks(activity, min_frames=10)
    assert masks[0, :, 0].sum() == 40 and masks[0, 40:60, 0].sum() == 0
    assert masks[0, :, 2].sum() == 5  # nothing clean: its overlapped frames are used, but it is not reliable
    assert reliable[0].tolist() == [True, True, False]


def test_fold_small_clusters():
    x = np.eye(3)[[0, 0, 0, 1, 1, 1, 2]] + 0.01
    labels = np.array([0, 0, 0, 1, 1, 1, 2])
    assert clustering.fold_small(x, labels, 2).tolist()[:6] == [0, 0, 0, 1, 1, 1]
    assert clustering.fold_small(x, labels, 2)[-1] in (0, 1)
    assert clustering.fold_small(x, labels, 4).tolist() == labels.tolist()  # none large: nothing folds


def test_options_validation():
    with pytest.raises(InputError, match="not both"):
        DiarizeOptions(num_speakers=2, max_speakers=3)
    with pytest.raises(InputError, match="--max-speakers must be at least --min-speakers"):
        DiarizeOptions(min_speakers=3, max_speakers=2)
    with pytest.raises(InputError, match="--step"):
        DiarizeOptions(step=0.1)
    with pytest.raises(InputError, match="--threshold"):
        DiarizeOptions(threshold=float("nan"))
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
