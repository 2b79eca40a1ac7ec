"""The local engine: worker processes on this machine, each loading the models once.

The parent hands each worker one input at a time over its own pipe, so it always knows what a
worker holds: a worker that dies (killed, out of memory) fails only that input, and a new worker
takes its place. Workers ignore SIGINT (Ctrl-C reaches the whole process group); the parent
stops them with SIGTERM, which unwinds a write in progress (its temporary is removed, the output
left as it was). A SIGTERM sent to the whole group (a service manager's stop) does the same in
each worker, and the parent takes it as Ctrl-C (``runner``); a worker whose parent is gone ends
quietly.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any, Callable

from ..errors import OasrError
from .manifest import Item
from .tasks import Work
from .worker import Worker

log = logging.getLogger("oasr")

MAX_REPLACEMENTS = 8  # workers started in place of dead ones before the batch gives up
STOP_SECONDS = 10.0  # a worker asked to stop gets this long before it is killed

Job = tuple[Item, str]  # an input and its journal key
OnRecord = Callable[[dict[str, Any]], bool]  # a finished input's record -> go on?


def _sigterm(signum, frame):
    # Once: a group stop (SIGTERM to every process) is followed by the parent's own SIGTERM, which
    # could land in the exit's finalizers and print their traceback.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise SystemExit(143)


def _serve(conn, work: Work, threads: int) -> None:
    """A worker process: load the models, then answer each (item, key) with its record."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _sigterm)
    try:
        worker = Worker(work, threads)
    except BaseException as e:  # the models would not load: the whole batch stops with this
        try:
            conn.send(("fatal", e))
        except Exception:
            conn.send(("fatal", OasrError(f"{type(e).__name__}: {e}")))
        return
    try:
        conn.send(("ready", None))
        while True:
            job = conn.recv()
            if job is None:
                return
            conn.send(("record", worker.process(*job)))
    except (EOFError, OSError):  # the parent is gone (its end of the pipe closed): nobody to answer
        return


@dataclass
class _Slot:
    process: Any
    conn: Any
    ready: bool = False  # its models are loaded
    job: Job | None = None  # the input it holds

    @property
    def busy(self) -> bool:
        return not self.ready or self.job is not None


def run_local(work: Work, jobs: list[Job], on_record: OnRecord, *, workers: int, threads: int) -> None:
    """Do ``jobs`` on ``workers`` processes; ``on_record`` hears each record and may stop the run."""
    context = multiprocessing.get_context("spawn")  # torch and fork do not mix
    pending = list(reversed(jobs))
    slots: list[_Slot] = []
    deaths = 0

    def start() -> _Slot:
        parent, child = context.Pipe()
        process = context.Process(target=_serve, args=(child, work, threads), name="oasr-batch-worker", daemon=True)
        process.start()
        child.close()
        return _Slot(process, parent)

    def feed(slot: _Slot) -> None:
        slot.job = pending.pop() if pending else None
        if slot.job is not None:
            try:
                slot.conn.send(slot.job)
            except OSError:  # the worker is gone: its sentinel says so next, and the input fails
                pass

    try:
        slots.extend(start() for _ in range(min(workers, len(jobs))))
        going = True
        while going and any(s.busy for s in slots):
            busy = [s for s in slots if s.busy]
            ready = wait([s.conn for s in busy] + [s.process.sentinel for s in busy])
            for slot in busy:
                kind, value = _message(slot, ready)
                if kind == "fatal":
                    raise value
                if kind == "ready":
                    slot.ready = True
                    feed(slot)
                elif kind == "record":
                    slot.job = None
                    going = on_record(value)
                    if going:
                        feed(slot)
                elif kind == "died":
                    deaths += 1
                    if deaths > MAX_REPLACEMENTS:
                        raise OasrError(f"{deaths} worker processes died; stopping the batch")
                    going = _replace(slot, slots, start, on_record)
                if not going:
                    break
    finally:
        _stop(slots)


def _message(slot: _Slot, ready: list) -> tuple[str | None, Any]:
    """What ``slot``'s worker said (kind, value), "died" when it is gone, (None, None) if nothing."""
    if slot.conn in ready and slot.conn.poll():
        try:
            return slot.conn.recv()
        except (EOFError, OSError):  # its end of the pipe closed as it died
            return "died", None
    if slot.process.sentinel in ready:
        return "died", None
    return None, None


def _replace(slot: _Slot, slots: list[_Slot], start, on_record: OnRecord) -> bool:
    """A worker died: the input it held failed; a new worker takes its place. Go on?"""
    slot.process.join()
    code = slot.process.exitcode
    slots.remove(slot)
    slot.conn.close()
    if not slot.ready:
        raise OasrError(f"a worker process died while loading the models (exit code {code})")
    if slot.job is None:
        slots.append(start())
        return True
    item, key = slot.job
    log.warning("the worker doing %s died (exit code %s); starting another", item.path, code)
    error = f"{item.path}: the worker process died (exit code {code})"
    going = on_record({"input": item.path, "name": item.name, "key": key, "status": "failed", "error": error})
    if going:
        slots.append(start())
    return going


def _stop(slots: list[_Slot]) -> None:
    """Idle workers are told to stop; busy ones are terminated (a write in progress unwinds)."""
    for slot in slots:
        try:
            if slot.busy:
                slot.process.terminate()
            else:
                slot.conn.send(None)
        except OSError:
            slot.process.terminate()
    for slot in slots:
        slot.process.join(STOP_SECONDS)
        if slot.process.is_alive():
            slot.process.kill()
            slot.process.join()
        slot.conn.close()
