"""Word-level timestamps: cross-attention alignment heads + DTW (``oasr.decoding.whisper.alignment``).

- Word splitting (``oasr.tokenizers.words``) on English with punctuation and on CJK text, against
  openai-whisper's tokenizer methods on the same GPT-2 vocabulary.
- The DTW and the median filter against openai-whisper's own (numba) kernels, ties included.
- The cross-attention scores the model returns on request: the logits stay those of SDPA.
- Parity with openai-whisper's ``find_alignment`` / ``add_word_timestamps`` on the real tiny.en
  weights, loaded into ``whisper.model.Whisper`` from oasr's own state dict, same tokens, same mel:
  one segment (jfk), several segments with bounds that trigger the cutting rules, and a 30 s
  telephone call with pauses (sample.wav).
- Acceptance (slow, real base weights): on sample.wav the first word of each ``sample.stm``
  utterance starts within 0.3 s of the reference, in the median.
"""

from __future__ import annotations

import base64
import gzip
import re
import string
import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from oasr.decoding.whisper.alignment import (  # noqa: E402
    WordTiming,
    align_segments,
    default_alignment_heads,
    dtw,
    median_filter,
    merge_punctuations,
)
from oasr.loading import load_pretrained  # noqa: E402
from oasr.tokenizers.words import split_to_word_tokens  # noqa: E402
from whisper_decoding import align_words  # noqa: E402

PUNCT_PREPEND = "\"'“¿([{-"
PUNCT_APPEND = "\"'.。,，!！?？:：”)]}、"


def _openai_gpt2_tokenizer(language=None):
    """openai-whisper's tokenizer on the GPT-2 vocabulary (tiny.en's), with ``language`` set."""
    whisper_tokenizer = pytest.importorskip("whisper.tokenizer")
    encoding = whisper_tokenizer.get_encoding("gpt2")
    return whisper_tokenizer.Tokenizer(encoding=encoding, num_languages=99, language=language, task="transcribe")


@pytest.fixture(scope="module")
def tiny_en(tiny_en_ct2):
    torch.set_num_threads(min(2, torch.get_num_threads()))
    return load_pretrained(tiny_en_ct2, device="cpu", dtype="float32")


# -- word splitting -----------------------------------------------------------------------------


def test_split_english_with_punctuation(tiny_en):
    tok = tiny_en.tokenizer()
    text = ' "Well," she said, it\'s 3.5% more - isn\'t it?'
    tokens = tok.encode(text) + [tok.eot]
    words, groups = split_to_word_tokens(tok, tokens, "en")
    # a piece starting with a space or made of one punctuation mark opens a word; other pieces
    # join the word before them (so '"' + 'Well' + ',"' is one word, and '.' + '5' another)
    assert words[:-1] == [' "Well,"', " she", " said", ",", " it's", " 3", ".5", "%", " more", " -", " isn't", " it", "?"]
    assert words[-1] == "<|endoftext|>" and groups[-1] == [tok.eot]
    assert [t for g in groups for t in g] == tokens  # every token once, in order
    ref_words, ref_groups = _openai_gpt2_tokenizer("en").split_to_word_tokens(tokens)
    assert (words, groups) == (ref_words, ref_groups)


def test_split_cjk_keeps_characters_whole(tiny_en):
    """GPT-2's byte-level vocabulary cuts most CJK characters over two tokens: groups must not."""
    tok = tiny_en.tokenizer()
    for language, text in (("zh", "你好，世界。我们在北京。"), ("ja", "こんにちは、東京タワー！")):
        tokens = tok.encode(text)
        assert len(tokens) > len(text)  # some characters do span several tokens
        words, groups = split_to_word_tokens(tok, tokens, language)
        assert "".join(words) == text
        assert all("\ufffd" not in w and w for w in words)
        assert [t for g in groups for t in g] == tokens
        assert len(words) == len(text)  # no spaces: one group per character here
        assert (words, groups) == _openai_gpt2_tokenizer(language).split_to_word_tokens(tokens)
    # the same Chinese text in a spaced language: one "word" (no space, no ASCII punctuation)
    words, _ = split_to_word_tokens(tok, tok.encode(" 你好世界"), "en")
    assert words == [" 你好世界"]


