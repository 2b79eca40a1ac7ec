"""Batched long-form Whisper (``batch_size`` > 1) and the batched decoder under it, on tiny.en.

- ``pack_windows``: VAD regions into windows of at most 30 s.
- The KV cache: a step after ``reorder`` reads the same keys as a cache built from those rows.
- ``WhisperDecoder.decode_batch``: windows decoded together give each window's own result
  (beam search and greedy), windows leaving the batch at different steps.
- A recording of more than 5 minutes (jfk, sample and AMI excerpts, short silences between):
  ``batch_size=8``'s WER within 1 point of the sequential result, scored on the jfk and sample
  stretches (the AMI excerpts have no transcript) by word times; word times present and in order.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import oasr  # noqa: E402
from oasr.errors import InputError  # noqa: E402
from oasr.decoding.whisper.options import WhisperDecoding  # noqa: E402
from oasr.options import TranscribeOptions  # noqa: E402
from oasr.pipelines.transcribe.whisper.batched import pack_windows  # noqa: E402
from wer import wer  # noqa: E402

SR = 16000


@pytest.fixture(scope="module")
def tiny(tiny_en_bundle):
    return oasr.load_pretrained(tiny_en_bundle, device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def clips(data_dir):
    from oasr.io.audio import load_audio

    ami = sorted(p for p in (data_dir / "diarization" / "ami").glob("*.wav") if p.name != "empty.wav")
    return {
        "jfk": load_audio(data_dir / "asr" / "jfk.wav", SR),
        "sample": load_audio(data_dir / "diarization" / "sample.wav", SR),
        "ami": [load_audio(p, SR) for p in ami],
    }


@pytest.fixture(scope="module")
def references(data_dir):
    stm = (data_dir / "diarization" / "sample.stm").read_text().splitlines()
    return {
        "jfk": (data_dir / "asr" / "jfk.txt").read_text().strip(),
        "sample": " ".join(line.split(maxsplit=5)[5] for line in stm if line.strip()),
    }


def _window_features(model, spec, audio: np.ndarray) -> torch.Tensor:
    from oasr.features.logmel import log_mel_spectrogram

    mel = log_mel_spectrogram(torch.from_numpy(audio[: 30 * SR]), spec, padding=30 * SR)[:, :3000]
    with torch.inference_mode():
        return model.embed_audio(mel[None])


def test_pack_windows():
    limit = 30 * SR
    regions = [(0, 10 * SR), (11 * SR, 25 * SR), (26 * SR, 40 * SR), (41 * SR, 120 * SR), (121 * SR, 122 * SR)]
    windows = pack_windows(regions, limit)
    assert windows == [(0, 25 * SR), (26 * SR, 40 * SR), (41 * SR, 71 * SR), (71 * SR, 101 * SR), (101 * SR, 122 * SR)]
    assert all(b - a <= limit for a, b in windows)
    assert pack_windows([], limit) == []


def test_reorder_matches_a_cache_of_the_chosen_rows(tiny):
    """Preallocated keys written in place, rows gathered by ``reorder``: the next step's logits
    equal those of a cache that held only the chosen rows from the start."""
    from oasr.models.whisper import WhisperKVCache

    model = tiny.model
    gen = torch.Generator().manual_seed(0)
    audio = torch.randn(1, 1500, model.config.n_audio_state, generator=gen)
    tokens = torch.randint(0, 50000, (3, 6), generator=gen)
    index = torch.tensor([2, 0, 0])
    with torch.inference_mode():
        cache = WhisperKVCache(capacity=4)  # grows past its capacity, too
        model.logits(tokens[:, :3], audio, cache)
        model.logits(tokens[:, 3:5], audio, cache)
        cache.reorder(index)
        step = model.logits(tokens[index, 5:6], audio, cache)
        direct = model.logits(tokens[index], audio)[:, 5:6]
    assert cache.offset == 6
    assert (step - direct).abs().max() < 1e-4


def test_dropping_windows_copies_the_cross_attention_block_by_block():
    """When windows leave the batch, each block's cross-attention keys and values are copied and
    the old ones let go before the next block's are copied: the cache never holds two whole
    copies (8 windows of base: 150 MB each)."""
    from oasr.models.whisper import WhisperKVCache

    class Rows:
        """A cross-attention tensor that counts how many of its kind are alive."""

        live = peak = 0

        def __init__(self):
            Rows.live += 1
            Rows.peak = max(Rows.peak, Rows.live)

        def __del__(self):
            Rows.live -= 1

        def index_select(self, dim, index):
            return Rows()

    blocks = 6
    cache = WhisperKVCache()
    cache.cross_kv = {i: (Rows(), Rows()) for i in range(blocks)}
    Rows.peak = Rows.live
    cache.reorder(torch.arange(3), windows=torch.arange(3))
    assert Rows.live == 2 * blocks
    assert Rows.peak <= 2 * blocks + 2, Rows.peak


def test_a_batch_lets_go_of_the_cross_attention_of_windows_that_left(tiny, clips):
    """``decode_batch`` uses its prompt up: the cross-attention keys and values the prompt held
    are not kept beside the cache's copies once windows leave the batch."""
    import weakref

    from oasr.decoding.whisper.decode import WhisperDecoder

    audios = [clips["jfk"], clips["sample"], clips["ami"][0][: 8 * SR]]  # they finish at different steps
    features = torch.cat([_window_features(tiny.model, tiny.feature_spec, a) for a in audios])
    decoder = WhisperDecoder(tiny.model, tiny.tokenizer(), beam_size=5)
    prompted = decoder.prompt(features, *decoder.initial_tokens("en", "transcribe"))
    originals = [weakref.ref(t) for kv in prompted.cross_kv.values() for t in kv]
    decoder.decode_batch(prompted, 0.0)
    assert originals and all(ref() is None for ref in originals)


