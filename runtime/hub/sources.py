"""The resolution chain's primitives: what a source is, what it is asked about, and what it shares.

A source is one place a bundle can come from. ``resolve.py`` puts them in one list per target, in
order of preference, and walks it: ``probe()`` says what a source would do (``describe_resolution``:
nothing is loaded, converted or downloaded), ``fetch()`` produces the converted bundle in the oasr
cache (``resolve_model``, under the model's file lock), ``ready()`` hands over a bundle already at
hand without hashing, locking or fetching anything (the fast path and ``cached_bundle``), and
``remove()`` takes a source's bundles out of the oasr cache (``remove_model``; only oasr's own
cache is ever removed from).

The sources themselves stand above this module: each kind of catalog source brings its own steps
(``kinds/``: hf, pypi, url and whatever installed packages add), ``chain.py`` puts the oasr cache
before them for a named model or a repository, and a path has ``paths.py``. The mechanisms they
use stay in their own modules: ``cache.py`` (the oasr cache on disk), ``hf.py`` (huggingface_hub),
``pypi.py`` (pip, wheels, sha256). Importing this module imports nothing heavy: hf, pypi and the
converters are imported when a source needs them.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

from . import cache as _cache

log = logging.getLogger("oasr")

# progress(step, message): step is one of "wait", "download", "verify", "assemble", "convert", "done".
Progress = Callable[[str, str], None]


@dataclass(frozen=True)
class Attempt:
    step: str  # "oasr cache", "hf cache", "hf download", "pypi mirror", "path"
    source: str  # what the step looked at
    outcome: str  # "hit", "miss", "used", "failed", "skipped", "available", "absent", "unreachable", "would try"
    detail: str = ""

    def line(self) -> str:
        where = f" ({self.source})" if self.source else ""
        if self.outcome in ("failed", "miss") or not self.detail:
            return f"{self.step}{where}: {self.detail or self.outcome}"
        return f"{self.step}{where}: {self.outcome}, {self.detail}"

    def to_dict(self) -> dict[str, str]:
        return {"step": self.step, "source": self.source, "outcome": self.outcome, "detail": self.detail}


@dataclass(frozen=True)
class Target:
    """What a spec names, as ``resolve._classify`` read it: what the chain's sources need of it.

    A registry entry gives it its name, its architecture and its licence; the rest of the entry
    (the restriction, the description) is ``resolve.py``'s to check and show.
    """

    kind: str  # "bundle" (a native bundle path), "path" (a foreign checkpoint), "model" (a registry
    #            entry), "repo" (a bare Hugging Face repository), "cached" (a name only the oasr cache knows)
    name: str  # cache folder and lock name (a registry entry's own name)
    sources: tuple[Any, ...] = ()  # the catalog's sources of the weights (of any kind), in order of preference
    path: Path | None = None
    asked_architecture: str | None = None  # ``architecture=`` for a path or a bare repository
    registry_architecture: str | None = None  # a registry entry's architecture
    licence: str = ""  # a registry entry's licence, recorded with each bundle made from it

    @property
    def architecture(self) -> str | None:
        """What the converter is told: the registry entry's architecture, else what was asked."""
        return self.registry_architecture or self.asked_architecture

    @property
    def label(self) -> str:
        if self.path is not None:
            return str(self.path)
        if self.kind == "repo":
            return self.sources[0].repo
        return self.name


@dataclass
class Run:
    """One resolution: the target, the cache, what the caller allows; shared by the chain's sources."""

    root: Path
    target: Target
    offline: bool | None = None
    accept_license: bool = False
    progress: Progress | None = None
    check_hub: bool = True  # may probe whether the Hugging Face hub answers (a few seconds at most)

    def say(self, step: str, message: str) -> None:
        log.info("%s", message)
        if self.progress is not None:
            self.progress(step, message)

    def reporter(self, step: str) -> Callable[[str], None] | None:
        """``message -> progress(step, message)`` for what moves within a step (bytes), unlogged."""
        progress = self.progress
        if progress is None:
            return None
        return lambda message: progress(step, message)

    @cached_property
    def offline_state(self) -> tuple[bool, str]:
        from . import hf as _hf  # off the fast path: it imports socket, threading, urllib

        return _hf.offline_state(self.offline)

    @cached_property
    def hub_unreachable(self) -> str | None:
        """Why the hub cannot be reached (probed once per resolution), or None."""
        from . import hf as _hf

        return _hf.unreachable_reason()


@dataclass(frozen=True)
class Hit:
    """A bundle a source has at hand, and the line ``resolve_model`` logs when it uses it."""

    bundle: Path
    note: str = ""


class Skip(Exception):
    """A source that cannot provide the bundle; the attempt says why, and the next source tries."""

    def __init__(self, attempt: Attempt):
        super().__init__(attempt.line())
        self.attempt = attempt


class ChainSource:
    """One place a bundle can come from. Subclasses set ``step`` and ``where`` and override what applies."""

    step = ""
    where = ""
    errors_pass = True  # an OasrError from fetch() lets the next source try; False: it is the answer

    def ready(self, run: Run) -> Hit | None:
        """The bundle, when it is at hand: nothing fetched, converted, hashed or locked."""
        return None

    def probe(self, run: Run) -> Attempt:
        """What fetch() would do, loading and downloading nothing."""
        raise NotImplementedError

    def fetch(self, run: Run) -> Path:
        """The bundle, in the oasr cache; raises Skip or an OasrError when this source cannot give it."""
        raise NotImplementedError

    def remove(self, run: Run) -> list[Path]:
        """Remove this source's bundles from the oasr cache; the bundles removed."""
        return []

    def attempt(self, outcome: str, detail: str = "") -> Attempt:
        return Attempt(self.step, self.where, outcome, detail)


# ---------------------------------------------------------------------------------------------
# cache keys


def digest(hashes: dict[str, str]) -> str:
    return hashlib.sha256("".join(f"{k}\0{v}\n" for k, v in sorted(hashes.items())).encode()).hexdigest()


# ---------------------------------------------------------------------------------------------
# converting into the cache (every fetching source ends here)


def convert_into_cache(
    run: Run, src: Path, stage: Path, record: _cache.CacheRecord, done: Callable[[Path], str] | None = None
) -> _cache.CacheRecord:
    """Convert ``src`` into ``stage/bundle`` (provenance.source = the record's origin, written by
    the bundle writer), take the weights' sha256, and commit it to the cache. The caller holds the lock."""
    from ..conversion.run import convert
    from ..io.bundle import read_config, weights_sha256

    run.say("convert", f"converting {record.origin} into a native bundle")
    out = stage / "bundle"
    [result] = convert([src], out, architecture=run.target.architecture, source_label=record.origin)
    record.architecture, record.converter = result.architecture, result.converter
    record.asked_architecture = run.target.asked_architecture or ""
    if not record.source_files:
        record.source_files = dict(read_config(out).provenance.source_files)
    record.weights_sha256 = weights_sha256(out)
    committed = _cache.commit(run.root, record, out)
    run.say("done", done(committed.bundle) if done is not None else f"{run.target.label}: {committed.bundle}")
    return committed


def licence_fields(run: Run) -> dict:
    """The licence fields of the cache record a fetching source makes."""
    return {"licence": run.target.licence, "licence_accepted": run.accept_license}


__all__ = [
    "Attempt", "Target", "Run", "Hit", "Skip", "ChainSource", "convert_into_cache",
    "licence_fields", "digest",
]
