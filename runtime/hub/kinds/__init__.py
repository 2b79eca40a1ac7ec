"""Source kinds: where a registry entry's weights can come from, one module per kind.

A kind is the ``KIND`` of its module (a ``SourceKind``), registered by one line of the
entry-point group ``oasr.sources``; the built-ins (hf, pypi, url) are declared in pyproject
exactly as a plugin declares its own. Its name is at once the catalog key (``sources: [{hf:
...}]``), the ``--source`` choice and the ``source`` of the cache records it makes. It brings:

- ``parse(body, label)``: a catalog entry's ``{name: body}`` read strictly into its source (a
  frozen dataclass with ``kind``, ``describe()`` and ``to_dict()``), a CatalogError otherwise;
- ``chain(sources)``: the resolution steps (``sources.ChainSource``) that fetch those sources,
  in order of preference; the oasr cache always comes first, then each kind by ``rank``;
- ``cached(root, target, source)``: the cache record of a bundle already made from ``source``;
- ``revision(record)``: what a bundle's provenance names as its revision when the record
  has none (a commit for hf; the packages for pypi; the cache key otherwise).

Listing the names imports nothing (``oasr --help`` offers them); loading a kind imports its
module, which imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ... import plugins
from ...errors import CapabilityError

if TYPE_CHECKING:
    from ..cache import CacheRecord
    from ..sources import ChainSource, Target

GROUP = "oasr.sources"
DEFAULT_RANK = 100  # a plugin's kind comes after the built-ins unless it says otherwise


def _key_revision(record: dict[str, Any]) -> str:
    return record.get("key", "")


@dataclass(frozen=True)
class SourceKind:
    name: str
    parse: Callable[[Any, str], Any]  # (catalog body, label for messages) -> source
    chain: Callable[[Sequence[Any]], list["ChainSource"]]  # this kind's sources of a target -> their steps
    cached: Callable[[Path, "Target", Any], "CacheRecord | None"]  # (cache root, target, source) -> record
    revision: Callable[[dict[str, Any]], str] = _key_revision  # a cache record (as a dict) -> its revision
    rank: int = DEFAULT_RANK  # place in the resolution chain among kinds: lower is tried first


def names() -> list[str]:
    """The installed kinds' names, imported nothing: the choices of ``--source``."""
    return sorted(plugins.declared(GROUP))


def get(name: str) -> SourceKind:
    """The kind ``name``; a CapabilityError naming the installed kinds when there is none."""
    if not names():  # even the built-ins are missing: the package's metadata is stale
        raise CapabilityError("no hub source kinds are installed: reinstall oasr-toolchain (its entry points are missing)")
    kind = plugins.load(GROUP, name, "source kind")
    if not isinstance(kind, SourceKind):
        raise CapabilityError(f"the source kind {name!r} is not an oasr.hub.kinds.SourceKind")
    return kind


def known(name: str | None) -> bool:
    return name is not None and name in plugins.declared(GROUP)


def provenance_revision(record: dict[str, Any]) -> str:
    """The revision a bundle's provenance names: the record's own, else what its kind derives
    from it (a path's conversion, or a kind no longer installed: its cache key)."""
    if record.get("revision"):
        return record["revision"]
    source = record.get("source")
    return get(source).revision(record) if known(source) else _key_revision(record)


__all__ = ["SourceKind", "GROUP", "names", "get", "known", "provenance_revision"]
