"""openai-whisper's spellings of long options, accepted as they are typed there.

``--output_dir DIR`` is ``--output-dir DIR`` and ``--word_timestamps True`` is
``--word-timestamps`` (whisper's boolean options take True/False; ``False`` of a flag with a
``--no-`` form is that form, of one without it the default, off). Only options the command has
are rewritten, so a misspelling is still click's one-line "No such option" naming it.
"""

from __future__ import annotations

import re

_UNDERSCORED = re.compile(r"^--([a-z0-9]+(?:_[a-z0-9]+)+)(=.*)?$")
_BOOLEANS = {"true": True, "false": False}


def _command(root, args: list[str]):
    """The click command ``args`` run (the group's sub-commands followed) and where its own arguments start."""
    command, i = root, 0
    while hasattr(command, "list_commands") and i < len(args):
        sub = command.commands.get(args[i]) if hasattr(command, "commands") else None
        if sub is None:
            break
        command, i = sub, i + 1
    return command, i


def accept(root, args: list[str]) -> list[str]:
    """``args`` with whisper's underscore spellings of ``root``'s options in the dashed form."""
    command, start = _command(root, args)
    options = {}
    for param in getattr(command, "params", ()):
        for name in (*param.opts, *getattr(param, "secondary_opts", ())):
            options[name] = param
    out = list(args[:start])
    i = start
    while i < len(args):
        token = args[i]
        i += 1
        if token == "--":
            out += args[i - 1 :]
            break
        m = _UNDERSCORED.match(token)
        dashed = f"--{m.group(1).replace('_', '-')}" if m else None
        if dashed is None or dashed not in options:
            out.append(token)
            continue
        param = options[dashed]
        if getattr(param, "is_flag", False) and m.group(2) is None and i < len(args) and args[i].lower() in _BOOLEANS:
            value = _BOOLEANS[args[i].lower()]
            i += 1
            off = [o for o in getattr(param, "secondary_opts", ()) if o.startswith("--")]
            if value:
                out.append(dashed)
            elif off:
                out.append(off[0])
            continue
        out.append(dashed + (m.group(2) or ""))
    return out
