"""Architectures by name, from the ``oasr.models`` entry points.

Each entry point names an ``OasrModel`` subclass; the class carries its config dataclass
(``config_class``) and what it can do (``capabilities``). Built-ins are declared in pyproject
exactly as another package declares its own, so a bundle of a plugin architecture loads with
nothing but that package installed. Classes are imported on first use, so ``import oasr`` stays
light.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from .. import plugins
from ..errors import CapabilityError, DetectionError
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


def find_architecture(architecture: str) -> Architecture:
    """The installed architecture of that name: its model class and config dataclass."""
    try:
        cls = plugins.load(ENTRY_POINT_GROUP, architecture, "architecture")
    except CapabilityError as e:
        raise DetectionError(str(e)) from e
    if not (isinstance(cls, type) and issubclass(cls, OasrModel)):
        raise DetectionError(f"the {architecture} architecture ({cls!r}) is not an OasrModel subclass")
    return Architecture(architecture, cls, cls.config_class)


def architectures() -> list[str]:
    return sorted(plugins.declared(ENTRY_POINT_GROUP))


def serving(capability: str) -> list[str]:
    """Display names of the installed architectures that declare ``capability``."""
    names = []
    for name in architectures():
        try:
            cls = find_architecture(name).model_cls
        except DetectionError:
            continue
        if capability in cls.capabilities:
            names.append(cls.display_name or name)
    return names
