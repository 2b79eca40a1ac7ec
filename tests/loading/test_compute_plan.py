"""The compute plan (oasr.precision.compute_plan): one pure function of what was asked, what is
stored, the device and the CPU, tested as a table the way CTranslate2 tests its compute-type
resolver. The CPUs are plain data; nothing here probes the machine."""

from __future__ import annotations

import dataclasses

import pytest

from oasr.cpu import CpuInfo
from oasr.errors import InputError
from oasr.precision import ATTENTION_ROWS, ComputePlan, Stored, compute_plan

# CPUs as the plan sees them: a vendor, /proc/cpuinfo's flags, and whether torch has oneDNN.
SAPPHIRE_RAPIDS = CpuInfo("GenuineIntel", frozenset({"amx_bf16", "amx_int8", "avx512_bf16", "avx512_vnni"}), onednn=True)
ZEN5 = CpuInfo("AuthenticAMD", frozenset({"avx512_bf16", "avx512_vnni", "avx2"}), onednn=True)
SKYLAKE = CpuInfo("GenuineIntel", frozenset({"avx2", "avx512f"}), onednn=True)
ZEN3_NO_ONEDNN = CpuInfo("AuthenticAMD", frozenset({"avx2"}), onednn=False)
UNKNOWN = CpuInfo("", frozenset(), onednn=True)

# What bundles hold, with what their family declares (Whisper, a CTC model, CREPE).
WHISPER = Stored("float32", auto_int8=True, quantizable=True, bf16_attention=True)
WHISPER_BF16 = dataclasses.replace(WHISPER, dtype="bfloat16")
WHISPER_FP16 = dataclasses.replace(WHISPER, dtype="float16")
WHISPER_INT8 = dataclasses.replace(WHISPER, scheme="int8")
WHISPER_INT4 = dataclasses.replace(WHISPER, scheme="int4")
CTC = Stored("float32", quantizable=True)
CREPE = Stored("float32", refusal="no weight-only quantization rules have been validated for it")

FP32 = ComputePlan("float32")
FP32_ONEDNN = ComputePlan("float32", onednn=True)
AUTO_INT8 = ComputePlan("float32", weights="int8", variant=True)

TABLE = [
    # asked, stored, device, cpu -> plan
    (None, WHISPER, "cpu", SAPPHIRE_RAPIDS, FP32),
    (None, WHISPER, "cpu", ZEN5, FP32_ONEDNN),
    (None, WHISPER_INT8, "cpu", ZEN5, ComputePlan("float32", weights="int8")),
    (None, WHISPER_BF16, "cpu", SKYLAKE, FP32),
    ("auto", WHISPER, "cpu", SAPPHIRE_RAPIDS, dataclasses.replace(AUTO_INT8, attention_dtype="bfloat16", fallback=FP32)),
    (
        "auto", WHISPER, "cpu", ZEN5,
        dataclasses.replace(AUTO_INT8, attention_dtype="bfloat16", attention_rows=ATTENTION_ROWS, fallback=FP32_ONEDNN),
    ),
    ("auto", WHISPER, "cpu", SKYLAKE, dataclasses.replace(AUTO_INT8, fallback=FP32)),
    ("auto", WHISPER, "cpu", ZEN3_NO_ONEDNN, dataclasses.replace(AUTO_INT8, fallback=FP32)),
    ("auto", WHISPER_BF16, "cpu", SKYLAKE, dataclasses.replace(AUTO_INT8, fallback=FP32)),
    ("auto", WHISPER_INT8, "cpu", ZEN5, ComputePlan("float32", weights="int8", attention_dtype="bfloat16", attention_rows=ATTENTION_ROWS)),
    ("auto", WHISPER_INT4, "cpu", SAPPHIRE_RAPIDS, ComputePlan("float32", weights="int4", attention_dtype="bfloat16")),
    ("auto", WHISPER_INT8, "cpu", SKYLAKE, ComputePlan("float32", weights="int8")),
    ("auto", CTC, "cpu", ZEN5, FP32_ONEDNN),
    ("auto", CTC, "cpu", UNKNOWN, FP32),
    ("auto", CREPE, "cpu", ZEN3_NO_ONEDNN, FP32),
    ("auto", WHISPER, "cuda", None, ComputePlan("float16")),
    ("auto", WHISPER_BF16, "cuda", None, ComputePlan("bfloat16")),
    ("auto", WHISPER_INT8, "cuda", None, ComputePlan("float16", weights="int8")),
    (None, WHISPER_FP16, "cuda", None, ComputePlan("float16")),
    ("float32", WHISPER, "cpu", ZEN5, FP32_ONEDNN),
    ("float32", WHISPER, "cpu", SAPPHIRE_RAPIDS, FP32),
    ("float32", WHISPER_INT8, "cpu", ZEN5, ComputePlan("float32", weights="int8")),
    ("bfloat16", WHISPER, "cpu", ZEN5, ComputePlan("bfloat16")),
    ("float16", WHISPER_BF16, "cuda", None, ComputePlan("float16")),
    ("stored", WHISPER_FP16, "cpu", ZEN5, ComputePlan("float16")),
    ("stored", WHISPER_BF16, "cuda", None, ComputePlan("bfloat16")),
    ("int8", WHISPER, "cpu", ZEN5, AUTO_INT8),
    ("int8", CTC, "cuda", None, ComputePlan("float16", weights="int8", variant=True)),
    ("int8", WHISPER_INT8, "cpu", SKYLAKE, ComputePlan("float32", weights="int8")),
]


