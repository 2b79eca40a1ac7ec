"""``oasr.batch``: a whole corpus through one task, resumable, on worker processes or Ray.

The run, in order: read the manifest; work out each input's outputs (the single-file command's
``--output-dir`` layout under OUTDIR) and its key (the models' sha256, the task, its options and
formats); skip the inputs the journal shows up to date (unless ``force``); hand the rest to the
engine; record each finished input in OUTDIR/batch.jsonl as it comes. A failing input is recorded
with its one-line error and the run goes on (``max_failures`` stops it early). An error about the
models stops the run; so does Ctrl-C, after the journal has what was done, and SIGTERM, which the
run takes as Ctrl-C (a service manager's stop: the workers are stopped, the journal written).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from ..errors import InputError
from .journal import Journal
from .lock import outdir_lock
from .manifest import Item, read_manifest
from .tasks import CorpusTask, Work, corpus_task, item_options
from .worker import one_line, split_threads

log = logging.getLogger("oasr")

ENGINES = ("local", "ray")
ENV_PREFIXES = ("OASR_", "HF_")  # the caller's settings every worker gets (a Ray node has its own environment)


@dataclass(frozen=True)
class BatchProgress:
    """Where a batch stands, after each finished input."""

    total: int
    done: int
    failed: int
    skipped: int
    elapsed: float  # seconds since the run started
    record: dict[str, Any] | None = None  # the input that just finished

    @property
    def finished(self) -> int:
        return self.done + self.failed + self.skipped


@dataclass
class BatchSummary:
    task: str
    outdir: str
    journal: str
    engine: str
    total: int = 0
    done: int = 0
    failed: int = 0
    skipped: int = 0
    not_started: int = 0  # left when --max-failures stopped the run
    seconds: float = 0.0
    audio_seconds: float = 0.0  # of the inputs done in this run
    failures: list[dict[str, str]] = field(default_factory=list)  # {"input", "error"}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def batch(
    task: str,
    manifest: str | Path,
    outdir: str | Path,
    *,
    model: str | None = None,
    segmentation_model: str | None = None,
    embedding_model: str | None = None,
    options: Any = None,
    formats: tuple[str, ...] | list[str] | None = None,
    writer_options: Any = None,
    device: str = "auto",
    dtype: str = "auto",
    glob: str | None = None,
    engine: str = "local",
    workers: int | None = None,
    threads: int | None = None,
    ray_address: str | None = None,
    num_gpus: float = 0,
    per_call: int | None = None,
    force: bool = False,
    max_failures: int | None = None,
    progress: Callable[[BatchProgress], None] | None = None,
    models: tuple[tuple[str, str], ...] | None = None,
) -> BatchSummary:
    """Run ``task`` (transcribe, diarize, pitch, convert, quantize) on every input ``manifest``
    names, writing the outputs and ``batch.jsonl`` under ``outdir``.

    ``manifest``: a folder (its files matching ``glob``, default ``*``; ``**/*.wav`` recurses; for
    convert/quantize its sub-folders), a text file of paths, or JSONL/CSV with a ``path`` column
    and per-row ``language`` / ``num_speakers``. ``model`` (transcribe, pitch) or
    ``segmentation_model`` / ``embedding_model`` (diarize): as ``-m`` takes, None the default; ``models``: the (name, task)
    pairs themselves. ``options``: the task's options (``TranscribeOptions``...); ``formats``:
    output formats (default: the command's); ``writer_options``: transcribe's subtitle layout.
    ``engine``: "local" (``workers`` processes, default 1, sharing this machine's cores, or
    ``threads`` torch threads each) or "ray" (``workers`` actors, default one per ``threads``
    CPUs of the cluster, ``num_gpus`` each, ``per_call`` inputs per call; ``ray_address``:
    "auto", a cluster address, or None for a local Ray unless one is initialised). ``force``:
    redo up-to-date inputs. ``max_failures``: stop after that many failed inputs.
    ``progress(BatchProgress)`` hears each finished input.
    """
    spec = corpus_task(task)
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}; choose {' or '.join(ENGINES)}")
    _check_counts(workers, threads, max_failures, per_call)
    if engine == "ray":
        from .ray_engine import require_ray

        require_ray()  # before any work: a missing extra is one line
    out = Path(outdir).expanduser()
    if out.exists() and not out.is_dir():
        raise InputError(f"{out} exists and is not a folder; OUTDIR is where the outputs go")
    items = read_manifest(manifest, glob=glob, folders=spec.folders)
    work = Work(
        task=spec.name,
        outdir=str(out),
        models=tuple(models) if models is not None else spec.models({"model": model, "segmentation_model": segmentation_model, "embedding_model": embedding_model}),
        options=options if options is not None else spec.options(),
        formats=tuple(formats or spec.default_formats),
        writer=writer_options,
        device=device,
        dtype=dtype,
        force=force,
        env={k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)},
    )
    _check_outputs(spec, work, items)
    with outdir_lock(out):
        return _Run(spec, work, items, progress, max_failures).go(engine, force, workers, threads, ray_address, num_gpus, per_call)


def _check_counts(workers, threads, max_failures, per_call) -> None:
    for name, value in (("workers", workers), ("threads", threads), ("max_failures", max_failures), ("per_call", per_call)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise InputError(f"{name} must be a whole number of at least 1, not {value!r}")


def _check_outputs(spec: CorpusTask, work: Work, items: list[Item]) -> None:
    """Two inputs may not write one output (talk.wav and talk.mp3 both give talk.txt)."""
    seen: dict[Path, str] = {}
    for item in items:
        for path in spec.outputs(work, item):
            if path in seen:
                raise InputError(f"{seen[path]} and {item.path} would both write {path}; give them separate manifests")
            seen[path] = item.path


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """SIGTERM raises KeyboardInterrupt while the run lasts, so it unwinds as Ctrl-C does: the
    workers stopped, the journal compacted. Only in the main thread, and only over the default
    action (a caller's own handler is left alone)."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def interrupt(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the unwinding is not interrupted again
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _options_dict(options: Any) -> dict[str, Any]:
    return dataclasses.asdict(options) if dataclasses.is_dataclass(options) else dict(options or {})


class _Run:
    def __init__(self, spec: CorpusTask, work: Work, items: list[Item], progress, max_failures):
        self.spec, self.work, self.items = spec, work, items
        self.progress, self.max_failures = progress, max_failures
        self.journal = Journal(Path(work.outdir))
        self.summary = BatchSummary(spec.name, work.outdir, str(self.journal.path), "", total=len(items))
        self.started = time.perf_counter()
        self.options: dict[str, dict] = {}  # input name -> its options, as recorded

    def go(self, engine, force, workers, threads, ray_address, num_gpus, per_call) -> BatchSummary:
        self.summary.engine = engine
        try:
            with _sigterm_as_interrupt():
                jobs = self._plan(force)
                if jobs:
                    log.info("%s: %d input(s) to do, %d up to date", self.spec.name, len(jobs), self.summary.skipped)
                    self._engine(engine, jobs, workers, threads, ray_address, num_gpus, per_call)
            finished = self.summary.done + self.summary.failed + self.summary.skipped
            self.summary.not_started = self.summary.total - finished
        finally:
            self.journal.compact(item.name for item in self.items)
            self.summary.seconds = round(time.perf_counter() - self.started, 3)
        return self.summary

    def _plan(self, force: bool) -> list[tuple[Item, str]]:
        """Each input's key; the up-to-date ones recorded as skipped, the rest returned as jobs."""
        shas = self._model_shas()
        jobs = []
        for item in self.items:
            try:
                options = item_options(self.spec, self.work, item)
            except Exception as e:  # a bad per-row option: this input fails, the rest go on
                self.options[item.name] = dict(item.options)
                if not self._record({"input": item.path, "name": item.name, "key": "", "status": "failed", "error": one_line(e, item.path)}):
                    return []
                continue
            self.options[item.name] = _options_dict(options)
            key = self._key(shas, options)
            earlier = None if force or self.spec.skips_itself else self.journal.up_to_date(item.name, key)
            if earlier is not None:
                self._record({**earlier, "input": item.path, "status": "skipped"})
            else:
                jobs.append((item, key))
        return jobs

    def _model_shas(self) -> list[str]:
        """The sha256 of each model's weights, resolving (not loading) them."""
        if not self.work.models:
            return []
        from ..hub.cache import bundle_sha256
        from ..loading import resolve_bundle

        return [bundle_sha256(resolve_bundle(name, task=task)) for name, task in self.work.models]

    def _key(self, shas: list[str], options: Any) -> str:
        blob = {
            "task": self.work.task,
            "models": shas,
            "options": _options_dict(options),
            "formats": list(self.work.formats),
            "writer": _options_dict(self.work.writer),
            "device": self.work.device,
            "dtype": self.work.dtype,
        }
        return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()

    def _engine(self, engine, jobs, workers, threads, ray_address, num_gpus, per_call) -> None:
        if engine == "local":
            from .local import run_local

            count = workers or 1
            run_local(self.work, jobs, self._record, workers=count, threads=threads or split_threads(min(count, len(jobs))))
        else:
            from .ray_engine import run_ray

            run_ray(self.work, jobs, self._record, workers=workers, threads=threads, address=ray_address, num_gpus=num_gpus, per_call=per_call)

    def _record(self, record: dict[str, Any]) -> bool:
        """Count and journal one finished input; False when the run should stop (max failures)."""
        record = {**record, "options": self.options.get(record["name"], {}), "finished": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        self.journal.append(record)
        status = record["status"]
        if status == "failed":
            self.summary.failed += 1
            self.summary.failures.append({"input": record["input"], "error": record.get("error", "")})
            log.info("failed: %s", record.get("error"))
        elif status == "skipped":
            self.summary.skipped += 1
        else:
            self.summary.done += 1
            self.summary.audio_seconds = round(self.summary.audio_seconds + (record.get("duration") or 0.0), 3)
        if self.progress is not None:
            s = self.summary
            self.progress(BatchProgress(s.total, s.done, s.failed, s.skipped, time.perf_counter() - self.started, record))
        return self.max_failures is None or self.summary.failed < self.max_failures
