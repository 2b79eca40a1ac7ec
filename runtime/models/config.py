"""The base of every architecture's config dataclass, apart from the models so that a conversion
that needs no torch (``oasr.conversion``) can build configs without importing it."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from ..errors import BundleError


@dataclasses.dataclass(frozen=True)
class BaseModelConfig:
    """Shape and topology of a model; plain JSON in ``oasr_config.json``."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]):
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise BundleError(f"model config has unknown field(s) for {cls.__name__}: {', '.join(unknown)}")
        try:
            return cls(**data)
        except TypeError as e:
            raise BundleError(f"model config for {cls.__name__} is incomplete: {e}") from e
