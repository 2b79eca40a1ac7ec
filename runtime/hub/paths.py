"""The resolution chain of a path: a native bundle is used where it lies; a foreign checkpoint is
converted once into the oasr cache (``bundles/local/sha-<sha12>``), keyed by the sha256 of its
source files and the architecture asked for, and found again by a stat fingerprint of the path
(names, sizes, modification times), so a second use hashes nothing.
"""

from __future__ import annotations

import logging
from pathlib import Path

from . import cache as _cache
from .sources import Attempt, ChainSource, Hit, Run, Skip, Target, convert_into_cache, digest

log = logging.getLogger("oasr")

LOCAL = "local"  # the cache name (folder and lock) of every converted path


def _reused(path: Path, bundle: Path) -> str:
    return f"{path}: using its cached conversion {bundle} (converted before; keyed by the sha256 of its files)"


def path_key(hashes: dict[str, str], architecture: str | None) -> str:
    keyed = dict(hashes) if architecture is None else {**hashes, "\0architecture": architecture}
    return f"sha-{digest(keyed)[:12]}"


class BundlePath(ChainSource):
    """A native bundle: used where it is."""

    step = "path"

    def __init__(self, path: Path):
        self.path = Path(path).resolve()
        self.where = str(self.path)

    def ready(self, run: Run) -> Hit | None:
        return Hit(self.path)

    def probe(self, run: Run) -> Attempt:
        return self.attempt("used", "a native bundle, used where it is")

    def fetch(self, run: Run) -> Path:
        return self.path


class PathCache(ChainSource):
    """The conversion of this path made before, found by its stat fingerprint: nothing hashed."""

    step = "oasr cache"

    def __init__(self, path: Path, architecture: str | None):
        self.path = Path(path).resolve()
        self.asked = architecture or ""

    def record(self, run: Run) -> _cache.CacheRecord | None:
        fp = _cache.fingerprint(self.path)
        for record in _cache.records(run.root, LOCAL):
            if record.paths.get(str(self.path)) == fp and record.asked_architecture == self.asked:
                return record
        return None

    def ready(self, run: Run) -> Hit | None:
        record = self.record(run)
        return None if record is None else Hit(record.bundle, _reused(self.path, record.bundle))

    def _miss(self, run: Run) -> Attempt:
        return Attempt(self.step, str(run.root), "miss", "not converted before")

    def probe(self, run: Run) -> Attempt:
        record = self.record(run)
        if record is None:
            return self._miss(run)
        return Attempt(self.step, str(record.bundle), "hit", f"converted before: {record.bundle}")

    def fetch(self, run: Run) -> Path:
        record = self.record(run)
        if record is None:
            raise Skip(self._miss(run))
        log.info("%s", _reused(self.path, record.bundle))
        return record.bundle

    def remove(self, run: Run) -> list[Path]:
        """Every cached conversion of this path (whatever architecture was asked)."""
        removed = []
        for record in _cache.records(run.root, LOCAL):
            if str(self.path) in record.paths:
                bundle = _cache.remove_entry(run.root, LOCAL, record.key)
                if bundle is not None:
                    removed.append(bundle)
        return removed


class PathConversion(ChainSource):
    """Convert the checkpoint into the cache, once per content: its source files are hashed first,
    and a conversion of the same bytes (another copy, or a touched file) is reused."""

    step = "path"
    errors_pass = False  # a path has no other source: its detection or conversion error is the answer

    def __init__(self, path: Path, architecture: str | None):
        self.path = Path(path).resolve()
        self.where = str(self.path)
        self.architecture = architecture

    def probe(self, run: Run) -> Attempt:
        from ..conversion.detect import pick_converter
        from ..errors import OasrError

        try:
            converter_cls, _ = pick_converter(self.path, self.architecture)
        except OasrError as e:
            return self.attempt("failed", str(e))
        return self.attempt("would try", f"convert with {converter_cls.name} into the oasr cache")

    def fetch(self, run: Run) -> Path:
        from ..conversion.detect import pick_converter
        from ..io.files import sha256_file

        converter_cls, _ = pick_converter(self.path, self.architecture)
        hashes = {f.name: sha256_file(f) for f in converter_cls(self.path).source_files()}
        key = path_key(hashes, self.architecture)
        record = _cache.lookup(run.root, LOCAL, key)
        if record is None:
            new = _cache.CacheRecord(name=LOCAL, key=key, source="path", origin=str(self.path), source_files=hashes)
            with _cache.staging(run.root) as stage:
                done = lambda bundle: f"converted {self.path} into the oasr cache: {bundle}"  # noqa: E731
                record = convert_into_cache(run, self.path, stage, new, done=done)
        else:
            log.info("%s", _reused(self.path, record.bundle))
        record.paths[str(self.path)] = _cache.fingerprint(self.path)
        _cache.write_record(record)
        return record.bundle


def path_sources(target: Target) -> list[ChainSource]:
    """The chain of a path: the bundle itself, or the cached conversion, then a conversion."""
    assert target.path is not None
    if target.kind == "bundle":
        return [BundlePath(target.path)]
    return [PathCache(target.path, target.asked_architecture), PathConversion(target.path, target.asked_architecture)]