@pytest.mark.parametrize("beam", [5, 1])
def test_windows_decoded_together_match_each_alone(tiny, clips, beam):
    from oasr.decoding.whisper.decode import WhisperDecoder

    model = tiny.model
    audios = [clips["jfk"], clips["sample"], clips["ami"][0][: 8 * SR]]  # they finish at different steps
    features = torch.cat([_window_features(model, tiny.feature_spec, a) for a in audios])
    decoder = WhisperDecoder(model, tiny.tokenizer(), beam_size=beam)
    tokens, sot = decoder.initial_tokens("en", "transcribe")
    together = decoder.decode_batch(decoder.prompt(features, tokens, sot), 0.0)
    for i, result in enumerate(together):
        alone = decoder.decode(decoder.prompt(features[i : i + 1], tokens, sot), 0.0)
        assert result.tokens == alone.tokens, f"window {i}: {result.text!r} != {alone.text!r}"
        assert result.sum_logprob == pytest.approx(alone.sum_logprob, abs=1e-3)
        assert result.no_speech_prob == pytest.approx(alone.no_speech_prob, abs=1e-4)
    assert len({len(r.tokens) for r in together}) == 3


def test_batched_refuses_hallucination_skipping():
    with pytest.raises(InputError, match="--batch-size 1"):
        TranscribeOptions(batch_size=8, word_timestamps=True, decoding=WhisperDecoding(hallucination_silence_threshold=2.0))


def _recording(clips) -> tuple[np.ndarray, list[tuple[str, float, float]]]:
    """jfk, sample and an AMI excerpt, four times over, 1 s of silence after each (5 min 8 s);
    the stretches that have a transcript, in seconds."""
    gap = np.zeros(SR, dtype=np.float32)
    pieces, spans, t = [], [], 0.0
    for k in range(4):
        for name, audio in (("jfk", clips["jfk"]), ("sample", clips["sample"]), ("ami", clips["ami"][k])):
            if name != "ami":
                spans.append((name, t, t + len(audio) / SR))
            pieces += [audio, gap]
            t += (len(audio) + len(gap)) / SR
    pieces.append(clips["jfk"])
    spans.append(("jfk", t, t + len(clips["jfk"]) / SR))
    return np.concatenate(pieces), spans


def _scored(transcript, spans) -> list[str]:
    """The words heard in each transcribed stretch, by the middle of their times."""
    words = [w for s in transcript.segments for w in s.words]
    return ["".join(w.word for w in words if a <= (w.start + w.end) / 2 < b) for _, a, b in spans]


@pytest.mark.slow
def test_batched_long_form_wer_within_a_point_of_sequential(tiny, clips, references):
    audio, spans = _recording(clips)
    assert len(audio) / SR >= 300
    reference = " ".join(references[name] for name, _, _ in spans)
    decoding = WhisperDecoding(beam_size=1)  # greedy keeps the sequential run short; beams: the test above
    scores, transcripts = {}, {}
    for batch in (1, 8):
        options = TranscribeOptions(word_timestamps=True, batch_size=batch, decoding=decoding)
        transcripts[batch] = oasr.transcribe(audio, tiny, options)
        scores[batch] = wer(reference, " ".join(_scored(transcripts[batch], spans)))
    print(f"\nWER over the transcribed stretches: sequential {scores[1]:.2%}, batch 8 {scores[8]:.2%}")
    assert scores[8] <= scores[1] + 0.01
    batched = transcripts[8]
    words = [w for s in batched.segments for w in s.words]
    assert len(words) > 500
    # Word starts never go back (a last word may end past its segment, as openai-whisper cuts it).
    previous = 0.0
    for s in batched.segments:
        assert s.words, f"segment {s.id} has no words"
        for w in s.words:
            assert previous - 1e-6 <= w.start <= w.end <= batched.duration, f"segment {s.id}: {w}"
            previous = w.start
