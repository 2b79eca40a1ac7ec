"""Printing policy: data to stdout, logs to stderr; bars and spinners on a terminal (in colour unless
NO_COLOR is set: it is about colour only), a periodic one-line status off one."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from typing import Any, Callable, Iterator

HubProgress = Callable[[str, str], None]  # the hub's progress(step, message)


def on_terminal(stream=None) -> bool:
    return (stream or sys.stderr).isatty()


def interactive(quiet: bool) -> bool:
    """Progress bars and spinners on stderr: a terminal and not --quiet. NO_COLOR does not matter
    here: rich reads it and draws the bars without colour."""
    return not quiet and on_terminal(sys.stderr)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record is emitted, so a library log line after
    an in-process run (tests, an embedding program) never goes to a stream that was closed."""

    def __init__(self):
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


def setup_logging(quiet: bool = False, verbose: bool = False) -> None:
    """Route the library's ``oasr`` logger to stderr as ``oasr: warning: ...`` lines."""
    logger = logging.getLogger("oasr")
    for handler in list(logger.handlers):
        if getattr(handler, "_oasr_cli", False):
            logger.removeHandler(handler)
    handler = _StderrHandler()
    handler._oasr_cli = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("oasr: %(levelname)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.ERROR if quiet else logging.INFO if verbose else logging.WARNING)
    logger.propagate = False
    logging.addLevelName(logging.WARNING, "warning")
    logging.addLevelName(logging.INFO, "info")
    logging.addLevelName(logging.ERROR, "error")


@contextlib.contextmanager
def hub_progress(enabled: bool) -> Iterator[HubProgress | None]:
    """The ``progress(step, message)`` callback of the hub as a spinner on stderr showing the
    current step (waiting, downloading, verifying, assembling, converting); None when disabled,
    so nothing is printed off a terminal or with --quiet (--verbose logs the steps instead).

    The spinner starts at the first step: a model already in the cache shows nothing.
    """
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.live import Live
    from rich.spinner import Spinner

    spinner = Spinner("dots", style="green")
    # Only reached when stderr is a terminal (see ``interactive``).
    live = Live(spinner, console=Console(stderr=True, force_terminal=True), transient=True, refresh_per_second=12.5)

    def progress(step: str, message: str) -> None:
        if not live.is_started:
            live.start()
        spinner.update(text=f"oasr: {message}")
        live.refresh()  # each step drawn at once

    try:
        yield progress
    finally:
        if live.is_started:
            live.stop()


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def human_size(n: float, unit: str = "B") -> str:
    for prefix in ("", "K", "M", "G", "T"):
        if abs(n) < 1000 or prefix == "T":
            return f"{n:.1f} {prefix}{unit}" if prefix else f"{int(n)} {unit}"
        n /= 1000
    return f"{n} {unit}"
