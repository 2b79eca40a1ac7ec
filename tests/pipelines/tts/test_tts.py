"""`oasr tts` and `oasr.synthesize` on a tiny random VITS voice: input checks, streaming, WAV output.

The voice is a native bundle of a random VITS a few thousand parameters large, with Piper's
default phoneme_id_map and the en-us espeak voice, so every path but the sound itself (the real
voice: test_piper_parity.py) runs in milliseconds. Phonemizing needs piper-tts (the tts extra).
"""

from __future__ import annotations

import io
import logging
import os
import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch

from cli_checks import one_line_error
from oasr_cli.kernel_caches import VARIABLES

pytest.importorskip("piper.phonemize_espeak", reason="piper-tts (the tts extra) phonemizes")

TINY = dict(
    n_vocab=256, hidden_channels=16, inter_channels=8, filter_channels=32, n_heads=2, n_layers=1, kernel_size=3,
    window_size=4, dp_filter_channels=16, sdp_flows=4, flow_layers=2, flow_wavenet_layers=2,
    resblock="2", resblock_kernel_sizes=(3,), resblock_dilation_sizes=((1, 2),), upsample_rates=(4, 4),
    upsample_initial_channel=16, upsample_kernel_sizes=(8, 8),
)
WORDS = "the quick brown fox jumps over the lazy dog while seven wizards quietly judge boxing".split()


def write_tiny_voice(dst: Path, seed: int = 0, **overrides) -> Path:
    from piper.phoneme_ids import DEFAULT_PHONEME_ID_MAP

    from oasr.io.bundle import BundleConfig, write_bundle
    from oasr.models.vits import Vits, VitsConfig
    from oasr.specs import Provenance
    from oasr_converters.piper import voice_specs

    config = VitsConfig(**{**TINY, **overrides})
    torch.manual_seed(seed)
    model = Vits(config)
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.2)
    with torch.no_grad():  # durations of one or two frames a phoneme: logw = (z - m) * exp(-logs)
        model.dp.flows["0"].m.zero_()
        model.dp.flows["0"].logs.fill_(2.0)
    voice = {"audio": {"sample_rate": 16000}, "espeak": {"voice": "en-us"}, "phoneme_id_map": DEFAULT_PHONEME_ID_MAP,
             "num_speakers": config.n_speakers, "speaker_id_map": {"alice": 0, "bob": 1} if config.n_speakers > 1 else {},
             "inference": {"noise_scale": 0.667, "length_scale": 1, "noise_w": 0.8}}
    tokenizer, _, features, decoding = voice_specs(voice, config, "tiny")
    write_bundle(
        dst,
        BundleConfig(architecture="vits", model=config.to_dict(), dtype="float32", tokenizer=tokenizer, features=features,
                     decoding=decoding, provenance=Provenance(source_format="native"), capabilities=("tts",)),
        {k: v.detach() for k, v in model.state_dict().items()},
        {},
    )
    return dst


@pytest.fixture(scope="module")
def voice(tmp_path_factory) -> Path:
    return write_tiny_voice(tmp_path_factory.mktemp("voices") / "tiny")


@pytest.fixture(scope="module")
def multi_voice(tmp_path_factory) -> Path:
    return write_tiny_voice(tmp_path_factory.mktemp("voices") / "multi", n_speakers=2, gin_channels=8)


def _riff_chunks(data: bytes) -> dict[bytes, bytes]:
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    chunks, at = {}, 12
    while at + 8 <= len(data):
        key, size = data[at : at + 4], struct.unpack("<I", data[at + 4 : at + 8])[0]
        chunks[key] = data[at + 8 : at + 8 + min(size, len(data))]
        at += 8 + size + (size % 2)
    return chunks


# --- the Python API ------------------------------------------------------------------------------


