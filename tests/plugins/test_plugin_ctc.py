"""The seams, proven by a plugin: a CTC architecture from its own package (tests/plugins/oasr_tinyctc)
converts, inspects, loads and transcribes with word timestamps, through the runtime and through
`oasr`, with nothing in runtime/ naming it.

Its network answers each label to a tone (weights set here), so synthetic audio has a known
transcript and known word times; 70 s of it run as overlapping chunks, with words placed across
every chunk boundary.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from safetensors.torch import save_file

ROOT = Path(__file__).resolve().parents[2]
SR = 16000
LABELS = ["<blank>", " ", "a", "b", "c", "d", "e"]
TONES = {" ": 300.0, "a": 520.0, "b": 900.0, "c": 1500.0, "d": 2500.0, "e": 4000.0}  # Hz
LETTER, SPACE = 0.16, 0.10  # seconds a letter's / a space's tone lasts
TOLERANCE = 0.03  # seconds: one and a half 20 ms output frames (measured: 10 ms at most)


@pytest.fixture
def checkpoint(tmp_path) -> Path:
    """A tinyctc folder whose label k answers to the mel bin of its tone."""
    from oasr.features.logmel import mel_filterbank

    filters = mel_filterbank(SR, 400, 80)  # [80, 201]
    weight = torch.zeros(len(LABELS), 80)
    bias = torch.zeros(len(LABELS))
    bias[0] = 3.0  # blank wins wherever no tone stands out
    for k, label in enumerate(LABELS[1:], start=1):
        m = int(filters[:, round(TONES[label] / (SR / 400))].argmax())
        weight[k] = -10.0 / 80
        weight[k, m] += 10.0
    folder = tmp_path / "tinyctc-ckpt"
    folder.mkdir()
    save_file({"W": weight, "b": bias}, str(folder / "weights.safetensors"))
    (folder / "tinyctc.json").write_text(json.dumps({"labels": LABELS, "n_mels": 80, "stride": 2, "language": "en"}))
    return folder


def _speech(plan: list[tuple[float, str]], duration: float) -> tuple[np.ndarray, list[tuple[str, float, float]]]:
    """Tones for words starting at the given times -> (samples, [(word, start, end)])."""
    audio = np.zeros(round(duration * SR), dtype=np.float32)
    truth = []

    def tone(label: str, start: float, length: float) -> float:
        t = np.arange(round(length * SR)) / SR
        a = round(start * SR)
        audio[a : a + t.size] += 0.3 * np.sin(2 * np.pi * TONES[label] * t).astype(np.float32)
        return start + length

    for start, word in plan:
        t = start
        for letter in word:
            t = tone(letter, t, LETTER)
        truth.append((word, start, t))
        tone(" ", t, SPACE)
    return audio, truth


# Chunks of 20 s overlapping by 4 s own [0, 18), [18, 34), [34, 50), [50, 66), [66, 70): words
# sit across each of those cuts, and pauses of over a second split segments.
PLAN = [(1.0, "abc"), (1.9, "de"), (5.0, "cab"), (17.7, "bad"), (18.5, "ace"), (25.0, "e"), (33.8, "dab"),
        (40.0, "bead"), (49.75, "cede"), (58.0, "ab"), (65.8, "dace"), (68.5, "bed")]


def _check_words(segments: list[dict], truth) -> None:
    words = [w for s in segments for w in s["words"]]
    assert [w["word"].strip() for w in words] == [t[0] for t in truth]
    for w, (_, start, end) in zip(words, truth):
        assert abs(w["start"] - start) <= TOLERANCE and abs(w["end"] - end) <= TOLERANCE, (w, start, end)
    for s in segments:
        assert s["text"] == "".join(w["word"] for w in s["words"])


def test_runtime_names_no_plugin():
    for path in (ROOT / "runtime").rglob("*"):
        if path.is_file() and path.suffix in (".py", ".yaml", ".toml", ".json"):
            assert "tinyctc" not in path.read_text().lower(), path


def test_plugin_converts_loads_and_transcribes_long_form(plugin, checkpoint, tmp_path):
    import oasr
    from oasr.decoding.whisper.options import WhisperDecoding
    from oasr.options import TranscribeOptions

    bundle = tmp_path / "bundle"
    oasr.convert([checkpoint], bundle)
    info = oasr.inspect(bundle)
    assert info["architecture"] == "tinyctc"
    assert set(info["capabilities"]) == {"transcribe", "timestamps", "word_timestamps"}

    audio, truth = _speech(PLAN, 70.0)
    options = TranscribeOptions(word_timestamps=True, chunk_length=20.0, chunk_overlap=4.0, batch_size=2)
    t = oasr.transcribe(audio, str(bundle), options)
    _check_words([s.to_dict() for s in t.segments], truth)
    assert t.language == "en" and t.language_probability is None
    assert len(t.segments) == 10  # "abc de" share one segment, as do "bad ace"; pauses split the rest
    assert t.text == "".join(" " + w for w, _, _ in truth)
    assert t.provenance.architecture == "tinyctc" and len(t.provenance.bundle_sha256) == 64

    # The same audio in one chunk gives the same words: the merge neither drops nor repeats.
    whole = oasr.transcribe(audio, str(bundle), TranscribeOptions(chunk_length=80.0))
    assert whole.text == t.text and whole.segments[0].words is None

    with pytest.raises(oasr.CapabilityError, match="ctc"):
        oasr.transcribe(audio[:SR], str(bundle), TranscribeOptions(decoding=WhisperDecoding(best_of=2)))  # a Whisper-only option
    with pytest.raises(oasr.CapabilityError, match="translate"):
        oasr.transcribe(audio[:SR], str(bundle), TranscribeOptions(task="translate"))
    with pytest.raises(oasr.CapabilityError, match="en only"):
        oasr.transcribe(audio[:SR], str(bundle), TranscribeOptions(language="de"))


def test_plugin_through_the_command_line(checkpoint, tmp_path, plugin_cli):
    audio, truth = _speech(PLAN[:4], 22.0)
    wav = tmp_path / "tones.wav"
    sf.write(wav, audio, SR)
    oasr_cli = plugin_cli
    inspected = oasr_cli("inspect", checkpoint, "--json")
    assert inspected.returncode == 0, inspected.stderr
    run = oasr_cli("transcribe", "-m", checkpoint, "-f", wav, "--word-timestamps", "-F", "json", "-v")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    _check_words(out["segments"], truth)
    assert out["provenance"]["architecture"] == "tinyctc"
    assert out["provenance"]["source"] == str(checkpoint.resolve())
    assert len(out["provenance"]["bundle_sha256"]) == 64 and out["provenance"]["revision"]
    converted = oasr_cli("convert", checkpoint, tmp_path / "b")
    assert converted.returncode == 0, converted.stderr
    shown = oasr_cli("inspect", tmp_path / "b")
    assert "word_timestamps" in shown.stdout, shown.stdout
