"""The Hugging Face hub and its cache, through huggingface_hub's own lookup and download.

A snapshot already in the Hugging Face cache is converted where it lies (no second copy of the
source). The cache folder is read from the environment at call time (``HF_HUB_CACHE``,
``HF_HOME``), as huggingface_hub reads it at import.
"""

from __future__ import annotations

import contextlib
import fnmatch
import io
import logging
import os
import socket
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, Sequence
from urllib.parse import urlsplit

from ..errors import SourceUnavailable

log = logging.getLogger("oasr")

_TRUE = {"1", "ON", "YES", "TRUE"}
PROBE_TIMEOUT = 3.0
# A repository named by the user without a registry entry: what a converter can read, not
# every format the repository carries (TF, Flax, ONNX, Core ML copies are skipped).
DEFAULT_ALLOW = (
    "*.json", "*.safetensors", "*.bin", "*.pt", "*.pth", "*.txt", "*.model", "*.yaml", "*.tiktoken",
)
DEFAULT_IGNORE = ("*.msgpack", "*.h5", "*.onnx", "*.ot", "*.tflite", "*.mlmodel", "onnx/*", "*.mlpackage/*", "*fp32*")


def hub_cache_dir() -> Path:
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.environ[var]).expanduser()
    home = os.environ.get("HF_HOME")
    if not home:
        home = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def offline_state(offline: bool | None) -> tuple[bool, str]:
    """Whether downloads are off, and why: ``offline`` when given, else ``HF_HUB_OFFLINE``."""
    if offline is not None:
        return bool(offline), "offline=True (--offline)" if offline else ""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in _TRUE:
        return True, "HF_HUB_OFFLINE=1"
    return False, ""


def short(revision: str) -> str:
    return revision[:12] if len(revision) == 40 else revision


def _matches(name: str, patterns: Sequence[str] | None) -> bool:
    return patterns is None or any(fnmatch.fnmatch(name, p) for p in patterns)


def cached_snapshot(repo: str, revision: str, allow_patterns: Sequence[str] | None) -> Path:
    """The snapshot folder huggingface_hub has for ``repo@revision``; SourceUnavailable if none."""
    from huggingface_hub import snapshot_download

    cache = hub_cache_dir()
    try:
        path = Path(
            snapshot_download(
                repo,
                revision=revision,
                allow_patterns=list(allow_patterns) if allow_patterns else None,
                cache_dir=str(cache),
                local_files_only=True,
            )
        )
    except Exception as e:  # LocalEntryNotFoundError, IncompleteSnapshotError, ...
        if type(e).__name__ == "LocalEntryNotFoundError":
            raise SourceUnavailable(f"{repo}@{short(revision)} is not in the Hugging Face cache {cache}") from e
        raise SourceUnavailable(f"{repo}@{short(revision)} in the Hugging Face cache {cache}: {_first_line(e)}") from e
    present = [p for p in path.rglob("*") if p.is_file() and _matches(p.relative_to(path).as_posix(), allow_patterns)]
    if not present:
        raise SourceUnavailable(f"the cached snapshot {path} holds none of the files the model needs")
    return path


def unreachable_reason(timeout: float = PROBE_TIMEOUT) -> str | None:
    """Why the hub cannot be reached, in a few seconds at most; None when it may be.

    huggingface_hub retries a failed connection for about 20 s before giving up: not worth it
    when the name does not even resolve. Behind a proxy nothing is probed (the proxy decides).
    """
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return None
    url = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host = url.hostname or "huggingface.co"
    port = url.port or (80 if url.scheme == "http" else 443)
    outcome: list[str | None] = []

    def probe() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                outcome.append(None)
        except socket.gaierror as e:
            outcome.append(f"cannot resolve {host}: {e.strerror or e}")
        except OSError as e:
            outcome.append(f"cannot connect to {host}:{port}: {e.strerror or e}")

    worker = threading.Thread(target=probe, name="oasr-hub-probe", daemon=True)
    worker.start()
    worker.join(timeout + 1.0)
    if not outcome:
        return f"no answer from {host}:{port} within {timeout:.0f} s"
    return outcome[0]


def download_snapshot(
    repo: str,
    revision: str,
    allow_patterns: Sequence[str] | None,
    ignore_patterns: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Download ``repo@revision`` into the Hugging Face cache; SourceUnavailable on failure.

    ``progress(message)`` hears the megabytes and files done while the download runs.
    """
    from huggingface_hub import snapshot_download

    bars = {} if progress is None else {"tqdm_class": reporting_bars(progress, f"{repo}@{short(revision)}")}
    try:
        with _quiet_hub():
            path = snapshot_download(
                repo,
                revision=revision,
                allow_patterns=list(allow_patterns) if allow_patterns else None,
                ignore_patterns=list(ignore_patterns) if ignore_patterns else None,
                cache_dir=str(hub_cache_dir()),
                **bars,
            )
    except Exception as e:
        raise SourceUnavailable(f"downloading {repo}@{short(revision)} failed: {_first_line(e)}") from e
    return Path(path)


def reporting_bars(report: Callable[[str], None], what: str, every: float = 0.25) -> type:
    """A tqdm class for huggingface_hub that prints nothing and tells ``report`` what is done.

    huggingface_hub gives it the files bar ("Fetching N files") and, in recent versions, the
    byte bars; the message names the bytes done (the furthest byte bar) and the files done, at
    most every ``every`` seconds, and always when a bar completes.
    """
    from tqdm.std import tqdm

    lock = threading.Lock()
    byte_bars: dict[int, tuple[float, float]] = {}
    state: dict = {"files": None, "said": 0.0, "last": ""}

    class ReportingBars(tqdm):
        monitor_interval = 0  # no monitor thread

        def __init__(self, *args, **kwargs):
            kwargs.pop("name", None)  # huggingface_hub's own bars take a group name; tqdm does not
            kwargs.update(file=io.StringIO(), disable=False, mininterval=0)
            super().__init__(*args, **kwargs)

        def display(self, msg=None, pos=None):  # tqdm calls this to draw: report instead
            with lock:
                done = bool(self.total) and self.n >= self.total
                if self.unit == "B":
                    byte_bars[id(self)] = (self.n, self.total or 0)
                else:
                    state["files"] = (self.n, self.total or 0)
                parts = []
                if byte_bars:
                    n, total = max(byte_bars.values())
                    if n:
                        parts.append(f"{n / 1e6:.1f} of {total / 1e6:.1f} MB" if total else f"{n / 1e6:.1f} MB")
                if state["files"] is not None and state["files"][1]:
                    parts.append(f"{state['files'][0]:.0f} of {state['files'][1]:.0f} files")
                now = time.monotonic()
                message = f"{what}: {', '.join(parts)}"
                if parts and message != state["last"] and (done or now - state["said"] >= every):
                    state["said"], state["last"] = now, message
                    report(message)
            return True

    return ReportingBars


@contextlib.contextmanager
def _quiet_hub() -> Iterator[None]:
    """No tqdm bars from huggingface_hub: the library never prints; progress goes to the callback."""
    try:
        from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    except ImportError:  # pragma: no cover - very old huggingface_hub
        yield
        return
    was_disabled = are_progress_bars_disabled()
    disable_progress_bars()
    try:
        yield
    finally:
        if not was_disabled:
            enable_progress_bars()


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__
