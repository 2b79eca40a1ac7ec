"""`oasr tts` on hostile text (issue 31): NUL characters, punctuation espeak-ng reads aloud, and
phoneme input long enough that one pass would need gigabytes."""

from __future__ import annotations

import unicodedata

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_checks import one_line_error

from .test_tts import write_tiny_voice

pytest.importorskip("piper.phonemize_espeak", reason="piper-tts (the tts extra) phonemizes")

FUZZ_EXAMPLES = 50


@pytest.fixture(scope="module")
def voice(tmp_path_factory):
    return write_tiny_voice(tmp_path_factory.mktemp("voices") / "tiny")


def test_nul_character_is_one_line(cli, voice, tmp_path):
    text = tmp_path / "n.txt"
    text.write_bytes(b"hello\x00world")
    code, _, stderr = cli("tts", "-f", text, "-m", voice, "-o", tmp_path / "o.wav")
    one_line_error(code, stderr, "NUL character")
    assert not (tmp_path / "o.wav").exists()


@pytest.mark.parametrize("text", ["!?.,;:--...", "... -- !", "...!!! ???"])
def test_punctuation_only_is_one_line(cli, voice, tmp_path, text):
    code, _, stderr = cli("tts", text, "-m", voice, "-o", tmp_path / "o.wav")
    one_line_error(code, stderr, "nothing the voice can say")
    assert list(tmp_path.iterdir()) == []


def test_long_phoneme_input_is_cut_into_passes(voice, monkeypatch):
    """50,000 phonemes on one line: no pass of the network sees more than MAX_SENTENCE_PHONEMES of them."""
    import oasr
    from oasr.models.vits import Vits
    from oasr.tokenizers.phonemes import MAX_SENTENCE_PHONEMES

    longest = []

    def forward(self, ids, **kwargs):
        longest.append(ids.shape[1])
        return torch.zeros(1, 8)

    monkeypatch.setattr(Vits, "forward", forward)
    line = " ".join(["həlˈoʊ wˈɜːld"] * 4000)  # about 52,000 code points, no sentence end
    assert len(unicodedata.normalize("NFD", line)) > 50_000
    speech = oasr.synthesize(line, str(voice), oasr.SynthesizeOptions(phonemes=True))
    assert len(longest) > 50 and max(longest) <= 2 * MAX_SENTENCE_PHONEMES + 3  # ids: a pad after each, BOS, EOS
    assert sum(len(s.phonemes) for s in speech.sentences) >= 50_000 - len(longest)


@settings(max_examples=FUZZ_EXAMPLES, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(line=st.text(st.sampled_from("həlˈoʊ wɜːd.,!?  \u0301\x00\t"), max_size=3000))
def test_fuzz_phoneme_lines_are_cut_and_whole(line):
    """Any phoneme line: every piece within the limit, nothing lost but the spaces at the cuts."""
    from oasr.tokenizers.phonemes import MAX_SENTENCE_PHONEMES, PiperPhonemes

    pieces = list(PiperPhonemes.from_phonemes(line))
    assert all(0 < len(s.phonemes) <= MAX_SENTENCE_PHONEMES for s in pieces)
    kept = "".join("".join(s.phonemes) for s in pieces).replace(" ", "")
    assert kept == unicodedata.normalize("NFD", line.strip()).replace(" ", "")
