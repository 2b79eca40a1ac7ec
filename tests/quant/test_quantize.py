"""``oasr quantize`` on tiny random Whisper models: layouts, the format-2 bundle, loading, the CLI.

Real weights (Whisper base: sizes, WER, logit cosine, RSS) are in ``test_quantize_base.py``.
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path

import pytest
import torch

import oasr
from oasr.io import bundle
from oasr.conversion.run import convert
from oasr.errors import BundleError, CapabilityError, LoadError
from oasr.models.whisper import Whisper
from oasr.quant import schemes
from oasr.quant.modules import QuantEmbedding, QuantLinear
from tiny_models import write_openai_pt

# Wide enough that every projection is quantized (layers under 64 inputs stay float).
DIMS = dict(n_audio_state=128, n_text_state=128, n_vocab=96, n_audio_ctx=16, n_text_ctx=12)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("quant")
    out = folder / "fp32"
    convert([write_openai_pt(folder / "tiny.pt", **DIMS)], out)
    return out


@pytest.fixture(scope="module")
def tiny_int8(tiny, tmp_path_factory):
    out = tmp_path_factory.mktemp("q8") / "int8"
    oasr.quantize(tiny, out, scheme="int8")
    return out


def _logits(model_or_path, seed=0, dtype="float32"):
    loaded = oasr.load_pretrained(model_or_path, device="cpu", dtype=dtype) if not hasattr(model_or_path, "model") else model_or_path
    torch.manual_seed(seed)
    mel = torch.randn(2, 80, 32)
    tokens = torch.randint(0, DIMS["n_vocab"], (2, 10))
    with torch.inference_mode():
        return loaded.model(mel.to(next(loaded.model.parameters()).dtype), tokens).float()


def _cosine(a, b):
    return torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0).item()


# -- packing -----------------------------------------------------------------------------------


def test_int4_nibbles_low_first_with_code_q_plus_8():
    q = torch.tensor([[1, -2, -8, 7], [0, 0, 3, -1]], dtype=torch.int8)
    packed = schemes.pack_int4(q)
    assert packed.dtype == torch.uint8 and packed.shape == (2, 2)
    # column 0 in the low nibble: codes 9 and 6 -> 0x69; codes 0 and 15 -> 0xF0
    assert packed.tolist() == [[0x69, 0xF0], [0x88, 0x7B]]
    assert torch.equal(schemes.unpack_int4(packed), q)


def test_int4_round_trip_and_scale_layout():
    torch.manual_seed(0)
    w = torch.randn(5, 200)  # 200 inputs: groups of 128 and 72
    packed, scale = schemes.quantize_int4(w)
    assert packed.shape == (5, 100) and scale.shape == (5, 2) and scale.dtype == torch.float32
    q = schemes.unpack_int4(packed)
    assert q.min() >= -7 and q.max() <= 7
    assert torch.equal(schemes.pack_int4(q), packed)
    assert torch.allclose(scale[:, 0], w[:, :128].abs().amax(1) / 7)
    assert torch.allclose(scale[:, 1], w[:, 128:].abs().amax(1) / 7)
    error = (schemes.dequantize_int4(packed, scale) - w).abs()
    assert (error <= scale.repeat_interleave(128, dim=1)[:, :200] / 2 + 1e-6).all()


def test_int4_requantized_to_int8_for_the_kernel():
    torch.manual_seed(0)
    w = torch.randn(6, 200) * torch.linspace(0.1, 3, 200)  # groups of very different ranges
    packed, scale = schemes.quantize_int4(w)
    q8, row = schemes.int4_to_int8(packed, scale)
    assert q8.dtype == torch.int8 and q8.shape == (6, 200) and row.shape == (6,)
    exact = schemes.dequantize_int4(packed, scale)
    assert ((schemes.dequantize_int8(q8, row) - exact).abs() <= row[:, None] / 2 + 1e-6).all()


def test_int8_scale_per_output_channel():
    torch.manual_seed(0)
    w = torch.randn(7, 33) * torch.arange(1, 8)[:, None]
    w[3] = 0  # an all-zero row stays zero, without a zero scale
    q, scale = schemes.quantize_int8(w)
    assert q.dtype == torch.int8 and scale.shape == (7,) and scale.dtype == torch.float32
    assert (q.abs().amax(1)[[0, 1, 2, 4, 5, 6]] == 127).all() and (q[3] == 0).all() and scale[3] > 0
    assert ((schemes.dequantize_int8(q, scale) - w).abs() <= scale[:, None] / 2 + 1e-6).all()


# -- the format-2 bundle -------------------------------------------------------------------------


def test_int8_bundle_layout(tiny, tiny_int8):
    cfg = bundle.read_config(tiny_int8)
    assert cfg.format_version == 2 and bundle.read_config(tiny).format_version == 1
    q = cfg.quantization
    assert q["scheme"] == "int8" and q["group_size"] == 128 and q["oasr_version"] == oasr.__version__
    from oasr.io.files import sha256_file

    assert q["source_sha256"] == sha256_file(tiny / "model.safetensors")
    assert q["layers"]["decoder.token_embedding"] == "int8"
    assert q["layers"]["encoder.blocks.0.mlp.2"] == "int8"
    assert len(q["layers"]) == 2 * 6 + 2 * 10 + 1  # encoder blocks 6 linears, decoder 10, token table
    tensors = bundle.read_tensors(tiny_int8)
    assert tensors["encoder.blocks.0.attn.query.weight"].dtype == torch.int8
    assert tensors["encoder.blocks.0.attn.query.weight_scale"].shape == (128,)
    assert tensors["encoder.blocks.0.attn.query.bias"].dtype == torch.float32  # biases stay float
    assert tensors["encoder.conv1.weight"].dtype == torch.float32  # convolutions stay float
    assert tensors["decoder.positional_embedding"].dtype == torch.float32


def test_int4_bundle_layout(tiny, tmp_path):
    out = tmp_path / "int4"
    result = oasr.quantize(tiny, out, scheme="int4")
    q = bundle.read_config(out).quantization
    assert q["layers"]["encoder.blocks.0.mlp.2"] == "int4"
    assert q["layers"]["decoder.token_embedding"] == "int8"  # the tied token table stays int8
    tensors = bundle.read_tensors(out)
    assert tensors["encoder.blocks.0.mlp.2.weight"].dtype == torch.uint8
    assert tensors["encoder.blocks.0.mlp.2.weight"].shape == (128, 256)  # 512 inputs, two per byte
    assert tensors["encoder.blocks.0.mlp.2.weight_scale"].shape == (128, 4)
    assert result.bytes < 0.5 * result.source_bytes


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda q: q.pop("source_sha256"), "missing field(s): source_sha256"),
        (lambda q: q.update(extra=1), "unknown field(s): extra"),
        (lambda q: q.update(scheme="int3"), "scheme 'int3' is not one of"),
        (lambda q: q.update(group_size=0), "group_size 0"),
        (lambda q: q["layers"].update({"encoder.conv1": "fp8"}), "unknown layer scheme"),
        (lambda q: q.update(source_sha256="abc"), "not a sha256"),
    ],
)
def test_quantization_section_is_read_strictly(tiny_int8, tmp_path, edit, message):
    import shutil

    copy = tmp_path / "b"
    shutil.copytree(tiny_int8, copy)
    path = copy / "oasr_config.json"
    cfg = json.loads(path.read_text())
    edit(cfg["quantization"])
    path.write_text(json.dumps(cfg))
    with pytest.raises(BundleError, match=message.replace("(", r"\(").replace(")", r"\)")):
        bundle.read_config(copy)


def test_integer_tensor_in_a_float_slot_is_refused(tiny_int8, tmp_path):
    import shutil

    copy = tmp_path / "b"
    shutil.copytree(tiny_int8, copy)
    path = copy / "oasr_config.json"
    cfg = json.loads(path.read_text())
    del cfg["quantization"]["layers"]["encoder.blocks.0.attn.query"]  # its int8 weight now meets a float layer
    path.write_text(json.dumps(cfg))
    with pytest.raises(LoadError, match="weight_scale"):
        oasr.load_pretrained(copy, device="cpu")


# -- loading and running ---------------------------------------------------------------------------


def test_load_swaps_in_quantized_modules(tiny_int8):
    loaded = oasr.load_pretrained(tiny_int8, device="cpu", dtype="bfloat16")
    model = loaded.model
    assert isinstance(model.encoder.blocks[0].attn.query, QuantLinear)
    assert isinstance(model.decoder.token_embedding, QuantEmbedding)
    state = model.state_dict()
    assert state["encoder.blocks.0.attn.query.weight"].dtype == torch.int8
    assert state["encoder.blocks.0.attn.query.weight_scale"].dtype == torch.float32  # never cast
    assert state["encoder.blocks.0.attn.query.bias"].dtype == torch.bfloat16  # --dtype: the float parts
    assert state["encoder.conv1.weight"].dtype == torch.bfloat16
    assert loaded.quantization["scheme"] == "int8"
    assert _logits(loaded).dtype == torch.float32
    query = model.encoder.blocks[0].attn.query
    assert isinstance(query._wide if query._wide is not None else query._packed, torch.ScriptObject)  # the CPU integer kernel


def _loaded_and_packed(bundle):
    """The bundle loaded fp32 on the CPU, once the helper thread has packed its integer weights."""
    import threading

    loaded = oasr.load_pretrained(bundle, device="cpu", dtype="float32")
    for thread in threading.enumerate():
        if thread.name == "oasr-int8-pack":
            thread.join(timeout=60)
    return loaded


def test_weights_are_packed_ahead_on_a_helper_thread(tiny_int8):
    """Loading starts packing every integer weight off the caller's thread, before any call; the
    model computes what it computes when each layer packs on its first call."""
    from oasr.loading import clear_cache

    clear_cache()
    loaded = _loaded_and_packed(tiny_int8)
    layers = [m for m in loaded.model.modules() if isinstance(m, (QuantLinear, QuantEmbedding))]
    # no forward ran: each has the kernel its first call wants (oneDNN's for the encoder's, on AMX)
    assert layers and all(isinstance(m._wide if m._wide is not None else m._packed, torch.ScriptObject) for m in layers)
    ahead = _logits(loaded)
    clear_cache()
    from oasr.quant import modules

    lazy = _loaded_and_packed(tiny_int8)
    for m in lazy.model.modules():
        if isinstance(m, (QuantLinear, QuantEmbedding)):
            m._packed = modules._PENDING  # packed again, on the first call
            m._wide = None if m._wide is None else modules._PENDING
    assert torch.equal(_logits(lazy), ahead)


def test_packed_weights_give_their_pages_back_to_the_bundle_file(tiny_int8, monkeypatch):
    """The integer weights are loaded as views of the bundle's mapping, never copied, and each is
    released once a kernel holds its packed copy: the process does not hold them twice."""
    from oasr.io import mapped
    from oasr.loading import clear_cache
    from oasr.quant import modules

    released = []
    monkeypatch.setattr(modules, "release", lambda t: released.append(t.data_ptr()))
    clear_cache()
    loaded = _loaded_and_packed(tiny_int8)
    layers = [m for m in loaded.model.modules() if isinstance(m, (QuantLinear, QuantEmbedding))]
    ranges = list(mapped._KEPT)
    assert layers and all(any(lo <= m.weight.data_ptr() < hi for lo, hi in ranges) for m in layers)
    assert {m.weight.data_ptr() for m in layers} <= set(released)
    clear_cache()


_EXIT_WHILE_PACKING = """
import sys, torch, oasr
from oasr.quant import modules
kernel = modules.QuantLinear._kernel
def slow(self, rows=1):  # a layer whose packing takes a while, its GIL released in torch
    a = torch.ones(600, 600)
    for _ in range(40):
        a = a @ a / 600
    return kernel(self, rows)
