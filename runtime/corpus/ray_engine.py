"""The Ray engine: actors that load the models once and take inputs in batches.

Ray is an optional extra (``pip install 'oasr-toolchain[ray]'``). Inputs and outputs are paths
every node reaches (a shared filesystem). An actor whose process dies is restarted by Ray (its
models loaded again) and the call it held is retried there (``max_restarts`` /
``max_task_retries``); outputs are written atomically, so a retried input is written whole, and the
driver records each input once. An actor dead for good fails the inputs it held; the rest go on.
"""

from __future__ import annotations

import logging
from typing import Any

from ..errors import OasrError
from .local import Job, OnRecord
from .tasks import Work
from .worker import Worker

log = logging.getLogger("oasr")

INSTALL_HINT = "--engine ray needs Ray: pip install 'oasr-toolchain[ray]'"
MAX_RESTARTS = 3  # an actor process that dies is restarted this often, and its call retried


class RayMissing(OasrError):
    """Ray is not installed."""


def require_ray():
    try:
        import ray
    except ImportError as e:
        raise RayMissing(INSTALL_HINT) from e
    return ray


class BatchActor:
    """The body of one Ray actor: a Worker; an error loading the models is kept for ``ready``."""

    def __init__(self, work: Work, threads: int):
        self.worker, self.error = None, None
        try:
            self.worker = Worker(work, threads)
        except Exception as e:
            self.error = e

    def ready(self):
        if self.error is not None:
            raise self.error
        return True

    def process(self, jobs: list[Job]) -> list[dict[str, Any]]:
        return [self.worker.process(item, key) for item, key in jobs]


def default_per_call(jobs: int, actors: int) -> int:
    """Inputs per actor call: about four calls per actor, at most 16 inputs each."""
    return max(1, min(16, jobs // max(1, 4 * actors)))


def run_ray(
    work: Work,
    jobs: list[Job],
    on_record: OnRecord,
    *,
    workers: int | None,
    threads: int | None,
    address: str | None = None,
    num_gpus: float = 0,
    per_call: int | None = None,
) -> None:
    """Do ``jobs`` on Ray actors: ``workers`` of them (default: one per ``threads`` CPUs of the
    cluster), ``num_gpus`` each; ``on_record`` hears each record and may stop the run."""
    ray = require_ray()
    started = not ray.is_initialized()
    if started:  # a cluster to join, or a local instance without the dashboard (nothing listens beyond it)
        local = {} if address else {"include_dashboard": False}
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False, **local)
    actors: list = []
    try:
        threads = threads or 1
        if workers is None:
            workers = max(1, int(ray.cluster_resources().get("CPU", 1)) // threads)
        count = min(workers, len(jobs))
        remote = ray.remote(num_cpus=threads, num_gpus=num_gpus, max_restarts=MAX_RESTARTS, max_task_retries=MAX_RESTARTS)(BatchActor)
        actors = [remote.remote(work, threads) for _ in range(count)]
        try:
            ray.get([a.ready.remote() for a in actors])  # a model that will not load stops the batch here
        except ray.exceptions.RayTaskError as e:
            raise (e.cause or e) from None
        _dispatch(ray, actors, jobs, on_record, per_call or default_per_call(len(jobs), count))
    finally:
        for actor in actors:
            ray.kill(actor, no_restart=True)
        if started:
            ray.shutdown()


def _dispatch(ray, actors: list, jobs: list[Job], on_record: OnRecord, per_call: int) -> None:
    from ray.exceptions import RayActorError

    calls = [jobs[i : i + per_call] for i in range(0, len(jobs), per_call)]
    calls.reverse()
    inflight: dict[Any, tuple[Any, list[Job]]] = {}

    def feed(actor) -> None:
        if calls:
            batch = calls.pop()
            inflight[actor.process.remote(batch)] = (actor, batch)

    for actor in actors:
        feed(actor)
    while inflight:
        (ref,), _ = ray.wait(list(inflight), num_returns=1)
        actor, batch = inflight.pop(ref)
        try:
            records = ray.get(ref)
        except RayActorError as e:  # dead for good, past Ray's restarts and retries
            log.warning("a Ray actor died for good: %s", " ".join(str(e).split())[:200])
            records = [
                {"input": item.path, "name": item.name, "key": key, "status": "failed", "error": f"{item.path}: the Ray actor died"}
                for item, key in batch
            ]
            actor = None
        for record in records:
            if not on_record(record):
                return
        if actor is not None:
            feed(actor)
        elif not inflight and calls:  # every actor gone
            raise OasrError("every Ray actor died; stopping the batch")
