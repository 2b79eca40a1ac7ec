"""``--help`` off a terminal (piped into grep, less, a file): plain text, COLUMNS wide.

rich's frames, padding and type metavars (``<bool>``) help a reader at a terminal and get in the
way of one reading through a pipe. Off a terminal the help is click's plain layout instead, at
the width COLUMNS gives (80 unset), with the options still grouped in their panels (Whisper-only
flags under their own heading) and the examples as written.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import textwrap
from typing import Iterator

DEFAULT_PANEL = "Options"


def _panels(command, ctx) -> list[tuple[str, list[tuple[str, str]]]]:
    """The help records of ``command``'s parameters, by panel, in the order they come."""
    panels: dict[str, list[tuple[str, str]]] = {}
    for param in command.get_params(ctx):
        if param.param_type_name == "argument":
            continue
        record = param.get_help_record(ctx)
        if record is None:
            continue
        name = getattr(param, "rich_help_panel", None) or DEFAULT_PANEL
        panels.setdefault(name, []).append(record)
    return list(panels.items())


def _arguments(command, ctx) -> list[tuple[str, str]]:
    # click gives arguments no help record: name and help as the rich layout shows them
    return [(p.metavar or p.name.upper(), getattr(p, "help", "") or "") for p in command.get_params(ctx) if p.param_type_name == "argument"]


def format_help(command, ctx, formatter) -> None:
    """``command``'s help (a command or a group) into click's ``formatter``, plain."""
    columns = os.environ.get("TERMINAL_WIDTH", "")  # typer's own setting, then COLUMNS, then 80
    width = int(columns) if columns.isdigit() else shutil.get_terminal_size((80, 24)).columns
    formatter.width = max(width - 2, 38)
    command.format_usage(ctx, formatter)
    if command.help:
        for paragraph in command.help.split("\n\n"):
            formatter.write_paragraph()
            with formatter.indentation():
                formatter.write_text(" ".join(paragraph.split()))
    arguments = [a for a in _arguments(command, ctx) if a[1]]
    if arguments:
        with formatter.section("Arguments"):
            formatter.write_dl(arguments)
    for name, records in _panels(command, ctx):
        with formatter.section(name):
            formatter.write_dl(records)
    if hasattr(command, "list_commands"):
        rows = []
        for sub in command.list_commands(ctx):
            cmd = command.get_command(ctx, sub)
            if cmd is not None and not cmd.hidden:
                rows.append((sub, cmd.get_short_help_str(limit=300)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
    if command.epilog:
        formatter.write_paragraph()
        for line in command.epilog.rstrip().split("\n"):  # the commands of the examples as written, the prose wrapped
            if line.startswith(" ") or not line.strip():
                formatter.write(f"{line}\n")
            else:
                formatter.write("\n".join(textwrap.wrap(line, formatter.width, break_on_hyphens=False)) + "\n")


@contextlib.contextmanager
def when_piped() -> Iterator[None]:
    """While this runs, help printed to a stdout that is no terminal is the plain layout."""
    if sys.stdout.isatty():
        yield
        return
    from typer import core

    saved = core.TyperCommand.format_help, core.TyperGroup.format_help
    core.TyperCommand.format_help = core.TyperGroup.format_help = format_help  # type: ignore[method-assign]
    try:
        yield
    finally:
        core.TyperCommand.format_help, core.TyperGroup.format_help = saved