modules.QuantLinear._kernel = slow
oasr.load_pretrained(sys.argv[1], device="cpu", dtype="float32")
print("loaded")
"""


def test_a_process_that_exits_while_packing_exits_cleanly(tiny_int8):
    """A process that loads a quantized model and exits at once (an error after loading, a short
    script) exits with its own status: the packing thread was aborting it (SIGABRT)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _EXIT_WHILE_PACKING, str(tiny_int8)], capture_output=True, text=True, timeout=300)
    assert (done.returncode, done.stdout.strip()) == (0, "loaded"), done.stderr[-2000:]


@pytest.mark.parametrize("scheme, floor", [("int8", 0.999), ("int4", 0.98)])
def test_quantized_logits_follow_the_float_model(tiny, tmp_path, scheme, floor):
    out = tmp_path / scheme
    oasr.quantize(tiny, out, scheme=scheme)
    reference = _logits(tiny)
    loaded = oasr.load_pretrained(out, device="cpu", dtype="float32")
    kernel = _logits(loaded)
    cosine = _cosine(reference, kernel)
    print(f"\ntiny {scheme}: logit cosine {cosine:.5f}")
    assert cosine >= floor
    # the dequantising path (used where there is no integer kernel) computes the same model
    for m in loaded.model.modules():
        if isinstance(m, (QuantLinear, QuantEmbedding)):
            m._packed = m._wide = None
    assert _cosine(_logits(loaded), kernel) >= 0.999


