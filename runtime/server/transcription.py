"""POST /v1/audio/transcriptions and /v1/audio/translations, in OpenAI's request and response shapes.

The form's fields map onto ``TranscribeOptions`` as ``oasr transcribe``'s flags do: ``language``
-> ``-l``, ``prompt`` -> ``--initial-prompt``, ``timestamp_granularities[]=word`` ->
``--word-timestamps``, ``temperature`` T > 0 -> ``--temperature T
--temperature-increment-on-fallback 0`` (0, the default, keeps the model's own fallback
schedule, as OpenAI's API does). The bodies are the CLI's, from the same writers
(``oasr.formats``): ``srt`` and ``vtt`` as ``-F srt`` / ``-F vtt``, ``text`` as ``-F txt``;
``verbose_json`` is ``-F json`` (text, segments with their words, language, duration, source,
provenance) plus OpenAI's ``task`` and, with word timestamps, its top-level ``words``; ``json`` is
that document's ``text`` and ``provenance``. Every answer carries the provenance in the
``x-oasr-provenance`` header too.
"""

from __future__ import annotations

import dataclasses
import json

from ..errors import InputError
from ..options import TranscribeOptions
from .errors import ApiError
from .uploads import read_upload

RESPONSE_FORMATS = ("json", "text", "srt", "vtt", "verbose_json")
GRANULARITIES = ("word", "segment")
GRANULARITY_FIELDS = ("timestamp_granularities[]", "timestamp_granularities")
MAX_TEMPERATURE = 1.0  # OpenAI's range


async def transcriptions(request, server):
    return await _speech(request, server, "transcribe")


async def translations(request, server):
    return await _speech(request, server, "translate")


async def _speech(request, server, task: str):
    upload = await read_upload(request)
    fmt = upload.choice("response_format", RESPONSE_FORMATS, default="json")
    words = "word" in upload.choices(GRANULARITY_FIELDS, GRANULARITIES)
    options = request_options(upload, task, words)
    slot = server.pool.slot(upload.text("model"), "transcribe")
    audio = upload.audio()
    config = server.config

    def work(samples, models, check):
        import oasr

        return oasr.transcribe(samples, models[0], options, device=config.device, dtype=config.dtype, progress=check)

    transcript = await server.infer(request, [slot], ["transcribe"], server.with_audio(audio, upload.filename, work))
    return respond(dataclasses.replace(transcript, source=upload.filename), fmt, task, words)


def request_options(upload, task: str, words: bool) -> TranscribeOptions:
    """The TranscribeOptions ``oasr transcribe`` builds from the same settings."""
    language = (upload.text("language") or "").strip().lower()
    prompt = upload.text("prompt") or None
    temperature = upload.number("temperature", 0.0)
    if not 0 <= temperature <= MAX_TEMPERATURE:
        raise ApiError(400, f"'temperature' must be between 0 and {MAX_TEMPERATURE:g}, not {temperature:g}", param="temperature", code="invalid_value")
    # The decoding options by name, read by the model's family as the CLI's flags are; none: its defaults.
    decoding = ({"initial_prompt": prompt} if prompt is not None else {}) | ({"temperatures": (temperature,)} if temperature > 0 else {})
    try:
        return TranscribeOptions(task=task, language=language if language not in ("", "auto") else None, word_timestamps=words, decoding=decoding or None)
    except InputError as e:
        param = "language" if "language" in str(e) else None
        raise ApiError(400, " ".join(str(e).split()), param=param, code="invalid_value") from e


def respond(transcript, fmt: str, task: str, words: bool):
    from starlette.responses import JSONResponse, PlainTextResponse

    from ..formats import render
    from ..formats.text import transcript_json

    document = json.loads(transcript_json(transcript, indent=None))  # `oasr transcribe -F json`'s document
    headers = {"x-oasr-provenance": json.dumps(document["provenance"], ensure_ascii=True, separators=(",", ":"))}
    if fmt in ("srt", "vtt", "text"):
        return PlainTextResponse(render(transcript, "txt" if fmt == "text" else fmt), headers=headers)
    if fmt == "json":
        return JSONResponse({"text": document["text"], "provenance": document["provenance"]}, headers=headers)
    body = {"task": task, **document}
    if words:  # OpenAI's top-level list: each word without its leading space
        body["words"] = [{**w, "word": w["word"].strip()} for s in document["segments"] for w in s.get("words", ())]
    return JSONResponse(body, headers=headers)
