"""Transducer and CTC decoding apart from any network, and the engines' option handling.

The batched label-looping greedy decoder is compared with a plain one-utterance frame loop
written here (NeMo's greedy semantics) on a toy joint whose labels depend on frame and history,
with rows of different lengths in one batch; CTC prefix beam search with an exhaustive search
over every label sequence (their probabilities summed over alignments by torch's CTC loss).
"""

from __future__ import annotations

import itertools

import numpy as np

import pytest
import torch

from oasr.decoding.ctc.search import beam_ctc, greedy_ctc
from oasr.decoding.transducer.search import beam_transducer, greedy_transducer

V = 6  # labels with the blank
BLANK = V - 1


class ToyTransducer:
    """A joint whose scores depend on the frame and on the prediction state (an RNN over labels)."""

    def __init__(self, seed: int, durations: int = 0, width: int = 8, blank_bias: float = 0.0):
        g = torch.Generator().manual_seed(seed)
        self.embed = torch.randn(V, width, generator=g)
        self.recur = torch.randn(width, width, generator=g) * 0.5
        self.out = torch.randn(width, V + durations, generator=g) * 2
        self.out_bias = torch.zeros(V + durations)
        self.out_bias[BLANK] = blank_bias

    def project_encoder(self, encoded):
        return encoded

    def predict(self, labels, state=None):
        prev = state[0][0] if state is not None else torch.zeros(labels.shape[0], self.embed.shape[1])
        h = torch.tanh(self.embed[labels] + prev @ self.recur)
        return h, (h[None], h[None])

    def joint_logits(self, f, g):
        return torch.relu(f + g) @ self.out + self.out_bias


def reference_greedy(model, f, blank, durations, max_symbols):
    """One utterance, one frame at a time: f [T, J] -> label ids."""
    g, state = model.predict(torch.tensor([blank]))
    ids, t, symbols = [], 0, 0
    while t < f.shape[0]:
        logits = model.joint_logits(f[t : t + 1], g)[0]
        label = int(logits[: blank + 1].argmax())
        step = durations[int(logits[blank + 1 :].argmax())] if durations else (1 if label == blank else 0)
        if label == blank:
            t, symbols = t + max(step, 1), 0
            continue
        ids.append(label)
        symbols = symbols + 1 if step == 0 else 0
        if symbols >= max_symbols:
            step, symbols = max(step, 1), 0
        t += step
        g, state = model.predict(torch.tensor([label]), state)
    return ids


