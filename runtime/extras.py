"""Optional packages (the extras of pyproject.toml): whether one imports, and the one line naming
the extra that installs it, so every command says the same thing for a missing one."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from .errors import MissingExtraError


def install_hint(module: str, extra: str, what: str) -> str:
    return f"{what} needs the {module} package, which is not installed: pip install 'oasr-toolchain[{extra}]'"


def importable(module: str) -> bool:
    """Whether ``module`` can be found, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a finder refused it, or sys.modules holds None for it
        return False


def require(module: str, extra: str, what: str) -> ModuleType:
    """``module`` imported, or a MissingExtraError naming ``extra``."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(install_hint(module, extra, what)) from None
