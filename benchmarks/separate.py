"""Separation benchmark: oasr's HTDemucs against demucs 4.0.1, same random weights, same track.

    python benchmarks/separate.py [--seconds 180] [--threads 2] [--runs 1] [--shifts 1]
                                  [--channels 48] [--low-memory] [--json FILE]

Weights: a demucs HTDemucs at the released htdemucs shape (48 channels, 7.8 s segments, 5
transformer layers) with random weights, saved as demucs saves a package; oasr converts it once
(not timed). Track: ``--seconds`` of 44.1 kHz stereo built from the test clips (jfk left, the
meeting right, each repeated), written as a WAV.

Each engine runs in its own process, so its peak RSS (VmHWM) is its own: the steps of
``demucs.separate`` (read the WAV, normalise by the mono mix, ``apply_model`` with overlap 0.25
and ``--shifts``, de-normalise, write four 16-bit WAVs with soundfile, as torchaudio is not
loadable here) against ``oasr separate`` (the same steps, streamed). Wall time covers reading,
separating and writing; model loading is reported apart. Runs alternate engines; medians. The
oasr process keeps glibc's allocator as ``oasr separate`` does; ``--low-memory`` fixes its mmap
threshold as ``oasr separate --low-memory`` does (``return_freed_buffers``, see
``oasr.heap``), less memory for more time. The load average is printed before and after: the machine may be shared.
Targets (issue 13, 2 threads): oasr at most 0.8x demucs' wall time and 0.6x its peak RSS.

Why ``--low-memory`` exists (``oasr.heap``): an HTDemucs forward pass on a
7.8 s segment allocates tens of tensors of 10 to 70 MB and frees them again. glibc serves blocks
above its mmap threshold with mmap and returns them when freed, but it raises that threshold to
the size of each such block freed (up to 32 MB), so after the first pass most of them come from
the heap, stay there when freed, and fragment it: the process then peaks about 300 MB above what
it holds at any moment (measured at the released htdemucs shape, 960 MB against 670 MB with the
threshold fixed at 1 MB). It is not the default because every such block is then a fresh mmap
whose pages are faulted in and zeroed. 3 minutes of a 44.1 kHz stereo track at the released
htdemucs shape, 2 threads, against demucs on the same weights: 1.21x demucs' time and 0.38x its
peak memory with the threshold at 1 MB, 0.76x and 0.51x with glibc's own behaviour. (Before the
forward pass ran its widest layers a few rows at a time, 30 s took 26.7 s and 731 MB at 1 MB,
16.3 s and 979 MB with glibc's own behaviour; a threshold of 4 or 16 MB, or ``malloc_trim`` after
each segment, fell between the two.)
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

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("OASR_TEST_DATA", ROOT / "tests" / "data"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
TARGET_WALL, TARGET_RSS = 0.8, 0.6


def _track(path: Path, seconds: float) -> None:
    import numpy as np
    import soundfile as sf
    import soxr

    left, _ = sf.read(DATA / "asr" / "jfk.wav", dtype="float32")
    right, _ = sf.read(DATA / "diarization" / "sample.wav", dtype="float32")
    n = int(seconds * 16000)
    stereo = soxr.resample(np.stack([np.resize(left, n), np.resize(right, n)], 1), 16000, 44100, quality="HQ")
    sf.write(path, stereo[: int(seconds * 44100)], 44100, subtype="PCM_16")


def _child(engine: str, package: Path, bundle: Path, song: Path, out: Path, shifts: int, threads: int, low_memory: bool) -> dict:
    import torch

    from common import peak_rss_mb

    torch.set_num_threads(threads)
    started = time.perf_counter()
    if engine == "demucs":
        import random

        import soundfile as sf

        from demucs_refs import demucs, load_reference

        _, apply = demucs()
        model = load_reference(package)
        loaded_at = time.perf_counter()
        random.seed(0)
        data, rate = sf.read(song, dtype="float32", always_2d=True)
        wav = torch.from_numpy(data.T.copy())
        ref = wav.mean(0)
        wav -= ref.mean()
        wav /= ref.std()
        with torch.no_grad():
            sources = apply.apply_model(model, wav[None], shifts=shifts, overlap=0.25)[0]
        sources *= ref.std()
        sources += ref.mean()
        for source, name in zip(sources, model.sources):
            source = source / max(1.01 * source.abs().max(), 1)  # demucs' prevent_clip("rescale")
            sf.write(out / f"{name}.wav", source.numpy().T, rate, subtype="PCM_16")
    else:
        import oasr
        from oasr.options import SeparateOptions
        from oasr.heap import return_freed_buffers
        from oasr.pipelines.separate.writer import StemFiles

        if low_memory:
            return_freed_buffers()  # as the oasr separate command does

        loaded = oasr.load_pretrained(bundle, task="separate", device="cpu", dtype="float32")
        loaded_at = time.perf_counter()
        names = loaded.config.sources
        oasr.separate(str(song), loaded, SeparateOptions(shifts=shifts), files=StemFiles({n: out / f"{n}.wav" for n in names}))
    done = time.perf_counter()
    return {"load_s": loaded_at - started, "wall_s": done - loaded_at, "peak_rss_mb": peak_rss_mb()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=180.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--shifts", type=int, default=1)
    parser.add_argument("--channels", type=int, default=48)
    parser.add_argument("--low-memory", action="store_true", help="oasr as `oasr separate --low-memory` runs: glibc's mmap threshold fixed at 1 MB")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child", nargs=6, metavar=("ENGINE", "PACKAGE", "BUNDLE", "SONG", "OUT", "SHIFTS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        engine, package, bundle, song, out, shifts = args.child
        print(json.dumps(_child(engine, Path(package), Path(bundle), Path(song), Path(out), int(shifts), args.threads, args.low_memory)))
        return 0

    from fractions import Fraction

    from demucs_refs import SOURCES_4, random_htdemucs, save_package
    from oasr.conversion.run import convert

    with tempfile.TemporaryDirectory(prefix="oasr-bench-sep-") as tmp:
        tmp = Path(tmp)
        package = save_package(
            random_htdemucs(SOURCES_4, seed=0, channels=args.channels, t_heads=8, segment=Fraction(39, 5)), tmp / "955717e8-00000000.th"
        )
        bundle = tmp / "bundle"
        convert([package], bundle)
        song = tmp / "song.wav"
        _track(song, args.seconds)
        print(f"{args.seconds:g} s stereo 44.1 kHz, htdemucs shape ({args.channels} channels), shifts {args.shifts}, "
              f"overlap 0.25, {args.threads} thread(s), {args.runs} run(s) per engine, alternating; medians"
              f"{'; oasr with --low-memory' if args.low_memory else ''}")
        print("load average before: %.2f %.2f %.2f (%d CPUs)" % (*os.getloadavg(), os.cpu_count()))
        results: dict[str, list[dict]] = {"oasr": [], "demucs": []}
        for run in range(args.runs):
            for engine in ("demucs", "oasr"):
                out = tmp / f"out-{engine}-{run}"
                out.mkdir()
                cmd = [sys.executable, __file__, "--threads", str(args.threads), *(["--low-memory"] if args.low_memory else []),
                       "--child", engine, str(package), str(bundle), str(song), str(out), str(args.shifts)]
                line = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
                results[engine].append(json.loads(line))
                print(f"  {engine:6} run {run + 1}: {results[engine][-1]} (load {os.getloadavg()[0]:.1f})", flush=True)
        print("load average after: %.2f %.2f %.2f" % os.getloadavg())
        med = {e: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for e, rs in results.items()}
        wall = med["oasr"]["wall_s"] / med["demucs"]["wall_s"]
        rss = med["oasr"]["peak_rss_mb"] / med["demucs"]["peak_rss_mb"]
        for e in ("demucs", "oasr"):
            print(f"{e:6}: wall {med[e]['wall_s']:.1f} s (x{args.seconds / med[e]['wall_s']:.2f} real time), "
                  f"peak RSS {med[e]['peak_rss_mb']:.0f} MB, load {med[e]['load_s']:.1f} s")
        print(f"oasr / demucs: wall {wall:.2f}x (target <= {TARGET_WALL}x: {'met' if wall <= TARGET_WALL else 'NOT met'}), "
              f"peak RSS {rss:.2f}x (target <= {TARGET_RSS}x: {'met' if rss <= TARGET_RSS else 'NOT met'})")
        if args.json:
            args.json.write_text(json.dumps({"medians": med, "wall_ratio": wall, "rss_ratio": rss}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
