"""``oasr quantize`` and ``--verify`` on tiny random FastConformers (transformers' Parakeet CTC and RNN-T).

The models are 128 wide (every projection has at least the 64 inputs the rules quantize) and
randomised as ``test_parakeet_parity.py`` does, so transcripts mix blanks and several labels.
``--verify`` compares encoder output, head logits and the transcript of jfk.wav; a bundle whose
one layer scale is corrupted must fail it with one line, exit 1 and nothing written.
"""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("transformers")
from transformers import ParakeetFeatureExtractor, ParakeetForRNNT, ParakeetProcessor, ParakeetRNNTConfig  # noqa: E402

import oasr  # noqa: E402
import oasr.quant.quantize as quantize_module  # noqa: E402
from oasr.io import bundle  # noqa: E402
from oasr.quant import verify  # noqa: E402
from oasr.quant.modules import QuantEmbedding, QuantLinear  # noqa: E402
from tests.models.fastconformer import test_parakeet_parity as parity  # noqa: E402

WIDE = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256, subsampling_conv_channels=16)


@pytest.fixture(scope="module", params=["ctc", "rnnt"])
def source(request, tmp_path_factory, monkeypatch_module, jfk_wav):
    """(kind, the fp32 oasr bundle of a tiny random Parakeet)."""
    monkeypatch_module.setattr(parity, "ENCODER", {**parity.ENCODER, **WIDE})
    if request.param == "ctc":
        model = parity._build("ctc")
    else:  # a prediction network and joint wide enough to be quantized
        model = ParakeetForRNNT(ParakeetRNNTConfig(
            vocab_size=parity.BLANK + 1, blank_token_id=parity.BLANK, pad_token_id=parity.BLANK,
            decoder_hidden_size=128, num_decoder_layers=1, encoder_config=parity.ENCODER,
        ))
        parity._randomize(model, 12.0, 0)
        _emit_on_a_third_of_frames(model.eval(), jfk_wav)
    folder = tmp_path_factory.mktemp(f"hf-{request.param}")
    model.save_pretrained(folder)
    ParakeetProcessor(feature_extractor=ParakeetFeatureExtractor(), tokenizer=parity._tokenizer()).save_pretrained(folder)
    out = tmp_path_factory.mktemp(f"fp32-{request.param}") / "bundle"
    oasr.convert([folder], out)
    return request.param, out


def _emit_on_a_third_of_frames(model, jfk_wav) -> None:
    """Bias the blank so the greedy path emits about one label per three frames of jfk.wav, as
    speech does (random weights emit on most frames, up to the per-frame cap: slow and unlike speech)."""
    import soundfile as sf

    audio, rate = sf.read(jfk_wav, dtype="float32")
    processor = ParakeetProcessor(feature_extractor=ParakeetFeatureExtractor(), tokenizer=parity._tokenizer())
    with torch.no_grad():
        features = processor(audio, sampling_rate=rate, return_tensors="pt")["input_features"]
        enc = model.encoder_projector(model.encoder(input_features=features).last_hidden_state)
        g = model.decoder(torch.tensor([[parity.BLANK]]))
        logits = model.joint(decoder_hidden_states=g[:, None], encoder_hidden_states=enc[:, :, None])[0, :, 0]
        margin = logits.max(-1).values - logits[:, parity.BLANK]
        model.joint.head.bias[parity.BLANK] += float(margin.quantile(0.67))


