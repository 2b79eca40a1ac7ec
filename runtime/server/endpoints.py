"""The endpoint table: one entry per route, ``(method, path, handler, needs the API key)``.

A handler is ``async (request, server) -> response``; it raises ``ApiError`` (or lets oasr's
errors through) and the app answers those in OpenAI's error shape. A new endpoint is its module
and one entry here (``Endpoint("POST", "/v1/audio/speech", speech.speech)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable

from . import diarization, separation, speech, transcription
from .errors import ApiError

Handler = Callable[..., Awaitable]


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str  # Starlette's path syntax; "{model:path}" takes a name with slashes
    handler: Handler
    keyed: bool = True  # needs the API key when the server has one


async def list_models(request, server):
    from starlette.responses import JSONResponse

    return JSONResponse({"object": "list", "data": server.pool.catalog()})


async def get_model(request, server):
    from starlette.responses import JSONResponse

    name = request.path_params["model"]
    for model in server.pool.catalog():
        if model["id"] == name:
            return JSONResponse(model)
    raise ApiError(404, f"The model '{name}' does not exist on this server", param="model", code="model_not_found")


async def health(request, server):
    from starlette.responses import JSONResponse

    loaded = [s.name for s in server.pool.slots.values() if s.loads]
    return JSONResponse({"status": "ok", "models": loaded})


async def metrics(request, server):
    from starlette.responses import PlainTextResponse

    return PlainTextResponse(server.metrics.render(server.pool.slots.values()), media_type="text/plain; version=0.0.4")


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("POST", "/v1/audio/transcriptions", transcription.transcriptions),
    Endpoint("POST", "/v1/audio/translations", transcription.translations),
    Endpoint("POST", "/v1/audio/diarization", diarization.diarization),
    Endpoint("POST", "/v1/audio/speech", speech.speech),
    Endpoint("POST", "/v1/audio/separation", separation.separation),
    Endpoint("GET", "/v1/models", list_models),
    Endpoint("GET", "/v1/models/{model:path}", get_model),
    Endpoint("GET", "/health", health, keyed=False),
    Endpoint("GET", "/metrics", metrics),
)
