"""``oasr serve``: an OpenAI-compatible speech server over the runtime (the ``serve`` extra:
Starlette, uvicorn, python-multipart).

    from oasr.server import ServerConfig, serve
    serve(ServerConfig(models=("whisper-base",), port=8000))

Layout: ``config`` (ServerConfig), ``endpoints`` (the table of routes; a task's endpoint is its
module and one entry), ``transcription`` / ``diarization`` (the handlers: form -> options ->
``oasr.transcribe`` / ``oasr.diarize`` -> the CLI's writers), ``models`` (which names a client
may use, and one inference at a time per model), ``context`` (timeout and cancellation),
``uploads`` (the body limit, forms), ``errors`` (OpenAI's error shape), ``metrics``
(Prometheus text), ``app`` (the ASGI app), ``run`` (uvicorn).
"""

from .config import API_KEY_ENV, DEFAULT_HOST, DEFAULT_MAX_UPLOAD_MB, DEFAULT_PORT, DEFAULT_TIMEOUT, ServerConfig

EXTRA_HINT = "pip install 'oasr-toolchain[serve]'"


def serve(config: ServerConfig, **kwargs) -> None:
    """Run the server until SIGINT/SIGTERM (``oasr.server.run.serve``)."""
    from .run import serve as _serve

    _serve(config, **kwargs)


def create_app(config: ServerConfig):
    """(ASGI app, its Server) for running under another ASGI server; call ``server.pool.load_pinned()`` first."""
    from .app import create_app as _create

    return _create(config)


__all__ = ["ServerConfig", "serve", "create_app", "API_KEY_ENV", "DEFAULT_HOST", "DEFAULT_PORT", "DEFAULT_MAX_UPLOAD_MB", "DEFAULT_TIMEOUT", "EXTRA_HINT"]
