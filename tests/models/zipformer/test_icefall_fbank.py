"""icefall's front end (80 bins, povey, no dither, snip_edges=False, 20 Hz to Nyquist - 400 Hz)
against torchaudio's Kaldi-compatible fbank (lhotse's reference, read out of the wheel) and
kaldi-native-fbank, on jfk.wav and sample.wav."""

from __future__ import annotations

import glob
import sys
import types
import zipfile
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
sf = pytest.importorskip("soundfile")

from oasr.features.kaldi import kaldi_fbank_features, kaldi_feature_spec  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


def _compliance():
    wheels = sorted(glob.glob(str(ROOT / ".weights" / "reference" / "torchaudio-*.whl")))
    if not wheels:
        pytest.skip("no torchaudio wheel in .weights/reference (make install-test downloads it)")
    sys.modules.setdefault("torchaudio", types.ModuleType("torchaudio"))
    module = types.ModuleType("torchaudio.compliance.kaldi")
    exec(compile(zipfile.ZipFile(wheels[-1]).read("torchaudio/compliance/kaldi.py").decode(), "kaldi.py", "exec"), module.__dict__)
    return module


@pytest.mark.parametrize("clip", ["asr/jfk.wav", "diarization/sample.wav"])
def test_fbank_matches_kaldi(data_dir, clip):
    audio, rate = sf.read(data_dir / clip, dtype="float32")
    got = kaldi_fbank_features(torch.from_numpy(audio), kaldi_feature_spec()).T
    ref = _compliance().fbank(
        torch.from_numpy(audio)[None], num_mel_bins=80, dither=0.0, snip_edges=False, high_freq=-400, low_freq=20,
        sample_frequency=rate, energy_floor=0.0,
    )
    assert got.shape == ref.shape and (got - ref).abs().max() < 1e-4
    knf = pytest.importorskip("kaldi_native_fbank")
    opts = knf.FbankOptions()
    opts.frame_opts.dither, opts.frame_opts.snip_edges, opts.frame_opts.samp_freq = 0, False, rate
    opts.mel_opts.num_bins, opts.mel_opts.high_freq = 80, -400
    fbank = knf.OnlineFbank(opts)
    fbank.accept_waveform(rate, audio.tolist())
    fbank.input_finished()
    native = np.stack([fbank.get_frame(i) for i in range(fbank.num_frames_ready)])
    diff = np.abs(native - got.numpy())
    # its float32 FFT differs from torch's on the quietest bins (log energies near -15): 99% within 1e-4
    assert native.shape == tuple(got.shape) and np.percentile(diff, 99) < 1e-4 and diff.max() < 5e-3
