"""What every handler is given: the configuration, the model pool, the metrics, and ``infer``,
which runs one request's work on its models under the serving policy (queue, timeout,
cancellation when the client goes away)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any, Callable, Sequence

from .config import ServerConfig
from .errors import ApiError
from .metrics import Metrics
from .models import ModelPool, ModelSlot

AUDIO_DECODES = 2  # uploads decoded at once by ``decode`` (in threads, outside the models' queues)


class ClientGone(Exception):
    """The client closed its connection before its answer was ready."""


class Server:
    def __init__(self, config: ServerConfig):
        self.config = config
        self.pool = ModelPool(config)
        self.metrics = Metrics()
        self.budget = DecodeBudget(config.decode_budget_bytes)
        self._decodes = asyncio.Semaphore(AUDIO_DECODES)

    def with_audio(self, data: bytes, name: str, work: Callable[..., Any], sample_rate: int = 16000, channels: int = 1) -> Callable[..., Any]:
        """``work(samples, models, check)`` as the ``work(models, check)`` that ``infer`` runs: the
        upload is decoded only once its models are free (in the worker thread, so no decoded
        samples wait in a queue), within the per-request length limit, holding its most bytes
        of the decode budget until the work is done."""

        def run(models, check):
            with self.budget.hold(self.config.request_decode_bytes(sample_rate, channels), check):
                samples = _decoded(data, name, sample_rate, channels, self.config.audio_seconds)
                check()
                return work(samples, models, check)

        return run

    async def decode(self, data: bytes, name: str, sample_rate: int = 16000):
        """The upload's samples now (outside the models' queues; ``with_audio`` decodes in turn),
        within the per-request length limit; a file that is no audio is a 400 naming it."""
        async with self._decodes:
            return await asyncio.to_thread(_decoded, data, name, sample_rate, 1, self.config.audio_seconds)

    async def infer(self, request, slots: Sequence[ModelSlot], tasks: Sequence[str], work: Callable[..., Any]) -> Any:
        """``work(loaded models, check)`` under the pool's policy, within the timeout; ClientGone
        when the client disconnects first (the work is cancelled: out of the queue at once, or
        stopped at its next progress call)."""
        cancel = threading.Event()
        job = asyncio.ensure_future(self.pool.run(slots, tasks, work, cancel))
        gone = asyncio.ensure_future(_disconnect(request.receive))
        try:
            done, _ = await asyncio.wait({job, gone}, timeout=self.config.timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if job in done:
            return job.result()
        job.cancel()
        await asyncio.gather(job, return_exceptions=True)  # quick: a running job is handed off, not awaited
        if gone in done:
            raise ClientGone
        raise ApiError(504, f"the request did not finish within this server's timeout of {self.config.timeout:g} s (--timeout)", type="server_error", code="timeout")


def _decoded(data: bytes, name: str, sample_rate: int, channels: int, max_seconds: float):
    from ..errors import InputError
    from ..io.audio import open_audio

    try:
        if not data:
            raise InputError(f"{name or 'the upload'} is empty (no audio bytes)")
        samples = open_audio(data, sample_rate, channels, max_seconds=max_seconds)
    except InputError as e:
        message = " ".join(str(e).split()).replace("<bytes>", name or "the upload")
        raise ApiError(400, message, param="file", code="invalid_file") from e
    return samples


class DecodeBudget:
    """Bytes of decoded samples held at once over all requests: ``hold(n)`` waits (in its worker
    thread, calling ``check`` so a cancelled request stops waiting) until n bytes are free."""

    def __init__(self, total: int):
        self.total = total
        self.used = 0
        self._free = threading.Condition()

    @contextlib.contextmanager
    def hold(self, n: int, check: Callable[[], None] = lambda: None):
        n = min(n, self.total)  # a request larger than the budget runs alone
        with self._free:
            while self.used + n > self.total:
                self._free.wait(0.25)
                check()
            self.used += n
        try:
            yield
        finally:
            with self._free:
                self.used -= n
                self._free.notify_all()


async def _disconnect(receive) -> None:
    """Returns once the client is gone (the body has been read: the next message is the disconnect)."""
    while (await receive())["type"] != "http.disconnect":
        pass
