"""HTDemucs against demucs 4.0.1 on random weights: the network, the whole separation, a bag.

Every model here goes through the converter (a .th written as demucs writes it, read without
running its pickle) into a bundle, and is compared with demucs' own load of the same file.
Tolerance 1e-4 (absolute, on audio in [-1, 1] scale) as the issue states.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch

from demucs_refs import SOURCES_4, SOURCES_6, demucs, load_reference, random_htdemucs, save_package

TOL = 1e-4
RATE = 44100


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def convert_package(tmp_path: Path, source: Path):
    import oasr
    from oasr.conversion.run import convert

    out = tmp_path / f"bundle-{source.stem}"
    [result] = convert([source], out)
    assert result.status == "converted", result.error
    return oasr.load_pretrained(out, task="separate", device="cpu", dtype="float32", cache=False)


def music(seconds: float, data_dir: Path) -> torch.Tensor:
    """[2, seconds * 44.1 kHz] stereo from the test clips (jfk left, the meeting right), resampled with soxr."""
    import soundfile as sf
    import soxr

    left, _ = sf.read(data_dir / "asr" / "jfk.wav", dtype="float32")
    right, _ = sf.read(data_dir / "diarization" / "sample.wav", dtype="float32")
    n16 = int(seconds * 16000)
    left = np.resize(left, n16)  # jfk repeated to length
    right = np.resize(right, n16)
    stereo = soxr.resample(np.stack([left, right], 1), 16000, RATE, quality="HQ").T
    return torch.from_numpy(np.ascontiguousarray(stereo[:, : int(seconds * RATE)], dtype=np.float32))


@pytest.mark.parametrize("sources", [SOURCES_4, SOURCES_6], ids=["htdemucs", "htdemucs_6s"])
def test_forward_matches_demucs_on_two_segments(tmp_path, sources):
    package = save_package(random_htdemucs(sources, seed=1), tmp_path / "955717e8-00000000.th")
    reference = load_reference(package)
    ours = convert_package(tmp_path, package).model
    segment = ours.config.members[0].segment_samples
    x = torch.randn(2, 2, segment) * 0.2  # a batch of two whole segments
    short = torch.randn(2, 2, segment // 3) * 0.2  # padded inside the network, as demucs pads it
    with torch.inference_mode():
        for mix in (x, short):
            want, got = reference(mix), ours(mix)
            assert got.shape == want.shape == (2, len(sources), 2, mix.shape[-1])
            assert (got - want).abs().max().item() < TOL


@pytest.mark.slow
def test_forward_matches_demucs_at_the_released_shape(tmp_path):
    """htdemucs' own dimensions (48 channels, 7.8 s segments, 5 transformer layers): 42 M weights."""
    from fractions import Fraction

    model = random_htdemucs(SOURCES_4, seed=2, channels=48, t_heads=8, segment=Fraction(39, 5))
    package = save_package(model, tmp_path / "955717e8-11111111.th")
    reference = load_reference(package)
    ours = convert_package(tmp_path, package).model
    assert ours.config.members[0].segment_samples == 343980
    x = torch.randn(2, 2, 343980) * 0.2
    with torch.inference_mode():
        assert (ours(x) - reference(x)).abs().max().item() < TOL


def _separation_case(tmp_path, data_dir, seconds: float, shifts: int, sources=SOURCES_4):
    import oasr
    from oasr.options import SeparateOptions

    package = save_package(random_htdemucs(sources, seed=3), tmp_path / "955717e8-22222222.th")
    reference = load_reference(package)
    loaded = convert_package(tmp_path, package)
    mix = music(seconds, data_dir)
    # demucs.separate's steps: normalise by the mono mix, apply_model, de-normalise.
    mono = mix.mean(0)
    mean, std = mono.mean(), mono.std()
    random.seed(7)
    with torch.no_grad():
        want = demucs()[1].apply_model(reference, ((mix - mean) / std)[None], shifts=shifts, overlap=0.25)[0] * std + mean
    got = oasr.separate(mix.numpy(), loaded, SeparateOptions(shifts=shifts, seed=7, clip="none"), device="cpu")
    assert got.names == tuple(sources)
    stacked = torch.from_numpy(np.stack([s.samples for s in got.stems]))
    assert stacked.shape == want.shape
    return (stacked - want).abs().max().item()


@pytest.mark.parametrize("shifts", [0, 2])
def test_separation_matches_apply_model(tmp_path, data_dir, shifts):
    assert _separation_case(tmp_path, data_dir, 6.0, shifts) < TOL


@pytest.mark.slow
@pytest.mark.parametrize("shifts", [0, 2])
def test_separation_of_30_seconds_matches_apply_model(tmp_path, data_dir, shifts):
    assert _separation_case(tmp_path, data_dir, 30.0, shifts) < TOL


@pytest.mark.slow
def test_six_source_separation_matches_apply_model(tmp_path, data_dir):
    assert _separation_case(tmp_path, data_dir, 30.0, 0, SOURCES_6) < TOL


def test_bag_of_two_with_a_weight_matrix_matches_apply_model(tmp_path, data_dir):
    import oasr
    from oasr.options import SeparateOptions

    _, apply = demucs()
    members = [random_htdemucs(SOURCES_4, seed=10 + i) for i in range(2)]
    sigs = ["aaaa0001", "bbbb0002"]
    for sig, m in zip(sigs, members):
        save_package(m, tmp_path / f"{sig}-12345678.th")
    weights = [[1.0, 0.0, 0.5, 2.0], [0.0, 1.0, 0.5, 1.0]]
    (tmp_path / "mybag.yaml").write_text(f"models: {sigs}\nweights: {weights}\n")
    loaded = convert_package(tmp_path, tmp_path / "mybag.yaml")
    assert loaded.config.weights == tuple(tuple(r) for r in weights)
    bag = apply.BagOfModels([load_reference(tmp_path / f"{s}-12345678.th") for s in sigs], weights)

    mix = music(8.0, data_dir)
    mono = mix.mean(0)
    mean, std = mono.mean(), mono.std()
    random.seed(11)
    with torch.no_grad():
        want = apply.apply_model(bag, ((mix - mean) / std)[None], shifts=1, overlap=0.25)[0] * std + mean
    got = oasr.separate(mix.numpy(), loaded, SeparateOptions(shifts=1, seed=11, clip="none"), device="cpu")
    stacked = torch.from_numpy(np.stack([s.samples for s in got.stems]))
    assert (stacked - want).abs().max().item() < TOL
