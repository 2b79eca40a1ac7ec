"""What a server is started with: one frozen dataclass, validated in one place."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from ..options import check_range

DEFAULT_HOST = "127.0.0.1"  # loopback unless told otherwise
DEFAULT_PORT = 8000
DEFAULT_MAX_UPLOAD_MB = 25.0  # OpenAI's own limit on an audio upload
MAX_UPLOAD_MB = 4096.0
MAX_WORKERS = 64
DEFAULT_TIMEOUT = 600.0  # seconds a request may wait and run
MAX_TIMEOUT = 86400.0
API_KEY_ENV = "OASR_API_KEY"
UPLOAD_BYTES_PER_SECOND = 32000  # 16 kHz 16-bit mono: the default per-request audio limit is the upload limit's worth
DEFAULT_DECODE_BUDGET_MB = 1024.0  # decoded samples held at once over all requests
DEFAULT_HEADER_TIMEOUT = 10.0  # seconds a connection may take to send a request's headers
DEFAULT_BODY_TIMEOUT = 120.0  # seconds a request body may take to arrive, all of it
BODY_IDLE_TIMEOUT = 30.0  # seconds between two pieces of a body
DEFAULT_MAX_CONNECTIONS = 256
KEEP_ALIVE_TIMEOUT = 5  # seconds an idle keep-alive connection is kept


@dataclass(frozen=True)
class ServerConfig:
    models: tuple[str, ...] = ()  # -m: loaded at start and kept loaded; "NAME=PATH" serves PATH as NAME
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT  # 0: a free port the system picks
    api_key: str | None = None  # when set, every /v1 and /metrics request needs "Authorization: Bearer KEY"
    max_upload_mb: float = DEFAULT_MAX_UPLOAD_MB  # a request body larger than this is refused (413) as it streams in
    workers: int = 1  # inferences running at once over all models; one model never runs two at once
    timeout: float = DEFAULT_TIMEOUT  # seconds a request may wait for its model and run (504 after)
    allow_pull: bool = False  # registry models not in the oasr cache may be fetched on first use
    device: str = "auto"
    dtype: str = "auto"
    max_audio_seconds: float | None = None  # the longest recording a request may decode to; None: the upload limit's worth at 16 kHz
    decode_budget_mb: float = DEFAULT_DECODE_BUDGET_MB  # decoded samples held at once, over all requests
    header_timeout: float = DEFAULT_HEADER_TIMEOUT  # a connection that has not sent its headers by then is closed
    body_timeout: float = DEFAULT_BODY_TIMEOUT  # a body not all in by then is answered 408
    max_connections: int = DEFAULT_MAX_CONNECTIONS  # past it, the oldest connection still sending headers is closed

    def __post_init__(self):
        check_range(self.port, "--port", 0, 65535, integer=True)
        check_range(self.max_upload_mb, "--max-upload-mb", 0, MAX_UPLOAD_MB, lo_open=True, unit="MB")
        check_range(self.workers, "--workers", 1, MAX_WORKERS, integer=True)
        check_range(self.timeout, "--timeout", 0, MAX_TIMEOUT, lo_open=True, unit="s")
        if self.api_key is not None and not self.api_key.strip():
            raise InputError("--api-key is empty; give a key, or leave it (and OASR_API_KEY) unset for no key")
        if not self.host.strip():
            raise InputError("--host is empty")
        check_range(self.decode_budget_mb, "--decode-budget-mb", 0, None, lo_open=True, unit="MB")
        if self.max_audio_seconds is not None:
            check_range(self.max_audio_seconds, "--max-audio-seconds", 0, None, lo_open=True, unit="s")
        check_range(self.header_timeout, "--header-timeout", 0, MAX_TIMEOUT, lo_open=True, unit="s")
        check_range(self.body_timeout, "--body-timeout", 0, MAX_TIMEOUT, lo_open=True, unit="s")
        check_range(self.max_connections, "--max-connections", 1, 1 << 20, integer=True)
        if self.request_decode_bytes() > self.decode_budget_bytes:
            raise InputError(
                f"--max-audio-seconds {self.audio_seconds:g} decodes to {self.request_decode_bytes() / 1048576:.0f} MB, "
                f"more than --decode-budget-mb {self.decode_budget_mb:g}: lower the one or raise the other"
            )

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 1024 * 1024)

    @property
    def audio_seconds(self) -> float:
        """The longest recording one request may decode to."""
        return self.max_audio_seconds if self.max_audio_seconds is not None else self.max_upload_bytes / UPLOAD_BYTES_PER_SECOND

    @property
    def decode_budget_bytes(self) -> int:
        return int(self.decode_budget_mb * 1024 * 1024)

    def request_decode_bytes(self, sample_rate: int = 16000, channels: int = 1) -> int:
        """The most bytes of float32 samples one request's audio may decode to (at most the budget)."""
        return min(int(self.audio_seconds * sample_rate) * channels * 4, 1 << 62)
