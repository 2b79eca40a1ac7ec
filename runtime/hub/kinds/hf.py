"""The source kind ``hf``: a Hugging Face repository at a revision (a pinned commit, or a branch).

The chain tries the Hugging Face cache first (converted where it lies, no second copy), then a
download with huggingface_hub into that cache, unless offline or the hub is unreachable. The
mechanisms are ``hub/hf.py``'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from .. import cache as _cache
from ..fields import Fields, kind_of
from ..sources import Attempt, ChainSource, Run, Skip, Target, convert_into_cache, licence_fields
from ...errors import OasrError, SourceUnavailable
from . import SourceKind

_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*\Z")
_COMMIT = re.compile(r"[0-9a-f]{40}\Z")


@dataclass(frozen=True)
class HFSource:
    repo: str  # "openai/whisper-base"
    revision: str  # a 40-hex commit (pinned) or a branch/tag name
    allow_patterns: tuple[str, ...]

    kind = "hf"

    @property
    def pinned(self) -> bool:
        return bool(_COMMIT.match(self.revision))

    def describe(self) -> str:
        rev = self.revision[:12] if self.pinned else f"{self.revision} (unpinned)"
        return f"hf:{self.repo}@{rev}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "hf", "repo": self.repo, "revision": self.revision, "allow_patterns": list(self.allow_patterns)}


def parse(raw: Any, label: str) -> HFSource:
    f = Fields(raw, label)
    repo = f.string("repo", _REPO, what="a Hugging Face repository id (org/name)")
    revision = f.string("revision", re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*\Z"), what="a commit or branch name")
    if re.fullmatch(r"[0-9a-fA-F]{40}", revision) and not _COMMIT.match(revision):
        raise f.fail("revision", "write the commit in lowercase hex")
    patterns = f.list("allow_patterns")
    for j, p in enumerate(patterns):
        if not isinstance(p, str) or not p.strip():
            raise f.fail(f"allow_patterns[{j}]", f"expected a glob pattern, got {kind_of(p)}")
    f.done()
    return HFSource(repo=repo, revision=revision, allow_patterns=tuple(patterns))


def hf_key(commit: str, asked_architecture: str | None = None) -> str:
    key = f"hf-{commit[:12]}"
    return f"{key}-as-{re.sub(r'[^A-Za-z0-9_.-]', '_', asked_architecture)}" if asked_architecture else key


def cached(root: Path, target: Target, source: HFSource) -> _cache.CacheRecord | None:
    asked = target.asked_architecture
    if source.pinned:
        return _cache.lookup(root, target.name, hf_key(source.revision, asked))
    return next(  # a branch: whichever commit of it was fetched (offline first; `oasr models rm` refreshes)
        (
            r for r in _cache.records(root, target.name)
            if r.source == "hf" and r.repo == source.repo and r.ref == source.revision
            and r.asked_architecture == (asked or "")
        ),
        None,
    )


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
        **licence_fields(run),
    )
    with _cache.staging(run.root) as stage:
        return convert_into_cache(run, snapshot, stage, record).bundle


class HFCache(ChainSource):
    """The Hugging Face cache, through huggingface_hub's own lookup; converted where it lies."""

    step = "hf cache"

    def __init__(self, source: HFSource):
        self.source = source
        self.where = source.describe()

    def _snapshot(self) -> Path:
        from .. import hf as _hf

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
        from .. import hf as _hf

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
        from .. import hf as _hf

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


def chain(sources: Sequence[HFSource]) -> list[ChainSource]:
    """Every repository's cached snapshot before any download."""
    return [*map(HFCache, sources), *map(HFDownload, sources)]


KIND = SourceKind(name="hf", parse=parse, chain=chain, cached=cached, rank=10)