def test_merge_punctuations():
    def timing(word):
        return WordTiming(word, [len(word)], 0.0, 0.0, 1.0)

    pieces = [" (", "Hello", ",", " world", "!", "\"", " ¿", "Qué", "?"]
    alignment = [timing(w) for w in pieces]
    merge_punctuations(alignment, PUNCT_PREPEND, PUNCT_APPEND)
    assert [t.word for t in alignment if t.word] == [" (Hello,", " world!\"", " ¿Qué?"]
    assert sum(len(t.tokens) for t in alignment) == 9 and [t.word for t in alignment].count("") == 6
    timing_module = pytest.importorskip("whisper.timing")
    reference = [timing_module.WordTiming(w, [len(w)], 0.0, 0.0, 1.0) for w in pieces]
    timing_module.merge_punctuations(reference, PUNCT_PREPEND, PUNCT_APPEND)
    assert [(t.word, t.tokens) for t in alignment] == [(t.word, t.tokens) for t in reference]


# -- DTW, median filter, attention scores -------------------------------------------------------


def test_dtw_and_median_filter_match_openai():
    timing = pytest.importorskip("whisper.timing")
    rng = np.random.default_rng(0)
    cases = [rng.standard_normal((40, 700))]
    # small integer costs: many ties, which must resolve the same way (diagonal, down, right)
    cases += [rng.integers(-2, 3, (int(rng.integers(1, 25)), int(rng.integers(1, 50)))).astype(float) for _ in range(40)]
    for x in cases:
        ours = dtw(x)
        ref = timing.dtw_cpu(x)
        assert np.array_equal(ours[0], ref[0]) and np.array_equal(ours[1], ref[1]), x.shape
    w = torch.randn(3, 20, 300)
    for width in (1, 3, 7):
        assert torch.equal(median_filter(w, width), timing.median_filter(w, width))
    assert torch.equal(median_filter(w[..., :3], 7), w[..., :3])  # too short to filter


def test_cross_attention_scores_leave_the_logits_unchanged(tiny_en):
    from oasr.models.whisper import WhisperKVCache

    model = tiny_en.model
    gen = torch.Generator().manual_seed(0)
    audio = torch.randn(1, 1500, model.config.n_audio_state, generator=gen)
    tokens = torch.tensor([[50257, 50362, 843, 523, 616, 7126]])
    heads = [[3, 4], [1, 0], [3, 1]]
    with torch.inference_mode():
        plain = model.logits(tokens, audio)
        logits, scores = model.logits(tokens, audio, cross_attention_heads=heads)
        cache = WhisperKVCache()
        model.logits(tokens[:, :4], audio, cache)
        step, step_scores = model.logits(tokens[:, 4:], audio, cache, cross_attention_heads=heads)
    assert scores.shape == (1, 3, 6, 1500) and scores.dtype == torch.float32
    assert (logits - plain).abs().max() < 1e-4
    assert (step - plain[:, 4:]).abs().max() < 1e-4
    assert (step_scores - scores[:, :, 4:]).abs().max() < 1e-4
    assert default_alignment_heads(4, 6) == [[2, h] for h in range(6)] + [[3, h] for h in range(6)]


# -- parity with openai-whisper -----------------------------------------------------------------


def _openai_model(loaded, alignment_heads):
    """openai-whisper's Whisper holding the same weights as ``loaded`` and the same alignment heads."""
    pytest.importorskip("whisper")
    from whisper.model import ModelDimensions, Whisper

    from oasr.models.whisper import sinusoids

    c = loaded.config
    dims = ModelDimensions(
        n_mels=c.n_mels, n_audio_ctx=c.n_audio_ctx, n_audio_state=c.n_audio_state, n_audio_head=c.n_audio_head,
        n_audio_layer=c.n_audio_layer, n_vocab=c.n_vocab, n_text_ctx=c.n_text_ctx, n_text_state=c.n_text_state,
        n_text_head=c.n_text_head, n_text_layer=c.n_text_layer,
    )
    model = Whisper(dims)
    state = dict(loaded.model.state_dict())
    state["encoder.positional_embedding"] = sinusoids(c.n_audio_ctx, c.n_audio_state)
    model.load_state_dict(state, strict=True)
    mask = np.zeros((c.n_text_layer, c.n_text_head), dtype=bool)
    for layer, head in alignment_heads:
        mask[layer, head] = True
    model.set_alignment_heads(base64.b85encode(gzip.compress(mask.tobytes())))
    return model.eval()


