"""Strict reading of a registry document: each field read once, its type and pattern checked, and
nothing left over; every problem a CatalogError naming the file, the entry and the field. The
catalog and every source kind's parser read through it."""

from __future__ import annotations

import re
from typing import Any, Mapping

from ..errors import OasrError

SHA256 = re.compile(r"[0-9a-f]{64}\Z")


class CatalogError(OasrError):
    """The model registry file is malformed; the message names the file, the entry and the field."""


class Fields:
    """Reads the fields of one mapping, each once, and refuses what is left over."""

    def __init__(self, data: Any, label: str):
        if not isinstance(data, Mapping):
            raise CatalogError(f"{label}: expected a mapping, got {kind_of(data)}")
        self.data, self.label, self.used = data, label, set()

    def _get(self, key: str, default: Any = ...):
        self.used.add(key)
        if key not in self.data:
            if default is ...:
                raise CatalogError(f"{self.label}: missing field {key!r}")
            return default
        return self.data[key]

    def fail(self, key: str, message: str) -> CatalogError:
        return CatalogError(f"{self.label}: {key}: {message}")

    def string(self, key: str, pattern: re.Pattern | None = None, default: Any = ..., what: str = "") -> str:
        value = self._get(key, default)
        if value is default and default is not ...:
            return value
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, f"expected a non-empty string, got {kind_of(value)}")
        if pattern is not None and not pattern.match(value):
            raise self.fail(key, f"{value!r} is not {what or 'valid'}")
        return value

    def choice(self, key: str, choices: tuple[str, ...], default: Any = ...) -> str:
        value = self._get(key, default)
        if value not in choices:
            raise self.fail(key, f"{value!r} is not one of {', '.join(choices)}")
        return value

    def integer(self, key: str, default: Any = ..., minimum: int = 0) -> int:
        value = self._get(key, default)
        if value is default and default is not ...:
            return value
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(key, f"expected an integer, got {kind_of(value)}")
        if value < minimum:
            raise self.fail(key, f"must be at least {minimum}, got {value}")
        return value

    def boolean(self, key: str, default: Any = ...) -> bool:
        value = self._get(key, default)
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, got {kind_of(value)}")
        return value

    def list(self, key: str, default: Any = ..., allow_empty: bool = False) -> list:
        value = self._get(key, default)
        if value is default and default is not ...:
            return value
        if not isinstance(value, list):
            raise self.fail(key, f"expected a list, got {kind_of(value)}")
        if not value and not allow_empty:
            raise self.fail(key, "must not be empty")
        return value

    def sha256(self, key: str, default: Any = ...) -> str:
        value = self._get(key, default)
        if value is default and default is not ...:
            return value
        if not isinstance(value, str) or not SHA256.match(value):
            raise self.fail(key, f"expected 64 lowercase hex digits, got {value!r}")
        return value

    def done(self) -> None:
        unknown = sorted(str(k) for k in self.data if k not in self.used)
        if unknown:
            raise CatalogError(f"{self.label}: unknown field(s) {', '.join(unknown)}")


def kind_of(value: Any) -> str:
    """What a wrong value is, for a message: ``int 3``, ``nothing``, ``list``."""
    if value is None:
        return "nothing"
    return f"{type(value).__name__} {value!r}" if isinstance(value, (bool, int, float, str)) else type(value).__name__
