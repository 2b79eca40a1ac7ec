"""oasr serve [-m MODEL ...] [--host 127.0.0.1] [--port 8000] [--api-key KEY] [--max-upload-mb N] [--workers N]

Policy only: flags -> ``oasr.server.ServerConfig``, then ``oasr.server.serve``. The server needs
the ``serve`` extra (Starlette, uvicorn, python-multipart); without it the command says how to
install it, in one line, and exits 1.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Annotated, Optional

import typer

from oasr.threads import set_threads
from oasr.server.config import (
    API_KEY_ENV, DEFAULT_BODY_TIMEOUT, DEFAULT_DECODE_BUDGET_MB, DEFAULT_HEADER_TIMEOUT, DEFAULT_HOST, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_UPLOAD_MB, DEFAULT_PORT, DEFAULT_TIMEOUT, MAX_WORKERS,
)

from ..errors import EXIT_FAILURE
from ..options import Device, DeviceOpt, Dtype, DtypeOpt, QuietOpt, ThreadsOpt, VerboseOpt, checked, model_spec
from ..output import setup_logging

SERVE_PACKAGES = ("starlette", "uvicorn", "multipart")  # the serve extra's import names

EXAMPLES = """Examples:

Serve Whisper base on localhost:8000, loaded once, for any OpenAI client:
  oasr serve -m whisper-base

Then, from another shell (or any OpenAI SDK with base_url http://127.0.0.1:8000/v1):
  curl -s http://127.0.0.1:8000/v1/audio/transcriptions -F file=@talk.wav -F model=whisper-base -F response_format=srt

On the local network, with a key and bigger uploads:
  OASR_API_KEY=secret oasr serve -m whisper-small --host 0.0.0.0 --max-upload-mb 200
"""


def serve(
    model: Annotated[
        Optional[list[str]],
        typer.Option(
            "--model",
            "-m",
            metavar="MODEL",
            help="A model loaded at start and kept loaded (repeatable): a registry name, bundle or checkpoint; NAME=PATH serves PATH as NAME. Registry models already in the oasr cache are also loaded on first use.",
            callback=lambda values: [model_spec(v) for v in values or ()],
            show_default=False,
        ),
    ] = None,
    host: Annotated[str, typer.Option("--host", metavar="ADDRESS", help="The address to listen on; 0.0.0.0 opens the server to the network.")] = DEFAULT_HOST,
    port: Annotated[int, typer.Option("--port", metavar="PORT", help="The TCP port (0: a free one, printed at start).")] = DEFAULT_PORT,
    api_key: Annotated[
        Optional[str],
        typer.Option("--api-key", metavar="KEY", envvar=API_KEY_ENV, show_envvar=True, help=f"Every /v1 and /metrics request must send 'Authorization: Bearer KEY' (else 401). A key on the command line is visible to every user in ps: set {API_KEY_ENV} instead."),
    ] = None,
    max_upload_mb: Annotated[float, typer.Option("--max-upload-mb", metavar="MB", help="The largest request body, in MB; larger uploads are refused (413) as they stream in.")] = DEFAULT_MAX_UPLOAD_MB,
    workers: Annotated[int, typer.Option("--workers", metavar="N", help=f"Inferences running at once over all models (1..{MAX_WORKERS}); one model always runs one at a time.")] = 1,
    timeout: Annotated[float, typer.Option("--timeout", metavar="SECONDS", help="A request that has not finished after this long (waiting included) gets a 504.")] = DEFAULT_TIMEOUT,
    max_audio_seconds: Annotated[
        Optional[float],
        typer.Option("--max-audio-seconds", metavar="S", help="The longest recording a request may decode to (400 past it, from the header before decoding). Default: the upload limit's worth at 16 kHz 16-bit.", show_default=False),
    ] = None,
    decode_budget_mb: Annotated[float, typer.Option("--decode-budget-mb", metavar="MB", help="Decoded samples held at once over all requests; a request waits for its share.")] = DEFAULT_DECODE_BUDGET_MB,
    header_timeout: Annotated[float, typer.Option("--header-timeout", metavar="SECONDS", help="A connection that has not sent a whole request head by then is closed.")] = DEFAULT_HEADER_TIMEOUT,
    body_timeout: Annotated[float, typer.Option("--body-timeout", metavar="SECONDS", help="A request body not all in by then gets a 408.")] = DEFAULT_BODY_TIMEOUT,
    max_connections: Annotated[int, typer.Option("--max-connections", metavar="N", help="Open connections at most; past it the one waiting longest for its headers is closed.")] = DEFAULT_MAX_CONNECTIONS,
    allow_pull: Annotated[bool, typer.Option("--allow-pull", help="Let requests name registry models the oasr cache does not hold yet (fetched and converted on first use).")] = False,
    device: DeviceOpt = Device.auto,
    dtype: DtypeOpt = Dtype.auto,
    threads: ThreadsOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Serve speech models over HTTP with OpenAI's audio API: transcriptions, translations, speech, models; and oasr's diarization and separation.

    Models stay loaded between requests; requests to one model are queued and run one at a time. Endpoints: POST /v1/audio/transcriptions, POST /v1/audio/translations, POST /v1/audio/speech, POST /v1/audio/diarization, POST /v1/audio/separation, GET /v1/models, GET /health, GET /metrics (Prometheus). OpenAI's model names (whisper-1, tts-1, ...) mean the served default model of the endpoint's task. SIGINT or SIGTERM stops the server after the running requests finish.
    """
    setup_logging(quiet, verbose)
    if not quiet:  # the access log: a line per request, shown without -v
        import logging

        logging.getLogger("oasr.access").setLevel(logging.INFO)
    set_threads(threads)
    missing = [name for name in SERVE_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        from oasr.server import EXTRA_HINT

        typer.echo(f"oasr: error: oasr serve needs the serve extra ({', '.join(missing)} missing): {EXTRA_HINT}", err=True)
        raise typer.Exit(EXIT_FAILURE)
    from oasr.server import ServerConfig
    from oasr.server import serve as run_server

    config = checked(
        ServerConfig,
        models=tuple(model or ()),
        host=host,
        port=port,
        api_key=api_key,  # --api-key, else OASR_API_KEY (an empty variable counts as unset)
        max_upload_mb=max_upload_mb,
        workers=workers,
        timeout=timeout,
        max_audio_seconds=max_audio_seconds,
        decode_budget_mb=decode_budget_mb,
        header_timeout=header_timeout,
        body_timeout=body_timeout,
        max_connections=max_connections,
        allow_pull=allow_pull,
        device=device.value,
        dtype=dtype.value,
    )

    def ready(url: str) -> None:
        if not quiet:
            print(f"oasr serve: listening on {url} (OpenAI base URL {url}/v1)", file=sys.stderr, flush=True)

    run_server(config, on_ready=ready)
