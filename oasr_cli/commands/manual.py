"""oasr man [COMMAND ...]: the manual page of oasr or of one of its commands.

pip installs the pages as data files (``share/man/man1`` under the environment's prefix), where
``man oasr`` finds them once that folder is on MANPATH; an editable install (``make install``)
installs no data files, so this command reads the pages where they are: the environment's
``share/man/man1``, else the checkout's ``man/`` beside this package. On a terminal the page opens
in ``man``; otherwise (or with --roff) its roff source is printed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

EXAMPLES = """Examples:

The manual of oasr transcribe, in man's pager:
  oasr man transcribe

The page of oasr eval der as roff, to install it by hand:
  oasr man eval der --roff > ~/.local/share/man/man1/oasr-eval-der.1
"""


def page_folders() -> list[Path]:
    """Where the pages may be: the installed data files, then the checkout's man/."""
    return [Path(sys.prefix) / "share" / "man" / "man1", Path(__file__).resolve().parents[2] / "man"]


def find_page(words: list[str]) -> Path:
    from oasr.errors import InputError

    name = "-".join(["oasr", *words]) + ".1"
    for folder in page_folders():
        if (folder / name).is_file():
            return folder / name
    known = sorted({p.stem for f in page_folders() if f.is_dir() for p in f.glob("oasr*.1")})
    if not known:
        raise InputError("no manual pages are installed here (pip installs them with the package; `make docs` writes man/)")
    raise InputError(f"no manual page {name[:-2]!r}; there are: {', '.join(known)}")


def man(
    command: Annotated[Optional[list[str]], typer.Argument(help="The command, as typed after oasr (eval der).", metavar="COMMAND", show_default=False)] = None,
    roff: Annotated[bool, typer.Option("--roff", help="Print the roff source, even on a terminal.")] = False,
) -> None:
    """Show the manual page of oasr or of one of its commands (also after an editable install, where `man oasr` finds none)."""
    page = find_page(list(command or []))
    viewer = shutil.which("man")
    if not roff and sys.stdout.isatty() and viewer is not None:
        raise typer.Exit(subprocess.call([viewer, "-l", str(page)], env=os.environ.copy()))
    sys.stdout.write(page.read_text(encoding="utf-8"))