@pytest.fixture(scope="module")
def clip(tmp_path_factory, jfk_wav):
    """The first 4 s of jfk.wav: --verify transcribes it twice per run, so the clip sets the cost."""
    import soundfile as sf

    audio, rate = sf.read(jfk_wav, dtype="float32")
    path = tmp_path_factory.mktemp("clip") / "jfk4.wav"
    sf.write(path, audio[: 4 * rate], rate)
    return path


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def test_rules(source, tmp_path):
    kind, src = source
    result = oasr.quantize(src, tmp_path / "q", scheme="int4")
    layers = result.layers
    # Every linear layer and kernel-1 conv of the encoder (the conv module's pointwise pair) ...
    for i in range(2):
        for name in ("self_attn.linear_q", "self_attn.linear_pos", "feed_forward1.linear1", "conv.pointwise_conv1", "conv.pointwise_conv2"):
            assert layers[f"encoder.layers.{i}.{name}"] == "int4"
    assert layers["encoder.pre_encode.out"] == "int4"
    if kind == "ctc":  # the CTC head stays float (0.2% of a 0.6B's bytes; see the model's evidence)
        assert "decoder.decoder_layers.0" not in layers and "decoder.decoder_layers.0.weight" in result.kept
    else:  # the joint stays float; the prediction network's label table takes int8, its LSTM stays float
        assert not any(n.startswith("joint.") for n in layers) and "joint.joint_net.2.weight" in result.kept
        assert layers["decoder.prediction.embed"] == "int8"
    # ... and nothing else: depthwise and subsampling convolutions, norms, the LSTM stay float.
    assert not any("depthwise" in n or "pre_encode.conv" in n or "lstm" in n or "norm" in n for n in layers)
    loaded = oasr.load_pretrained(tmp_path / "q", dtype="float32")
    modules = dict(loaded.model.named_modules())
    assert isinstance(modules["encoder.layers.0.conv.pointwise_conv1"], QuantLinear)
    assert type(modules["encoder.layers.0.conv.depthwise_conv"]) is torch.nn.Conv1d
    if kind != "ctc":
        assert isinstance(modules["decoder.prediction.embed"], QuantEmbedding)
    assert result.ratio < 0.5


def _run_verify(cli, src, dst, clip):
    return cli("quantize", src, dst, "--verify", "--verify-audio", clip, "--json")


def test_verify_passes(source, tmp_path, cli, clip):
    kind, src = source
    code, out, err = _run_verify(cli, src, tmp_path / "q", clip)
    assert code == 0, err
    report = json.loads(out)["verify"]
    gates = verify.ENCODER_GATES["int8"]
    assert report["gates"] == gates
    assert report["encoder_cosine"] >= gates["encoder_cosine"] and report["cosine"] >= gates["cosine"]
    assert report["wer_change"] <= gates["wer_change"]
    assert len(report["source_text"].split()) >= 3  # a transcript that can change
    assert bundle.is_bundle(tmp_path / "q")


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
    code, out, err = _run_verify(cli, src, dst, clip)
    assert code == 1 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"oasr: error: verification on {clip} failed: ")
    assert "cosine" in lines[0]
    assert not dst.exists() and list(tmp_path.iterdir()) == []
    if kind != "ctc":
        return  # the rest is the same code path for both kinds
    # An existing DST is left as it was.
    monkeypatch.setattr(quantize_module, "quantize_int8", real)
    oasr.quantize(src, dst, scheme="int4")
    before = (dst / "model.safetensors").read_bytes()
    calls.clear()
    monkeypatch.setattr(quantize_module, "quantize_int8", corrupted)
    code, _, err = _run_verify(cli, src, dst, clip)
    assert code == 1 and "verification on" in err
    assert (dst / "model.safetensors").read_bytes() == before


@pytest.mark.parametrize("source", ["rnnt"], indirect=True)  # CTC logits need no path
def test_transducer_teacher_forcing_follows_the_greedy_path(source, jfk_wav):
    """The source's joint logits at its own path pick its own labels on the frames that emitted."""
    kind, src = source
    from oasr.io.audio import load_audio

    loaded = oasr.load_pretrained(src, dtype="float32")
    samples = load_audio(jfk_wav, 16000)
    _, logits, labels = verify.transducer_outputs(loaded, samples)
    assert labels and logits.shape[0] > max(f for _, f in labels)
    first_at = {}
    for label, frame in labels:
        first_at.setdefault(frame, label)  # the first label of a frame is scored at that frame's state
    assert all(int(logits[f, : loaded.decoding.blank_id + 1].argmax()) == label for f, label in first_at.items())
