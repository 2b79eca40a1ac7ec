"""Printing policy: data to stdout, logs to stderr, colour only on a terminal without NO_COLOR."""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any


def use_color(stream=sys.stderr) -> bool:
    return stream.isatty() and "NO_COLOR" not in os.environ


def setup_logging(quiet: bool = False, verbose: bool = False) -> None:
    """Route the library's ``oasr`` logger to stderr as ``oasr: warning: ...`` lines."""
    logger = logging.getLogger("oasr")
    for handler in list(logger.handlers):
        if getattr(handler, "_oasr_cli", False):
            logger.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler._oasr_cli = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("oasr: %(levelname)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.ERROR if quiet else logging.INFO if verbose else logging.WARNING)
    logger.propagate = False
    logging.addLevelName(logging.WARNING, "warning")
    logging.addLevelName(logging.INFO, "info")
    logging.addLevelName(logging.ERROR, "error")


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def human_size(n: float, unit: str = "B") -> str:
    for prefix in ("", "K", "M", "G", "T"):
        if abs(n) < 1000 or prefix == "T":
            return f"{n:.1f} {prefix}{unit}" if prefix else f"{int(n)} {unit}"
        n /= 1000
    return f"{n} {unit}"