def test_synthesize_returns_typed_speech_sentence_by_sentence(voice):
    import oasr

    speech = oasr.synthesize("Hello there. How are you today?\nA second line!", str(voice), oasr.SynthesizeOptions(sentence_silence=0.25))
    assert isinstance(speech, oasr.Speech) and speech.sample_rate == 16000
    assert [s.phonemes[-1] for s in speech.sentences] == [".", "?", "!"]
    assert speech.samples.dtype == np.float32 and np.abs(speech.samples).max() <= 1.0
    for a, b in zip(speech.sentences, speech.sentences[1:]):
        assert b.start == pytest.approx(a.end + 0.25, abs=1 / 16000)
    assert speech.to_dict()["provenance"]["architecture"] == "vits"


def test_the_seed_decides_the_noise(voice):
    import oasr

    a = oasr.synthesize("Hello there.", str(voice), oasr.SynthesizeOptions(seed=1)).samples
    b = oasr.synthesize("Hello there.", str(voice), oasr.SynthesizeOptions(seed=1)).samples
    c = oasr.synthesize("Hello there.", str(voice), oasr.SynthesizeOptions(seed=2)).samples
    assert np.array_equal(a, b) and not (len(a) == len(c) and np.array_equal(a, c))


def test_phonemes_input_skips_the_phonemizer(voice, monkeypatch):
    import oasr
    from oasr.tokenizers import phonemes

    monkeypatch.setattr(phonemes, "_espeak", lambda: pytest.fail("--phonemes must not phonemize"))
    speech = oasr.synthesize("həlˈoʊ wˈɜːld.", str(voice), oasr.SynthesizeOptions(phonemes=True))
    assert speech.sentences[0].phonemes == "həlˈoʊ wˈɜːld."


def test_speakers_by_id_and_name(voice, multi_voice):
    import oasr
    from oasr.errors import CapabilityError, InputError

    alice = oasr.synthesize("Hello.", str(multi_voice), oasr.SynthesizeOptions(speaker="alice", noise_scale=0, noise_w=0)).samples
    zero = oasr.synthesize("Hello.", str(multi_voice), oasr.SynthesizeOptions(speaker=0, noise_scale=0, noise_w=0)).samples
    bob = oasr.synthesize("Hello.", str(multi_voice), oasr.SynthesizeOptions(speaker="bob", noise_scale=0, noise_w=0)).samples
    assert np.array_equal(alice, zero) and not (len(alice) == len(bob) and np.array_equal(alice, bob))
    with pytest.raises(InputError, match="no speaker 'carol'"):
        oasr.synthesize("Hello.", str(multi_voice), oasr.SynthesizeOptions(speaker="carol"))
    with pytest.raises(InputError, match="speakers 0..1"):
        oasr.synthesize("Hello.", str(multi_voice), oasr.SynthesizeOptions(speaker=5))
    with pytest.raises(CapabilityError, match="one speaker"):
        oasr.synthesize("Hello.", str(voice), oasr.SynthesizeOptions(speaker=1))


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"speed": 0.0}, "--speed must be between 0.25 and 4"),
        ({"speed": float("nan")}, "--speed must be a finite number"),
        ({"noise_scale": 3.0}, "--noise-scale must be between 0 and 2"),
        ({"noise_w": -1.0}, "--noise-w must be between 0 and 2"),
        ({"sentence_silence": 1e9}, "--sentence-silence must be between 0 s and 10 s"),
        ({"speaker": -1}, "--speaker must be at least 0"),
        ({"seed": 1.5}, "--seed must be a whole number"),
    ],
)
def test_options_are_bounded(fields, message):
    from oasr.errors import InputError
    from oasr.options import SynthesizeOptions

    with pytest.raises(InputError, match=message):
        SynthesizeOptions(**fields)


def test_unsayable_characters_are_skipped_with_one_warning(voice, caplog):
    import oasr

    with caplog.at_level(logging.WARNING, logger="oasr"):
        speech = oasr.synthesize("Hello 😀 world 你好, hello 😀 again.", str(voice))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and all(ch in warnings[0] for ch in ("😀", "你", "好")), warnings
    said = "".join(s.phonemes for s in speech.sentences)
    assert "ɡɹˈɪnɪŋ" not in said and "tʃˈaɪniːz" not in said  # espeak-ng's "grinning face", "Chinese letter"


