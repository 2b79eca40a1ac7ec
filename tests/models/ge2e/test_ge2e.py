"""GE2E speaker embeddings against Resemblyzer's VoiceEncoder (installed for the tests only).

Parity is measured on the same waveform (Resemblyzer's ``preprocess_wav`` output, passed to both
with our volume normalisation off), on random weights and on the pretrained ones; then that
``embed_segments`` embeds each window exactly as ``embed_utterance`` embeds it alone, and that
the embeddings tell the two speakers of sample.wav apart.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import oasr  # noqa: E402
from installed_models import pull_installed  # noqa: E402
from oasr.errors import CapabilityError, InputError  # noqa: E402
from oasr.pipelines.diarize.embedding import embed_segments, embed_utterance, partial_starts  # noqa: E402

SR = 16000
LENGTHS = [100, 3000, SR, 25600, 25601, 30000, 3 * SR, 77 * 160 * 3 + 12345]  # samples: edges of the partial rule


@pytest.fixture(scope="module")
def resemblyzer():
    return pytest.importorskip("resemblyzer", reason="resemblyzer is installed by make install-test")


@pytest.fixture(scope="module")
def pretrained(resemblyzer) -> Path:
    return Path(resemblyzer.__file__).parent / "pretrained.pt"


@pytest.fixture(scope="module")
def encoder(pretrained):
    return oasr.load_pretrained(pretrained, device="cpu")


@pytest.fixture(scope="module")
def reference(resemblyzer):
    return resemblyzer.VoiceEncoder("cpu", verbose=False)


@pytest.fixture(scope="module")
def speech(resemblyzer, data_dir) -> np.ndarray:
    """sample.wav (two speakers) as Resemblyzer prepares a file: -30 dBFS, long silences cut."""
    return resemblyzer.preprocess_wav(data_dir / "diarization" / "sample.wav").astype(np.float32)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_random_weights_match(resemblyzer, tmp_path):
    """A Resemblyzer checkpoint of random weights: the converter, front end and network, untrained."""
    torch.manual_seed(0)
    net = resemblyzer.VoiceEncoder("cpu", verbose=False)
    # Small recurrent weights keep the untrained LSTM out of chaos (where float noise would decide).
    state = {k: torch.randn_like(v) * (0.05 if "_hh_" in k else 0.3) for k, v in net.state_dict().items()}
    state.update(similarity_weight=torch.tensor([10.0]), similarity_bias=torch.tensor([-5.0]))
    torch.save({"step": 1, "model_state": state, "optimizer_state": {}}, tmp_path / "pretrained.pt")
    ref = resemblyzer.VoiceEncoder("cpu", verbose=False, weights_fpath=tmp_path / "pretrained.pt")
    ours = oasr.load_pretrained(tmp_path, device="cpu")
    assert ours.architecture == "ge2e" and sorted(ours.report.dropped) == ["similarity_bias", "similarity_weight"]
    wav = np.random.default_rng(0).normal(0, 0.1, 2 * SR).astype(np.float32)
    assert _cosine(ref.embed_utterance(wav), embed_utterance(wav, ours, normalize_volume=False)) > 0.999999


@pytest.mark.slow
def test_pretrained_embeddings_match(encoder, reference, speech):
    lengths = [100, 25601, 3 * SR, len(speech)]  # under one partial, just over one, several, the whole file
    worst = 1.0
    for n in lengths:
        wav = speech[5000 : 5000 + n]
        worst = min(worst, _cosine(reference.embed_utterance(wav), embed_utterance(wav, encoder, normalize_volume=False)))
    print(f"\nworst cosine to Resemblyzer over {len(lengths)} lengths: {worst:.7f}")
    assert worst > 0.9999


@pytest.mark.slow  # real weights: Resemblyzer's pretrained.pt
def test_partial_rule_matches(reference):
    for n in LENGTHS + [0, 1, 12159, 12160, 12161]:
        _, mel_slices = reference.compute_partial_slices(n, 1.3, 0.75)
        ours = partial_starts(n, partial_frames=160, hop=160, sample_rate=SR, rate=1.3, min_coverage=0.75)
        assert ours == [s.start for s in mel_slices], n


@pytest.mark.slow
def test_segments_are_embedded_as_utterances(encoder, reference, speech):
    windows = [(0.0, 1.5), (0.3, 1.1), (2.0, 3.5), (4.0, 9.0), (len(speech) / SR - 1.0, len(speech) / SR + 2.0)]
    batched = embed_segments(speech, windows, encoder, batch_size=3, normalize_volume=False)
    assert batched.shape == (len(windows), 256)
    np.testing.assert_allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-6)
    for i, ((a, b), e) in enumerate(zip(windows, batched)):
        alone = speech[round(a * SR) : round(b * SR)]
        assert _cosine(e, embed_utterance(alone, encoder, normalize_volume=False)) > 0.999999
        if i in (1, 4):  # a short window, and one past the end
            assert _cosine(e, reference.embed_utterance(alone)) > 0.9999


@pytest.mark.slow  # real weights: Resemblyzer's pretrained.pt
def test_volume_normalisation_is_resemblyzers(encoder, reference, resemblyzer, jfk_wav):
    from oasr.io.audio import load_audio

    quiet = load_audio(jfk_wav, SR)[: 3 * SR] * 0.05
    raised = resemblyzer.audio.normalize_volume(quiet, -30, increase_only=True)
    assert _cosine(reference.embed_utterance(raised), embed_utterance(quiet, encoder)) > 0.9999
    loud = quiet * 40  # louder than -30 dBFS: left as it is
    assert _cosine(reference.embed_utterance(loud), embed_utterance(loud, encoder)) > 0.9999


@pytest.mark.slow
def test_two_speakers_apart(encoder, data_dir):
    """On sample.wav, windows of one speaker are closer to each other than to the other's."""
    from oasr.io.audio import load_audio

    audio = load_audio(data_dir / "diarization" / "sample.wav", SR)
    turns = []
    for line in (data_dir / "diarization" / "sample.rttm").read_text().splitlines():
        f = line.split()
        start, length, speaker = float(f[3]), float(f[4]), f[7]
        turns += [(speaker, (t, t + 1.5)) for t in np.arange(start, start + length - 1.5, 0.75)]
    speakers = sorted({s for s, _ in turns})
    embeds = embed_segments(audio, [w for _, w in turns], encoder)
    labels = np.array([speakers.index(s) for s, _ in turns])
    # Leave-one-out nearest centroid: each window against the mean of every other window per speaker.
    sums = np.stack([embeds[labels == k].sum(0) for k in range(len(speakers))])
    counts = np.bincount(labels)
    correct = 0
    for e, k in zip(embeds, labels):
        centroids = (sums - np.eye(len(speakers))[k][:, None] * e) / (counts - np.eye(len(speakers))[k])[:, None]
        correct += int(np.argmax(centroids @ e) == k)
    print(f"\n{len(turns)} windows of {len(speakers)} speakers: {correct} nearest their own speaker")
    assert len(speakers) == 2 and correct / len(turns) >= 0.9


