"""Entry-point groups: how the runtime finds what installed packages add.

``oasr.models`` (architecture -> OasrModel subclass), ``oasr.converters`` (converter classes),
``oasr.features`` (feature kind -> ``fn(audio, spec, **kw)``), ``oasr.tokenizers`` (tokenizer
kind -> ``fn(files, spec)``), ``oasr.decoding`` (decoding family -> its ``DecodingFamily``: options section, engine, verify rule),
``oasr.sources`` (hub source kind -> ``hub.kinds.SourceKind``) and ``oasr.formats.<result>``
(output format of a result type -> ``formats.Format``). The built-ins are declared in pyproject
the same way, so nothing in the runtime lists them; each object is imported when first used.
"""

from __future__ import annotations

import functools
from importlib.metadata import EntryPoint, EntryPoints, entry_points

from .errors import CapabilityError


@functools.cache
def _all() -> EntryPoints:
    """Every installed package's entry points, read once: each read walks every package's
    metadata (3-4 ms), and a command asks for about ten groups."""
    return entry_points()


@functools.cache
def declared(group: str) -> dict[str, EntryPoint]:
    """Name -> entry point of every installed package's ``group`` (imports nothing)."""
    return {ep.name: ep for ep in _all().select(group=group)}


@functools.cache
def load(group: str, name: str, what: str):
    """The object ``name`` of ``group``; ``what`` names the kind of thing in the error."""
    ep = declared(group).get(name)
    if ep is None:
        known = ", ".join(sorted(declared(group))) or "none"
        raise CapabilityError(f"unknown {what} {name!r} (no installed package declares it); known: {known}")
    try:
        return ep.load()
    except Exception as e:
        raise CapabilityError(f"the {what} {name!r} ({ep.value}) failed to import: {e}") from e


def clear() -> None:
    """Forget what was found (after installing a package, or in tests that add one)."""
    _all.cache_clear()
    declared.cache_clear()
    load.cache_clear()
