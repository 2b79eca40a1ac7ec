"""Corrupt weights are refused (issue 17, item 5): convert and quantize check every floating tensor
for inf/NaN, and ``oasr inspect --verify`` reads a bundle whole (shapes, values, header, sha256)."""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import struct
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

import oasr
from oasr.conversion.run import convert as _convert
from oasr.errors import BundleError, ConversionError
from oasr.io import bundle
from tiny_models import write_openai_pt
from cli_checks import one_line_error as _one_line_error



@contextlib.contextmanager
def _quiet_log():
    """The oasr log off while the library converts a tiny checkpoint: its missing-tokenizer warning
    would go to a handler an earlier in-process CLI run left on its (closed) captured stderr."""
    log = logging.getLogger("oasr")
    was = log.disabled
    log.disabled = True
    try:
        yield
    finally:
        log.disabled = was


def convert(*args, **kwargs):
    with _quiet_log():
        return _convert(*args, **kwargs)




def _poisoned_pt(path: Path, **values: float) -> Path:
    """A tiny openai-whisper checkpoint whose named tensors hold ``value`` at their first element."""
    write_openai_pt(path)
    ckpt = torch.load(path, weights_only=True)
    for name, value in values.items():
        ckpt["model_state_dict"][name.replace("__", ".")].view(-1)[0] = value
    torch.save(ckpt, path)
    return path


def _rewrite_weights(folder: Path, change) -> None:
    tensors = dict(bundle.read_tensors(folder))
    change(tensors)
    save_file({k: v.contiguous() for k, v in sorted(tensors.items())}, folder / bundle.WEIGHTS_NAME, metadata={"format": "pt"})


# --- convert ---------------------------------------------------------------------------------------


def test_flipped_bytes_in_a_ctranslate2_model_are_refused(cli, tiny_en_ct2, tmp_path):
    src = tmp_path / "tiny.en"
    shutil.copytree(tiny_en_ct2, src)
    src.chmod(0o755)
    weights = src / "model.bin"
    weights.chmod(0o644)
    middle = weights.stat().st_size // 2
    with open(weights, "r+b") as f:  # flip every bit of 4 KiB in the middle (tensor data, not the header)
        f.seek(middle)
        block = f.read(4096)
        f.seek(middle)
        f.write(bytes(b ^ 0xFF for b in block))
    dst = tmp_path / "out"
    code, out, err = cli("convert", src, dst)
    _one_line_error(code, err, "tensor(s) hold inf or NaN values", "decoder.token_embedding.weight", "corrupt")
    assert not dst.exists()


def test_non_finite_tensors_are_named_and_counted(cli, tmp_path):
    src = _poisoned_pt(tmp_path / "nan.pt", decoder__ln__weight=float("nan"), encoder__conv1__weight=float("inf"))
    code, out, err = cli("convert", src, tmp_path / "out")
    line = _one_line_error(code, err, "2 tensor(s) hold inf or NaN values")
    assert "decoder.ln.weight" in line and "encoder.conv1.weight" in line
    assert not (tmp_path / "out").exists()


def test_many_non_finite_tensors_name_the_first_three(tmp_path):
    write_openai_pt(tmp_path / "all.pt")
    ckpt = torch.load(tmp_path / "all.pt", weights_only=True)
    state = ckpt["model_state_dict"]  # all NaN but the computed (sinusoidal) table, checked on its own
    ckpt["model_state_dict"] = {k: v if "positional_embedding" in k and "encoder" in k else torch.full_like(v, float("nan")) for k, v in state.items()}
    torch.save(ckpt, tmp_path / "all.pt")
    with pytest.raises(ConversionError, match=r"tensor\(s\) hold inf or NaN values \([^,]+, [^,]+, [^,]+ and \d+ more\)"):
        convert([tmp_path / "all.pt"], tmp_path / "out")


def test_values_that_overflow_the_target_dtype_are_refused(tmp_path):
    src = _poisoned_pt(tmp_path / "big.pt", decoder__ln__weight=1e6)  # finite in fp32, inf in fp16
    convert([src], tmp_path / "fp32")  # kept in fp32: fine
    with pytest.raises(ConversionError, match=r"1 tensor\(s\) hold inf or NaN values \(decoder\.ln\.weight\)"):
        convert([src], tmp_path / "fp16", dtype="float16")
    assert not (tmp_path / "fp16").exists()


# --- quantize --------------------------------------------------------------------------------------