@pytest.mark.slow  # real weights: Resemblyzer's pretrained.pt
def test_converter_claims_resemblyzer_checkpoints_only(pretrained, tmp_path):
    from oasr.conversion.detect import detect, pick_converter
    from tiny_models import write_openai_pt

    assert pick_converter(pretrained)[0].name == "resemblyzer"  # over the generic one-.pt-file rule
    assert pick_converter(pretrained.parent)[0].name == "resemblyzer"
    other = write_openai_pt(tmp_path / "tiny.pt")
    assert [c.converter.name for c in detect(other)] == ["openai-whisper"]


@pytest.mark.slow  # real weights: Resemblyzer's pretrained.pt
def test_errors(encoder, tmp_path):
    from tiny_models import write_openai_pt

    with pytest.raises(InputError, match="start < end"):
        embed_segments(np.zeros(SR, dtype=np.float32), [(0.5, 0.5)], encoder)
    with pytest.raises(InputError, match="mono"):
        embed_utterance(np.zeros((2, SR), dtype=np.float32), encoder)
    with pytest.raises(InputError, match="rate"):
        embed_utterance(np.zeros(SR, dtype=np.float32), encoder, rate=0.1)
    whisper = oasr.load_pretrained(write_openai_pt(tmp_path / "tiny.pt"), device="cpu")
    with pytest.raises(CapabilityError, match="needs a .*ge2e or WeSpeaker ResNet model"):
        embed_segments(np.zeros(SR, dtype=np.float32), [(0.0, 1.0)], whisper)
    assert embed_segments(np.zeros(SR, dtype=np.float32), [], encoder).shape == (0, 256)


@pytest.mark.slow  # real weights: Resemblyzer's pretrained.pt
def test_not_quantized(encoder):
    from oasr.quant.layers import check_quantizable

    with pytest.raises(CapabilityError, match="LSTM"):
        check_quantizable(encoder.model, "ge2e")


@pytest.mark.slow  # real weights: Resemblyzer's pretrained.pt
def test_registry_name_resolves(resemblyzer, encoder, tmp_path_factory):
    """`ge2e-speaker` (by name, no longer the default), pulled through the registry's PyPI path from the installed files."""
    pull_installed("ge2e-speaker", tmp_path_factory.mktemp("wheels"))
    wav = np.random.default_rng(1).normal(0, 0.1, SR).astype(np.float32)
    np.testing.assert_array_equal(embed_utterance(wav), embed_utterance(wav, encoder))
