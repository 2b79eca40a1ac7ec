"""``serve(config)``: the -m models loaded, then uvicorn on the configured address until SIGINT or
SIGTERM; running requests are finished first (for up to the request timeout)."""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import threading
from typing import Callable

from ..errors import InputError
from .app import create_app
from .config import ServerConfig

log = logging.getLogger("oasr")

BACKLOG = 128


def serve(config: ServerConfig, *, on_ready: Callable[[str], None] | None = None) -> None:
    """Serve until stopped; ``on_ready(url)`` once the models are loaded and the port is bound
    (with port 0, the URL names the port the system picked)."""
    import uvicorn

    app, server = create_app(config)
    server.pool.load_pinned()
    sock = _listen(config.host, config.port)
    host, port = sock.getsockname()[:2]
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    uv = uvicorn.Server(
        uvicorn.Config(
            app,
            log_config=None,  # oasr's logging stays as the caller set it
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=int(config.timeout) + 1,
        )
    )
    log.info("serving on %s (%d model(s) loaded)", url, len(config.models))
    if on_ready is not None:
        on_ready(url)
    try:
        with _sigterm_stops():
            uv.run(sockets=[sock])
    finally:
        sock.close()
        server.pool.close()


@contextlib.contextmanager
def _sigterm_stops():
    """uvicorn re-raises the signal that stopped it once its graceful shutdown is done; SIGTERM's
    default action would then kill the process, so while it runs SIGTERM's own handler does
    nothing and the server exits 0 (SIGINT stays Python's KeyboardInterrupt: "interrupted")."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _listen(host: str, port: int) -> socket.socket:
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError as e:
        raise InputError(f"cannot listen on {host}:{port}: {e.strerror or e}") from e
    sock.set_inheritable(True)
    return sock
