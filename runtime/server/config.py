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

    def __post_init__(self):
        check_range(self.port, "--port", 0, 65535, integer=True)
        check_range(self.max_upload_mb, "--max-upload-mb", 0, MAX_UPLOAD_MB, lo_open=True, unit="MB")
        check_range(self.workers, "--workers", 1, MAX_WORKERS, integer=True)
        check_range(self.timeout, "--timeout", 0, MAX_TIMEOUT, lo_open=True, unit="s")
        if self.api_key is not None and not self.api_key.strip():
            raise InputError("--api-key is empty; give a key, or leave it (and OASR_API_KEY) unset for no key")
        if not self.host.strip():
            raise InputError("--host is empty")

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 1024 * 1024)
