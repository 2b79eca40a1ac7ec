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
from .config import KEEP_ALIVE_TIMEOUT, ServerConfig
from .connections import guarded_protocol

log = logging.getLogger("oasr")

BACKLOG = 128
HEAD_BYTES = 16 * 1024  # a request line and headers larger than this are refused (400)


def serve(config: ServerConfig, *, on_ready: Callable[[str], None] | None = None) -> None:
    """Serve until stopped; ``on_ready(url)`` once the models are loaded and the port is bound
    (with port 0, the URL names the port the system picked)."""
    import uvicorn

    logging.getLogger("python_multipart").setLevel(logging.ERROR)  # a malformed form is the client's 400, not lines in our log
    app, server = create_app(config)
    server.pool.load_pinned()
    sock = _listen(config.host, config.port)
    host, port = sock.getsockname()[:2]
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    _raise_file_limit()
    uv = uvicorn.Server(
        uvicorn.Config(
            app,
            http=guarded_protocol(config.header_timeout, config.max_connections),
            log_config=None,  # oasr's logging stays as the caller set it
            access_log=False,  # oasr's own (server/access.py): no client address, no query string
            lifespan="off",
            timeout_keep_alive=KEEP_ALIVE_TIMEOUT,
            h11_max_incomplete_event_size=HEAD_BYTES,
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


def _raise_file_limit() -> None:
    """The soft limit on open files up to the hard one (or enough for the connection limit and
    the models' files), so connections are refused by the limit, not by a failed accept."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        if soft != resource.RLIM_INFINITY and soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (ImportError, ValueError, OSError):  # not POSIX, or not allowed: keep what there is
        pass


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
