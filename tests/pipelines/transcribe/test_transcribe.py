"""``oasr.transcribe`` on real weights and real audio, and its pieces (filters, VAD, time map).

Accuracy is asserted as WER numbers (``tests/support/wer.py``: lowercase, punctuation stripped, word
edit distance), printed with ``-s``. Models: Whisper tiny.en (fast) and base (multilingual, slow
marker), both from the CTranslate2 directories the fixtures provide, converted to bundles.
"""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import oasr  # noqa: E402
from oasr.errors import CapabilityError, InputError  # noqa: E402
from oasr.decoding.whisper.options import WhisperDecoding  # noqa: E402
from oasr.options import TranscribeOptions  # noqa: E402
from wer import wer  # noqa: E402

SR = 16000


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tiny_en_bundle):
    return oasr.load_pretrained(tiny_en_bundle, device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def base_bundle(base_ct2, tmp_path_factory):
    from oasr.conversion.run import convert

    out = tmp_path_factory.mktemp("bundles") / "base"
    convert([base_ct2], out)
    return out


@pytest.fixture(scope="module")
def base(base_bundle):
    return oasr.load_pretrained(base_bundle, device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def jfk_text(data_dir):
    return (data_dir / "asr" / "jfk.txt").read_text()


@pytest.fixture(scope="module")
def jfk_audio(jfk_wav):
    from oasr.io.audio import load_audio

    return load_audio(jfk_wav, SR)


@pytest.fixture(scope="module")
def tiny_jfk(tiny, jfk_audio):
    """The default transcription (beam 5, timestamps, fallback) of jfk with tiny.en."""
    return oasr.transcribe(jfk_audio, tiny)


def _stm_text(path) -> str:
    return " ".join(line.split(maxsplit=5)[5] for line in path.read_text().splitlines() if line.strip())


def _check_timeline(transcript, duration: float) -> None:
    previous_end = 0.0
    for s in transcript.segments:
        assert 0.0 <= s.start <= s.end <= duration + 1e-6, f"segment {s.id} [{s.start}, {s.end}] outside 0..{duration}"
        assert s.start >= previous_end - 1e-6, f"segment {s.id} starts at {s.start} before the previous end {previous_end}"
        previous_end = s.end
    assert [s.id for s in transcript.segments] == list(range(len(transcript.segments)))


class _CountDecodes:
    """Counts calls of WhisperDecoder.decode (a window that is decoded at some temperature)."""

    def __init__(self, monkeypatch):
        from oasr.decoding.whisper.decode import WhisperDecoder

        self.calls = 0
        original = WhisperDecoder.decode

        def counting(decoder, *args, **kwargs):
            self.calls += 1
            return original(decoder, *args, **kwargs)

        monkeypatch.setattr(WhisperDecoder, "decode", counting)


# -- tiny.en: accuracy, decoding paths, timeline --------------------------------------------------


def test_jfk_tiny_en_beam_search_wer(tiny_jfk, jfk_text, tiny_en_bundle):
    t = tiny_jfk
    error = wer(jfk_text, t.text)
    print(f"\njfk tiny.en beam 5: WER {error:.3f} {t.text!r}")
    assert error <= 0.05
    assert t.language == "en" and t.language_probability is None  # English-only: not detected
    assert t.duration == pytest.approx(11.0, abs=0.01)
    _check_timeline(t, t.duration)
    assert len(t.segments) >= 1 and all(s.words is None for s in t.segments)
    assert all(s.temperature == 0.0 and s.avg_logprob > -1.0 and s.compression_ratio < 2.4 for s in t.segments)
    assert t.text == "".join(s.text for s in t.segments)


def test_provenance_of_a_bundle_path(tiny_en_bundle, jfk_audio):
    # float32: the weights of the bundle named (auto's int8 variant records its own, test_precision)
    t = oasr.transcribe(jfk_audio[: 3 * SR], str(tiny_en_bundle), TranscribeOptions(decoding=WhisperDecoding(beam_size=1)), dtype="float32")
    p = t.provenance
    expected = hashlib.sha256((tiny_en_bundle / "model.safetensors").read_bytes()).hexdigest()
    assert (p.model, p.architecture, p.bundle_sha256) == (str(tiny_en_bundle), "whisper", expected)
    assert p.oasr_version == oasr.__version__
    assert p.options == dataclasses.asdict(TranscribeOptions(decoding=WhisperDecoding(beam_size=1)))
    assert t.to_dict()["provenance"]["bundle_sha256"] == expected


def test_greedy_is_token_identical_to_the_reference_greedy_decoder(tiny, jfk_audio):
    """beam_size 1, timestamps off, one temperature: the same tokens as whisper_decoding.greedy_decode."""
    import torch.nn.functional as F

    from whisper_decoding import greedy_decode
    from oasr.features.logmel import log_mel_spectrogram

    options = TranscribeOptions(decoding=WhisperDecoding(beam_size=1, without_timestamps=True, temperatures=(0.0,)))
    ours = oasr.transcribe(jfk_audio, tiny, options)
    tok = tiny.tokenizer()
    mel = log_mel_spectrogram(torch.from_numpy(jfk_audio), tiny.feature_spec, padding=30 * SR)
    frames = mel.shape[-1] - 3000
    with torch.inference_mode():
        features = tiny.model.embed_audio(F.pad(mel[:, :frames], (0, 3000 - frames))[None])
    reference = greedy_decode(
        tiny.model,
        features,
        tok.sot_sequence(timestamps=False),
        eot=tok.eot,
        suppress=tok.suppressed_tokens(),
        suppress_at_begin=tok.blank_tokens(),
    )
    tokens = [t for s in ours.segments for t in s.tokens]
    print(f"\ngreedy: {len(tokens)} tokens {ours.text!r}")
    assert tokens == reference
    assert len(ours.segments) == 1 and ours.segments[0].start == 0.0  # no timestamps: the window


def test_beam_search_and_greedy_both_read_jfk(tiny, jfk_audio, jfk_text, tiny_jfk):
    greedy = oasr.transcribe(jfk_audio, tiny, TranscribeOptions(decoding=WhisperDecoding(beam_size=1)))
    beam_err, greedy_err = wer(jfk_text, tiny_jfk.text), wer(jfk_text, greedy.text)
    print(f"\njfk tiny.en: beam 5 WER {beam_err:.3f}, greedy WER {greedy_err:.3f}")
    assert beam_err <= 0.05 and greedy_err <= 0.05
    _check_timeline(greedy, greedy.duration)


def test_beam_search_finds_a_likelier_sequence_than_greedy(tiny, jfk_audio):
    """On one window, by the ranking score (sum logprob / length): beam 5 >= greedy."""
    import torch.nn.functional as F

    from oasr.decoding.whisper.decode import WhisperDecoder
    from oasr.features.logmel import log_mel_spectrogram

    mel = log_mel_spectrogram(torch.from_numpy(jfk_audio), tiny.feature_spec, padding=30 * SR)
    frames = mel.shape[-1] - 3000
    with torch.inference_mode():
        features = tiny.model.embed_audio(F.pad(mel[:, :frames], (0, 3000 - frames))[None])
    scores = {}
    for beam in (1, 5):
        decoder = WhisperDecoder(tiny.model, tiny.tokenizer(), beam_size=beam)
        prompted = decoder.prompt(features, *decoder.initial_tokens("en", "transcribe"))
        result = decoder.decode(prompted, 0.0)
        scores[beam] = result.sum_logprob / len(result.tokens)
        assert result.no_speech_prob < 0.1 and result.tokens[0] == tiny.tokenizer().timestamp_begin
    print(f"\nscore per token: greedy {scores[1]:.4f}, beam 5 {scores[5]:.4f}")
    assert scores[5] >= scores[1] - 1e-6


def test_sampling_reads_jfk(tiny, jfk_audio, jfk_text):
    """Temperature 0.2 only: the most likely of best_of samples."""
    torch.manual_seed(0)
    t = oasr.transcribe(jfk_audio, tiny, TranscribeOptions(decoding=WhisperDecoding(temperatures=(0.2,), best_of=5)))
    error = wer(jfk_text, t.text)
    print(f"\njfk tiny.en sampled at 0.2: WER {error:.3f} {t.text!r}")
    assert t.segments and error <= 0.15
    assert all(s.temperature == 0.2 for s in t.segments)


def test_the_same_seed_gives_the_same_samples(tiny, jfk_audio):
    """Sampling draws from the decoding's own seeded generator, not torch's global one (seeded
    at random in every process): a seed gives one text, whatever ran before."""

    def sampled(seed: int) -> str:
        options = TranscribeOptions(decoding=WhisperDecoding(temperatures=(1.0,), best_of=1, seed=seed))
        return oasr.transcribe(jfk_audio, tiny, options).text

    first = sampled(0)
    torch.manual_seed(12345)  # the global generator plays no part
    assert sampled(0) == first
    assert len({first, *(sampled(seed) for seed in (1, 2, 3))}) > 1


def test_fallback_tries_every_temperature_and_keeps_the_best(tiny, jfk_audio, monkeypatch):
    """An impossible logprob threshold fails every temperature: each is tried once per window,
    and the window keeps the most probable result whose compression ratio passed."""
    counter = _CountDecodes(monkeypatch)
    options = TranscribeOptions(decoding=WhisperDecoding(temperatures=(0.0, 0.4, 0.8), logprob_threshold=0.0, no_speech_threshold=None))
    t = oasr.transcribe(jfk_audio, tiny, options)
    windows = len({s.seek for s in t.segments})
    print(f"\nforced fallback: {counter.calls} decodes for {windows} window(s), temperatures {[s.temperature for s in t.segments]}")
    assert counter.calls == 3 * windows
    assert t.segments[0].temperature == 0.0  # beam search at 0 is the most probable here


def test_initial_prompt(tiny, jfk_audio, jfk_text):
    t = oasr.transcribe(jfk_audio, tiny, TranscribeOptions(decoding=WhisperDecoding(initial_prompt="President Kennedy's inaugural address.")))
    assert wer(jfk_text, t.text) <= 0.05
    assert "inaugural" not in t.text  # the prompt conditions, it is not transcribed


def test_progress_in_audio_seconds(tiny, jfk_audio, jfk_text):
    audio = np.concatenate([jfk_audio] * 3)  # 33 s: two windows or more
    calls = []
    t = oasr.transcribe(audio, tiny, TranscribeOptions(decoding=WhisperDecoding(beam_size=1)), progress=lambda d, n: calls.append((d, n)))
    print(f"\nprogress: {calls}")
    assert len(calls) >= 3 and calls[-1] == (t.duration, t.duration) == (33.0, 33.0)
    assert all(a[0] <= b[0] for a, b in zip(calls, calls[1:]))  # never backwards
    assert 0 < calls[0][0] < 33.0 and all(n == 33.0 for _, n in calls)
    assert wer(" ".join([jfk_text] * 3), t.text) <= 0.1
    _check_timeline(t, t.duration)


def test_repeated_segments_are_dropped(tiny, jfk_audio, monkeypatch):
    """A repeat of the previous segment goes when it comes from an earlier window or has three
    words or more (a loop); a short repeat inside one window ("Hi. Hi.") stays."""
    from oasr.decoding.whisper.decode import WhisperDecoder, WindowResult

    tok = tiny.tokenizer()

    def window(*pieces):
        tokens = []
        for start, text, end in pieces:
            tokens += [tok.timestamp_begin + round(start / 0.02), *tok.encode(text), tok.timestamp_begin + round(end / 0.02)]
        return WindowResult(tuple(tokens), tok.decode(tokens), -1.0, -0.1, 0.01, 0.0, 1.0)

    results = iter([
        window((0, " Hello there my friend.", 2), (2, " Hello there, my friend!", 4), (4, " Hi.", 5), (5, " Hi.", 6)),
        window((0, " hi", 1), (1, " Bye.", 2)),
    ])
    monkeypatch.setattr(WhisperDecoder, "decode", lambda self, prompted, temperature=0.0: next(results))
    t = oasr.transcribe(np.concatenate([jfk_audio] * 4), tiny)
    assert [s.text for s in t.segments] == [" Hello there my friend.", " Hi.", " Hi.", " Bye."]
    assert [s.start for s in t.segments] == [0.0, 4.0, 5.0, 31.0]


def test_silence_gives_an_empty_transcript_without_decoding(tiny, monkeypatch):
    counter = _CountDecodes(monkeypatch)
    t = oasr.transcribe(np.zeros(5 * SR, dtype=np.float32), tiny)
    assert (t.text, t.segments, t.duration) == ("", (), 5.0)
    assert counter.calls == 0  # a window of pure silence is not decoded


def test_ami_empty_wav_gives_an_empty_transcript(tiny, data_dir):
    t = oasr.transcribe(str(data_dir / "diarization" / "ami" / "empty.wav"), tiny)
    print(f"\nami/empty.wav: {t.text!r}")
    assert t.text == "" and t.segments == ()


def test_energy_vad_keeps_the_text(tiny, jfk_audio, jfk_text, tiny_jfk, monkeypatch):
    vad = oasr.transcribe(jfk_audio, tiny, TranscribeOptions(vad="energy"))
    plain_err, vad_err = wer(jfk_text, tiny_jfk.text), wer(jfk_text, vad.text)
    print(f"\njfk tiny.en: WER {plain_err:.3f} without VAD, {vad_err:.3f} with the energy VAD")
    assert vad_err <= plain_err + 0.02
    _check_timeline(vad, vad.duration)
    counter = _CountDecodes(monkeypatch)
    for silence in (np.zeros(5 * SR, dtype=np.float32), np.full(3 * SR, 0.3, dtype=np.float32)):
        t = oasr.transcribe(silence, tiny, TranscribeOptions(vad="energy"))
        assert (t.text, t.segments) == ("", ())
    assert counter.calls == 0


def test_vad_times_map_back_to_the_original(tiny, jfk_audio, jfk_text, tiny_jfk):
    """jfk with 20 s of silence in front: with the VAD the silence is never decoded, and the
    segments land where they are in the padded file."""
    padded = np.concatenate([np.zeros(20 * SR, dtype=np.float32), jfk_audio])
    t = oasr.transcribe(padded, tiny, TranscribeOptions(vad="energy"))
    print(f"\n20 s silence + jfk with VAD: {[(s.start, s.end) for s in t.segments]}")
    assert wer(jfk_text, t.text) <= 0.05
    _check_timeline(t, t.duration)
    assert t.segments[0].start >= 19.5 and t.segments[-1].end <= 31.01
    assert abs(t.segments[0].start - 20.0 - tiny_jfk.segments[0].start) < 0.6


def test_word_timestamps_integration(tiny, jfk_audio):
    pytest.importorskip("oasr.decoding.whisper.alignment")
    t = oasr.transcribe(jfk_audio, tiny, TranscribeOptions(word_timestamps=True))
    words = [w for s in t.segments for w in s.words]
    print(f"\nwords: {[(w.word, w.start, w.end) for w in words[:6]]}")
    assert len(words) >= 20
    for s in t.segments:
        assert s.words and abs(s.start - s.words[0].start) < 1.0 and abs(s.end - s.words[-1].end) < 1.0
    assert all(0 <= w.start <= w.end <= t.duration for w in words)
    assert all(b.start >= a.start for a, b in zip(words, words[1:]))


# -- errors and capabilities -----------------------------------------------------------------------


def test_capability_errors(tiny, jfk_audio):
    short = jfk_audio[:SR]
    with pytest.raises(CapabilityError, match="English-only"):
        oasr.transcribe(short, tiny, TranscribeOptions(language="fr"))
    with pytest.raises(CapabilityError, match="translate"):
        oasr.transcribe(short, tiny, TranscribeOptions(task="translate"))
    no_tokenizer = dataclasses.replace(tiny, tokenizer_spec=dataclasses.replace(tiny.tokenizer_spec, kind="none"))
    with pytest.raises(CapabilityError, match="tokenizer"):
        oasr.transcribe(short, no_tokenizer)
    with pytest.raises(InputError, match="one channel"):
        oasr.transcribe(np.zeros((2, SR), dtype=np.float32), tiny)
    with pytest.raises(InputError, match="no such file"):
        oasr.transcribe("/nonexistent/audio.wav", tiny)


# -- base (multilingual): language ID, translate, sample.wav against faster-whisper ----------------


@pytest.mark.slow
def test_language_id_and_translate_with_base(base, jfk_audio, jfk_text):
    t = oasr.transcribe(jfk_audio, base)
    print(f"\nbase on jfk: language {t.language} p={t.language_probability:.3f}, WER {wer(jfk_text, t.text):.3f}")
    assert t.language == "en" and t.language_probability > 0.9
    assert wer(jfk_text, t.text) <= 0.05
    translated = oasr.transcribe(jfk_audio, base, TranscribeOptions(task="translate", language="en"))
    print(f"translate: {translated.text!r}")
    assert translated.language == "en" and translated.language_probability is None
    assert wer(jfk_text, translated.text) <= 0.2


@pytest.mark.parametrize("batch_size", [1, 8])
def test_only_a_recording_of_one_window_gives_the_heap_back_between_layers(tiny, jfk_audio, monkeypatch, batch_size):
    """jfk (11 s) is one window: each encoder block is followed by a release; three copies of it
    (33 s, two windows) grow the heap once for good, and release nothing."""
    from oasr import heap

    calls = []
    monkeypatch.setattr(heap, "release_free_pages", lambda: calls.append(1) or True)
    options = TranscribeOptions(batch_size=batch_size)
    short = oasr.transcribe(jfk_audio, tiny, options)
    assert short.text.strip() and len(calls) % tiny.model.config.n_audio_layer == 0 and calls
    calls.clear()
    oasr.transcribe(np.concatenate([jfk_audio] * 3), tiny, options)
    assert calls == []


@pytest.mark.slow
def test_language_detection_and_decoding_share_the_cross_attention_keys(base, jfk_audio, monkeypatch):
    """The audio's cross-attention keys and values are projected once per decoder block for both
    language detection and the decoding after it (base: 12 integer/float GEMMs of 1500 rows
    fewer), and the transcript is the one two projections give."""
    from oasr.models import whisper as W
    from oasr.pipelines.transcribe.whisper.decoder import WindowDecoder

    projected = []
    project_kv = W.MultiHeadAttention.project_kv
    cross = {id(block.cross_attn) for block in base.model.decoder.blocks}

    def counting(self, x):
        if id(self) in cross:
            projected.append(1)
        return project_kv(self, x)

    monkeypatch.setattr(W.MultiHeadAttention, "project_kv", counting)
    shared = oasr.transcribe(jfk_audio, base)
    assert shared.language == "en" and len(projected) == base.model.config.n_text_layer
    projected.clear()
    monkeypatch.setattr(WindowDecoder, "_projected", lambda self, features: None)
    twice = oasr.transcribe(jfk_audio, base)
    assert len(projected) == 2 * base.model.config.n_text_layer
    assert [s.tokens for s in shared.segments] == [s.tokens for s in twice.segments]
    assert shared.language_probability == twice.language_probability


@pytest.mark.slow
def test_sample_wav_base_against_faster_whisper(base, base_ct2, data_dir):
    pytest.importorskip("faster_whisper")
    import ctranslate2
    from faster_whisper import WhisperModel

    wav = data_dir / "diarization" / "sample.wav"
    reference = _stm_text(data_dir / "diarization" / "sample.stm")
    options = TranscribeOptions(decoding=WhisperDecoding(beam_size=5, best_of=5, condition_on_previous_text=True))
    torch.manual_seed(0)  # temperature fallback samples: fixed seeds, repeatable numbers
    ctranslate2.set_random_seed(0)
    ours = oasr.transcribe(str(wav), base, options)
    fw = WhisperModel(str(base_ct2), device="cpu", compute_type="float32", cpu_threads=2)
    segments, info = fw.transcribe(
        str(wav), beam_size=5, best_of=5, temperature=list(options.decoding.temperatures), condition_on_previous_text=True
    )
    fw_text = "".join(s.text for s in segments)
    ours_err, fw_err = wer(reference, ours.text), wer(reference, fw_text)
    print(f"\nsample.wav base: oasr WER {ours_err:.3f} ({ours.language}), faster-whisper WER {fw_err:.3f} ({info.language})")
    print(f"oasr: {ours.text!r}\nfaster-whisper: {fw_text!r}")
    assert ours.language == "en"
    assert ours_err <= fw_err + 0.01
    _check_timeline(ours, ours.duration)
    texts = [s.text.strip().lower() for s in ours.segments]
    assert len(texts) >= 2 and texts[-1] != texts[-2], "the final segment repeats the one before"


@pytest.mark.slow
def test_long_audio_timeline_covers_the_speech(tiny, data_dir, tmp_path):
    """AMI excerpts + sample.wav, over 3 minutes. Coverage: the share of the reference speech
    (RTTM turns, overlaps merged) that lies inside some segment. Whisper segments run from the
    first word to the last of a phrase, so the union of segments should hold nearly all speech;
    a skipped window or a timeline that drifts off the audio loses whole 30 s blocks of it."""
    import soundfile as sf

    from oasr.io.audio import load_audio

    ami = data_dir / "diarization" / "ami"
    parts = sorted(ami.glob("dev*.wav")) + sorted(ami.glob("trn*.wav")) + [data_dir / "diarization" / "sample.wav"]
    turns: dict[str, list[tuple[float, float]]] = {}
    for rttm in [*ami.glob("*.rttm"), data_dir / "diarization" / "sample.rttm"]:
        for line in rttm.read_text().splitlines():
            f = line.split()
            if f and f[0] == "SPEAKER":
                turns.setdefault(f[1], []).append((float(f[3]), float(f[3]) + float(f[4])))
    audio, reference, offset = [], [], 0.0
    for path in parts:
        samples = load_audio(path, SR)
        audio.append(samples)
        reference += [(offset + a, offset + b) for a, b in turns.get(path.stem, [])]
        offset += len(samples) / SR
    wav = tmp_path / "long.wav"
    sf.write(wav, np.concatenate(audio), SR)
    assert offset > 180
    torch.manual_seed(0)
    t = oasr.transcribe(str(wav), tiny)
    _check_timeline(t, offset)
    speech = _union(reference)
    covered = _overlap(speech, _union([(s.start, s.end) for s in t.segments]))
    total = sum(b - a for a, b in speech)
    print(f"\n{offset:.0f} s, {len(t.segments)} segments, reference speech {total:.0f} s, covered {covered / total:.3f}")
    assert covered / total >= 0.8
    assert t.segments[-1].end > offset - 30  # the timeline reaches the last file


def _union(spans):
    out = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def _overlap(xs, ys) -> float:
    return sum(max(0.0, min(b, d) - max(a, c)) for a, b in xs for c, d in ys)


# -- pieces ------------------------------------------------------------------------------------------


def test_timestamp_rules():
    from oasr.decoding.whisper.filters import WhisperLogitFilter

    V, eot, tb = 20, 10, 12  # text 0..9, eot 10, no_timestamps 11, timestamps 12..19
    f = WhisperLogitFilter(V, eot=eot, suppress=[3], begin=[eot], timestamp_begin=tb, no_timestamps=11, max_initial_index=2)
    state = f.new_state(1, torch.device("cpu"))
    first = f.apply(torch.zeros(1, V), state)[0]
    assert torch.isfinite(first).nonzero().flatten().tolist() == [12, 13, 14]  # a timestamp <= 2
    state.update(torch.tensor([13]))
    after_one = f.apply(torch.zeros(1, V), state)[0]  # text must follow the opening timestamp
    assert torch.isinf(after_one[tb:]).all() and torch.isfinite(after_one[:3]).all() and torch.isinf(after_one[3])
    state.update(torch.tensor([5]))
    text = torch.zeros(1, V)
    text[0, :tb] = 5.0  # text far more likely than any timestamp: no forced timestamp
    allowed = torch.isfinite(f.apply(text, state)[0]).nonzero().flatten().tolist()
    assert 11 not in allowed and 12 not in allowed and 13 not in allowed and 14 in allowed  # no <|notimestamps|>, monotonic, non-empty
    state.update(torch.tensor([15]))
    closing = torch.zeros(1, V)
    closing[0, eot] = 5.0  # end-of-text likelier than the timestamps together
    closing = f.apply(closing, state)[0]  # a lone closing timestamp: another timestamp or eot
    assert torch.isinf(closing[:eot]).all() and torch.isfinite(closing[eot]) and torch.isfinite(closing[15:]).all()
    assert torch.isinf(closing[12:15]).all()  # ... not before the last one
    state.update(torch.tensor([15]))
    paired = f.apply(torch.zeros(1, V), state)[0]  # after a pair: no timestamp
    assert torch.isinf(paired[tb:]).all() and torch.isfinite(paired[:3]).all()
    state = f.new_state(1, torch.device("cpu"))
    state.update(torch.tensor([12]))
    state.update(torch.tensor([5]))
    stamps = torch.full((1, V), -5.0)
    stamps[0, tb:] = 0.0  # the timestamps together outweigh every text token: one is forced
    forced = f.apply(stamps, state)[0]
    assert torch.isinf(forced[:tb]).all() and torch.isfinite(forced[13:]).all()


def test_candidates_are_ranked_by_length_normalised_logprob(tiny):
    """openai's ranker: sum logprob / length, or / ((5 + length) / 6) ** alpha."""
    from oasr.decoding.whisper.decode import Prompted, WhisperDecoder

    candidates = [([1, 2, 3, 4], -2.0), ([5], -0.9), ([6, 7], -1.0)]  # per token: -0.5, -0.9, -0.5
    prompted = Prompted(None, 1, {}, {}, torch.zeros(1, 4), 0.0)
    picks = {}
    for alpha in (None, 1.0):
        decoder = WhisperDecoder(tiny.model, tiny.tokenizer(), beam_size=5, length_penalty=alpha)
        decoder._beam_search = lambda prompted, steps: list(candidates)
        picks[alpha] = decoder.decode(prompted, 0.0)
    assert picks[None].tokens == (1, 2, 3, 4)  # ties go to the first
    assert picks[None].avg_logprob == pytest.approx(-2.0 / 5)  # end-of-text counts in the average
    assert picks[1.0].tokens == (6, 7)  # -1.0 / (7/6) beats -0.9 / 1 and -2.0 / (9/6)


def test_sampler_follows_the_distribution():
    from oasr.decoding.whisper.decode import WhisperDecoder

    logits = torch.log(torch.tensor([[0.1, 0.0, 0.6, 0.3]])).expand(20000, -1)
    decoder = WhisperDecoder.__new__(WhisperDecoder)
    decoder.generator = torch.Generator().manual_seed(0)
    draws = decoder._draw(logits, 1.0)
    freq = torch.bincount(draws, minlength=4).float() / len(draws)
    assert freq[1] == 0 and torch.allclose(freq, torch.tensor([0.1, 0.0, 0.6, 0.3]), atol=0.015)


def test_energy_vad_regions_and_time_map():
    from oasr.pipelines.vad.energy import SpeechMap, collect_speech, speech_regions

    rng = np.random.default_rng(0)
    audio = (rng.standard_normal(10 * SR) * 1e-4).astype(np.float32)  # -80 dBFS noise
    tone = 0.3 * np.sin(2 * np.pi * 220 * np.arange(SR) / SR)
    for start in (2, 6):
        audio[start * SR : (start + 1) * SR] += tone.astype(np.float32)
    audio[8 * SR : 8 * SR + 800] += 0.5  # a 50 ms click: too short for speech
    regions = speech_regions(audio, SR)
    assert [(round(a / SR, 1), round(b / SR, 1)) for a, b in regions] == [(1.8, 3.2), (5.8, 7.2)]
    joined, m = collect_speech(audio, regions, SR)
    assert len(joined) == sum(b - a for a, b in regions) and m.duration == pytest.approx(2.8)
    assert m.to_original(0.0) == pytest.approx(1.8) and m.to_original(1.5) == pytest.approx(5.9)
    assert m.to_original(1.4, is_end=True) == pytest.approx(3.2)  # an end at the seam stays in the first region
    assert m.to_original(1.4) == pytest.approx(5.8)
    assert m.to_original(99.0) == pytest.approx(7.2)
    assert speech_regions(np.zeros(SR, dtype=np.float32), SR) == []
    assert isinstance(SpeechMap([(0, SR)], SR), SpeechMap)