def test_quantized_model_saves_as_version_2(tiny_int8, tmp_path):
    loaded = oasr.load_pretrained(tiny_int8, device="cpu", dtype="stored")
    loaded.save(tmp_path / "again")
    assert (tmp_path / "again" / "model.safetensors").read_bytes() == (tiny_int8 / "model.safetensors").read_bytes()
    assert bundle.read_config(tmp_path / "again").format_version == 2


# -- quantize: idempotence, atomicity, rules, refusal ------------------------------------------------


def test_idempotent_and_forced(tiny, tmp_path):
    out = tmp_path / "q"
    assert oasr.quantize(tiny, out, scheme="int8").status == "quantized"
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    assert oasr.quantize(tiny, out, scheme="int8").status == "skipped"
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp
    assert oasr.quantize(tiny, out, scheme="int8", force=True).status == "quantized"
    assert oasr.quantize(tiny, out, scheme="int4").status == "quantized"  # another scheme is not up to date
    assert oasr.quantize(tiny, out, scheme="int4", keep=["*.mlp.*"]).status == "quantized"


def test_keep_patterns_stay_float(tiny, tmp_path):
    out = tmp_path / "q"
    result = oasr.quantize(tiny, out, scheme="int8", keep=["decoder.token_embedding.weight", "*.mlp.2.weight"])
    layers = bundle.read_config(out).quantization["layers"]
    assert "decoder.token_embedding" not in layers and not any(n.endswith("mlp.2") for n in layers)
    assert "decoder.token_embedding.weight" in result.kept
    loaded = oasr.load_pretrained(out, device="cpu", dtype="float32")
    assert type(loaded.model.decoder.token_embedding).__name__ == "Embedding"
    assert _cosine(_logits(tiny), _logits(loaded)) >= 0.999


