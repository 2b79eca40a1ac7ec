"""The upload path without a server (issue 31): the decode budget, and the multipart parser and
form fields fuzzed: any body is an Upload or an ApiError, never another exception."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

pytest.importorskip("starlette", reason="oasr serve needs the serve extra (make install-test)")
pytest.importorskip("multipart", reason="oasr serve needs the serve extra (make install-test)")

from oasr.server.context import DecodeBudget  # noqa: E402
from oasr.server.errors import ApiError  # noqa: E402
from oasr.server.uploads import BodyTimeout, UploadTooLarge, limited, read_upload  # noqa: E402

FUZZ_EXAMPLES = 150
BOUNDARY = "b0undary"
VALID = (
    f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-tiny.en\r\n"
    f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"temperature\"\r\n\r\n0.2\r\n"
    f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"../a\\\\b.wav\"\r\nContent-Type: audio/wav\r\n\r\nRIFF....\r\n"
    f"--{BOUNDARY}--\r\n"
).encode()


def test_budget_waits_for_room_and_stops_when_cancelled():
    budget = DecodeBudget(100)
    order = []
    second = budget.hold(60)
    with budget.hold(60):
        waiter = threading.Thread(target=lambda: (second.__enter__(), order.append("second")))
        waiter.start()
        time.sleep(0.5)
        assert order == [] and budget.used == 60  # no room: it waits
        order.append("first done")
    waiter.join(5)
    assert order == ["first done", "second"] and budget.used == 60
    second.__exit__(None, None, None)
    assert budget.used == 0
    budget.used = 60  # held by another request
    class Gone(Exception):
        pass

    def check():
        raise Gone

    with pytest.raises(Gone):
        with budget.hold(60, check):
            pass
    assert budget.used == 60  # nothing taken by the one that gave up
    budget.used = 0
    with budget.hold(10**9):  # larger than the whole budget: waits for all of it, then runs alone
        pass


def _parse(body: bytes, content_type: str, limit: int = 1 << 20, pieces: int = 1):
    from starlette.requests import Request

    chunks = [body[i * len(body) // pieces : (i + 1) * len(body) // pieces] for i in range(pieces)]
    messages = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]

    async def receive():
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    scope = {"type": "http", "app": None, "method": "POST", "path": "/", "headers": [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())], "query_string": b""}

    async def go():
        return await read_upload(Request(scope, limited(receive, limit, 5.0, 5.0)))

    return asyncio.run(go())


def test_valid_form_parses_to_plain_fields():
    upload = _parse(VALID, f"multipart/form-data; boundary={BOUNDARY}", pieces=3)
    assert upload.text("model") == "whisper-tiny.en" and upload.number("temperature") == 0.2
    assert upload.data == b"RIFF...." and upload.filename == "b.wav"  # a base name, never a path


def _mutations(data: bytes):
    return st.lists(st.tuples(st.integers(0, len(data)), st.integers(0, 40), st.binary(max_size=12)), max_size=6).map(lambda edits: _apply(data, edits))


def _apply(data: bytes, edits) -> bytes:
    out = bytearray(data)
    for at, cut, insert in edits:
        at = min(at, len(out))
        out[at : at + cut] = insert
    return bytes(out)


@settings(max_examples=FUZZ_EXAMPLES, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    body=st.one_of(_mutations(VALID), st.binary(max_size=300)),
    content_type=st.sampled_from([f"multipart/form-data; boundary={BOUNDARY}", "multipart/form-data", "multipart/form-data; boundary=", "application/x-www-form-urlencoded", "text/plain", "multipart/form-data; boundary=\"" + "x" * 80 + "\""]),
    pieces=st.integers(1, 4),
    limit=st.sampled_from([1 << 20, 64]),
)
@example(body=VALID.replace(b'name="file"', b'name="other"'), content_type=f"multipart/form-data; boundary={BOUNDARY}", pieces=1, limit=1 << 20)
@example(body=VALID * 80, content_type=f"multipart/form-data; boundary={BOUNDARY}", pieces=2, limit=1 << 20)
def test_fuzz_any_body_is_an_upload_or_an_api_error(body, content_type, pieces, limit):
    from starlette.requests import ClientDisconnect

    try:
        upload = _parse(body, content_type, limit, pieces)
    except (ApiError, UploadTooLarge, BodyTimeout, ClientDisconnect):  # each answered by the app: 400, 413, 408, 499
        return
    for name in ("model", "temperature", "response_format", "language"):
        try:  # the field readers on whatever was parsed: a value or a 400
            upload.text(name)
            upload.number(name)
            upload.choice(name, ("json", "text"), "json")
        except ApiError as e:
            assert e.status == 400
    assert upload.filename == "" or ("/" not in upload.filename and "\\" not in upload.filename)
