"""Path -> what loads it: a native bundle, an explicitly named converter, or ranked detection."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

from .base import CheckpointConverter
from ..errors import DetectionError, InputError, MissingExtraError
from ..extras import importable, install_hint


log = logging.getLogger("oasr")

ENTRY_POINT_GROUP = "oasr.converters"


@functools.cache
def converters() -> dict[str, type[CheckpointConverter]]:
    """Every installed converter, by name, from the ``oasr.converters`` entry points."""
    found: dict[str, type[CheckpointConverter]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            cls = ep.load()
        except Exception as e:  # a broken third-party plugin must not break the others
            log.warning("converter plugin %s failed to load: %s", ep.name, e)
            continue
        if not (isinstance(cls, type) and issubclass(cls, CheckpointConverter)):
            log.warning("converter plugin %s is not a CheckpointConverter; ignored", ep.name)
            continue
        found[cls.name] = cls
    return found


@dataclass(frozen=True)
class Claim:
    converter: type[CheckpointConverter]
    specificity: int
    reason: str

    def to_dict(self) -> dict:
        return {
            "converter": self.converter.name,
            "architecture": self.converter.architecture,
            "specificity": self.specificity,
            "reason": self.reason,
        }


def check_source(path: Path) -> Path:
    path = Path(path).expanduser()
    if not path.exists():
        raise InputError(f"no such file or directory: {path}")
    if path.is_dir() and not any(path.iterdir()):
        raise InputError(f"{path} is an empty directory")
    return path


def missing_extra(cls: type[CheckpointConverter]) -> MissingExtraError | None:
    """The error naming the extra to install when a package ``cls`` reads with is absent."""
    for module, extra in cls.requires.items():
        if not importable(module):
            return MissingExtraError(install_hint(module, extra, f"the {cls.name} converter"))
    return None


def detect(path: Path, candidates: list[type[CheckpointConverter]] | None = None) -> list[Claim]:
    """Every claim on ``path``, most specific first.

    A converter's ``detect`` raises MissingExtraError for a path it would read but cannot without
    an optional package; unless a converter at least as specific claims the path, that one line
    (the extra to install) is the answer, not "no converter recognises".
    """
    claims, missing = [], []
    for cls in candidates if candidates is not None else converters().values():
        try:
            reason = cls.detect(path)
        except MissingExtraError as e:
            missing.append((cls.detect_specificity, e))
            continue
        if reason:
            claims.append(Claim(cls, cls.detect_specificity, reason))
    claims.sort(key=lambda c: (-c.specificity, c.converter.name))
    if missing:
        specificity, error = max(missing, key=lambda m: m[0])
        if not claims or specificity >= claims[0].specificity:
            raise error
    return claims


def pick_converter(path: Path, architecture: str | None = None) -> tuple[type[CheckpointConverter], list[Claim]]:
    """The converter for a foreign source, and the claims that led to it.

    ``architecture`` names a converter ("ctranslate2") or an architecture ("whisper"); a
    converter name is used without sniffing, an architecture narrows detection to its converters.
    """
    path = check_source(path)
    known = converters()
    candidates = None
    if architecture is not None:
        if architecture in known:
            return known[architecture], []
        candidates = [c for c in known.values() if c.architecture == architecture]
        if not candidates:
            from ..models.architectures import architectures  # imports torch: only for this message

            raise DetectionError(
                f"--architecture {architecture!r} is neither a converter ({', '.join(sorted(known))}) "
                f"nor an architecture ({', '.join(architectures())})"
            )
        if len(candidates) == 1:
            return candidates[0], []
    claims = detect(path, candidates)
    if not claims:
        looked = "; ".join(f"{c.name}: {c.markers}" for c in (candidates or known.values()))
        raise DetectionError(f"no converter recognises {path}; looked for {looked}")
    top = [c for c in claims if c.specificity == claims[0].specificity]
    if len(top) > 1:
        listed = ", ".join(f"{c.converter.name} ({c.reason})" for c in top)
        raise DetectionError(f"{path} is claimed equally by {listed}; pass --architecture with one of them")
    return top[0].converter, claims
