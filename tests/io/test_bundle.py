"""The native bundle: round trip, strict reading, refusal of unknown versions and damaged files."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

import oasr
from oasr.io import bundle
from oasr.errors import BundleError, LoadError



def test_layout_and_config(random_whisper_bundle):
    assert sorted(p.name for p in random_whisper_bundle.iterdir()) == ["model.safetensors", "oasr_config.json"]
    cfg = json.loads((random_whisper_bundle / "oasr_config.json").read_text())
    assert cfg["format_version"] == 1
    assert cfg["architecture"] == "whisper"
    assert cfg["provenance"]["source_format"] == "openai-whisper"
    assert len(cfg["provenance"]["source_files"]["tiny.pt"]) == 64
    assert cfg["provenance"]["oasr_version"] == oasr.__version__
    assert cfg["features"]["kind"] == "whisper_logmel"


def test_computed_buffers_skipped_and_tied_weight_stored_once(random_whisper_bundle):
    from safetensors import safe_open

    with safe_open(random_whisper_bundle / "model.safetensors", "pt") as f:
        names = set(f.keys())
    assert "encoder.positional_embedding" not in names
    assert "decoder.token_embedding.weight" in names
    assert not any("proj" in n for n in names)


def test_round_trip_is_byte_identical(random_whisper_bundle, tmp_path):
    loaded = oasr.load_pretrained(random_whisper_bundle, device="cpu", dtype="stored")
    out = tmp_path / "again"
    loaded.save(out)
    assert (out / "model.safetensors").read_bytes() == (random_whisper_bundle / "model.safetensors").read_bytes()
    assert json.loads((out / "oasr_config.json").read_text()) == json.loads((random_whisper_bundle / "oasr_config.json").read_text())


def test_round_trip_of_real_weights(tiny_en_bundle, tmp_path):
    loaded = oasr.load_pretrained(tiny_en_bundle, device="cpu", dtype="stored")
    assert loaded.model.decoder.token_embedding.weight.dtype == torch.float16
    loaded.save(tmp_path / "again")
    assert (tmp_path / "again" / "model.safetensors").read_bytes() == (tiny_en_bundle / "model.safetensors").read_bytes()
    assert (tmp_path / "again" / "tokenizer" / "tokenizer.json").is_file()


def test_loaded_model_matches_source(tmp_path, random_whisper_bundle):
    from_pt = oasr.load_pretrained(tmp_path / "tiny.pt", device="cpu")
    from_bundle = oasr.load_pretrained(random_whisper_bundle, device="cpu")
    for (name, a), (_, b) in zip(from_pt.model.state_dict().items(), from_bundle.model.state_dict().items()):
        assert torch.equal(a, b), name
    assert from_bundle.report.missing == [] and from_bundle.report.dropped == []


def test_dtype_is_cast_on_load(random_whisper_bundle):
    model, config = oasr.from_pretrained(random_whisper_bundle, device="cpu", dtype="bfloat16")
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    assert config.n_text_layer == 2
    model, _ = oasr.from_pretrained(random_whisper_bundle, device="cpu")
    assert {p.dtype for p in model.parameters()} == {torch.float32}


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c: c.pop("architecture"), "missing field(s): architecture"),
        (lambda c: c.update(format_version=3), "format_version 3 is not supported"),
        (lambda c: c.update(format_version=2), "requires a quantization section"),
        (lambda c: c["tokenizer"].pop("kind"), "missing field(s): kind"),
        (lambda c: c.update(extra=1), "unknown field(s): extra"),
    ],
)
def test_malformed_config_is_refused(random_whisper_bundle, edit, message):
    path = random_whisper_bundle / "oasr_config.json"
    cfg = json.loads(path.read_text())
    edit(cfg)
    path.write_text(json.dumps(cfg))
    with pytest.raises(BundleError, match=message.replace("(", r"\(").replace(")", r"\)")):
        oasr.load_pretrained(random_whisper_bundle, device="cpu")


def test_version_2_is_readable(random_whisper_bundle):
    path = random_whisper_bundle / "oasr_config.json"
    cfg = json.loads(path.read_text())
    section = {"scheme": "int8", "group_size": 128, "layers": {"decoder.blocks.0.mlp.0": "int8"},
               "source_sha256": "0" * 64, "oasr_version": oasr.__version__}
    cfg.update(format_version=2, quantization=section)
    path.write_text(json.dumps(cfg))
    assert bundle.read_config(random_whisper_bundle).quantization == section


def test_truncated_weights_are_refused(random_whisper_bundle):
    path = random_whisper_bundle / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(BundleError, match="truncated or corrupted"):
        oasr.load_pretrained(random_whisper_bundle, device="cpu")


def test_missing_tensor_fails_the_load(random_whisper_bundle, tmp_path):
    from safetensors.torch import load_file, save_file

    tensors = load_file(random_whisper_bundle / "model.safetensors")
    del tensors["decoder.ln.weight"]
    save_file(tensors, random_whisper_bundle / "model.safetensors")
    with pytest.raises(LoadError, match="decoder.ln.weight"):
        oasr.load_pretrained(random_whisper_bundle, device="cpu")


def test_unexpected_tensor_fails_the_load(random_whisper_bundle):
    from safetensors.torch import load_file, save_file

    tensors = load_file(random_whisper_bundle / "model.safetensors")
    tensors["decoder.extra_head.weight"] = torch.zeros(2)
    save_file(tensors, random_whisper_bundle / "model.safetensors")
    with pytest.raises(LoadError, match="decoder.extra_head.weight"):
        oasr.load_pretrained(random_whisper_bundle, device="cpu")


def test_missing_tokenizer_asset_is_refused(tiny_en_bundle, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(tiny_en_bundle, copy)
    (copy / "tokenizer" / "tokenizer.json").unlink()
    with pytest.raises(BundleError, match="tokenizer asset"):
        oasr.load_pretrained(copy, device="cpu")


def test_native_bundle_comes_before_an_explicit_architecture(random_whisper_bundle):
    from oasr.errors import DetectionError

    assert oasr.load_pretrained(random_whisper_bundle, architecture="whisper", device="cpu").architecture == "whisper"
    with pytest.raises(DetectionError, match="native whisper bundle, not conformer"):
        oasr.load_pretrained(random_whisper_bundle, architecture="conformer", device="cpu")
