"""``oasr quantize`` rules and ``--verify`` for the ``aed`` family, on a tiny random U2++ Conformer
(128 wide: every projection has the 64 inputs the rules quantize). The deliberate break (one
layer's channel scales skewed) must fail verification with one line, exit 1 and nothing written."""

from __future__ import annotations

import json

import pytest
import torch

import oasr
import oasr.quant.quantize as quantize_module
from oasr.quant.modules import QuantLinear
from oasr.quant.verify import ENCODER_GATES
from tests.support import wenet_refs as wr

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wenet") / "exp"
    wr.write_folder(folder, wr.train_yaml(width=128))
    out = folder.parent / "bundle"
    oasr.convert([folder], out)
    return out


@pytest.fixture(scope="module")
def clip(jfk_head):
    return jfk_head(3)


def test_rules(source, tmp_path):
    result = oasr.quantize(source, tmp_path / "q", scheme="int8")
    layers = result.layers
    for i in range(2):
        for name in ("self_attn.linear_q", "self_attn.linear_pos", "feed_forward.w_1", "feed_forward_macaron.w_2",
                     "conv_module.pointwise_conv1", "conv_module.pointwise_conv2"):
            assert layers[f"encoder.encoders.{i}.{name}"] == "int8"
    for side in ("left", "right"):
        assert layers[f"decoder.{side}_decoder.decoders.0.src_attn.linear_k"] == "int8"
        assert layers[f"decoder.{side}_decoder.output_layer"] == "int8"
    assert "ctc.ctc_lo" not in layers and "ctc.ctc_lo.weight" in result.kept
    assert not any("depthwise" in n or "embed.conv" in n or "norm" in n or "embed.0" in n for n in layers)
    loaded = oasr.load_pretrained(tmp_path / "q", dtype="float32")
    modules = dict(loaded.model.named_modules())
    assert isinstance(modules["encoder.encoders.0.conv_module.pointwise_conv1"], QuantLinear)
    t = oasr.transcribe(torch.zeros(16000).numpy() + 0.01, loaded)
    assert t.provenance


def test_verify_passes(source, tmp_path, cli, clip):
    code, out, err = cli("quantize", source, tmp_path / "q", "--verify", "--verify-audio", clip, "--json")
    assert code == 0, err
    report = json.loads(out)["verify"]
    gates = ENCODER_GATES["int8"]
    assert report["encoder_cosine"] >= gates["encoder_cosine"] and report["cosine"] >= gates["cosine"]
    assert report["decoder_cosine"] >= gates["cosine"]


def test_verify_catches_a_corrupted_scale(source, tmp_path, cli, clip, monkeypatch):
    real, calls = quantize_module.quantize_int8, []

    def corrupted(weight):
        q, scale = real(weight)
        calls.append(tuple(weight.shape))
        # every layer's output channels scaled 1x..4x: one layer's bad scales, or a uniform factor, are
        # mostly undone by the layer norms of a random-weight model this small (cosine stayed > 0.9999)
        return q, scale * torch.linspace(1, 4, scale.numel()).view_as(scale)

    monkeypatch.setattr(quantize_module, "quantize_int8", corrupted)
    code, out, err = cli("quantize", source, tmp_path / "q", "--verify", "--verify-audio", clip, "--json")
    assert code == 1 and out == "", out[-600:]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "verification on" in lines[0] and "cosine" in lines[0]
    assert not (tmp_path / "q").exists()
