"""The ASGI app: the endpoint table as Starlette routes, each answered by ``_answer``.

``_answer`` is the one place every request passes: the API key (401), the upload limit and the
body timeout on the body's stream (413, 408), the handler, every error as an OpenAI error body (a
traceback only in the server's log), a client gone mid-request as 499, and the request's status
and latency in the metrics. ``access.access_logged`` wraps the whole app: one log line a request.
"""

from __future__ import annotations

import hmac
import logging
import time

from .config import ServerConfig
from .context import ClientGone, Server
from .endpoints import ENDPOINTS, Endpoint
from .errors import ApiError, from_exception
from .metrics import CLIENT_CLOSED
from .uploads import BodyTimeout, UploadTooLarge, limited, too_large, too_slow

log = logging.getLogger("oasr")


def create_app(config: ServerConfig, endpoints: tuple[Endpoint, ...] = ENDPOINTS):
    """(the Starlette app, its Server); the -m models are loaded by ``Server.pool.load_pinned``."""
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.routing import Route

    server = Server(config)
    routes = [Route(e.path, _answer(e, server), methods=[e.method]) for e in endpoints]

    async def http_error(request, exc: HTTPException):  # no such route (404), wrong method (405)
        message = {404: f"no endpoint {request.url.path}", 405: f"{request.method} is not allowed on {request.url.path}"}
        error = ApiError(exc.status_code, message.get(exc.status_code, str(exc.detail)), code="not_found" if exc.status_code == 404 else None)
        return _error_response(error)

    async def internal_error(request, exc: Exception):
        return _error_response(from_exception(exc))

    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error, Exception: internal_error})
    from .access import access_logged

    return access_logged(app), server


def _answer(endpoint: Endpoint, server: Server):
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import Response

    from .config import BODY_IDLE_TIMEOUT

    config = server.config

    async def route(request: Request):
        started = time.perf_counter()
        response = None
        try:
            request = Request(request.scope, limited(request.receive, config.max_upload_bytes, config.body_timeout, BODY_IDLE_TIMEOUT))
            if endpoint.keyed and config.api_key is not None:
                try:
                    _check_key(request, config.api_key)
                except ApiError:
                    await _discard_body(request)  # a client that sends its whole body first still reads the 401
                    raise
            response = await endpoint.handler(request, server)
        except (ClientGone, ClientDisconnect):  # gone while it sent its body, or while its work ran
            response = Response(status_code=CLIENT_CLOSED)  # nobody reads it; the access log and the metrics do
        except UploadTooLarge:
            response = _error_response(too_large(config.max_upload_bytes), close=True)
        except BodyTimeout:
            response = _error_response(too_slow(config.body_timeout), close=True)
        except Exception as e:
            response = _error_response(from_exception(e))
        finally:
            status = response.status_code if response is not None else CLIENT_CLOSED
            server.metrics.observe(endpoint.path, status, time.perf_counter() - started)
        return response

    return route


def _check_key(request, key: str) -> None:
    given = request.headers.get("authorization", "")
    scheme, _, token = given.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), key.encode()):
        what = "no API key was given" if not given else "the API key is not this server's"
        raise ApiError(401, f"{what}; send 'Authorization: Bearer KEY' (the server's --api-key or OASR_API_KEY)", code="invalid_api_key")


async def _discard_body(request) -> None:
    from starlette.requests import ClientDisconnect

    try:
        async for _ in request.stream():
            pass
    except (UploadTooLarge, BodyTimeout):
        pass
    except ClientDisconnect:
        raise ClientGone from None


def _error_response(error: ApiError, *, close: bool = False):
    """The OpenAI error body; ``close``: the connection is closed after it (the rest of the body is not read)."""
    from starlette.responses import JSONResponse

    return JSONResponse(error.body(), status_code=error.status, headers={"connection": "close"} if close else None)