def test_failure_leaves_destination_as_it_was(tiny, tmp_path, monkeypatch):
    import oasr.quant.quantize as q

    out = tmp_path / "q"
    oasr.quantize(tiny, out, scheme="int8")
    before = (out / "model.safetensors").read_bytes()

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(q, "quantize_int4", boom)
    with pytest.raises(KeyboardInterrupt):
        oasr.quantize(tiny, out, scheme="int4")
    assert (out / "model.safetensors").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q"]


def test_refused_architecture_writes_nothing(tiny, tmp_path, monkeypatch, cli):
    monkeypatch.setattr(Whisper, "quant_refusal", "its rules were never validated")
    with pytest.raises(CapabilityError, match="whisper models cannot be quantized: its rules were never validated"):
        oasr.quantize(tiny, tmp_path / "q", scheme="int8")
    code, out, err = cli("quantize", tiny, tmp_path / "q")
    assert code == 1 and out == ""
    assert err.strip().splitlines() == ["oasr: error: whisper models cannot be quantized: its rules were never validated"]
    assert not (tmp_path / "q").exists()


def test_quantized_source_is_refused(tiny_int8, tmp_path):
    with pytest.raises(oasr.InputError, match="already quantized"):
        oasr.quantize(tiny_int8, tmp_path / "q", scheme="int4")