def test_an_all_nan_bundle_is_not_quantized(cli, random_whisper_wide_bundle, tmp_path):
    poisoned = tmp_path / "nan"
    shutil.copytree(random_whisper_wide_bundle, poisoned)
    _rewrite_weights(poisoned, lambda ts: ts.update({k: torch.full_like(v, float("nan")) for k, v in ts.items() if v.is_floating_point()}))
    code, out, err = cli("quantize", poisoned, tmp_path / "q8")
    _one_line_error(code, err, "the source bundle", "tensor(s) hold inf or NaN values")
    assert out == "" and not (tmp_path / "q8").exists()
    code, _, err = cli("quantize", random_whisper_wide_bundle, tmp_path / "q8")  # the clean one quantizes
    assert code == 0, err


# --- inspect --verify --------------------------------------------------------------------------------


def test_verify_a_good_bundle(cli, random_whisper_wide_bundle):
    code, out, err = cli("inspect", "--verify", random_whisper_wide_bundle)
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("verify"))
    assert "ok:" in line and "tensors read" in line and "every floating value finite" in line
    assert "not in the oasr cache" in line
    code, out, _ = cli("inspect", "--verify", "--json", random_whisper_wide_bundle)
    info = json.loads(out)["verify"]
    assert code == 0 and info["ok"] and info["problems"] == [] and info["tensors"] > 0


def test_verify_finds_non_finite_values(cli, random_whisper_wide_bundle, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(random_whisper_wide_bundle, bad)
    _rewrite_weights(bad, lambda ts: ts["decoder.ln.bias"].view(-1).__setitem__(0, float("inf")))
    code, out, err = cli("inspect", "--verify", bad)
    _one_line_error(code, err, "failed verification", "1 tensor(s) hold inf or NaN values (decoder.ln.bias)")
    assert "verify         FAILED" in out
    code, out, _ = cli("inspect", "--verify", "--json", bad)
    assert code == 1 and not json.loads(out)["verify"]["ok"]


def test_verify_checks_shapes_against_the_model(cli, random_whisper_wide_bundle, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(random_whisper_wide_bundle, bad)
    _rewrite_weights(bad, lambda ts: ts.update({"decoder.ln.weight": torch.ones(7)}))
    code, out, err = cli("inspect", "--verify", bad)
    _one_line_error(code, err, "model accounting", "decoder.ln.weight", "(7,)")


def test_verify_checks_the_cached_sha256(cli, tmp_path):
    from oasr.hub.resolve import bundle_origin, resolve_model

    with _quiet_log():
        cached = Path(resolve_model(str(write_openai_pt(tmp_path / "tiny.pt", seed=3))))
    assert bundle_origin(cached)["weights_sha256"]
    code, out, err = cli("inspect", "--verify", cached)
    assert code == 0 and "sha256 matches the cache record" in out, out + err
    # One mantissa bit of the first float32 value: still finite, still the right shape.
    weights = cached / bundle.WEIGHTS_NAME
    weights.chmod(0o644)
    raw = bytearray(weights.read_bytes())
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    first = min((v["data_offsets"][0] for k, v in header.items() if k != "__metadata__" and v["dtype"] == "F32"))
    raw[8 + n + first] ^= 0x01
    weights.write_bytes(bytes(raw))
    code, out, err = cli("inspect", "--verify", cached)
    _one_line_error(code, err, "failed verification", "its cache record says", "changed after it was cached")


def test_a_damaged_header_or_truncated_file_is_a_bundle_error(cli, random_whisper_wide_bundle, tmp_path):
    truncated = tmp_path / "truncated"
    shutil.copytree(random_whisper_wide_bundle, truncated)
    weights = truncated / bundle.WEIGHTS_NAME
    weights.write_bytes(weights.read_bytes()[:-100])
    code, _, err = cli("inspect", "--verify", truncated)
    _one_line_error(code, err, "truncated or corrupted")
    with pytest.raises(BundleError, match="truncated or corrupted"):
        oasr.load_pretrained(truncated, cache=False)

    damaged = tmp_path / "damaged"
    shutil.copytree(random_whisper_wide_bundle, damaged)
    weights = damaged / bundle.WEIGHTS_NAME
    raw = bytearray(weights.read_bytes())
    raw[8:40] = b"\xff" * 32  # the header's JSON
    weights.write_bytes(bytes(raw))
    code, _, err = cli("inspect", "--verify", damaged)
    _one_line_error(code, err, "truncated or corrupted")


def test_verify_needs_a_bundle(cli, tmp_path):
    src = write_openai_pt(tmp_path / "tiny.pt")
    code, _, err = cli("inspect", "--verify", src)
    _one_line_error(code, err, "not a native oasr bundle")
    code, out, _ = cli("inspect", src)  # without --verify: detection as before
    assert code == 0 and "openai-whisper" in out
