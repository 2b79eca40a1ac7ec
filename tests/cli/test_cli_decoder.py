"""`oasr transcribe` decoding flags on a hybrid RNNT+CTC FastConformer (random weights): --decoder
picks the head, --beam-size the CTC prefix or RNN-T beam search, and a flag the model's family
cannot honour is refused on one line naming what it can do."""

from __future__ import annotations

import pytest
import soundfile as sf

from cli_checks import one_line_error

import oasr
from oasr.decoding.transducer.options import TransducerDecoding


@pytest.fixture(scope="module")
def clip(random_hybrid_fastconformer_bundle, tmp_path_factory, jfk_wav):
    audio, rate = sf.read(jfk_wav, dtype="float32")
    path = tmp_path_factory.mktemp("clip") / "clip.wav"
    sf.write(path, audio[: 5 * rate], rate)
    return path


def _text(bundle, clip, section=None) -> str:
    return _words(oasr.transcribe(str(clip), str(bundle), oasr.TranscribeOptions(decoding=section)).text)


def _words(text: str) -> str:
    """The words, however they are spread over lines (the txt output puts a segment per line)."""
    return " ".join(text.split())


def test_decoder_and_beam_flags_pick_the_head_and_the_search(cli, random_hybrid_fastconformer_bundle, clip):
    expected = {
        (): _text(random_hybrid_fastconformer_bundle, clip),
        ("--decoder", "rnnt"): _text(random_hybrid_fastconformer_bundle, clip),
        ("--decoder", "ctc"): _text(random_hybrid_fastconformer_bundle, clip, TransducerDecoding(decoder="ctc")),
        ("--beam-size", "3"): _text(random_hybrid_fastconformer_bundle, clip, TransducerDecoding(beam_size=3)),
        ("--decoder", "ctc", "--beam-size", "3"): _text(random_hybrid_fastconformer_bundle, clip, TransducerDecoding(decoder="ctc", beam_size=3)),
    }
    assert expected[()] != expected[("--decoder", "ctc")]
    for flags, text in expected.items():
        code, out, err = cli("transcribe", "-m", random_hybrid_fastconformer_bundle, "-q", *flags, clip)
        assert code == 0, err
        assert _words(out) == text, flags


def test_flags_the_family_cannot_honour_are_refused(cli, random_hybrid_fastconformer_bundle, clip):
    code, out, err = cli("transcribe", "-m", random_hybrid_fastconformer_bundle, "--temperature", "0.4", "--initial-prompt", "Kennedy", clip)
    one_line_error(code, err, "--temperature", "--initial-prompt", "greedy transducer decoding", "RNN-T beam search")
    assert out == ""
    code, _, err = cli("transcribe", "-m", random_hybrid_fastconformer_bundle, "--decoder", "ctc", "--best-of", "3", clip)
    assert code == 2 and "--best-of" in err and "cannot honour" in err
    code, _, err = cli("transcribe", "-m", random_hybrid_fastconformer_bundle, "--decoder", "attention", clip)
    assert code == 2 and "--decoder" in err


def test_an_explicit_beam_size_reaches_every_family(cli, random_hybrid_fastconformer_bundle, clip):
    """--beam-size 5 equals Whisper's default, yet asks a transducer for a beam of 5 (not greedy)."""
    code, out, err = cli("transcribe", "-m", random_hybrid_fastconformer_bundle, "-q", "--beam-size", "5", clip)
    assert code == 0, err
    assert _words(out) == _text(random_hybrid_fastconformer_bundle, clip, TransducerDecoding(beam_size=5))
    assert _words(out) == _text(random_hybrid_fastconformer_bundle, clip, oasr.WhisperDecoding(beam_size=5))


def test_a_beam_past_whispers_range_reaches_ctc_and_transducer_models(cli, random_hybrid_fastconformer_bundle, clip, tiny_en_bundle):
    """Whisper takes 1..32 beams, CTC prefix and RNN-T beam search 1..64: the CLI cannot know the
    family before loading, so a beam of 40 goes to the model, which says whether it takes it."""
    for flags, section in (((), TransducerDecoding(beam_size=40)), (("--decoder", "ctc"), TransducerDecoding(decoder="ctc", beam_size=40))):
        code, out, err = cli("transcribe", "-m", random_hybrid_fastconformer_bundle, "-q", "--beam-size", "40", *flags, clip)
        assert code == 0, err
        assert _words(out) == _text(random_hybrid_fastconformer_bundle, clip, section), flags
    code, out, err = cli("transcribe", "-m", tiny_en_bundle, "--beam-size", "40", clip)
    one_line_error(code, err, "--beam-size 40", "1..32")
    assert out == ""
    code, _, err = cli("transcribe", "-m", random_hybrid_fastconformer_bundle, "--beam-size", "65", clip)
    assert code == 2 and "--beam-size" in err
    code, _, err = cli("transcribe", "-m", random_hybrid_fastconformer_bundle, "--beam-size", "40", "--best-of", "3", clip)
    assert code == 2 and "--best-of" in err and "cannot honour" in err
