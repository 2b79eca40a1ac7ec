"""The server's models: which names a client may ask for, and one inference at a time per model.

A client names a model; no name ever becomes a path. The names are the server's ``-m`` list
(loaded at start and held for the server's life; ``NAME=PATH`` serves the operator's PATH as
NAME) and the registry's names (``oasr models list``), loaded on first use through
``oasr.load_pretrained``, whose process cache (``oasr.loading``) keeps the most recently used
few. A registry model the oasr cache does not hold yet is refused unless the server was started
with ``allow_pull`` (a client cannot make the server download). OpenAI's own model names
(``whisper-1``, ``tts-1``, ..., ``OPENAI_NAMES``) and ``auto`` are the served default of the
endpoint's task: the first ``-m`` model serving it, else the registry's default for it.

``ModelPool.run`` is the serving policy. Each model has an ``asyncio.Lock``: requests to one model
queue for it, and the work (loading, then the forward passes) runs in a thread of a pool of
``workers`` threads, one at a time per model and at most ``workers`` over all models, so two
forward passes never fight over the same cores. A request cancelled while it waits (its client
went away, its time ran out) leaves the queue at once; one cancelled while it runs is told to stop
(``Cancelled`` is raised at the pipeline's next progress call), and its model's lock is released
only when the thread has returned, never earlier.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..errors import InputError, OasrError
from ..tasks import CAPABILITY
from .config import ServerConfig
from .errors import ApiError

log = logging.getLogger("oasr")


# What OpenAI's clients send as ``model``, by the oasr task of the endpoint; each means this
# server's default model for that task (a served model of the same name still wins).
OPENAI_NAMES = {
    "transcribe": ("whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe", "gpt-4o-transcribe-diarize"),
    "tts": ("tts-1", "tts-1-hd", "gpt-4o-mini-tts"),
}


class Cancelled(Exception):
    """Raised inside a running job when its request was cancelled: the pipeline stops there."""


@dataclass
class ModelSlot:
    """One name a client may ask for, with its queue."""

    name: str  # what the client sends as ``model``
    spec: str  # what load_pretrained is given: a registry name, or the operator's -m
    tasks: tuple[str, ...]  # the oasr tasks it serves
    pinned: Any = None  # the LoadedModel of a -m model, held for the server's life
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    waiting: int = 0  # requests queued for this model
    running: int = 0
    loads: int = 0  # times its weights were read (1 unless the process cache dropped it)


def served_tasks(capabilities) -> tuple[str, ...]:
    return tuple(task for task, need in CAPABILITY.items() if need in capabilities)


class ModelPool:
    def __init__(self, config: ServerConfig):
        self.config = config
        self.slots: dict[str, ModelSlot] = {}
        self._workers = asyncio.Semaphore(config.workers)
        self._executor = ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="oasr-infer")
        self._seen: weakref.WeakSet = weakref.WeakSet()  # model modules already counted as loaded
        self._seen_lock = threading.Lock()
        self._background: set[asyncio.Future] = set()

    # --- names --------------------------------------------------------------------------------

    def load_pinned(self) -> None:
        """Load every -m model (at start, before the first request is taken)."""
        import oasr

        for given in self.config.models:
            name, spec = _split_alias(given)
            if name in self.slots:
                raise InputError(f"-m {name} is given twice")
            log.info("loading %s", spec)
            loaded = oasr.load_pretrained(spec, device=self.config.device, dtype=self.config.dtype)
            loaded = _as_requested(loaded, name)
            slot = ModelSlot(name, spec, served_tasks(loaded.capabilities), pinned=loaded)
            self._count_load(slot, loaded)
            self.slots[name] = slot
            log.info("serving %s (%s) for %s", name, loaded.architecture, ", ".join(slot.tasks) or "no task")

    def slot(self, name: str | None, task: str, param: str = "model") -> ModelSlot:
        """The slot of model ``name`` for ``task``; 404 when no such model is served, 400 when it
        serves another task."""
        if not name or not name.strip():
            raise ApiError(400, f"'{param}' is required: a model this server serves (GET /v1/models lists them)", param=param, code="missing_required_parameter")
        found = self.slots.get(name)
        if found is None and (name == "auto" or name in OPENAI_NAMES.get(task, ())):
            name = self.default_name(task)
            found = self.slots.get(name)
        if found is None:
            found = self._registry_slot(name, param)
        if task not in found.tasks:
            does = ", ".join(found.tasks) or "no task this endpoint serves"
            raise ApiError(400, f"model {name!r} serves {does}, not {task}", param=param, code="model_not_supported")
        return found

    def default_name(self, task: str) -> str:
        """The model ``auto`` and OpenAI's names stand for: the first -m model serving ``task``,
        else the registry's default for it."""
        from ..hub.catalog import load_catalog

        for slot in self.slots.values():
            if slot.pinned is not None and task in slot.tasks:
                return slot.name
        try:
            return load_catalog().default_for(task).name
        except OasrError:
            raise ApiError(404, f"this server has no default model for {task}; name one (GET /v1/models lists them)", param="model", code="model_not_found") from None

    def _registry_slot(self, name: str, param: str) -> ModelSlot:
        from ..hub.catalog import load_catalog
        from ..hub.resolve import cached_bundle

        entry = load_catalog().get(name)
        if entry is None:
            raise ApiError(404, f"The model '{name}' does not exist on this server (GET /v1/models lists them)", param=param, code="model_not_found")
        if not self.config.allow_pull and cached_bundle(name, task=entry.task) is None:
            raise _not_cached(name, param)
        return self.slots.setdefault(name, ModelSlot(name, name, (entry.task,)))

    def catalog(self) -> list[dict[str, Any]]:
        """The models a client may name: the -m list, then registry models this server can load."""
        from ..hub.resolve import list_models

        out = [_model_object(s.name, s.tasks, s.pinned is not None, "oasr") for s in self.slots.values() if s.pinned is not None]
        pinned = {s.name for s in self.slots.values() if s.pinned is not None}
        for entry in list_models():
            if entry["name"] in pinned or not (entry["cached"] or self.config.allow_pull):
                continue
            slot = self.slots.get(entry["name"])
            out.append(_model_object(entry["name"], (entry["task"],), bool(slot and slot.loads), "oasr-registry"))
        return out

    # --- running --------------------------------------------------------------------------------

    async def run(self, slots: Sequence[ModelSlot], task: Sequence[str], work: Callable[..., Any], cancel: threading.Event) -> Any:
        """``work(loaded models, check)`` in a worker thread once every model in ``slots`` is free;
        ``task[i]`` is what ``slots[i]`` is loaded for; ``check()`` raises Cancelled once
        ``cancel`` is set."""
        order = sorted(range(len(slots)), key=lambda i: slots[i].name)  # one lock order: no deadlock
        hold = _Hold(self, [slots[i] for i in order])
        try:
            await hold.acquire()
            loop = asyncio.get_running_loop()
            future = loop.run_in_executor(self._executor, self._job, list(slots), list(task), work, cancel)
            try:
                return await asyncio.shield(future)
            except asyncio.CancelledError:
                cancel.set()  # the job stops at its next progress call; the models stay held until it returns
                hold.release_after(future)
                raise
        finally:
            hold.release()

    def _job(self, slots: list[ModelSlot], tasks: list[str], work: Callable[..., Any], cancel: threading.Event) -> Any:
        def check(*_args) -> None:
            if cancel.is_set():
                raise Cancelled("the request was cancelled")

        check()
        return work(tuple(self._loaded(s, t) for s, t in zip(slots, tasks)), check)

    def _loaded(self, slot: ModelSlot, task: str):
        if slot.pinned is not None:
            return slot.pinned.require(task)
        import oasr
        from ..hub.resolve import cached_bundle

        spec = slot.spec
        if not self.config.allow_pull:  # only what the oasr cache holds: nothing is fetched for a client
            spec = cached_bundle(slot.spec, task=task)
            if spec is None:
                raise _not_cached(slot.name, "model")
        loaded = _as_requested(oasr.load_pretrained(spec, task=task, device=self.config.device, dtype=self.config.dtype), slot.name)
        self._count_load(slot, loaded)
        return loaded

    def _count_load(self, slot: ModelSlot, loaded) -> None:
        with self._seen_lock:
            if loaded.model not in self._seen:
                self._seen.add(loaded.model)
                slot.loads += 1
                if slot.loads > 1:
                    log.info("%s: loaded again (the process cache had let it go)", slot.name)

    def close(self) -> None:
        self._executor.shutdown(wait=True)