@pytest.mark.parametrize(("asked", "stored", "device", "cpu", "expected"), TABLE)
def test_the_plan_of_each_case(asked, stored, device, cpu, expected):
    assert compute_plan(asked, stored, device, cpu) == expected


@pytest.mark.parametrize(
    ("asked", "stored", "device", "message"),
    [
        ("int8", CREPE, "cpu", "cannot be quantized \\(no weight-only"),
        ("int8", WHISPER_INT4, "cuda", "quantized int4; load its full-precision source"),
        ("float64", WHISPER, "cpu", "unknown dtype 'float64'; choose auto, stored, float32"),
        ("half", WHISPER, "cuda", "unknown dtype 'half'"),
    ],
)
def test_what_cannot_be_honoured_is_an_error_naming_the_choices(asked, stored, device, message):
    with pytest.raises(InputError, match=message):
        compute_plan(asked, stored, device, ZEN5)


def test_a_cpu_plan_needs_the_cpu():
    with pytest.raises(ValueError, match="needs the CPU"):
        compute_plan("auto", WHISPER, "cpu", None)


@pytest.mark.parametrize("stored", [WHISPER, WHISPER_BF16, WHISPER_INT8, WHISPER_INT4, CTC, CREPE])
@pytest.mark.parametrize("cpu", [SAPPHIRE_RAPIDS, ZEN5, SKYLAKE, ZEN3_NO_ONEDNN, UNKNOWN])
def test_auto_is_none_plus_the_cpu_speed_policy(stored, cpu):
    """On a GPU the two are one plan; on a CPU auto adds int8 weights and bf16 attentions, and
    falls back to exactly None's plan where the variant cannot be made."""
    assert compute_plan("auto", stored, "cuda") == compute_plan(None, stored, "cuda")
    plain = compute_plan(None, stored, "cpu", cpu)
    auto = compute_plan("auto", stored, "cpu", cpu)
    if auto.variant:
        assert auto.fallback == plain
    else:
        assert dataclasses.replace(auto, attention_dtype=None, attention_rows=None) == plain


def test_the_plan_probes_nothing(monkeypatch):
    """The CPU is an argument: the machine's own is never read while planning."""
    from oasr import cpu

    def no_probing(*args):
        raise AssertionError("the plan probed the machine")

    for name in ("flags", "vendor", "this_cpu", "_cpuinfo"):
        monkeypatch.setattr(cpu, name, no_probing)
    assert compute_plan("auto", WHISPER, "cpu", ZEN5).attention_rows == ATTENTION_ROWS


def test_loading_plans_from_the_bundle_its_family_and_this_cpu(tiny_en_bundle, monkeypatch):
    """``plan_for`` gathers the inputs: the bundle's dtype, Whisper's declared CPU hooks, the CPU."""
    import torch

    from oasr import cpu
    from oasr.loading import plan_for

    monkeypatch.setattr(cpu, "this_cpu", lambda: ZEN5)
    plan = plan_for(tiny_en_bundle, torch.device("cpu"), "auto")
    assert plan == compute_plan("auto", WHISPER, "cpu", ZEN5)
    assert plan_for(tiny_en_bundle, torch.device("cpu"), torch.bfloat16) == ComputePlan("bfloat16")


def test_a_family_without_long_attentions_says_so():
    import torch

    from oasr.models.base import BaseModelConfig, OasrModel

    model = OasrModel(BaseModelConfig())
    assert not OasrModel.bf16_attention
    with pytest.raises(NotImplementedError, match="declares no long attentions"):
        model.attend_in(torch.bfloat16)


def test_asking_int8_runs_the_variant_and_nothing_else(tiny_en_bundle, tmp_path, monkeypatch):
    """``dtype="int8"``: the hub's int8 variant with fp32 float parts, its attentions as they
    are even on a CPU with native bf16 (an explicit ask changes one thing)."""
    import shutil

    import oasr
    from oasr import cpu
    from oasr.hub.cache import variant_path

    bundle = shutil.copytree(tiny_en_bundle, tmp_path / "tiny.en")
    monkeypatch.setattr(cpu, "this_cpu", lambda: ZEN5)
    loaded = oasr.load_pretrained(bundle, device="cpu", dtype="int8", cache=False)
    assert loaded.quantization["scheme"] == "int8" and loaded.identity.bundle == str(variant_path(bundle))
    assert loaded.identity.revision.endswith("+int8")
    assert {b.attn.attention_dtype for b in loaded.model.encoder.blocks} == {None}
