"""``oasr quantize`` and ``--verify`` on tiny random Paraformers (FunASR's modules), zh and en vocabularies.

64 wide (the encoder's projections reach the 64 inputs the rules quantize), weights as the parity
test randomises them. ``--verify`` (``oasr.decoding.cif.verify``) compares encoder output,
decoder logits over the source's token count and the transcript of jfk.wav's first 4 s; a
bundle whose one layer scale is corrupted must fail it with one line and exit 1.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

import oasr  # noqa: E402
import oasr.quant.quantize as quantize_module  # noqa: E402
from oasr.conversion.run import convert  # noqa: E402
from oasr.decoding.cif import verify as cif_verify  # noqa: E402
from oasr.quant import verify  # noqa: E402
from oasr.quant.modules import QuantLinear  # noqa: E402

import funasr_reference as ref  # noqa: E402

CASES = {"zh": 0, "en": 4}  # vocabulary -> seed, as the parity test's


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    ref.funasr()
    root = tmp_path_factory.mktemp("paraformer-quant")
    out = {}
    for kind, seed in CASES.items():
        folder = ref.write_folder(root / f"funasr-{kind}", ref.config(d_model=64), kind, seed)
        convert([folder], root / kind)
        out[kind] = root / kind
    return out


@pytest.fixture(params=sorted(CASES))
def source(request, sources):
    return request.param, sources[request.param]


@pytest.fixture(scope="module")
def clip(jfk_head):
    return jfk_head(4)


@pytest.mark.parametrize("scheme", ["int8", "int4"])
def test_rules_and_the_quantized_bundle_transcribes(source, scheme, tmp_path, clip):
    kind, src = source
    result = oasr.quantize(src, tmp_path / "q", scheme=scheme)
    layers = result.layers
    for name in ("encoders0.0.self_attn.linear_q_k_v", "encoders.0.self_attn.linear_out", "encoders.1.feed_forward.w_1", "encoders.1.feed_forward.w_2"):
        assert layers[f"encoder.{name}"] == scheme
    # only the encoder: the predictor and the decoder (its logits fell under the int8 gate) stay float
    assert all(n.startswith("encoder.") for n in layers)
    assert {"decoder.output_layer.weight", "decoder.decoders.0.src_attn.linear_q.weight", "predictor.cif_output.weight"} <= set(result.kept)
    loaded = oasr.load_pretrained(tmp_path / "q", dtype="float32", cache=False)
    assert isinstance(dict(loaded.model.named_modules())["encoder.encoders.0.self_attn.linear_out"], QuantLinear)
    assert oasr.transcribe(str(clip), loaded).text.strip()


@pytest.mark.parametrize("scheme", ["int8", "int4"])
def test_verify_passes(source, scheme, tmp_path, cli, clip):
    kind, src = source
    code, out, err = cli("quantize", src, tmp_path / "q", "--scheme", scheme, "--verify", "--verify-audio", clip, "--json")
    if kind == "zh" and scheme == "int4":  # 4 of 8 characters of a random model's near-tied labels flip
        assert code == 1 and "WER change" in err and "cosine" not in err
        return
    assert code == 0, err
    report = json.loads(out)["verify"]
    gates = verify.ENCODER_GATES[scheme]
    assert report["gates"] == gates
    assert report["encoder_cosine"] >= gates["encoder_cosine"] and report["cosine"] >= gates["cosine"]
    assert report["cosine"] < 1.0  # the comparison saw the quantized layers
    assert report["wer_change"] <= gates["wer_change"]
    assert len(report["source_text"]) >= 8  # a transcript that can change


def test_cjk_characters_count_as_words():
    assert cif_verify.unit_error_rate("不天天界", "不天地界") == 0.25
    assert cif_verify.unit_error_rate("hello world", "hello word") == 0.5


def test_decoder_logits_compare_at_the_sources_token_count(sources, clip):
    from oasr.io.audio import load_audio

    loaded = oasr.load_pretrained(sources["en"], dtype="float32", cache=False)
    samples = load_audio(clip, 16000)
    _, logits, n = cif_verify.cif_outputs(loaded, samples)
    assert n >= 3 and logits.shape[0] == n
    _, longer, _ = cif_verify.cif_outputs(loaded, samples, n + 2)  # a quantized predictor that fired fewer
    assert longer.shape[0] == n + 2


def test_verify_catches_a_corrupted_scale(source, tmp_path, cli, clip, monkeypatch):
    """The deliberate break: the first quantized layer's scales are multiplied by 4."""
    kind, src = source
    real, calls = quantize_module.quantize_int8, []

    def corrupted(weight):
        q, scale = real(weight)
        calls.append(1)
        return (q, scale * 4) if len(calls) == 1 else (q, scale)

    monkeypatch.setattr(quantize_module, "quantize_int8", corrupted)
    dst = tmp_path / "q"
    code, out, err = cli("quantize", src, dst, "--verify", "--verify-audio", clip, "--json")
    assert code == 1 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"oasr: error: verification on {clip} failed: ") and "cosine" in lines[0]
    assert not dst.exists()
