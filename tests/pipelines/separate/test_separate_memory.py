"""Issue 13, streaming: separating a long track costs what a short one costs.

The track is decoded into an unnamed temporary file past ``SPOOL_SAMPLES`` and read a window at a
time, normalised by statistics from a first pass; the stems go to disk as segments finish. Each
length runs ``oasr separate`` in a fresh process (peak RSS: VmHWM) on the same tiny random
HTDemucs bundle whose network is replaced by one that hands every source the mix (the network's
own memory is per segment, whatever the track's length; this keeps the test to I/O): 6 minutes
of 44.1 kHz stereo (127 MB of float32 samples, 500 MB of stems) against 20 seconds, the long
one's peak within 1.15x of the short one's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from demucs_refs import SOURCES_4, random_htdemucs, save_package

ROOT = Path(__file__).resolve().parents[3]
RATE = 44100
BOUND = 1.15

_RUN = """
import json, os, sys
import torch
torch.set_num_threads(1)
from oasr.models.demucs.htdemucs import HTDemucsNet
# every source gets the mix: the pipeline's memory without the network's cost
HTDemucsNet.forward = lambda self, mix: mix[:, None].expand(-1, len(self.config.sources), -1, -1).clone()
from oasr_cli.main import main
code = main(sys.argv[1:])
peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
with open(os.environ["OASR_TEST_PEAK"], "w") as f:
    json.dump({"code": code, "peak_mb": peak / 1024}, f)
sys.exit(code)
"""


def _song(path: Path, seconds: float) -> Path:
    """Noise under a slow tone, written a minute at a time (the test itself holds no whole track)."""
    rng = np.random.default_rng(0)
    with sf.SoundFile(path, "w", RATE, 2, subtype="PCM_16") as f:
        for start in range(0, int(seconds * RATE), 60 * RATE):
            n = min(60 * RATE, int(seconds * RATE) - start)
            t = (start + np.arange(n)) / RATE
            tone = 0.2 * np.sin(2 * np.pi * 110 * t)
            f.write(np.stack([tone, -tone], 1) + 0.05 * rng.standard_normal((n, 2)))
    return path


def _peak(args: list[str], tmp: Path, tag: str) -> float:
    result = tmp / f"{tag}.json"
    env = {**os.environ, "OASR_TEST_PEAK": str(result)}
    proc = subprocess.run([sys.executable, "-c", _RUN, *args], capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    assert proc.returncode == 0, f"{tag}: {proc.stderr[-2000:]}"
    return json.loads(result.read_text())["peak_mb"]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc for the peak RSS (VmHWM)")
def test_six_minutes_cost_what_twenty_seconds_cost(tmp_path):
    from oasr.conversion.run import convert

    [converted] = convert([save_package(random_htdemucs(SOURCES_4, seed=8), tmp_path / "955717e8-88888888.th")], tmp_path / "model")
    assert converted.status == "converted", converted.error
    peaks = {}
    for tag, seconds in (("short", 20.0), ("long", 360.0)):
        song = _song(tmp_path / f"{tag}.wav", seconds)
        args = ["separate", "-m", str(tmp_path / "model"), "-o", str(tmp_path / "out"), "--shifts", "0", "--device", "cpu", "-q", str(song)]
        peaks[tag] = _peak(args, tmp_path, tag)
        assert sf.info(tmp_path / "out" / "model" / tag / "vocals.wav").frames == int(seconds * RATE)
    ratio = peaks["long"] / peaks["short"]
    print(f"separate: 20 s {peaks['short']:.0f} MB, 6 min {peaks['long']:.0f} MB, ratio {ratio:.2f} (bound {BOUND})")
    assert ratio <= BOUND, peaks
