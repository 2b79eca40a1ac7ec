"""The same speech through different containers and formats gives the same transcript."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

import oasr
from oasr.io.audio import load_audio
from oasr.decoding.whisper.options import WhisperDecoding
from oasr.options import TranscribeOptions


@pytest.fixture(scope="module")
def tiny(tiny_en_bundle):
    return oasr.load_pretrained(tiny_en_bundle, device="cpu")


def test_mp3_and_a_44k_stereo_copy_read_the_same(tiny, jfk_wav, data_dir, tmp_path):
    import soxr

    options = TranscribeOptions(decoding=WhisperDecoding(beam_size=1))
    reference = oasr.transcribe(jfk_wav, tiny, options=options).text
    mono = load_audio(jfk_wav)
    hi = soxr.resample(mono, 16000, 44100, quality="VHQ")
    stereo = np.stack([hi, 0.9 * hi], axis=1)
    copy = tmp_path / "jfk-44k-stereo.wav"
    sf.write(copy, stereo, 44100, subtype="PCM_16")
    assert "ask not what your country can do for you" in reference.lower()
    assert oasr.transcribe(copy, tiny, options=options).text == reference
    assert oasr.transcribe(data_dir / "asr" / "jfk.mp3", tiny, options=options).text == reference
