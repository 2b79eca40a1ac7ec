"""Request bodies in: the upload limit, enforced while the body streams in, and multipart forms.

``limited(receive, limit)`` wraps an ASGI ``receive``: once more than ``limit`` body bytes have
come, it reads (and drops) what the client is still sending, up to ``DRAIN_BYTES`` more, so the
413 reaches a client that writes its whole body before it reads the answer, then raises
``UploadTooLarge``. Nothing past the limit is kept. With a ``timeout``, a body that is not all in
``timeout`` seconds after its first read, or that pauses ``idle`` seconds, raises ``BodyTimeout``
(a client dribbling a byte at a time holds a connection no longer than that). ``read_upload`` parses the multipart form
into a plain ``Upload``: the one ``file`` field's bytes, its base name (a label in results, never
a path: nothing a client sends reaches the file system), and the text fields.
"""

from __future__ import annotations

import asyncio
import math
import re
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from .errors import ApiError

DRAIN_BYTES = 64 * 1024 * 1024  # read past the limit at most this much before the 413 (then the connection closes)
MAX_FIELDS = 64
MAX_FIELD_BYTES = 64 * 1024  # a text field (a prompt) longer than this is refused
Receive = Callable[[], Awaitable[dict]]


class UploadTooLarge(Exception):
    pass


class BodyTimeout(Exception):
    pass


def limited(receive: Receive, limit: int, timeout: float | None = None, idle: float | None = None) -> Receive:
    total, complete, deadline = 0, False, None

    async def bounded() -> dict:
        nonlocal deadline
        if complete or timeout is None:  # the body is in: what comes next is the disconnect, whenever
            return await receive()
        now = asyncio.get_running_loop().time()
        deadline = now + timeout if deadline is None else deadline
        wait = max(0.0, min(deadline - now, idle if idle is not None else timeout))
        try:
            return await asyncio.wait_for(receive(), wait)
        except asyncio.TimeoutError:
            raise BodyTimeout from None

    async def wrapped() -> dict:
        nonlocal total, complete
        message = await bounded()
        if message["type"] == "http.request":
            complete = not message.get("more_body", False)
            total += len(message.get("body", b""))
            if total > limit:
                drained, more = 0, message.get("more_body", False)
                while more and drained < DRAIN_BYTES:
                    rest = await bounded()
                    if rest["type"] != "http.request":
                        break
                    drained += len(rest.get("body", b""))
                    more = rest.get("more_body", False)
                raise UploadTooLarge
        return message

    return wrapped


def too_slow(timeout: float) -> ApiError:
    return ApiError(408, f"the request body did not arrive within this server's {timeout:g} s (--body-timeout)", code="request_timeout")


def too_large(limit: int) -> ApiError:
    return ApiError(413, f"the request body is larger than this server's limit of {limit / 1048576:g} MB (--max-upload-mb)", param="file", code="file_too_large")


@dataclass
class Upload:
    fields: dict[str, list[str]] = field(default_factory=dict)
    data: bytes | None = None  # the file's bytes; None: no file field
    filename: str = ""  # the file's base name as the client gave it (a label only)

    def text(self, name: str, default: str | None = None) -> str | None:
        values = self.fields.get(name)
        return values[-1] if values else default

    def choice(self, name: str, choices: tuple[str, ...], default: str) -> str:
        value = (self.text(name) or default).strip()
        if value not in choices:
            raise ApiError(400, f"'{name}' must be one of {', '.join(choices)}, not {value!r}", param=name, code="invalid_value")
        return value

    def choices(self, names: tuple[str, ...], choices: tuple[str, ...]) -> tuple[str, ...]:
        """Every value of a repeated field (``a[]`` or ``a``), each one of ``choices``."""
        values = [v.strip() for n in names for v in self.fields.get(n, ())]
        for v in values:
            if v not in choices:
                raise ApiError(400, f"'{names[0]}' takes {', '.join(choices)}, not {v!r}", param=names[0], code="invalid_value")
        return tuple(dict.fromkeys(values))

    def number(self, name: str, default: float | None = None, *, integer: bool = False) -> float | int | None:
        raw = self.text(name)
        if raw is None or not raw.strip():
            return default
        try:
            value = int(raw) if integer else float(raw)
        except ValueError:
            kind = "a whole number" if integer else "a number"
            raise ApiError(400, f"'{name}' must be {kind}, not {raw!r}", param=name, code="invalid_value") from None
        if not integer and not math.isfinite(value):
            raise ApiError(400, f"'{name}' must be a finite number, not {raw!r}", param=name, code="invalid_value")
        return value

    def audio(self) -> bytes:
        if self.data is None:
            raise ApiError(400, "'file' is required: the audio, as a multipart/form-data file field", param="file", code="missing_required_parameter")
        if not self.data:
            raise ApiError(400, f"the file {self.filename or 'upload'} is empty", param="file", code="invalid_file")
        return self.data


async def read_upload(request) -> Upload:
    """The multipart (or urlencoded) form of ``request``; its receive must already be ``limited``."""
    from starlette.datastructures import UploadFile
    from starlette.exceptions import HTTPException

    upload = Upload()
    try:
        async with request.form(max_files=1, max_fields=MAX_FIELDS, max_part_size=MAX_FIELD_BYTES) as form:
            for key, value in form.multi_items():
                if isinstance(value, UploadFile):
                    if key != "file":
                        raise ApiError(400, f"unexpected file field {key!r}; the audio goes in 'file'", param=key, code="invalid_value")
                    upload.data = await value.read()
                    upload.filename = base_name(value.filename or "")
                else:
                    upload.fields.setdefault(key, []).append(value)
    except HTTPException as e:  # the multipart parser's own complaints (too many fields, a malformed body)
        raise ApiError(400, f"malformed form: {e.detail}", code="invalid_request") from None
    return upload


def base_name(name: str) -> str:
    """The last component of a client's file name, control characters taken out."""
    name = re.split(r"[\\/]", name)[-1]
    return "".join(ch for ch in name if ch.isprintable())[:255]
