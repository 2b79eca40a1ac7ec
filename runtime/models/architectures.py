"""Architectures by name, from the ``oasr.models`` entry points.

Each entry point names an ``OasrModel`` subclass; the class carries its config dataclass
(``config_class``) and what it can do (``capabilities``). Built-ins are declared in pyproject
exactly as another package declares its own, so a bundle of a plugin architecture loads with
nothing but that package installed. Classes are imported on first use, so ``import oasr`` stays
light.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

from ..errors import DetectionError
from .base import BaseModelConfig, OasrModel

log = logging.getLogger("oasr")

ENTRY_POINT_GROUP = "oasr.models"


@dataclass(frozen=True)
class Architecture:
    name: str
    model_cls: type[OasrModel]
    config_cls: type[BaseModelConfig]

    @property
    def capabilities(self) -> frozenset[str]:
        return self.model_cls.capabilities


@functools.cache
def _entry_points() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


@functools.cache
def model_entry(architecture: str) -> Architecture:
    ep = _entry_points().get(architecture)
    if ep is None:
        raise DetectionError(
            f"unknown architecture {architecture!r} (no installed package declares it in the {ENTRY_POINT_GROUP} "
            f"entry points); known: {', '.join(architectures())}"
        )
    try:
        cls = ep.load()
    except Exception as e:
        raise DetectionError(f"the {architecture} architecture ({ep.value}) failed to import: {e}") from e
    if not (isinstance(cls, type) and issubclass(cls, OasrModel)):
        raise DetectionError(f"the {architecture} entry point ({ep.value}) is not an OasrModel subclass")
    return Architecture(architecture, cls, cls.config_class)


def architectures() -> list[str]:
    return sorted(_entry_points())