def test_first_sentence_is_out_before_the_last_is_computed(voice, monkeypatch):
    """What streaming means: each sentence's audio is written before the next one is made."""
    from oasr.formats.wav import PcmWriter
    from oasr.pipelines.tts import prepare

    plan = prepare(". ".join(f"Sentence number {i}" for i in range(6)) + ".", str(voice))
    calls = []
    forward = type(plan.loaded.model).forward
    monkeypatch.setattr(type(plan.loaded.model), "forward", lambda self, *a, **k: calls.append(1) or forward(self, *a, **k))

    class Sink(io.BytesIO):
        calls_at_writes: list = []

        def write(self, data):
            self.calls_at_writes.append(len(calls))
            return super().write(data)

    out = Sink()
    writer = PcmWriter(out, plan.sample_rate, plan.wav_tags, raw=True)
    for chunk in plan.chunks():
        writer.write(chunk.samples)
    assert out.calls_at_writes == [1, 2, 3, 4, 5, 6]


def _peak_bytes(voice: Path, words: int) -> int:
    from oasr.options import SynthesizeOptions
    from oasr.pipelines.tts import prepare

    # Lowercase after every period: espeak-ng ends no sentence there, so this is also one
    # 10,000-word "sentence" for it, cut into pieces by oasr.
    text = " ".join(WORDS[i % len(WORDS)] + ("." if i % 12 == 11 else "") for i in range(words))
    plan = prepare(text, str(voice), SynthesizeOptions(sentence_silence=0.5))
    tracemalloc.start()
    try:
        n = 0
        for chunk in plan.chunks():  # numpy buffers are traced; each chunk is dropped
            n += len(chunk.samples)
        assert n > words * 64  # every word was spoken
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_text(voice, monkeypatch):
    """10,000 words stream in about the memory of 1,000: nothing is kept once it is yielded.

    The network is replaced by one that returns 64 samples of noise per id (the tiny random VITS
    takes minutes on 10,000 words with the traced allocator): what is measured is the pipeline,
    phonemizer and sentence cutting included. Were the audio kept, 10,000 words would hold ~40 MB.
    """
    from oasr.models.vits import Vits

    monkeypatch.setattr(Vits, "forward", lambda self, ids, **k: torch.rand(1, ids.shape[1] * 64))
    small, large = _peak_bytes(voice, 1_000), _peak_bytes(voice, 10_000)
    print(f"peak traced memory: 1,000 words {small / 1e6:.2f} MB, 10,000 words {large / 1e6:.2f} MB")
    assert large < small * 1.5 + 1_000_000, (small, large)


# --- the command line --------------------------------------------------------------------------------


def test_cli_writes_a_wav_with_an_info_chunk(cli, voice, tmp_path):
    out = tmp_path / "hello.wav"
    code, stdout, stderr = cli("tts", "Hello there. How are you?", "-m", voice, "-o", out)
    assert code == 0, stderr
    chunks = _riff_chunks(out.read_bytes())
    info = chunks[b"LIST"]
    assert info.startswith(b"INFO") and b"ISFT" in info and b"synthesized speech" in info and b"vits voice" in info
    fmt = struct.unpack("<HHIIHH", chunks[b"fmt "][:16])
    assert fmt == (1, 1, 16000, 32000, 2, 16)
    import soundfile as sf

    samples, rate = sf.read(out)
    assert rate == 16000 and len(samples) == len(chunks[b"data"]) // 2 > 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporaries left


PROCESS_CHECK = """
import os, sys
from oasr_cli.main import main
code = main(sys.argv[1:])
from oasr_cli.kernel_caches import VARIABLES
caches = [os.environ.get(v) for v in VARIABLES]
print(code, *caches, *sorted(m for m in ("onnxruntime", "piper.voice") if m in sys.modules))
"""