@pytest.mark.parametrize("durations", [(), (0, 1, 2, 3, 4), (0, 2, 4)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_batched_label_looping_matches_plain_greedy(durations, seed):
    model = ToyTransducer(seed, len(durations), blank_bias=0.5)
    g = torch.Generator().manual_seed(100 + seed)
    lengths = torch.tensor([40, 17, 33, 1])
    encoded = torch.randn(4, 40, 8, generator=g) * 2
    rows = greedy_transducer(model, encoded, lengths, blank_id=BLANK, durations=durations, max_symbols=3)
    emitted = 0
    for r, n in enumerate(lengths.tolist()):
        ref = reference_greedy(model, encoded[r, :n], BLANK, durations, 3)
        assert [t.id for t in rows[r]] == ref
        frames = [t.frame for t in rows[r]]
        assert frames == sorted(frames) and all(0 <= f < n for f in frames)
        if durations:
            assert all(t.duration in durations for t in rows[r])
        # one row alone takes the single-row loop: the same tokens as in the batch
        alone = greedy_transducer(model, encoded[r : r + 1, :n], lengths[r : r + 1], blank_id=BLANK, durations=durations, max_symbols=3)[0]
        assert [(t.id, t.frame, t.duration) for t in alone] == [(t.id, t.frame, t.duration) for t in rows[r]]
        assert [t.probability for t in alone] == pytest.approx([t.probability for t in rows[r]], abs=1e-6)
        emitted += len(ref)
    assert emitted > 10


def test_one_row_looks_ahead_over_doubling_stretches_of_frames():
    """A lone row scores a stretch of frames with one joint call, the stretch doubling (1, 2, 4,
    ... up to ``WINDOW``) while it holds only blanks: labels close together, and runs of blanks
    across several stretches, give the frame loop's tokens."""
    model = ToyTransducer(3, blank_bias=15.0)  # about one label in five frames
    encoded = torch.randn(1, 300, 8, generator=torch.Generator().manual_seed(7)) * 2
    alone = greedy_transducer(model, encoded, torch.tensor([300]), blank_id=BLANK, max_symbols=3)[0]
    batched = greedy_transducer(model, encoded.expand(2, -1, -1), torch.tensor([300, 300]), blank_id=BLANK, max_symbols=3)[0]
    assert [t.id for t in alone] == reference_greedy(model, encoded[0], BLANK, (), 3)
    assert [(t.id, t.frame) for t in alone] == [(t.id, t.frame) for t in batched]
    assert [t.probability for t in alone] == pytest.approx([t.probability for t in batched], abs=1e-6)
    gaps = [b.frame - a.frame for a, b in zip(alone, alone[1:])]
    assert max(gaps) > 1 + 2 + 4 + 8 and min(gaps) <= 1  # blanks across four stretches; labels a frame apart


def test_max_symbols_guard_moves_on():
    """A joint that never emits a blank: exactly max_symbols labels per frame, then the next frame."""
    model = ToyTransducer(0, blank_bias=-100.0)
    rows = greedy_transducer(model, torch.zeros(1, 5, 8), torch.tensor([5]), blank_id=BLANK, max_symbols=4)
    assert [t.frame for t in rows[0]] == [f for f in range(5) for _ in range(4)]


def test_all_blank_and_empty_input():
    model = ToyTransducer(0, blank_bias=100.0)
    assert greedy_transducer(model, torch.zeros(2, 6, 8), torch.tensor([6, 0]), blank_id=BLANK) == [[], []]


def reference_beam(model, f, blank, beam_size):
    """NeMo's ``default_beam_search`` for one utterance, as plainly as it reads: f [T, J] ->
    (labels, score) of the best hypothesis by score per label (``score_norm``)."""
    beam = min(beam_size, blank)
    top = min(beam, blank - 1)
    g0, s0 = model.predict(torch.tensor([blank]))
    outputs = {(): (g0, s0)}  # labels -> prediction output and state after them

    def output(labels):
        if labels not in outputs:
            output(labels[:-1])
            outputs[labels] = model.predict(torch.tensor([labels[-1]]), outputs[labels[:-1]][1])
        return outputs[labels][0]

    kept = [((), 0.0)]
    for t in range(f.shape[0]):
        hyps, kept = kept, []
        while True:
            best = max(hyps, key=lambda h: h[1])
            hyps.remove(best)
            logp = model.joint_logits(f[t : t + 1], output(best[0]))[0, : blank + 1].log_softmax(-1)
            kept.append((best[0], best[1] + float(logp[blank])))
            values, ids = logp[:blank].topk(top)
            for lp, k in zip(values.tolist(), ids.tolist()):
                hyps.append((best[0] + (k,), best[1] + lp))
            ceiling = max(h[1] for h in hyps)
            ahead = sorted((h for h in kept if h[1] > ceiling), key=lambda h: h[1])
            if len(ahead) >= beam:
                kept = ahead
                break
    labels, score = max(kept, key=lambda h: h[1] / (len(h[0]) + 1))
    return list(labels), score


class BeamToy:
    """A joint of per-frame label scores (the encoder frame itself) plus a history term: after a
    label, that label drops and the blank rises (as a trained prediction network does), and an RNN
    over the labels makes the rest depend on the whole history."""

    def __init__(self, seed: int):
        g = torch.Generator().manual_seed(seed)
        self.embed = torch.randn(V, V, generator=g) * 0.5
        for k in range(BLANK):
            self.embed[k, k] -= 3.0
            self.embed[k, BLANK] += 2.0
        self.recur = torch.randn(V, V, generator=g) * 0.5

    def project_encoder(self, encoded):
        return encoded

    def predict(self, labels, state=None):
        prev = state[0][0] if state is not None else torch.zeros(labels.shape[0], V)
        h = self.embed[labels] + torch.tanh(prev) @ self.recur
        return h, (h[None], h[None])

    def joint_logits(self, f, g):
        return f + g


@pytest.mark.parametrize("beam_size", [2, 4])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_batched_beam_search_matches_plain_beam_search(beam_size, seed):
    model = BeamToy(seed)
    lengths = torch.tensor([20, 13, 7, 1, 0])
    encoded = torch.randn(5, 20, V, generator=torch.Generator().manual_seed(200 + seed)) * 1.5
    # the guard set out of reach: the reference has none
    hyps = beam_transducer(model, encoded, lengths, blank_id=BLANK, beam_size=beam_size, max_expansions=1000)
    emitted = differs = 0
    for r, n in enumerate(lengths.tolist()):
        labels, score = reference_beam(model, encoded[r, :n], BLANK, beam_size)
        assert [t.id for t in hyps[r].tokens] == labels
        assert hyps[r].score == pytest.approx(score, abs=1e-5)
        frames = [t.frame for t in hyps[r].tokens]
        assert frames == sorted(frames) and all(0 <= f < n for f in frames)
        emitted += len(labels)
        differs += labels != reference_greedy(model, encoded[r, :n], BLANK, (), 10)
    assert emitted >= 5 and differs  # labels were found, and the search is not greedy's


def test_beam_of_one_is_greedy():
    model = BeamToy(3)
    encoded = torch.randn(2, 20, V, generator=torch.Generator().manual_seed(7)) * 1.5
    lengths = torch.tensor([20, 9])
    beam = beam_transducer(model, encoded, lengths, blank_id=BLANK, beam_size=1, max_expansions=3)
    greedy = greedy_transducer(model, encoded, lengths, blank_id=BLANK, max_symbols=3)
    assert [h.tokens for h in beam] == greedy and any(greedy)


def test_beam_search_guard_ends_a_frame_without_blanks():
    """A joint that never emits a blank would expand forever: the frame ends after beam x max_expansions."""
    model = ToyTransducer(0, blank_bias=-100.0)
    hyps = beam_transducer(model, torch.randn(1, 3, 8), torch.tensor([3]), blank_id=BLANK, beam_size=2, max_expansions=4)
    assert 0 < len(hyps[0].tokens) <= 3 * 2 * 4


def _best_by_exhaustion(log_probs, blank, max_len):
    """The label sequence with the highest total (all-alignment) probability, by enumeration."""
    ctc = torch.nn.CTCLoss(blank=blank, reduction="sum")
    t = log_probs.shape[0]
    best, best_score = (), -float("inf")
    for n in range(max_len + 1):
        for seq in itertools.product([i for i in range(log_probs.shape[1]) if i != blank], repeat=n):
            if n == 0:
                score = float(log_probs[:, blank].sum())
            else:
                loss = ctc(log_probs[:, None], torch.tensor([seq]), torch.tensor([t]), torch.tensor([n]))
                score = -float(loss)
            if score > best_score:
                best, best_score = seq, score
    return list(best)


@pytest.mark.parametrize("seed", range(6))
def test_ctc_prefix_beam_search_finds_the_most_probable_sequence(seed):
    g = torch.Generator().manual_seed(seed)
    log_probs = (torch.randn(6, 3, generator=g) * 1.5).log_softmax(-1)  # blank 0, labels 1 and 2
    expected = _best_by_exhaustion(log_probs, 0, 6)
    assert [t.id for t in beam_ctc(log_probs, 0, beam_size=64)] == expected


def test_ctc_beam_search_can_beat_greedy():
    """Two frames where greedy's best path (blank, blank) loses to the label summed over its paths."""
    p = torch.tensor([[0.4, 0.35, 0.25], [0.4, 0.3, 0.3]]).log()
    assert greedy_ctc(p, 0) == []
    assert [t.id for t in beam_ctc(p, 0, beam_size=8)] == _best_by_exhaustion(p, 0, 2) != []


# --- the engines on a hybrid RNNT+CTC bundle ------------------------------------------------------
# (random_hybrid_fastconformer_bundle: tests/support/random_bundles.py)


@pytest.fixture(scope="module")
def speech(jfk_wav):
    import soundfile as sf

    audio, _ = sf.read(jfk_wav, dtype="float32")
    return audio[: 5 * 16000]


def _direct(bundle, audio, head: str) -> str:
    """The transcript straight from the model and the decoders, no engine."""
    import oasr
    from oasr.features import feature_extractor

    loaded = oasr.load_pretrained(str(bundle))
    model, spec = loaded.model, loaded.feature_spec
    features = feature_extractor(spec)(torch.from_numpy(audio), spec)[None]
    with torch.no_grad():
        encoded, lengths = model.encode(features, torch.tensor([features.shape[-1]]))
        if head == "ctc":
            ids = [t.id for t in greedy_ctc(model.ctc_logits(encoded)[0].log_softmax(-1), model.blank_id)]
        else:
            ids = [t.id for t in greedy_transducer(model, encoded, lengths, blank_id=model.blank_id)[0]]
    return loaded.tokenizer().decode(ids)


def test_hybrid_decodes_with_either_head(random_hybrid_fastconformer_bundle, speech):
    import oasr
    from oasr.decoding.transducer.options import TransducerDecoding

    default = oasr.transcribe(speech, str(random_hybrid_fastconformer_bundle))
    with_ctc = oasr.transcribe(speech, str(random_hybrid_fastconformer_bundle), oasr.TranscribeOptions(decoding=TransducerDecoding(decoder="ctc")))
    transducer_text, ctc_text = _direct(random_hybrid_fastconformer_bundle, speech, "rnnt"), _direct(random_hybrid_fastconformer_bundle, speech, "ctc")
    assert transducer_text and ctc_text and transducer_text != ctc_text
    assert default.text.strip() == transducer_text
    assert with_ctc.text.strip() == ctc_text
    beam = oasr.transcribe(speech, str(random_hybrid_fastconformer_bundle), oasr.TranscribeOptions(decoding=TransducerDecoding(decoder="ctc", beam_size=4)))
    assert beam.text.strip()


def test_long_form_chunks_and_word_times(random_hybrid_fastconformer_bundle, speech):
    import oasr

    audio = np.concatenate([speech] * 3)  # 15 s in 6 s chunks with 1 s overlap
    t = oasr.transcribe(audio, str(random_hybrid_fastconformer_bundle), oasr.TranscribeOptions(chunk_length=6.0, chunk_overlap=1.0, word_timestamps=True, batch_size=2))
    words = [w for s in t.segments for w in s.words]
    assert words and all(0 <= w.start < w.end <= 15.0 + 1e-6 for w in words)
    assert all(a.start <= b.start for a, b in zip(words, words[1:]))
    assert max(w.end for w in words) > 10.0  # the last chunk was decoded too


def test_options_a_transducer_cannot_honour_are_refused(random_hybrid_fastconformer_bundle, speech):
    import oasr
    from oasr.decoding.transducer.options import TransducerDecoding
    from oasr.decoding.whisper.options import WhisperDecoding

    with pytest.raises(oasr.CapabilityError, match="greedy transducer decoding"):
        oasr.transcribe(speech, str(random_hybrid_fastconformer_bundle), oasr.TranscribeOptions(decoding=WhisperDecoding(initial_prompt="Kennedy")))
    with pytest.raises(oasr.InputError, match="--beam-size"):
        TransducerDecoding(beam_size=0)
    with pytest.raises(oasr.InputError, match="unknown --decoder"):
        TransducerDecoding(decoder="attention")


def test_engines_read_a_sample_file_window_by_window(random_hybrid_fastconformer_bundle, jfk_wav, monkeypatch):
    """A spooled recording (SampleFile) gives the transcript of the array, with either head and
    the transducer beam, and is never read into one whole array."""
    import soundfile as sf

    import oasr
    from oasr.io import samples as samples_module
    from oasr.io.audio import open_audio
    from oasr.io.samples import SampleFile
    from oasr.decoding.transducer.options import TransducerDecoding

    monkeypatch.setattr(samples_module, "SPOOL_SAMPLES", 5 * 16000)
    spooled = open_audio(jfk_wav)
    assert isinstance(spooled, SampleFile)
    in_memory = sf.read(jfk_wav, dtype="float32")[0]

    def refuse(self, dtype=None, copy=None):
        raise AssertionError("the whole recording was read into memory")

    model = oasr.load_pretrained(str(random_hybrid_fastconformer_bundle))
    for section in (None, TransducerDecoding(decoder="ctc"), TransducerDecoding(beam_size=2)):
        options = oasr.TranscribeOptions(decoding=section, chunk_length=6.0, chunk_overlap=1.0)
        b = oasr.transcribe(in_memory, model, options)
        with monkeypatch.context() as m:
            m.setattr(SampleFile, "__array__", refuse)
            a = oasr.transcribe(spooled, model, options)
        assert a.text == b.text and a.text.strip(), section
        assert [(s.start, s.end) for s in a.segments] == [(s.start, s.end) for s in b.segments]


def test_tdt_beam_search_and_a_missing_ctc_head_are_refused():
    """Checked before any work, from the bundle's decoding defaults alone."""
    from types import SimpleNamespace

    import oasr
    from oasr.decoding.transducer.options import TransducerDecoding
    from oasr.pipelines.transcribe import transducer
    from oasr.specs import DecodingDefaults

    def bundle(**options):
        return SimpleNamespace(architecture="fastconformer", decoding=DecodingDefaults(family="tdt", blank_id=BLANK, options=options))

    with pytest.raises(oasr.CapabilityError, match="beam search over TDT durations is not implemented"):
        transducer.Engine(bundle(durations=[0, 1, 2]), oasr.TranscribeOptions(decoding=TransducerDecoding(beam_size=4)))
    with pytest.raises(oasr.CapabilityError, match="heads: rnnt only"):
        transducer.Engine(bundle(durations=[0, 1, 2]), oasr.TranscribeOptions(decoding=TransducerDecoding(decoder="ctc")))
