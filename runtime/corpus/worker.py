"""One worker of a batch: loads the task's models once, then does inputs one by one.

The same class serves both engines: a local worker process holds one, a Ray actor holds one.
Each input gives one record (a dict, JSON-ready): status, outputs, duration, timing, the models'
provenance. A failing input is a "failed" record with its one-line error; the worker goes on.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import Any

from ..errors import OasrError
from .manifest import Item
from .tasks import Work, corpus_task, item_options

log = logging.getLogger("oasr")

# What a model's provenance in a record keeps (oasr.loading.ModelIdentity's fields less the rest).
IDENTITY_FIELDS = ("requested", "source", "bundle_sha256", "revision", "architecture")


def one_line(exc: BaseException, label: str) -> str:
    """``exc`` as the one line the CLI prints for a failed input (named, once)."""
    message = " ".join(str(exc).split()) or type(exc).__name__
    if not isinstance(exc, (OasrError, OSError)):
        message = f"internal error: {type(exc).__name__}: {message}"
    return message if label in message else f"{label}: {message}"


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def split_threads(workers: int, cpus: int | None = None) -> int:
    """torch threads per worker: this machine's cores shared out, at least one each."""
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cpus // max(1, workers))


class Worker:
    def __init__(self, work: Work, threads: int | None = None):
        os.environ.update(work.env)  # a Ray actor on another node gets the caller's cache and hub settings
        if threads:
            import torch

            torch.set_num_threads(threads)
        from ..loading import load_pretrained

        self.work = work
        self.task = corpus_task(work.task)
        self.models = tuple(load_pretrained(spec, task=t, device=work.device, dtype=work.dtype) for spec, t in work.models)
        self.provenance = [{k: getattr(m.identity, k) for k in IDENTITY_FIELDS} for m in self.models]

    def process(self, item: Item, key: str) -> dict[str, Any]:
        """Do ``item``; its record. ``key``: what the journal compares to skip it next time."""
        started = time.perf_counter()
        record: dict[str, Any] = {"input": item.path, "name": item.name, "key": key, "worker": worker_name()}
        try:
            options = item_options(self.task, self.work, item)
            outcome = self.task.run(self.models, self.work, item, options)
        except Exception as e:
            log.debug("%s failed", item.path, exc_info=True)
            return {**record, "status": "failed", "error": one_line(e, item.path), "seconds": round(time.perf_counter() - started, 3)}
        seconds = time.perf_counter() - started
        if outcome.duration is not None:
            log.info("%s: %.1f s of audio in %.1f s", item.path, outcome.duration, seconds)
        from ..io.files import sha256_file

        return {
            **record,
            "status": outcome.status,
            "outputs": [str(p) for p in outcome.outputs],
            "output_sha256": {str(p): sha256_file(p) for p in outcome.outputs if p.is_file()},
            "duration": None if outcome.duration is None else round(outcome.duration, 3),
            "seconds": round(seconds, 3),
            "models": self.provenance,
        }
