"""A song for separation keeps its channels, whatever the container, and a long one is read from
disk a window at a time (io/samples.py's SampleFile of frames), normalised by statistics taken in
a streaming first pass: the same stems as from the whole array in memory."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import soxr
import torch

import oasr
from demucs_refs import SOURCES_4, random_htdemucs, save_package
from oasr.errors import InputError
from oasr.io import samples as samples_module
from oasr.io.audio import fit_channels, open_audio
from oasr.io.samples import SampleFile, SampleSink
from oasr.pipelines.separate.track import mix_stats, read_track

RATE = 44100


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def spool_short(monkeypatch):
    """More than 2 s of 44.1 kHz stereo goes to disk."""
    monkeypatch.setattr(samples_module, "SPOOL_SAMPLES", 2 * 2 * RATE)


@pytest.fixture
def no_whole_array(monkeypatch):
    def refuse(self, dtype=None, copy=None):
        raise AssertionError("the whole track was read into memory")

    monkeypatch.setattr(SampleFile, "__array__", refuse)


def _stereo(seconds: float, rate: int = RATE, seed: int = 0) -> np.ndarray:
    """[2, n]: a 220 Hz tone with noise left, 330 Hz right (distinct, so a mono decode shows)."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    left = 0.3 * np.sin(2 * np.pi * 220 * t) + 0.05 * rng.standard_normal(len(t))
    right = 0.2 * np.sin(2 * np.pi * 330 * t) + 0.05 * rng.standard_normal(len(t))
    return np.stack([left, right]).astype(np.float32)


def test_a_sink_of_frames_spools_and_reads_back_as_channels_by_samples(spool_short):
    data = _stereo(5.0)
    sink = SampleSink(0, channels=2)
    for a in range(0, data.shape[1], 10_000):  # passes SPOOL_SAMPLES mid-way
        sink.extend([data[:, a : a + 10_000]])
    spooled = sink.result()
    assert isinstance(spooled, SampleFile)
    assert (len(spooled), spooled.shape, spooled.size, spooled.ndim) == (data.shape[1], data.shape, data.size, 2)
    for a, b in ((0, 1), (123, 45_678), (data.shape[1] - 7, data.shape[1] + 100)):
        assert np.array_equal(spooled[:, a:b], data[:, a:b])
        assert np.array_equal(spooled[..., a:b], data[:, a:b])
    assert np.array_equal(np.asarray(spooled), data)
    with pytest.raises(TypeError):
        spooled[3:4]  # rows of channels or frames? refused, not guessed

    short = SampleSink(1000, channels=2)
    short.extend([data[:, :600], data[:, 600:1000]])
    assert np.array_equal(short.result(), data[:, :1000])
    with pytest.raises(ValueError, match=r"\[2, n\]"):
        short.extend([data[0]])


def test_fit_channels_is_demucs_convert_audio_channels():
    data = _stereo(0.1)
    assert np.array_equal(fit_channels(data, 2), data)
    assert np.array_equal(fit_channels(data, 1), data.mean(0, keepdims=True))
    assert np.array_equal(fit_channels(data[:1], 2), np.repeat(data[:1], 2, 0))
    assert np.array_equal(fit_channels(np.concatenate([data, data]), 2), data)
    with pytest.raises(InputError, match="2 channels; 3 cannot be made"):
        fit_channels(data, 3)


def test_a_long_flac_is_resampled_as_a_stream_into_frames_on_disk(spool_short, tmp_path):
    data = _stereo(6.0, 48000)
    sf.write(tmp_path / "song.flac", data.T, 48000, subtype="PCM_24")
    want = soxr.resample(sf.read(tmp_path / "song.flac", dtype="float32")[0], 48000, RATE, quality="HQ").T
    got = open_audio(tmp_path / "song.flac", RATE, channels=2)
    assert isinstance(got, SampleFile) and got.channels == 2
    assert abs(got.shape[1] - want.shape[1]) <= 1
    n = min(got.shape[1], want.shape[1])
    assert np.abs(got[:, 0:n] - want[:, :n]).max() < 2e-4
    mono = open_audio(tmp_path / "song.flac", RATE)  # the one-channel path is the channels' mean, as before
    assert isinstance(mono, SampleFile) and mono.shape == (got.shape[1],)
    assert np.abs(mono[0:n] - got[:, 0:n].mean(0)).max() < 1e-5


