"""HTTP errors in OpenAI's shape, ``{"error": {"message", "type", "param", "code"}}``, and the one
table from oasr's exceptions to a status.

A handler raises ``ApiError`` for what it checks itself (a missing field, an unknown model) and
lets oasr's own errors through; ``error_response`` turns either into the JSON body. Anything else
is a 500 whose body names only the exception's class: the traceback goes to the server's log,
never to the client.
"""

from __future__ import annotations

import logging

from ..errors import BundleError, CapabilityError, ConversionError, DetectionError, InputError, LoadError, OasrError

log = logging.getLogger("oasr")

INVALID_REQUEST = "invalid_request_error"
SERVER_ERROR = "server_error"


class ApiError(Exception):
    """A request answered with ``status`` and an OpenAI error body."""

    def __init__(self, status: int, message: str, *, type: str = INVALID_REQUEST, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


# (oasr exception, status, param, code); the first match wins. Input the client sent is a 400;
# a model that cannot be read is the server's fault (500), said in one line.
OASR_ERRORS: tuple[tuple[type[OasrError], int, str | None, str | None], ...] = (
    (CapabilityError, 400, "model", "unsupported_option"),
    (InputError, 400, None, "invalid_value"),
    ((BundleError, LoadError, ConversionError, DetectionError), 500, "model", "model_unavailable"),  # type: ignore[dict-item]
    (OasrError, 500, None, None),
)


def from_exception(exc: BaseException) -> ApiError:
    """The ApiError ``exc`` is answered with."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, OasrError):
        for cls, status, param, code in OASR_ERRORS:
            if isinstance(exc, cls):
                kind = INVALID_REQUEST if status < 500 else SERVER_ERROR
                return ApiError(status, one_line(str(exc)) or type(exc).__name__, type=kind, param=param, code=code)
    log.error("internal error answering a request", exc_info=exc)
    return ApiError(500, f"internal error ({type(exc).__name__}); the server's log has the details", type=SERVER_ERROR)


def one_line(text: str) -> str:
    return " ".join(text.split())
