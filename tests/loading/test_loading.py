"""load_pretrained: a model that knows what it is, one cache per process, the task's capability."""

from __future__ import annotations

import hashlib
import logging
import os

import pytest
import torch

import oasr
from oasr import loading
from oasr.conversion.run import convert
from oasr.errors import CapabilityError, InputError
from tiny_models import write_openai_pt


def _sha(path) -> str:
    return hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()


def test_identity_of_a_bundle_path(random_whisper_bundle):
    loaded = oasr.load_pretrained(random_whisper_bundle, device="cpu")
    ident = loaded.identity
    assert ident.requested == str(random_whisper_bundle)
    assert ident.source == ident.bundle == str(random_whisper_bundle.resolve())
    assert ident.bundle_sha256 == _sha(random_whisper_bundle)
    assert ident.revision.startswith("sources-") and ident.architecture == "whisper"
    assert "transcribe" in ident.capabilities
    p = loaded.result_provenance({"beam_size": 1})
    assert (p.model, p.source, p.bundle_sha256, p.revision) == (str(random_whisper_bundle), ident.source, ident.bundle_sha256, ident.revision)
    assert p.options == {"beam_size": 1} and p.oasr_version == oasr.__version__


def test_identity_of_a_foreign_checkpoint(tmp_path, caplog):
    src = write_openai_pt(tmp_path / "tiny.pt", seed=4321)  # bytes no other test converted into the session cache
    with caplog.at_level(logging.INFO, logger="oasr"):
        loaded = oasr.load_pretrained(src, device="cpu")
    ident = loaded.identity
    assert ident.requested == str(src) and ident.source == str(src.resolve())
    assert ident.revision.startswith("sha-") and ident.bundle_sha256 == _sha(loaded_path := type(src)(ident.bundle))
    assert "into the oasr cache" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="oasr"):
        again = oasr.load_pretrained(src, device="cpu")  # converted once: the cached bundle is reused
    assert again.identity.bundle == str(loaded_path) and "cached conversion" in caplog.text


def test_one_cache_per_process(random_whisper_bundle):
    a = oasr.load_pretrained(random_whisper_bundle, device="cpu")
    b = oasr.load_pretrained(str(random_whisper_bundle), device="cpu", task="transcribe")
    assert a.model is b.model and a is not b
    assert oasr.load_pretrained(random_whisper_bundle, device="cpu", dtype="bfloat16").model is not a.model
    assert oasr.load_pretrained(random_whisper_bundle, device="cpu", cache=False).model is not a.model
    model, _ = oasr.from_pretrained(random_whisper_bundle, device="cpu")  # a private copy, free to modify
    assert model is not a.model
    os.utime(random_whisper_bundle / "model.safetensors", ns=(1, 1))  # a rewritten bundle is loaded again
    assert oasr.load_pretrained(random_whisper_bundle, device="cpu").model is not a.model
    loading.clear_cache()
    assert oasr.load_pretrained(random_whisper_bundle, device="cpu").model is not a.model


def test_the_cache_is_bounded(tmp_path):
    loading.clear_cache()
    bundles = []
    for i in range(loading.CACHE_SIZE + 1):
        out = tmp_path / f"b{i}"
        convert([write_openai_pt(tmp_path / f"t{i}.pt", seed=i)], out)
        bundles.append(out)
    first = oasr.load_pretrained(bundles[0], device="cpu")
    for b in bundles[1:]:
        oasr.load_pretrained(b, device="cpu")
    assert oasr.load_pretrained(bundles[-1], device="cpu").model is oasr.load_pretrained(bundles[-1], device="cpu").model
    assert oasr.load_pretrained(bundles[0], device="cpu").model is not first.model  # the oldest went


def test_task_capability_and_passthrough(random_whisper_bundle):
    loaded = oasr.load_pretrained(random_whisper_bundle, device="cpu")
    assert oasr.load_pretrained(loaded, task="transcribe") is loaded
    with pytest.raises(CapabilityError, match=r"pitch needs a CREPE model; this whisper model can: .*transcribe"):
        oasr.load_pretrained(loaded, task="pitch")
    with pytest.raises(InputError, match="unknown task 'enhance'"):
        oasr.load_pretrained(loaded, task="enhance")
    with pytest.raises(InputError, match="not int"):
        oasr.load_pretrained(3)


def test_weights_sha256_is_kept_beside_the_cache(random_whisper_bundle, monkeypatch):
    from oasr.hub import cache

    sha = cache.bundle_sha256(random_whisper_bundle)
    assert sha == _sha(random_whisper_bundle)
    cache._HASHES.clear()  # a new process: the kept value is read, the file is not hashed

    def no_hashing(path):
        raise AssertionError("hashed again")

    monkeypatch.setattr(cache, "sha256_file", no_hashing)
    assert cache.bundle_sha256(random_whisper_bundle) == sha
    monkeypatch.undo()
    cache._HASHES.clear()
    state = torch.zeros(3)
    from safetensors.torch import save_file

    save_file({"x": state}, str(random_whisper_bundle / "model.safetensors"))  # changed bytes: hashed anew
    assert cache.bundle_sha256(random_whisper_bundle) == _sha(random_whisper_bundle) != sha