def _mp3(path, data: np.ndarray, rate: int) -> None:
    """Stereo MP3 through PyAV's LAME encoder (the PyAV wheel carries it)."""
    av = pytest.importorskip("av")
    try:
        av.codec.Codec("libmp3lame", "w")
    except Exception:
        pytest.skip("this PyAV has no MP3 encoder")
    with av.open(str(path), "w", format="mp3") as out:
        stream = out.add_stream("libmp3lame", rate=rate, layout="stereo")
        for a in range(0, data.shape[1], 1152):
            frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(data[:, a : a + 1152]), format="fltp", layout="stereo")
            frame.sample_rate, frame.pts = rate, a
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)


def test_an_mp3_keeps_its_channels(tmp_path):
    rate = 32000
    t = np.arange(2 * rate) / rate
    data = np.stack([0.3 * np.sin(2 * np.pi * 440 * t), np.zeros_like(t)]).astype(np.float32)  # left only
    _mp3(tmp_path / "left.mp3", data, rate)
    track, _ = read_track(str(tmp_path / "left.mp3"), RATE, 2)
    assert track.shape[0] == 2 and abs(track.shape[1] - 2 * RATE) < 0.1 * RATE  # at the model's rate
    rms = np.sqrt((track[:, RATE // 4 : -RATE // 4] ** 2).mean(1))
    assert rms[0] > 0.15 and rms[1] < 0.01, rms  # decoded as mono, both would be ~0.1
    mono = open_audio(tmp_path / "left.mp3", RATE)
    assert np.abs(mono - track.mean(0)).max() < 1e-5
    raw = (tmp_path / "left.mp3").read_bytes()
    assert np.array_equal(read_track(raw, RATE, 2)[0], track)  # encoded bytes: the same decoder


def test_mix_stats_are_demucs_mean_and_std_of_the_mono_mix(spool_short, tmp_path):
    data = _stereo(5.0) + 0.25  # an offset, so the mean matters
    mono = torch.from_numpy(data).mean(0)  # demucs' float32 mono mix
    mean, std = mix_stats(data)
    exact = mono.double()
    assert mean == pytest.approx(exact.mean().item(), rel=1e-9) and std == pytest.approx(exact.std().item(), rel=1e-9)
    assert mean == pytest.approx(mono.mean().item(), rel=1e-5) and std == pytest.approx(mono.std().item(), rel=1e-6)
    sf.write(tmp_path / "song.wav", data.T, RATE, subtype="FLOAT")
    spooled = open_audio(tmp_path / "song.wav", RATE, channels=2)
    assert isinstance(spooled, SampleFile)
    assert mix_stats(spooled) == pytest.approx((mean, std), abs=1e-9)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    from oasr.conversion.run import convert

    root = tmp_path_factory.mktemp("demucs-input")
    [result] = convert([save_package(random_htdemucs(SOURCES_4, seed=6), root / "955717e8-66666666.th")], root / "bundle")
    assert result.status == "converted", result.error
    return oasr.load_pretrained(root / "bundle", task="separate", device="cpu", dtype="float32")


def test_a_track_on_disk_separates_as_the_same_track_in_memory(spool_short, no_whole_array, tmp_path, loaded):
    data = _stereo(4.0)
    sf.write(tmp_path / "song.wav", data.T, RATE, subtype="FLOAT")
    options = oasr.SeparateOptions(shifts=1, seed=3, clip="none")
    assert isinstance(read_track(str(tmp_path / "song.wav"), RATE, 2)[0], SampleFile)
    from_disk = oasr.separate(str(tmp_path / "song.wav"), loaded, options, device="cpu")
    in_memory = oasr.separate(data, loaded, options, device="cpu")
    for a, b in zip(from_disk.stems, in_memory.stems):
        assert a.samples.shape == (2, data.shape[1])
        assert np.abs(a.samples - b.samples).max() < 1e-5