# -- the command line ----------------------------------------------------------------------------


def test_cli_quantize_json_and_skip(tiny, tmp_path, cli):
    out = tmp_path / "q"
    code, stdout, _ = cli("quantize", tiny, out, "--scheme", "int4", "--keep", "*.attn.*", "--json")
    assert code == 0
    report = json.loads(stdout)
    assert report["status"] == "quantized" and report["scheme"] == "int4"
    assert not any(".attn." in n for n in report["layers"])
    assert report["ratio"] == pytest.approx((out / "model.safetensors").stat().st_size / (tiny / "model.safetensors").stat().st_size)
    code, stdout, _ = cli("quantize", tiny, out, "--scheme", "int4", "--keep", "*.attn.*")
    assert code == 0 and stdout.startswith("skipped")


def test_cli_flags(tiny, tmp_path, cli):
    code, _, err = cli("quantize", tiny, tmp_path / "q", "--verify-audio", "x.wav")
    assert code == 2 and "--verify-audio needs --verify" in err
    code, _, err = cli("quantize", tiny, tmp_path / "q", "--verify", "--verify-audio", tmp_path / "missing.wav")
    assert code == 1 and "no such file" in err and not (tmp_path / "q").exists()
    code, _, err = cli("quantize", tiny, tmp_path / "q", "--scheme", "int2")
    assert code == 2


def test_cli_inspect_summarises_the_section(tiny, tmp_path, cli):
    out = tmp_path / "q"
    oasr.quantize(tiny, out, scheme="int4", keep=["*.mlp.*"])
    code, stdout, _ = cli("inspect", out)
    assert code == 0 and "(format 2)" in stdout
    assert "quantization   int4 (group 128): 24 int4, 1 int8 layers; float by --keep or rule: *.mlp.*" in stdout


@pytest.mark.requires_cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_dequantises_on_the_fly(tiny_int8):
    loaded = oasr.load_pretrained(tiny_int8, device="cuda", dtype="float16")
    assert loaded.model.encoder.blocks[0].attn.query._packed is None
    assert loaded.model.encoder.blocks[0].attn.query.weight.dtype == torch.int8
    assert _cosine(_logits(tiny_int8), _logits(loaded).cpu()) >= 0.999


def test_verify_clip_default_is_the_installed_pyannote_sample(tmp_path, monkeypatch):
    import importlib.machinery

    from oasr.quant import verify

    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(oasr.InputError, match="pass --verify-audio FILE"):
        verify.verify_clip(None)
    package = tmp_path / "pyannote" / "audio"
    (package / "sample").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sample" / "sample.wav").write_bytes(b"RIFF")
    spec = importlib.machinery.ModuleSpec("pyannote.audio", None, origin=str(package / "__init__.py"))
    monkeypatch.setattr("importlib.util.find_spec", lambda name: spec if name == "pyannote.audio" else None)
    assert verify.verify_clip(None) == package / "sample" / "sample.wav"


def test_foreign_source_is_converted_first(tmp_path):
    src = write_openai_pt(tmp_path / "tiny.pt", **DIMS)
    result = oasr.quantize(src, tmp_path / "q", scheme="int8")
    assert result.status == "quantized" and bundle.is_bundle(result.source)  # the cached conversion
    assert bundle.read_config(tmp_path / "q").quantization["source"] == str(src)


