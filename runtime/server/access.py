"""The access log: one line per request, ``METHOD PATH STATUS in=BYTES out=BYTES SECONDS``.

An ASGI wrapper around the whole app, so every answer is counted, routes the app does not know
included. It names no key, no query string and no body; a request whose client went away is
logged with 499 (nginx's "client closed request").
"""

from __future__ import annotations

import logging
import time

from .metrics import CLIENT_CLOSED

access = logging.getLogger("oasr.access")


def access_logged(app):
    async def asgi(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        started = time.perf_counter()
        status, got, sent = None, 0, 0

        async def counted_receive():
            nonlocal got
            message = await receive()
            if message["type"] == "http.request":
                got += len(message.get("body", b""))
            return message

        async def counted_send(message):
            nonlocal status, sent
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
            await send(message)

        try:
            await app(scope, counted_receive, counted_send)
        finally:
            access.info("%s %s %d in=%d out=%d %.3fs", scope.get("method", "?"), _printable(scope.get("path", "")), status or CLIENT_CLOSED, got, sent, time.perf_counter() - started)

    return asgi


def _printable(path: str) -> str:
    """The path with control characters escaped (a client cannot forge log lines), cut at 200."""
    return "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in path[:200])