def _window(loaded, wav: Path):
    """openai-whisper's framing: the log-mel of the audio plus 30 s of zeros; the first 3000 frames."""
    from oasr.io.audio import load_audio
    from oasr.features.logmel import log_mel_spectrogram

    audio = load_audio(wav)
    mel = log_mel_spectrogram(torch.from_numpy(audio), loaded.feature_spec, padding=480000)
    return mel[:, :3000], min(3000, len(audio) // 160)


def _compare_with_openai(loaded, wav, segments, *, language, multilingual, last_speech=0.0):
    """Run both implementations on ``segments`` (dicts with tokens, start, end); returns stats."""
    from whisper.timing import add_word_timestamps
    from whisper.tokenizer import get_tokenizer

    heads = loaded.decoding.options["alignment_heads"]
    tok = loaded.tokenizer()
    mel, num_frames = _window(loaded, wav)
    ours = align_segments(
        loaded.model, tok, mel, [s["tokens"] for s in segments], num_frames=num_frames, alignment_heads=heads,
        language=language, prepend_punctuations=PUNCT_PREPEND, append_punctuations=PUNCT_APPEND, time_offset=0.0,
        segment_bounds=[(s["start"], s["end"]) for s in segments], last_speech_timestamp=last_speech,
    )
    ref_segments = [dict(s, seek=0) for s in segments]
    reference = _openai_model(loaded, heads)
    ref_tok = get_tokenizer(multilingual, language=language if multilingual else None, task="transcribe")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        add_word_timestamps(
            segments=ref_segments, model=reference, tokenizer=ref_tok, mel=mel, num_frames=num_frames,
            prepend_punctuations=PUNCT_PREPEND, append_punctuations=PUNCT_APPEND, last_speech_timestamp=last_speech,
        )
    n = close = 0
    worst_p = worst_t = 0.0
    for our_words, ref_seg, bounds in zip(ours.words, ref_segments, ours.segment_bounds):
        ref_words = ref_seg["words"]
        assert [w.word for w in our_words] == [w["word"] for w in ref_words]
        for a, b in zip(our_words, ref_words):
            n += 1
            close += abs(a.start - b["start"]) <= 0.02 + 1e-6 and abs(a.end - b["end"]) <= 0.02 + 1e-6
            worst_p = max(worst_p, abs(a.probability - b["probability"]))
            worst_t = max(worst_t, abs(a.start - b["start"]), abs(a.end - b["end"]))
        if our_words:
            assert bounds == pytest.approx((ref_seg["start"], ref_seg["end"]), abs=0.02 + 1e-6)
    print(f"{wav.name}: {n} words, {close} with start and end within 0.02 s (max |dt| {worst_t:.3f} s), max |dp| {worst_p:.1e}")
    assert n > 0
    assert close >= 0.95 * n, f"only {close}/{n} words within one frame of openai-whisper"
    assert worst_p <= 1e-3
    return ours


def test_parity_with_openai_jfk(tiny_en, jfk_wav, data_dir):
    tok = tiny_en.tokenizer()
    tokens = tok.encode(" " + (data_dir / "asr" / "jfk.txt").read_text().strip())
    ours = _compare_with_openai(tiny_en, jfk_wav, [dict(tokens=tokens, start=0.0, end=11.0)], language="en", multilingual=False)
    words = ours.words[0]
    assert [w.word for w in words][:5] == [" And", " so", " my", " fellow", " Americans,"]
    assert all(a.end <= b.start + 1e-9 for a, b in zip(words, words[1:]))
    assert 0.0 <= words[0].start and words[-1].end <= 11.0
    # "ask" opens the famous phrase near 3.4 s (it follows a pause)
    ask = next(w for w in words if w.word == " ask")
    assert 2.8 <= ask.start <= 4.0, ask


def test_parity_with_openai_segment_rules(tiny_en, jfk_wav, data_dir):
    """Two segments whose given bounds are tighter than the words: the first word, the last word
    of each segment and the word after the pause are cut by openai-whisper's rules."""
    tok = tiny_en.tokenizer()
    first = tok.encode(" And so my fellow Americans, ask not what your country can do for you,")
    second = tok.encode(" ask what you can do for your country.")
    segments = [dict(tokens=first, start=0.6, end=7.5), dict(tokens=second, start=8.6, end=9.6)]
    ours = _compare_with_openai(tiny_en, jfk_wav, segments, language="en", multilingual=False)
    # unbounded, " And" spans 0.00-0.74 and " you," 7.26-8.02: both overrun the bounds by > 0.5 s
    assert ours.segment_bounds[0] == (0.6, 7.5)
    assert 0.0 < ours.words[0][0].start <= 0.6 and ours.words[0][-1].end < 7.9


def test_parity_with_openai_sample_with_pauses(tiny_en, data_dir):
    """30 s of a telephone call: speech starts after 6 s of ringing (the pause rule fires)."""
    tok = tiny_en.tokenizer()
    text = " ".join(line.split(maxsplit=5)[5] for line in (data_dir / "diarization" / "sample.stm").read_text().splitlines())
    segments = [dict(tokens=tok.encode(" " + text), start=0.0, end=30.0)]
    _compare_with_openai(tiny_en, data_dir / "diarization" / "sample.wav", segments, language="en", multilingual=False)


def test_empty_and_window_offset(tiny_en, jfk_wav):
    """No tokens: no words. A window later in the file: the same words shifted by its start."""
    tok = tiny_en.tokenizer()
    mel, num_frames = _window(tiny_en, jfk_wav)
    heads = tiny_en.decoding.options["alignment_heads"]
    kwargs = dict(num_frames=num_frames, alignment_heads=heads, language="en")
    assert align_words(tiny_en.model, tok, mel, [[], []], **kwargs) == [[], []]
    tokens = tok.encode(" And so my fellow Americans, ask not")
    at_zero = align_words(tiny_en.model, tok, mel, [[], tokens], **kwargs)
    later = align_words(tiny_en.model, tok, mel, [[], tokens], time_offset=90.0, last_speech_timestamp=90.0, **kwargs)
    assert at_zero[0] == [] and len(at_zero[1]) == 7
    for a, b in zip(at_zero[1], later[1]):
        assert (b.start - a.start, b.end - a.end) == pytest.approx((90.0, 90.0), abs=1e-6)
        assert a.word == b.word and a.probability == b.probability


# -- acceptance: onsets on sample.wav with base -------------------------------------------------


def _normalise(word: str) -> str:
    return re.sub(rf"[{re.escape(string.punctuation.replace(chr(39), ''))}]", "", word.lower()).strip()


def _edit_alignment(ref: list[str], hyp: list[str], ref_times: list[float], hyp_times: list[float]) -> dict[int, int]:
    """Word alignment of reference and hypothesis: reference index -> hypothesis index for every
    match or substitution (deleted reference words are absent).

    Text decides: the fewest errors (substitutions, insertions, deletions), then the most exact
    matches. Only among alignments equal on both does time break the tie (the smallest summed
    |hypothesis start - reference time| over aligned pairs), as sclite's time-mediated alignment
    does; this is what places a single hypothesis "hello" against the right one of two.
    """
    error, match = 1e8, 1e5  # lexicographic: errors, then matches, then seconds (<< 1e5)

    def pair(i: int, j: int) -> float:
        return (-match if ref[i] == hyp[j] else error) + abs(ref_times[i] - hyp_times[j])

    n, m = len(ref), len(hyp)
    d = np.zeros((n + 1, m + 1))
    d[:, 0] = np.arange(n + 1) * error
    d[0, :] = np.arange(m + 1) * error
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d[i, j] = min(d[i - 1, j - 1] + pair(i - 1, j - 1), d[i - 1, j] + error, d[i, j - 1] + error)
    pairs = {}
    i, j = n, m
    while i > 0 and j > 0:
        if d[i, j] == d[i - 1, j - 1] + pair(i - 1, j - 1):
            pairs[i - 1] = j - 1
            i, j = i - 1, j - 1
        elif d[i, j] == d[i - 1, j] + error:
            i -= 1
        else:
            j -= 1
    return pairs


def _onset_errors(words, stm: Path) -> tuple[list[tuple[str, float, str, float]], float]:
    """Onset error of the first word of each stm utterance, and their median.

    Matching rule: all reference words (utterances in time order) and all hypothesis words are
    aligned one to one, in order (``_edit_alignment``): by text first (lowercased, punctuation
    removed), by time only between equally good text alignments (reference words are given
    times spread evenly over their utterance). An utterance's first word is scored against the
    hypothesis word aligned to it, a match or a substitution; a first word left without a
    counterpart (the model dropped it) scores as an infinite error, which counts against the
    median. No hypothesis word serves twice, and time never overrides text: it only chooses
    between alignments equally good in text (a lone "hello" against the first of two, say).
    """
    utterances = []
    for line in stm.read_text().splitlines():
        _, _, _, start, end, text = line.split(maxsplit=5)
        utterances.append((float(start), float(end), [_normalise(w) for w in text.split()]))
    utterances.sort(key=lambda u: u[0])
    ref, ref_times, first_index = [], [], []
    for start, end, ws in utterances:
        first_index.append(len(ref))
        ref.extend(ws)
        ref_times.extend(start + (end - start) * k / len(ws) for k in range(len(ws)))
    hyp = [_normalise(w.word) for w in words]
    pairs = _edit_alignment(ref, hyp, ref_times, [w.start for w in words])
    rows = []
    for (start, _, ws), k in zip(utterances, first_index):
        if k in pairs:
            w = words[pairs[k]]
            rows.append((ws[0], start, w.word.strip(), abs(w.start - start)))
        else:
            rows.append((ws[0], start, "-", float("inf")))
    return rows, float(np.median([r[3] for r in rows]))


def _print_onsets(title, rows, median):
    print(f"\n{title}: median onset error {median:.3f} s")
    for ref_word, ref_start, hyp_word, err in rows:
        print(f"  {ref_start:7.2f}  {ref_word:10} -> {hyp_word:12} {err:6.2f}")


@pytest.fixture(scope="module")
def base(base_ct2):
    torch.set_num_threads(min(2, torch.get_num_threads()))
    return load_pretrained(base_ct2, device="cpu", dtype="float32")


@pytest.mark.slow
def test_sample_onsets_with_base(base, data_dir):
    from whisper_decoding import greedy_decode

    wav, stm = data_dir / "diarization" / "sample.wav", data_dir / "diarization" / "sample.stm"
    tok = base.tokenizer()
    heads = base.decoding.options.get("alignment_heads")
    mel, num_frames = _window(base, wav)
    assert num_frames == 3000  # exactly one 30 s window
    with torch.inference_mode():
        audio_features = base.model.embed_audio(mel[None])
    tokens = greedy_decode(
        base.model, audio_features, tok.sot_sequence("en", timestamps=False), eot=tok.eot,
        suppress=tok.suppressed_tokens(), suppress_at_begin=tok.blank_tokens(),
    )
    (words,) = align_words(
        base.model, tok, mel, [tokens], num_frames=num_frames, alignment_heads=heads, language="en",
        prepend_punctuations=PUNCT_PREPEND, append_punctuations=PUNCT_APPEND, time_offset=0.0,
        audio_features=audio_features,
    )
    assert "".join(w.word for w in words) == tok.decode(tokens)
    assert all(0.0 <= w.start <= w.end <= 30.0 for w in words)
    assert all(a.start <= b.start for a, b in zip(words, words[1:]))
    rows, median = _onset_errors(words, stm)
    _print_onsets("sample.wav, base, greedy window + align_words", rows, median)
    assert median <= 0.3

    # the same tokens through openai-whisper's implementation (multilingual sot sequence)
    _compare_with_openai(base, wav, [dict(tokens=tokens, start=0.0, end=30.0)], language="en", multilingual=True)


@pytest.mark.slow
def test_sample_onsets_through_transcribe(base_ct2, data_dir):
    """The same acceptance through the long-form pipeline, once it exists."""
    import oasr

    try:
        transcribe = oasr.transcribe
        from oasr.options import TranscribeOptions
    except AttributeError:
        pytest.skip("oasr.transcribe does not exist yet")
    result = transcribe(  # the default options: beam search of 5, timestamps, temperature fallback
        str(data_dir / "diarization" / "sample.wav"), model=str(base_ct2),
        options=TranscribeOptions(language="en", word_timestamps=True),
    )
    words = [w for s in result.segments for w in (s.words or ())]
    rows, median = _onset_errors(words, data_dir / "diarization" / "sample.stm")
    _print_onsets("sample.wav, base, oasr.transcribe(word_timestamps=True)", rows, median)
    assert median <= 0.3
