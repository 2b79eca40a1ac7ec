"""fp32 on a CPU not made by Intel: Whisper's linear maps run through oneDNN's GEMM on weights
packed once at load (the compute plan of ``oasr.precision``); the same model, the same outputs."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import oasr  # noqa: E402
from oasr import onednn  # noqa: E402
from oasr.models import whisper as W  # noqa: E402
from oasr import cpu  # noqa: E402


def _packed(model) -> list:
    return [m.onednn for m in model.modules() if isinstance(m, (W.Linear, W.Embedding))]


def _logits(model, n_mels: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    mel = torch.randn(1, n_mels, 3000, generator=g)
    tokens = torch.tensor([[50257, 50362, 440, 1029, 286, 220, 1002]])
    with torch.inference_mode():
        return model.logits(tokens, model.embed_audio(mel))


def _load(bundle, monkeypatch, vendor: str, dtype: str = "float32"):
    monkeypatch.setattr(cpu, "vendor", lambda: vendor)
    return oasr.load_pretrained(bundle, device="cpu", dtype=dtype, cache=False).model


def test_fp32_off_intel_runs_the_linear_maps_through_onednn(tiny_en_bundle, monkeypatch):
    amd = _load(tiny_en_bundle, monkeypatch, "AuthenticAMD")
    intel = _load(tiny_en_bundle, monkeypatch, "GenuineIntel")
    assert all(p is not None for p in _packed(amd)) and len(_packed(amd)) > 20
    assert all(p is None for p in _packed(intel))
    n_mels = amd.encoder.conv1.in_channels
    reference = _logits(intel, n_mels)
    torch.testing.assert_close(_logits(amd, n_mels), reference, atol=2e-4, rtol=1e-4)
    # the packed weight is what runs: zero one layer's and the logits move
    fc2 = amd.decoder.blocks[0].mlp[2]
    fc2.onednn = onednn.pack(torch.zeros_like(fc2.weight))
    assert not torch.allclose(_logits(amd, n_mels), reference, atol=1e-2)


@pytest.mark.parametrize("dtype", ["auto", "bfloat16"])
def test_other_precisions_keep_their_own_kernels(tiny_en_bundle, monkeypatch, dtype):
    """auto's int8 variant and a bf16 model are not packed for the fp32 GEMM."""
    model = _load(tiny_en_bundle, monkeypatch, "AuthenticAMD", dtype)
    assert all(p is None for p in _packed(model))



def test_pack_linears_swaps_plain_linear_layers_and_keeps_their_maps():
    from oasr.onednn import PackedLinear, pack, pack_linears

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8, bias=False)).eval()
    x = torch.randn(3, 7, 32)
    with torch.inference_mode():
        expected = model(x)
        keys = model.state_dict().keys()
        weights = {i: model[i].weight.clone() for i in (0, 2)}
        assert pack_linears(model) == 2
        assert all(isinstance(model[i], PackedLinear) for i in (0, 2))
        torch.testing.assert_close(model(x), expected, atol=1e-5, rtol=1e-5)
        assert model.state_dict().keys() == keys  # the same parameters, the weight unpacked when read
        assert all("weight" not in model[i]._parameters for i in (0, 2))  # kept only packed, not twice
        torch.testing.assert_close(model[0].weight, weights[0], atol=0, rtol=0)
        torch.testing.assert_close(model.state_dict()["2.weight"], weights[2], atol=0, rtol=0)
        plain = torch.nn.functional.linear(x, weights[0], model[0].bias)
        torch.testing.assert_close(model[0](x.bfloat16()).float(), plain, atol=0.05, rtol=0.02)  # another dtype: the plain product
        model[2].packed = pack(torch.zeros(8, 64))
        assert not torch.allclose(model(x), expected)  # the packed weight is what runs


def test_a_family_without_its_own_packing_gets_the_plain_swap(tmp_path, monkeypatch):
    """FastConformer (a tiny random Parakeet CTC through its converter): every plain linear layer
    packed off Intel, none on Intel; the encoder's output the same."""
    pytest.importorskip("transformers")
    from tests.models.fastconformer import test_parakeet_parity as parity
    from oasr.onednn import PackedLinear

    folder, bundle = tmp_path / "hf", tmp_path / "bundle"
    parity._build("ctc").save_pretrained(folder)
    oasr.convert([folder], bundle)
    amd = _load(bundle, monkeypatch, "AuthenticAMD")
    intel = _load(bundle, monkeypatch, "GenuineIntel")
    assert not any(isinstance(m, PackedLinear) for m in intel.modules())
    assert not any(type(m) is torch.nn.Linear for m in amd.modules())
    assert sum(isinstance(m, PackedLinear) for m in amd.modules()) > 10
    x = parity._features()
    with torch.inference_mode():
        ours, _ = amd.encode(x, torch.tensor([x.shape[-1]]))
        reference, _ = intel.encode(x, torch.tensor([x.shape[-1]]))
    torch.testing.assert_close(ours, reference, atol=1e-4, rtol=1e-4)
