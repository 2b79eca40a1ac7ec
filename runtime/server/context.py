"""What every handler is given: the configuration, the model pool, the metrics, and ``infer``,
which runs one request's work on its models under the serving policy (queue, timeout,
cancellation when the client goes away)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, Sequence

from .config import ServerConfig
from .errors import ApiError
from .metrics import Metrics
from .models import ModelPool, ModelSlot

AUDIO_DECODES = 2  # uploads decoded at once (in threads, outside the models' queues)


class ClientGone(Exception):
    """The client closed its connection before its answer was ready."""


class Server:
    def __init__(self, config: ServerConfig):
        self.config = config
        self.pool = ModelPool(config)
        self.metrics = Metrics()
        self._decodes = asyncio.Semaphore(AUDIO_DECODES)

    async def decode(self, data: bytes, name: str, sample_rate: int = 16000):
        """The upload's samples; a file that is no audio is a 400 naming it."""
        from ..errors import InputError
        from ..io.audio import load_audio_bytes

        async with self._decodes:
            try:
                return await asyncio.to_thread(load_audio_bytes, data, sample_rate, name=name or "the upload")
            except InputError as e:
                raise ApiError(400, " ".join(str(e).split()), param="file", code="invalid_file") from e

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


async def _disconnect(receive) -> None:
    """Returns once the client is gone (the body has been read: the next message is the disconnect)."""
    while (await receive())["type"] != "http.disconnect":
        pass
