"""`oasr transcribe` decoding flags on a hybrid RNNT+CTC FastConformer (random weights): --decoder
picks the head, --beam-size the CTC prefix or RNN-T beam search, and a flag the model's family
cannot honour is refused on one line naming what it can do."""

from __future__ import annotations

import pytest
import soundfile as sf

from cli_checks import one_line_error
from test_transducer_decoding import hybrid_bundle  # noqa: F401  (the module-scoped bundle)

import oasr
from oasr.options import TransducerDecoding


@pytest.fixture(scope="module")
def clip(hybrid_bundle, tmp_path_factory, jfk_wav):  # noqa: F811
    audio, rate = sf.read(jfk_wav, dtype="float32")
    path = tmp_path_factory.mktemp("clip") / "clip.wav"
    sf.write(path, audio[: 5 * rate], rate)
    return path


def _text(bundle, clip, section=None) -> str:
    return oasr.transcribe(str(clip), str(bundle), oasr.TranscribeOptions(decoding=section)).text.strip()


def test_decoder_and_beam_flags_pick_the_head_and_the_search(cli, hybrid_bundle, clip):  # noqa: F811
    expected = {
        (): _text(hybrid_bundle, clip),
        ("--decoder", "rnnt"): _text(hybrid_bundle, clip),
        ("--decoder", "ctc"): _text(hybrid_bundle, clip, TransducerDecoding(decoder="ctc")),
        ("--beam-size", "3"): _text(hybrid_bundle, clip, TransducerDecoding(beam_size=3)),
        ("--decoder", "ctc", "--beam-size", "3"): _text(hybrid_bundle, clip, TransducerDecoding(decoder="ctc", beam_size=3)),
    }
    assert expected[()] != expected[("--decoder", "ctc")]
    for flags, text in expected.items():
        code, out, err = cli("transcribe", "-m", hybrid_bundle, "-q", *flags, clip)
        assert code == 0, err
        assert out.strip() == text, flags


def test_flags_the_family_cannot_honour_are_refused(cli, hybrid_bundle, clip):  # noqa: F811
    code, out, err = cli("transcribe", "-m", hybrid_bundle, "--temperature", "0.4", "--initial-prompt", "Kennedy", clip)
    one_line_error(code, err, "--temperature", "--initial-prompt", "greedy transducer decoding", "RNN-T beam search")
    assert out == ""
    code, _, err = cli("transcribe", "-m", hybrid_bundle, "--decoder", "ctc", "--best-of", "3", clip)
    assert code == 2 and "--best-of" in err and "cannot honour" in err
    code, _, err = cli("transcribe", "-m", hybrid_bundle, "--decoder", "attention", clip)
    assert code == 2 and "--decoder" in err


def test_an_explicit_beam_size_reaches_every_family(cli, hybrid_bundle, clip):  # noqa: F811
    """--beam-size 5 equals Whisper's default, yet asks a transducer for a beam of 5 (not greedy)."""
    code, out, err = cli("transcribe", "-m", hybrid_bundle, "-q", "--beam-size", "5", clip)
    assert code == 0, err
    assert out.strip() == _text(hybrid_bundle, clip, TransducerDecoding(beam_size=5))
    assert out.strip() == _text(hybrid_bundle, clip, oasr.WhisperDecoding(beam_size=5))