def test_every_architecture_is_validated_or_refused_with_a_reason():
    from oasr.models.architectures import architectures, find_architecture

    for name in architectures():
        cls = find_architecture(name).model_cls
        # validated: test_quantize_base.py, test_quantize_fastconformer.py, test_quantize_zipformer.py, test_quantize_paraformer.py,
        # models/qwen2_audio/test_qwen2_audio_quantize.py, decoding/aed/
        if name in ("whisper", "fastconformer", "zipformer", "paraformer", "qwen2-audio", "conformer"):
            assert cls.quant_refusal is None
        else:
            assert isinstance(cls.quant_refusal, str) and len(cls.quant_refusal) > 20, name


def test_an_encoder_takes_onednns_amx_kernel_where_the_cpu_has_it(tiny_int8):
    """Whisper's encoder layers (1500 rows a window) and token table run oneDNN's int8 kernel on
    an AMX CPU, the decoder's layers (a few rows a step) fbgemm's; both multiply the same int8
    weights."""
    from oasr.loading import clear_cache
    from oasr.quant import modules

    if not modules._has_amx_int8():
        pytest.skip("this CPU has no AMX int8: every layer keeps fbgemm's kernel")
    clear_cache()
    model = oasr.load_pretrained(tiny_int8, device="cpu", dtype="float32").model
    clear_cache()  # the layers are changed below
    named = [(n, m) for n, m in model.named_modules() if isinstance(m, (QuantLinear, QuantEmbedding))]
    assert all((m._wide is not None) == n.startswith(("encoder.", "decoder.token_embedding")) for n, m in named)
    mel = torch.randn(8, 80, 2 * DIMS["n_audio_ctx"])  # 8 windows of 16 frames: 128 rows a call
    with torch.inference_mode():
        wide = model.encoder(mel)
        assert all(isinstance(m._wide, torch.ScriptObject) for n, m in named if n.startswith("encoder."))
        for _, m in named:
            m._wide = None
        narrow = model.encoder(mel)
    assert not torch.equal(wide, narrow)  # another kernel ran
    assert _cosine(wide, narrow) >= 0.9999


def test_a_packed_weight_costs_one_copy_of_the_int8_weight_not_two():
    """oneDNN's packed weight keeps the qint8 tensor it was packed from (its unpacked weight):
    made by copying, that doubled the memory of oneDNN's layers (Whisper's encoder and token
    table on an AMX CPU); made on the stored bytes, it costs nothing beyond the packed copy.
    (fbgemm keeps no such tensor.)"""
    from oasr.quant import modules

    engine = "onednn"
    if engine not in torch.backends.quantized.supported_engines:
        pytest.skip(f"this torch build has no {engine}")
    status = Path("/proc/self/status")
    if not status.is_file() or not hasattr(ctypes.CDLL(None), "malloc_trim"):
        pytest.skip("resident memory is read from /proc, with glibc's heap trimmed")

    def anon_mib() -> float:
        # Live memory only: the packing's freed temporaries may stay in the C heap (glibc raises
        # its mmap threshold after earlier frees), which malloc_trim gives back.
        ctypes.CDLL(None).malloc_trim(0)
        return next(int(line.split()[1]) for line in status.read_text().splitlines() if line.startswith("RssAnon")) / 1024

    weights = [torch.randint(-127, 128, (2048, 2048), dtype=torch.int8) for _ in range(16)]  # 64 MiB
    scale = torch.rand(2048) / 100
    before = anon_mib()
    packed = [modules._prepack(q, scale, engine) for q in weights]
    added = anon_mib() - before
    assert added < 1.2 * 64, f"packing 64 MiB of int8 with {engine} added {added:.0f} MiB"
    x = torch.randn(3, 2048)
    reference = x @ (weights[0].float() * scale[:, None]).T
    assert _cosine(torch.ops.quantized.linear_dynamic(x, packed[0], False), reference) > 0.999