@pytest.mark.parametrize("user_capacity", [None, "64"])
def test_cli_process_leaves_out_what_tts_does_not_use(voice, tmp_path, user_capacity):
    """A fresh ``oasr tts`` process: piper's phonemizer without its ONNX voice (onnxruntime is
    0.1 s and 20 MB), and oneDNN's two kernel caches at 16 (every other command's 64 held 60
    sentences at 570 MB against 500) unless the user set their size."""
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    if user_capacity:
        env["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = user_capacity
    args = ["tts", "Hello there.", "-m", str(voice), "-o", str(tmp_path / "a.wav")]
    done = subprocess.run([sys.executable, "-c", PROCESS_CHECK, *args], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", user_capacity or "16", "16"]


def test_cli_text_from_file_and_stdin_and_raw(cli, voice, tmp_path, monkeypatch):
    text = tmp_path / "t.txt"
    text.write_text("Hello there.\n", encoding="utf-8")
    code, _, stderr = cli("tts", "-f", text, "-m", voice, "-o", tmp_path / "a.raw", "--raw")
    assert code == 0, stderr
    raw = (tmp_path / "a.raw").read_bytes()
    assert raw[:4] != b"RIFF" and len(raw) % 2 == 0 and raw
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"Hello there.\n")))
    code, _, stderr = cli("tts", "-f", "-", "-m", voice, "-o", tmp_path / "b.raw", "--raw")
    assert code == 0, stderr
    assert (tmp_path / "b.raw").read_bytes() == raw  # the same text, seed and voice: the same samples


def test_cli_output_dir_one_file_per_line(cli, voice, tmp_path):
    text = tmp_path / "lines.txt"
    text.write_text("First line.\n\nSecond line.\nThird.\n", encoding="utf-8")
    code, _, stderr = cli("tts", "-f", text, "-m", voice, "--output-dir", tmp_path / "clips")
    assert code == 0, stderr
    assert sorted(p.name for p in (tmp_path / "clips").iterdir()) == ["0001.wav", "0002.wav", "0003.wav"]


@pytest.mark.parametrize("text", ["", "   ", "...", "?! ,;"])
def test_cli_nothing_to_say_is_one_line_exit_1_nothing_written(cli, voice, tmp_path, text):
    code, stdout, stderr = cli("tts", text, "-m", voice, "-o", tmp_path / "x.wav")
    one_line_error(code, stderr, "nothing")
    assert list(tmp_path.iterdir()) == [] and stdout == ""


def test_cli_only_unsayable_characters_warn_then_fail(cli, voice, tmp_path):
    code, _, stderr = cli("tts", "😀 你好", "-m", voice, "-o", tmp_path / "x.wav")
    warning, error = stderr.splitlines()
    assert code == 1 and "😀 你 好" in warning and error.startswith("oasr: error:") and "nothing" in error
    assert list(tmp_path.iterdir()) == []


def test_cli_unwritable_output_fails_before_any_synthesis(cli, voice, tmp_path, monkeypatch):
    import oasr.pipelines.tts as pipeline

    monkeypatch.setattr(pipeline, "prepare", lambda *a, **k: pytest.fail("synthesis started"))
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, stderr = cli("tts", "Hello.", "-m", voice, "-o", blocker / "out.wav")
    one_line_error(code, stderr, "cannot write")
    assert blocker.read_text() == ""


def test_cli_usage_errors(cli, voice, tmp_path):
    assert cli("tts", "Hi.", "-f", tmp_path / "x", "-m", voice, "-o", tmp_path / "o.wav")[0] == 2
    assert cli("tts", "Hi.", "-m", voice, "-o", tmp_path / "o.wav", "--output-dir", tmp_path)[0] == 2
    code, _, stderr = cli("tts", "Hi.", "-m", voice, "-o", tmp_path / "o.wav", "--speed", "9")
    assert code == 2 and "--speed must be between 0.25 and 4" in stderr
    assert cli("tts", "Hi.", "-m", voice, "-o", "-", "--json")[0] == 2
    assert list(tmp_path.iterdir()) == []
