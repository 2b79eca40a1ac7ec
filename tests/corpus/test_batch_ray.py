"""oasr batch --engine ray on a local Ray instance this module starts (two CPUs, no dashboard,
nothing outside the machine): the same outputs and records as the local engine, byte for byte,
and a run that completes with every output written whole when one actor's process is killed.

One Ray session serves the module: starting Ray on two busy cores takes a while.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
from pathlib import Path

import pytest

import oasr

ray = pytest.importorskip("ray", reason="the ray extra is not installed (make install-test)")

CORRUPT = b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 40
OPTIONS = oasr.TranscribeOptions(decoding=oasr.WhisperDecoding(temperatures=(0.0,)))  # one decode per window
FORMATS = ("txt", "json")


@pytest.fixture(scope="module")
def ray_session():
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def speech(data_dir, tmp_path_factory) -> Path:
    corpus = tmp_path_factory.mktemp("speech")
    shutil.copy(data_dir / "asr" / "jfk.wav", corpus / "jfk.wav")
    shutil.copy(data_dir / "diarization" / "sample.wav", corpus / "sample.wav")
    shutil.copy(data_dir / "diarization" / "ami" / "empty.wav", corpus / "ami-empty.wav")
    (corpus / "corrupt.wav").write_bytes(CORRUPT)
    return corpus


@pytest.fixture(scope="module")
def local_run(speech, tiny_en_bundle, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("local")
    # One thread per worker, as each Ray actor has (the thread count changes the last bits of the JSON's floats).
    summary = oasr.batch("transcribe", speech, out, model=str(tiny_en_bundle), options=OPTIONS, formats=FORMATS, workers=2, threads=1)
    assert (summary.done, summary.failed) == (3, 1)
    return out


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and p.name != "batch.jsonl"}


def _records(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "batch.jsonl").read_text().splitlines()]


# What two runs' records must share (timing and the worker's name differ).
SAME = ("input", "name", "key", "status", "outputs", "output_sha256", "duration", "models", "options", "error")


def _comparable(folder: Path) -> list[dict]:
    """The records of the batch in ``folder``, its output paths relative to it."""
    text = (folder / "batch.jsonl").read_text().replace(json.dumps(str(folder))[1:-1] + "/", "OUTDIR/")
    return [{k: r.get(k) for k in SAME} for r in map(json.loads, text.splitlines())]


@pytest.mark.slow
def test_ray_engine_writes_what_the_local_engine_writes(ray_session, speech, tiny_en_bundle, local_run, tmp_path):
    out = tmp_path / "ray"
    summary = oasr.batch("transcribe", speech, out, model=str(tiny_en_bundle), options=OPTIONS, formats=FORMATS, engine="ray", workers=2, per_call=2)
    assert (summary.engine, summary.done, summary.failed, summary.skipped) == ("ray", 3, 1, 0)
    assert _files(out) == _files(local_run) and len(_files(out)) == 6
    assert _comparable(out) == _comparable(local_run)
    again = oasr.batch("transcribe", speech, out, model=str(tiny_en_bundle), options=OPTIONS, formats=FORMATS, engine="ray", workers=2)
    assert (again.done, again.failed, again.skipped) == (0, 1, 3)


@pytest.mark.slow
def test_a_killed_actor_is_restarted_and_the_run_completes(ray_session, speech, tiny_en_bundle, local_run, tmp_path):
    out = tmp_path / "ray-killed"
    killed: list[int] = []

    def kill_soon(progress) -> None:
        """At the first finished input, kill the process of the actor that did it, a moment later
        (while it works on its next input)."""
        if not killed:
            pid = int(progress.record["worker"].rsplit(":", 1)[1])
            killed.append(pid)
            threading.Timer(0.5, os.kill, (pid, signal.SIGKILL)).start()

    summary = oasr.batch(
        "transcribe", speech, out, model=str(tiny_en_bundle), options=OPTIONS, formats=FORMATS,
        engine="ray", workers=2, per_call=1, progress=kill_soon,
    )
    assert killed
    with pytest.raises(ProcessLookupError):
        os.kill(killed[0], 0)  # it is gone
    assert (summary.done, summary.failed) == (3, 1)
    assert _files(out) == _files(local_run)  # every output whole, no temporaries
    records = _records(out)
    assert len(records) == len({r["name"] for r in records}) == 4  # each input recorded once
    assert len({r["worker"] for r in records}) == 3  # the input the killed actor held was redone by its restart
    assert _comparable(out) == _comparable(local_run)
