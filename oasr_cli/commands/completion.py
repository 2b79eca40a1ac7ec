"""oasr completion show|install SHELL: the shell-completion scripts of oasr and oasr-convert.

The same scripts are in the repository's completions/ (scripts/gen_cli_docs.py writes them from
here) and are installed by pip where system shells look (``share/bash-completion/completions``,
``share/zsh/site-functions``, ``share/fish/vendor_completions.d`` under the install prefix).
"""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from ..options import new_app

# (program, the variable its completion call-back is keyed on)
PROGRAMS = (("oasr", "_OASR_COMPLETE"), ("oasr-convert", "_OASR_CONVERT_COMPLETE"))
SHELLS = ("bash", "zsh", "fish")

Shell = Enum("Shell", {name: name for name in SHELLS}, type=str)
ShellArg = Annotated[Shell, typer.Argument(help="bash, zsh or fish.", metavar="SHELL", show_default=False)]

app = new_app("completion", "Shell completion for oasr and oasr-convert: print the scripts, or install them for this user.")

SHOW_EXAMPLES = """Examples:

Complete oasr in the running bash session:
  source <(oasr completion show bash)

Write the zsh script where zsh's fpath finds it:
  oasr completion show zsh > /usr/local/share/zsh/site-functions/_oasr
"""

INSTALL_EXAMPLES = """Examples:

Install for the login shell's kind, then open a new shell:
  oasr completion install bash
  oasr completion install fish
"""


def script(prog: str, shell: str) -> str:
    """The completion script of ``prog`` for ``shell``; it calls the program back to complete."""
    from typer._completion_shared import get_completion_script

    var = dict(PROGRAMS)[prog]
    text = get_completion_script(prog_name=prog, complete_var=var, shell=shell)
    if shell == "zsh":  # also complete on the first Tab when autoloaded from fpath as _PROG (as cobra's scripts do)
        text += f'\n\nif [ "$funcstack[1]" = "_{prog}" ]; then\n  _{prog.replace("-", "_")}_completion "$@"\nfi'
    return text + "\n"


def script_name(prog: str, shell: str) -> str:
    """The file name each shell loads a script by: oasr.bash, _oasr (zsh autoloads _NAME), oasr.fish."""
    return f"_{prog}" if shell == "zsh" else f"{prog}.{shell}"


def user_folder(shell: str) -> Path:
    """Where ``shell`` looks for one user's completion scripts."""
    home = Path.home()
    if shell == "bash":  # bash-completion 2.x loads completions/NAME.bash on first use of NAME
        data = Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")
        return Path(os.environ.get("BASH_COMPLETION_USER_DIR") or data / "bash-completion") / "completions"
    if shell == "zsh":  # not searched by default: ~/.zshrc needs fpath+=(~/.zfunc) before compinit
        return Path(os.environ.get("ZDOTDIR") or home) / ".zfunc"
    return Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / "fish" / "completions"


@app.command(no_args_is_help=True, epilog=SHOW_EXAMPLES)
def show(shell: ShellArg) -> None:
    """Print the completion scripts of oasr and oasr-convert for SHELL on stdout."""
    typer.echo("\n".join(script(prog, shell.value) for prog, _ in PROGRAMS), nl=False)


@app.command(no_args_is_help=True, epilog=INSTALL_EXAMPLES)
def install(shell: ShellArg) -> None:
    """Write the completion scripts of oasr and oasr-convert where SHELL loads them for this user; print their paths."""
    from oasr.io.files import atomic_write_text

    folder = user_folder(shell.value)
    folder.mkdir(parents=True, exist_ok=True)
    for prog, _ in PROGRAMS:
        path = folder / script_name(prog, shell.value)
        atomic_write_text(path, script(prog, shell.value))
        typer.echo(str(path))
    if shell.value == "zsh":
        typer.echo(f"oasr: add fpath+=({folder}) before compinit in your .zshrc", err=True)
