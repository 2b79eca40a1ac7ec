"""The one table from exceptions to a one-line message and an exit code."""

from __future__ import annotations

import contextlib

import io
import os
import sys
import traceback

import typer

from oasr.errors import OasrError

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

# (exception class, exit code, message prefix); the first match wins.
ERROR_TABLE: tuple[tuple[type[BaseException], int, str], ...] = (
    (OasrError, EXIT_FAILURE, "error"),
    (FileNotFoundError, EXIT_FAILURE, "error"),
    (PermissionError, EXIT_FAILURE, "error"),
    (IsADirectoryError, EXIT_FAILURE, "error"),
    (OSError, EXIT_FAILURE, "error"),
    (MemoryError, EXIT_FAILURE, "out of memory"),
    (Exception, EXIT_FAILURE, "internal error"),
)


class OneLineUsage(Exception):
    """A usage error said in one line (``oasr: error: ...``, exit 2), not click's usage block."""


def debug_enabled() -> bool:
    return os.environ.get("OASR_DEBUG", "") not in ("", "0")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def report(exc: BaseException) -> int:
    """Print ``exc`` as one line on stderr (a traceback first when OASR_DEBUG=1); return the exit code."""
    if debug_enabled():
        traceback.print_exception(exc, file=sys.stderr)
    for cls, code, prefix in ERROR_TABLE:
        if isinstance(exc, cls):
            message = _one_line(str(exc)) or type(exc).__name__
            if prefix == "internal error":
                message = f"{type(exc).__name__}: {message} (rerun with OASR_DEBUG=1 for the traceback)"
            print(f"oasr: {prefix}: {message}", file=sys.stderr)
            return code
    raise exc


def silence_stdout() -> None:
    """Point stdout at /dev/null once its reader is gone (``oasr ... | head -1``), so nothing more
    is written there, not even the interpreter's final flush (no "Exception ignored" line)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, io.UnsupportedOperation):  # stdout is no file (captured, closed)
        pass


@contextlib.contextmanager
def sigterm_interrupts():
    """SIGTERM raises KeyboardInterrupt while this runs (in the main thread), so the work unwinds
    as for Ctrl-C: temporaries removed, the destination as it was, exit 130. Its default action
    ends the process at once and leaves them behind."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# Set once a SIGINT or SIGTERM has come: whatever fails after it is the interrupt's doing. A Ctrl-C
# that lands inside an import leaves a half-made module behind (numpy's C core refuses a second
# import), and a library's broad ``except`` may swallow the KeyboardInterrupt itself; the error that
# follows is then no bug of ours, and the run was interrupted (exit 130).
_interrupted = False


def _interrupt(signum, frame):
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


@contextlib.contextmanager
def _interrupts_noted():
    """Ctrl-C raises KeyboardInterrupt as Python's own handler does, noting it first (main thread only)."""
    import signal

    try:
        previous = signal.getsignal(signal.SIGINT)
        if previous is not signal.default_int_handler:
            previous = None
        else:
            signal.signal(signal.SIGINT, _interrupt)
    except ValueError:  # not the main thread
        previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def run(command, args: list[str] | None, prog_name: str) -> int:
    """Run the app's click command with oasr's exit codes: 0, 1 failure, 2 usage, 130 interrupted.

    Typer carries its own copy of click, so its exceptions are reached through ``typer``. Typer
    turns a KeyboardInterrupt (Ctrl-C) inside a command into ``Exit(130)``, which in
    non-standalone mode comes back as the return value 130: that, like an interrupt reaching
    here, is reported as ``oasr: interrupted``.
    """
    try:
        with _interrupts_noted():
            result = command.main(args=args, prog_name=prog_name, standalone_mode=False)
        return _exit_code(result if isinstance(result, int) else EXIT_OK)
    except typer.Exit as e:
        return _exit_code(e.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        return _exit_code(EXIT_INTERRUPTED)
    except BrokenPipeError:
        # The reader of stdout went away (`oasr ... | head`): it has what it wanted, and that is
        # no failure of ours, so the exit is 0 (as the documented codes say; 141, a shell's mark of
        # death by SIGPIPE, would fail `set -o pipefail` scripts that only wanted the first lines).
        silence_stdout()
        return EXIT_OK
    except OneLineUsage as e:
        print(f"oasr: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except typer.TyperException as e:  # click's usage errors: one line, not its Usage / Try / Error block
        if hasattr(e, "format_message"):
            print(usage_line(e, prog_name), file=sys.stderr)
            return getattr(e, "exit_code", EXIT_USAGE)
        return report(e)
    except Exception as e:
        if _interrupted:
            return _exit_code(EXIT_INTERRUPTED)
        return report(e)


def usage_line(e, prog_name: str) -> str:
    """``oasr: error: <click's message> (oasr CMD --help lists the options)``: one line."""
    ctx = getattr(e, "ctx", None)
    command = ctx.command_path if ctx is not None else prog_name
    return f"oasr: error: {_one_line(e.format_message())} ({command} --help lists the options)"


def _exit_code(code: int) -> int:
    """``code``, after saying ``oasr: interrupted`` on stderr when it is the interrupt's (130)."""
    if code == EXIT_INTERRUPTED:
        try:
            print("oasr: interrupted", file=sys.stderr, flush=True)
        except (OSError, ValueError):  # stderr is gone too
            pass
    return code
