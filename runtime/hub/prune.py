"""What the oasr cache holds, with its size on disk, and the removal of what is unused.

An entry is a converted bundle (``bundles/<name>/<key>/``, its record beside it) together with
its CPU variants (``<key>.int8``...), which go with it. An entry is *in use* when it is the
newest entry of a model that is a registry default (what ``-m auto`` of some task resolves to) or
of a model the caller keeps (``keep``: names, as ``oasr models rm --all-unused --keep NAME``
takes them); every other entry is unused: models pulled and no longer named, older revisions
that a newer pull superseded, checkpoints converted from a path. Removal takes each model's lock,
as ``oasr models rm`` does, so a fetch running at the same time is not cut.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from . import cache as _cache


@dataclass(frozen=True)
class CachedEntry:
    record: _cache.CacheRecord
    bytes: int  # the bundle and its variants, as they lie on disk
    used: str  # why it is kept ("default of transcribe", "kept"), "" when unused

    def to_dict(self) -> dict:
        return {**self.record.to_dict(), "bytes_on_disk": self.bytes, "used": self.used, "unused": not self.used}


def disk_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (links are not followed)."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                pass
    return total


def cached_entries(keep: Iterable[str] = ()) -> list[CachedEntry]:
    """Every complete entry of the oasr cache, by name then newest first, with its size and use."""
    from .catalog import load_catalog

    root = _cache.cache_root()
    reasons: dict[str, str] = {e.name: f"default of {e.task}" for e in load_catalog().entries.values() if e.default}
    reasons.update({name: "kept" for name in keep})
    out, seen = [], set()
    for record in sorted(_cache.records(root), key=lambda r: r.name):  # stable: newest first within a name, as records() gives them
        size = disk_bytes(record.bundle) + sum(disk_bytes(v) for v in record.bundle.parent.glob(f"{record.bundle.name}.*") if v.is_dir())
        used = reasons.get(record.name, "") if record.name not in seen else ""
        seen.add(record.name)
        out.append(CachedEntry(record, size, used))
    return out


def remove_unused(keep: Iterable[str] = (), *, dry_run: bool = False) -> list[CachedEntry]:
    """Remove every unused entry (see the module docstring); the entries removed (or, with
    ``dry_run``, those that would be)."""
    root = _cache.cache_root()
    unused = [e for e in cached_entries(keep) if not e.used]
    if dry_run:
        return unused
    for entry in unused:
        with _cache.entry_lock(root, entry.record.name):
            _cache.remove_entry(root, entry.record.name, entry.record.key)
    return unused
