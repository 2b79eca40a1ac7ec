"""POST /v1/audio/speech: OpenAI's text-to-speech request and answer, spoken by a Piper (VITS) voice.

The JSON body's fields map onto ``oasr tts``'s: ``model`` (a served voice; OpenAI's ``tts-1``,
``tts-1-hd``, ``gpt-4o-mini-tts`` are the served default voice), ``input`` (the text, at most
``MAX_INPUT_CHARS`` as OpenAI's), ``voice`` -> ``--speaker`` (a speaker name or id of a
multi-speaker voice; OpenAI's voice names such as ``alloy`` are the voice's default speaker),
``speed`` -> ``--speed`` (0.25..4), ``response_format`` ``wav`` (``oasr tts -o F.wav``'s bytes,
RIFF INFO chunk included; the default, since oasr makes no mp3) or ``pcm`` (headerless s16le mono
at the voice's rate, given in the ``x-oasr-sample-rate`` header: OpenAI's pcm is 24 kHz, a Piper
voice's is its own). Fields a voice cannot honour (``instructions``, another format) are a 400.
"""

from __future__ import annotations

import io
import json
import math

from ..errors import InputError
from .errors import ApiError

MAX_INPUT_CHARS = 4096  # OpenAI's limit on ``input``
RESPONSE_FORMATS = {"wav": ("wav", "audio/wav"), "pcm": ("raw", "audio/pcm")}  # OpenAI's name -> (oasr's speech format, media type)
# OpenAI's voices: each means the model's default speaker here (a voice's own speaker of the same name wins).
OPENAI_VOICES = ("alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer", "verse", "marin", "cedar")
FIELDS = {"model", "input", "voice", "response_format", "speed", "instructions", "stream_format"}


async def speech(request, server):
    from starlette.responses import Response

    body = await _json_body(request)
    text = _field(body, "input")
    if not text.strip():
        raise ApiError(400, "'input' is empty: nothing to say", param="input", code="invalid_value")
    if len(text) > MAX_INPUT_CHARS:
        raise ApiError(400, f"'input' is {len(text)} characters; at most {MAX_INPUT_CHARS}", param="input", code="invalid_value")
    fmt = _field(body, "response_format", default="wav")
    if fmt not in RESPONSE_FORMATS:
        raise ApiError(400, f"'response_format' must be one of {', '.join(RESPONSE_FORMATS)}, not {fmt!r} (oasr writes no compressed audio)", param="response_format", code="invalid_value")
    if body.get("instructions"):
        raise ApiError(400, "a Piper voice takes no 'instructions'; choose the speaker with 'voice' and the rate with 'speed'", param="instructions", code="unsupported_option")
    if body.get("stream_format", "audio") != "audio":
        raise ApiError(400, "'stream_format' must be audio: the answer is the whole file", param="stream_format", code="invalid_value")
    speed = body.get("speed", 1.0)
    if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not math.isfinite(speed):
        raise ApiError(400, f"'speed' must be a number, not {speed!r}", param="speed", code="invalid_value")
    voice = _field(body, "voice", default="").strip()
    slot = server.pool.slot(_field(body, "model", default=""), "tts")
    writer_format, media_type = RESPONSE_FORMATS[fmt]
    device = server.config.device

    def work(models, check):
        from ..formats.registry import get
        from ..options import SynthesizeOptions
        from ..pipelines.tts import prepare

        (loaded,) = models
        try:
            options = SynthesizeOptions(speaker=speaker(voice, loaded), speed=float(speed))
        except InputError as e:
            raise ApiError(400, " ".join(str(e).split()), param="speed" if "speed" in str(e) else "voice", code="invalid_value") from e
        plan = prepare(text, loaded, options, device=device, dtype="float32")
        out = io.BytesIO()
        writer = get("speech", writer_format).write(out, plan.sample_rate, plan.wav_tags)
        for chunk in plan.chunks():
            check()
            writer.write(chunk.samples)
        writer.finish()
        return out.getvalue(), plan

    audio, plan = await server.infer(request, [slot], ["tts"], work)
    headers = {
        "x-oasr-provenance": json.dumps(plan.provenance.__dict__, ensure_ascii=True, separators=(",", ":")),
        "x-oasr-sample-rate": str(plan.sample_rate),
    }
    return Response(audio, media_type=media_type, headers=headers)


def speaker(voice: str, loaded) -> int | str | None:
    """``voice`` as ``SynthesizeOptions.speaker``: a speaker of the voice by name or id, or None
    (the default speaker) for OpenAI's names and an empty voice; a 400 listing them otherwise."""
    speakers = loaded.decoding.options.get("speakers", {}) or {}
    if voice in speakers:
        return voice
    if not voice or voice.lower() in OPENAI_VOICES:
        return None
    if voice.isdigit() and loaded.config.n_speakers > 1:
        return int(voice)
    name, openai_names = loaded.identity.requested, ", ".join(OPENAI_VOICES[:3])
    if speakers:
        own = ", ".join(sorted(speakers)[:10]) + (", ..." if len(speakers) > 10 else "")
        takes = f"one of its speakers ({own}), an id 0..{loaded.config.n_speakers - 1}, or OpenAI's names ({openai_names}, ...) for its default speaker"
    else:
        takes = f"OpenAI's names ({openai_names}, ...): {name} has one speaker"
    raise ApiError(400, f"the voice {name} has no speaker {voice!r}; 'voice' takes {takes}", param="voice", code="invalid_value")


async def _json_body(request) -> dict:
    try:
        body = json.loads(await request.body())
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "the body must be a JSON object (Content-Type: application/json)", code="invalid_request") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object", code="invalid_request")
    unknown = sorted(set(body) - FIELDS)
    if unknown:
        raise ApiError(400, f"unknown field {unknown[0]!r}; /v1/audio/speech takes {', '.join(sorted(FIELDS))}", param=unknown[0], code="invalid_value")
    return body


def _field(body: dict, name: str, default: str | None = None) -> str:
    value = body.get(name, default)
    if value is None:
        raise ApiError(400, f"'{name}' is required", param=name, code="missing_required_parameter")
    if not isinstance(value, str):
        raise ApiError(400, f"'{name}' must be a string, not {type(value).__name__}", param=name, code="invalid_value")
    return value
