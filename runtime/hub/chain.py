"""The chain of a named model or a Hugging Face repository: the oasr cache first, then the steps
of each kind of source the target lists (``kinds/``), in the kinds' rank order.

It stands above the kinds and the chain's primitives (``sources.py``), so that neither of them
needs the other's composition; ``resolve.py`` asks it for the chain (a path has ``paths.py``).
"""

from __future__ import annotations

import logging
from pathlib import Path

from . import cache as _cache
from . import kinds
from .sources import Attempt, ChainSource, Hit, Run, Skip, Target

log = logging.getLogger("oasr")


class OasrCache(ChainSource):
    """The converted bundle already in the oasr cache: one small JSON read, nothing hashed, no torch."""

    step = "oasr cache"

    def __init__(self, target: Target):
        self.target = target

    def record(self, run: Run) -> _cache.CacheRecord | None:
        """The cached bundle of the first catalog source that has one, in the order of preference."""
        for source in self.target.sources:
            record = kinds.get(source.kind).cached(run.root, self.target, source)
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


def model_sources(target: Target) -> list[ChainSource]:
    """The chain of a registry entry or a repository: the oasr cache, then each kind's own steps
    (in the kinds' rank order: the Hugging Face cache and hub, the PyPI mirror, URLs, plugins')."""
    chain: list[ChainSource] = [OasrCache(target)]
    for kind in sorted({kinds.get(s.kind) for s in target.sources}, key=lambda k: (k.rank, k.name)):
        chain += kind.chain([s for s in target.sources if s.kind == kind.name])
    return chain


__all__ = ["OasrCache", "model_sources"]