class _Hold:
    """The locks of one request's models and its worker, taken in order and given back once."""

    def __init__(self, pool: ModelPool, slots: list[ModelSlot]):
        self.pool, self.slots = pool, slots
        self.locked: list[ModelSlot] = []
        self.worker = False
        self.handed_off = False

    async def acquire(self) -> None:
        for s in self.slots:
            s.waiting += 1
        try:
            for s in self.slots:
                await s.lock.acquire()
                self.locked.append(s)
                s.waiting -= 1
            await self.pool._workers.acquire()
            self.worker = True
            for s in self.slots:
                s.running += 1
        except BaseException:
            for s in self.slots[len(self.locked) :]:
                s.waiting -= 1
            raise

    def release_after(self, future: asyncio.Future) -> None:
        """Keep everything held until ``future`` (the running job) is done, then release."""
        self.handed_off = True

        def done(_f: asyncio.Future) -> None:
            if not _f.cancelled():
                _f.exception()  # retrieved: the request is gone, nothing is left to tell
            self._release_now()
            self.pool._background.discard(future)

        self.pool._background.add(future)
        future.add_done_callback(done)

    def release(self) -> None:
        if not self.handed_off:
            self._release_now()

    def _release_now(self) -> None:
        if self.worker:
            for s in self.slots:
                s.running -= 1
            self.pool._workers.release()
            self.worker = False
        while self.locked:
            self.locked.pop().lock.release()


def _not_cached(name: str, param: str) -> ApiError:
    return ApiError(
        404,
        f"The model '{name}' is not in this server's oasr cache; pull it first (oasr models pull {name}) or start the server with --allow-pull",
        param=param,
        code="model_not_found",
    )


def _split_alias(given: str) -> tuple[str, str]:
    """``NAME=PATH`` -> (NAME, PATH); anything else is its own name."""
    name, sep, spec = given.partition("=")
    if sep and name and spec and "/" not in name and "\\" not in name:
        return name, spec
    return given, given


def _as_requested(loaded, name: str):
    """``loaded`` with the name clients know it by in its identity (hence in every provenance)."""
    return dataclasses.replace(loaded, identity=dataclasses.replace(loaded.identity, requested=name))


def _model_object(name: str, tasks, loaded: bool, owner: str) -> dict[str, Any]:
    """OpenAI's model object (``created`` is unknown: 0), with oasr's ``tasks`` and ``loaded``."""
    return {"id": name, "object": "model", "created": 0, "owned_by": owner, "tasks": list(tasks), "loaded": loaded}
