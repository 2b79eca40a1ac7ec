"""Diarization benchmark: ``oasr.diarize`` end to end, and the same pipeline on the packages' own models.

    python benchmarks/diarize.py [--runs N] [--threads N] [--audio sample,trn01,...] [--json FILE]

Audio: ``sample.wav`` (30 s, two speakers) by default, or AMI excerpts by name. Weights: each
package's own files (silero-vad's ``data/``, resemblyzer's ``pretrained.pt``), loaded by oasr
once (not timed).

* ``oasr``: ``oasr.diarize`` on the samples already in memory: Silero VAD, GE2E windows,
  clustering, smoothing;
* ``packages``: the reference pipeline a user would assemble from the packages: silero-vad's
  ``get_speech_timestamps`` (its own model, the same thresholds and padding), resemblyzer's
  ``VoiceEncoder.embed_utterance`` per window (it has no batched form), then oasr's own
  clustering and smoothing (``diarize_regions``), so the two differ only in the model runs.

Both run in this process, interleaved over ``--runs`` rounds after a warm-up of each; medians (and
oasr's fastest run, a hint of what an idle machine does) and the ratio packages / oasr (above 1:
oasr is faster). Real-time factor = seconds per second of
audio. Target (issue 6, 2-core CPU): 30 s of audio in at most 1.5 s (RTF 0.05).
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
DATA = Path(os.environ.get("OASR_TEST_DATA", ROOT.parent / "shared" / "data"))
SR = 16000
TARGET_SECONDS_PER_30S = 1.5


def _audio_path(name: str) -> Path:
    return DATA / "diarization" / ("sample.wav" if name == "sample" else f"ami/{name}.wav")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--audio", default="sample", help="comma-separated: sample, trn01..trn09, dev00, dev01")
    parser.add_argument("--json", type=Path, default=None, help="also write the medians here")
    args = parser.parse_args()

    import torch

    threads = args.threads or torch.get_num_threads()
    import silero_vad  # sets torch to one thread on import: restored below
    from resemblyzer import VoiceEncoder

    torch.set_num_threads(threads)
    sys.path.insert(0, str(ROOT))
    import oasr
    from oasr.io.audio import load_audio
    from oasr.options import DiarizeOptions
    from oasr.pipelines.diarize.timeline import diarize_regions

    options = DiarizeOptions()
    vad = oasr.load_pretrained(package_dir("silero_vad") / "data")
    encoder = oasr.load_pretrained(package_dir("resemblyzer") / "pretrained.pt")
    their_vad = silero_vad.load_silero_vad()
    their_encoder = VoiceEncoder("cpu", verbose=False)
    torch.set_num_threads(threads)

    def ours(samples):
        return oasr.diarize(samples, options, vad_model=vad, embedding_model=encoder)

    def packages(samples):
        speech = silero_vad.get_speech_timestamps(
            torch.from_numpy(samples),
            their_vad,
            threshold=options.vad.threshold,
            speech_pad_ms=int(options.vad.speech_pad_s * 1000),
            min_speech_duration_ms=int(options.vad.min_speech_s * 1000),
            min_silence_duration_ms=int(options.vad.min_silence_s * 1000),
            return_seconds=False,
        )
        regions = [(s["start"] / SR, s["end"] / SR) for s in speech]

        def embed(windows):
            import numpy as np

            return np.stack([their_encoder.embed_utterance(samples[round(a * SR) : round(b * SR)]) for a, b in windows])

        return diarize_regions(regions, len(samples) / SR, embed, options)

    results = {}
    print(f"torch threads: {threads}; runs: {args.runs}")
    for name in args.audio.split(","):
        samples = load_audio(_audio_path(name))
        seconds = len(samples) / SR
        times: dict[str, list[float]] = {"oasr": [], "packages": []}
        speakers = {}
        for engine, fn in (("oasr", ours), ("packages", packages)):  # warm-up
            out = fn(samples)
            speakers[engine] = len({t.speaker for t in (out.turns if engine == "oasr" else out)})
        for _ in range(args.runs):
            for engine, fn in (("oasr", ours), ("packages", packages)):
                start = time.perf_counter()
                fn(samples)
                times[engine].append(time.perf_counter() - start)
        medians = {k: statistics.median(v) for k, v in times.items()}
        fastest = min(times["oasr"])
        rtf = medians["oasr"] / seconds
        results[name] = {"seconds": seconds, **{f"{k}_s": v for k, v in medians.items()}, "oasr_min_s": fastest, "rtf": rtf, "speakers": speakers}
        print(
            f"{name}: {seconds:.1f} s of audio  oasr {medians['oasr']:.3f} s (fastest {fastest:.3f} s; RTF {rtf:.4f}, "
            f"{30 * rtf:.2f} s per 30 s; target {TARGET_SECONDS_PER_30S} s)  packages {medians['packages']:.3f} s  "
            f"ratio packages/oasr {medians['packages'] / medians['oasr']:.2f}x  speakers oasr {speakers['oasr']} packages {speakers['packages']}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
