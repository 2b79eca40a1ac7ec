#!/usr/bin/env python
"""Regenerate man/ (roff man pages) and completions/ (bash, zsh, fish) from the oasr command line.

    python scripts/gen_cli_docs.py           # write the files (also: make docs)
    python scripts/gen_cli_docs.py --check   # exit 1 listing stale, missing or leftover files

Nothing here is written per command: the command tree is walked from ``oasr_cli.main.app`` (the
``oasr`` program) and ``oasr_cli.main.convert_app`` (``oasr-convert``), so a new command, option,
help string or example shows up in ``man/`` and ``completions/`` on the next run;
tests/test_cli_docs.py fails until the checked-in copies are current. Files in man/ (*.1) and
completions/ (*.bash, _*, *.fish) that the apps no longer produce (a removed command) are deleted.
The completion scripts themselves come from ``oasr completion`` (``oasr_cli.commands.completion``),
so the installed command and these files say the same; pip installs both folders as data files.

Typer 0.29 carries its own copy of click (``typer._click``), which the real ``click`` package does
not recognise (that is why ``click-man`` wrote pages without OPTIONS). The click objects are
therefore duck-typed here: a parameter is an option when ``param.param_type_name == "option"``,
a command is a group when it has ``list_commands``. A command's epilog that starts with
"Examples:" becomes the page's EXAMPLES section (indented lines are commands, shown as written).

The output is deterministic: no dates, and the only version is ``oasr.version.__version__``.
Importing this module does not import torch.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # oasr_cli from this checkout when the package is not installed

import typer  # noqa: E402

from oasr.version import __version__  # noqa: E402
from oasr_cli import errors  # noqa: E402
from oasr_cli.commands.completion import PROGRAMS as COMPLETED, SHELLS, script, script_name  # noqa: E402

MAN_SECTION = "1"
MANUAL = "oasr manual"

# (program name, the Typer app's attribute in oasr_cli.main)
PROGRAMS: tuple[tuple[str, str], ...] = (("oasr", "app"), ("oasr-convert", "convert_app"))

EXIT_STATUS: tuple[tuple[int, str], ...] = (
    (errors.EXIT_OK, "Success; also when the reader of stdout stops reading early (oasr ... | head)."),
    (errors.EXIT_FAILURE, "Failure: bad input, a failed conversion; a batch run exits 1 at the end when any input failed."),
    (errors.EXIT_USAGE, "Usage error: an unknown option, a missing or invalid argument."),
    (errors.EXIT_INTERRUPTED, "Interrupted (Ctrl-C)."),
)

# Environment variables read by every command. Variables attached to a single option
# (``typer.Option(envvar=...)``) are added to that command's page automatically.
ENVIRONMENT: tuple[tuple[str, str], ...] = (
    ("OASR_DEBUG", "Set to 1 to print the full traceback before the one-line error message."),
    ("NO_COLOR", "When set (to anything), no colour; progress bars stay on a terminal (off one a status line is printed now and then)."),
    ("OASR_CACHE", "Where converted bundles and downloads are kept (default: the platform's user cache folder)."),
    ("OASR_CATALOG", "Extra model registry files (YAML), separated like PATH, added to the built-in registry."),
    ("HF_HUB_OFFLINE", "Set to 1 to never reach the Hugging Face hub; its local cache is still used."),
    ("HF_HOME", "Where the Hugging Face cache lives (read through huggingface_hub)."),
    ("OASR_MAX_STDIN_MB", "The most megabytes '-' reads from stdin (default 1024; 0: no limit). Stdin is copied to a temporary file in TMPDIR, not held in memory."),
    ("ONEDNN_PRIMITIVE_CACHE_CAPACITY, LRU_CACHE_CAPACITY", "How many compiled oneDNN kernels the process keeps (oneDNN's own cache and PyTorch's ideep cache). Unset, each command keeps 64 and tts 16: work whose shapes change with every input would otherwise grow the process by hundreds of MB."),
)


# --------------------------------------------------------------------------------------------
# roff


def _escape(text: str) -> str:
    """Escape text for roff: backslashes, hyphen-minus (so flags copy and paste), leading . and ',
    and non-ASCII characters as named Unicode escapes (groff warns on raw ones)."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    text = "".join(c if ord(c) < 128 else f"\\[u{ord(c):04X}]" for c in text)
    return "\n".join(("\\&" + line) if line.startswith((".", "'")) else line for line in text.split("\n"))


def _bold(text: str) -> str:
    return f"\\fB{_escape(text)}\\fR"


def _italic(text: str) -> str:
    return f"\\fI{_escape(text)}\\fR"


def _plain(text: str | None, markup_mode: Any) -> str:
    """Help text as ``--help`` shows it: cut at \\f, Rich markup rendered to plain text."""
    text = (text or "").partition("\f")[0].strip()
    if markup_mode == "rich" and "[" in text:
        try:
            from rich.text import Text

            text = Text.from_markup(text).plain
        except Exception:  # markup errors: show the text as written
            pass
    return text


def _paragraphs(text: str) -> list[str]:
    """Roff for help text: blank lines separate paragraphs; a paragraph led by \\b keeps its lines."""
    out = []
    for para in re.split(r"\n\s*\n", text.strip()):
        if not para.strip():
            continue
        if para.startswith("\b"):
            out.append(".nf\n" + _escape(para[1:].strip("\n")) + "\n.fi")
        else:
            out.append(_escape(" ".join(line.strip() for line in para.splitlines() if line.strip())))
    return out


EXAMPLES_HEADING = "Examples:"


def _examples(text: str) -> list[str]:
    """Roff for an Examples epilog: each paragraph a sentence, then its indented command lines as written."""
    out = []
    for para in re.split(r"\n\s*\n", text.strip()):
        prose = [line.strip() for line in para.splitlines() if line.strip() and not line[:1].isspace()]
        commands = [line.strip() for line in para.splitlines() if line.strip() and line[:1].isspace()]
        if prose:
            out += [".PP", _escape(" ".join(prose))]
        if commands:
            out += [".RS 4", ".nf", *(_escape(c) for c in commands), ".fi", ".RE"]
    return out


def _first_paragraph(text: str) -> str:
    paras = re.split(r"\n\s*\n", text.strip(), maxsplit=1)
    return " ".join(paras[0].replace("\b", "").split()) if paras and paras[0] else ""


# --------------------------------------------------------------------------------------------
# the command tree


@dataclass
class Param:
    kind: str  # "option" or "argument"
    name: str
    flags: list[str]  # options: every flag, primary first then secondary (--no-x)
    secondary: list[str]
    metavar: str | None  # options taking a value, and arguments
    help: str
    extras: list[str]  # "default: auto", "required", "env var: X", ranges, as --help shows them
    envvars: list[str]
    required: bool


@dataclass
class Node:
    path: tuple[str, ...]  # ("oasr", "models", "list")
    command: Any
    ctx: Any
    params: list[Param]
    children: list["Node"] = field(default_factory=list)

    @property
    def is_group(self) -> bool:
        return hasattr(self.command, "list_commands")

    @property
    def page(self) -> str:
        return "-".join(self.path)

    @property
    def markup_mode(self) -> Any:
        return getattr(self.command, "rich_markup_mode", None)

    @property
    def help(self) -> str:
        return _plain(self.command.help, self.markup_mode)

    @property
    def short_help(self) -> str:
        short = _plain(getattr(self.command, "short_help", None), self.markup_mode)
        return short or _first_paragraph(self.help)


def _choices(param: Any, ctx: Any) -> list[str] | None:
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return [str(m.value) for m in annotation]
    shown = _display_type(param, ctx)
    if shown and "|" in shown:
        return shown.split("|")
    return None


def _display_type(param: Any, ctx: Any) -> str | None:
    for attr in ("display_type", "display_type_rich"):
        fn = getattr(param, attr, None)
        if fn is None:
            continue
        try:
            shown = fn(ctx)
        except TypeError:
            shown = fn(ctx=ctx)
        if shown:
            return shown.strip().strip("<>")
    return None


def _type_metavar(param: Any, ctx: Any) -> str:
    """A metavar for a parameter that declares none: its choices, else its type's name."""
    choices = _choices(param, ctx)
    if choices:
        return "{" + "|".join(choices) + "}"
    shown = _display_type(param, ctx) or ""
    suffix = ""
    match = re.fullmatch(r"(?:list|tuple|set|Sequence|List|Tuple)\[(.+?)(?:, \.\.\.)?\]", shown)
    if match:
        shown, suffix = match.group(1), "..."
    shown = re.sub(r"^(?:Optional\[(.+)\]|(.+?) \| None)$", lambda m: m.group(1) or m.group(2), shown)
    names = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "path": "PATH", "bool": "BOOLEAN"}
    word = names.get(shown.lower(), shown.upper() or param.name.upper())
    return word + suffix


def _extras(param: Any, ctx: Any) -> tuple[str, list[str]]:
    """The help text and its ``[default: ...; required]`` extras, split from the --help record."""
    help_text = _plain(getattr(param, "help", None), None)
    record = param.get_help_record(ctx)
    shown = record[1] if record else ""
    base = getattr(param, "help", None) or ""
    rest = shown[len(base):] if shown.startswith(base) else ""
    match = re.fullmatch(r"\s*\[(.*)\]\s*", rest, flags=re.S)
    extras = [e.strip() for e in match.group(1).split("; ")] if match else []
    return help_text, [e for e in extras if e]


def _param(param: Any, ctx: Any, markup_mode: Any) -> Param | None:
    if getattr(param, "hidden", False) or not param.get_help_record(ctx):
        return None
    help_text, extras = _extras(param, ctx)
    help_text = _plain(help_text, markup_mode)
    envvar = getattr(param, "envvar", None)
    envvars = list(envvar) if isinstance(envvar, (list, tuple)) else [envvar] if envvar else []
    if param.param_type_name == "option":
        opts = sorted(param.opts, key=lambda o: (len(o.lstrip("-/+")) > 1, o))  # -a before --architecture
        takes_value = not getattr(param, "is_flag", False) and not getattr(param, "count", False)
        metavar = (param.metavar or _type_metavar(param, ctx)) if takes_value else None
        if metavar and getattr(param, "multiple", False):
            extras.insert(0, "may be repeated")
        return Param("option", param.name, opts + list(param.secondary_opts), list(param.secondary_opts),
                     metavar, help_text, extras, envvars, bool(param.required))
    metavar = param.metavar
    if not metavar:
        metavar = param.name.upper()
        if getattr(param, "nargs", 1) != 1:
            metavar += "..."
    extras = [e for e in extras if e != "required"]
    return Param("argument", param.name, [], [], metavar, help_text, extras, envvars, bool(param.required))


def _node(command: Any, path: tuple[str, ...], parent_ctx: Any = None) -> Node:
    ctx = command.make_context(path[-1], [], parent=parent_ctx, resilient_parsing=True)
    mode = getattr(command, "rich_markup_mode", None)
    params = [p for p in (_param(p, ctx, mode) for p in command.get_params(ctx)) if p is not None]
    node = Node(path, command, ctx, params)
    if node.is_group:
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is None or getattr(sub, "hidden", False):
                continue
            node.children.append(_node(sub, path + (name,), ctx))
    return node


def walk(node: Node):
    """The node, then every command below it, depth first."""
    yield node
    for child in node.children:
        yield from walk(child)


def program_trees() -> list[Node]:
    """One tree per installed program (``oasr``, ``oasr-convert``), built from the Typer apps."""
    from oasr_cli import main

    return [_node(typer.main.get_command(getattr(main, attr)), (prog,)) for prog, attr in PROGRAMS]


# --------------------------------------------------------------------------------------------
# man pages


def _synopsis(node: Node) -> str:
    words = [_bold(" ".join(node.path))]
    if any(p.kind == "option" for p in node.params):
        words.append("[" + _italic("OPTIONS") + "]")
    if node.is_group:
        words.append(_italic("COMMAND") + " [" + _italic("ARGS") + "]...")
    for p in node.params:
        if p.kind == "argument":
            words.append(_italic(p.metavar) if p.required else "[" + _italic(p.metavar) + "]")
    return ".PP\n" + " ".join(words)


def _sentence(extra: str) -> str:
    text = extra[:1].upper() + extra[1:]
    return text if text.endswith(".") else text + "."


def _param_entry(p: Param) -> str:
    if p.kind == "option":
        primary = [f for f in p.flags if f not in p.secondary]
        tag = ", ".join(_bold(f) for f in primary)
        if p.secondary:  # a boolean pair: --strict / --lenient
            tag += " / " + ", ".join(_bold(f) for f in p.secondary)
        if p.metavar:
            metavar = _italic(p.metavar)
            if len(p.metavar) > 40:  # \: lets groff break a long list of choices after a bar
                metavar = metavar.replace("|", "|\\:")
            tag += " " + metavar
    else:
        tag = _italic(p.metavar)
    body = "\n.IP\n".join(_paragraphs(p.help))
    extras = "\n".join(_escape(_sentence(e)) for e in p.extras)
    if extras:
        body = f"{body}\n{extras}" if body else extras
    return ".TP\n" + tag + ("\n" + body if body else "")


def render_man_page(nodes: list[Node], parents: dict[tuple[str, ...], Node | None]) -> str:
    """One page for ``nodes`` (one command; several when two programs run the same command)."""
    node = nodes[0]
    page = node.page
    title = _escape(page.upper())
    lines = [
        f'.\\" Generated by scripts/gen_cli_docs.py from the oasr command line; do not edit.',
        f'.TH "{title}" "{MAN_SECTION}" "" "oasr {_escape(__version__)}" "{MANUAL}"',
        ".nh",  # no hyphenation: names such as openai-whisper stay whole
        ".ad l",
        ".SH NAME",
        f"{_escape(page)} \\- {_escape(node.short_help)}" if node.short_help else _escape(page),
        ".SH SYNOPSIS",
    ]
    for n in nodes:
        lines.append(_synopsis(n))
    lines.append(".SH DESCRIPTION")
    deprecated = getattr(node.command, "deprecated", False)
    if deprecated:
        note = "Deprecated." + (f" {deprecated}" if isinstance(deprecated, str) else "")
        lines += [".PP", _escape(note)]
    for para in _paragraphs(node.help):
        lines += [".PP", para]
    epilog = _plain(getattr(node.command, "epilog", None), node.markup_mode)
    examples = epilog.startswith(EXAMPLES_HEADING)
    for para in [] if examples else _paragraphs(epilog):
        lines += [".PP", para]
    if node.children:
        lines.append(".SH COMMANDS")
        for child in node.children:
            lines += [".TP", _bold(child.path[-1]),
                      _escape(child.short_help) + f" See {_bold(child.page)}({MAN_SECTION})."]
    arguments = [p for p in node.params if p.kind == "argument"]
    if arguments:
        lines.append(".SH ARGUMENTS")
        lines += [_param_entry(p) for p in arguments]
    options = [p for p in node.params if p.kind == "option"]
    if options:
        lines.append(".SH OPTIONS")
        lines += [_param_entry(p) for p in options]
    if examples:
        lines.append(".SH EXAMPLES")
        lines += _examples(epilog.removeprefix(EXAMPLES_HEADING))
    lines.append(".SH EXIT STATUS")
    for code, text in EXIT_STATUS:
        lines += [".TP", _bold(str(code)), _escape(text)]
    lines.append(".SH ENVIRONMENT")
    env = list(ENVIRONMENT)
    for p in node.params:
        for var in p.envvars:
            flag = p.flags[-1] if p.flags else p.metavar
            env.append((var, f"The default for {flag}."))
    for var, text in env:
        lines += [".TP", _bold(var), _escape(text)]
    see_also: list[str] = []
    for n in nodes:
        parent = parents.get(n.path)
        if parent is not None:
            see_also.append(parent.page)
    see_also += [c.page for c in node.children]
    see_also = sorted(dict.fromkeys(p for p in see_also if p != page))
    if see_also:
        lines += [".SH SEE ALSO", ",\n".join(f"{_bold(p)}({MAN_SECTION})" for p in see_also)]
    return "\n".join(lines) + "\n"


def _signature(node: Node) -> list[tuple]:
    return [(p.kind, tuple(p.flags), p.metavar, p.help, tuple(p.extras)) for p in node.params]


def man_pages(trees: list[Node] | None = None) -> dict[str, str]:
    """``{"oasr.1": roff, "oasr-convert.1": roff, ...}`` for every command of every program.

    A page name can be reached twice (``oasr convert`` and the ``oasr-convert`` program both make
    ``oasr-convert.1``): that is one page with both synopses, and only allowed when the two take
    the same arguments and options.
    """
    trees = program_trees() if trees is None else trees
    by_page: dict[str, list[Node]] = {}
    parents: dict[tuple[str, ...], Node | None] = {}

    def visit(node: Node, parent: Node | None) -> None:
        by_page.setdefault(node.page, []).append(node)
        parents[node.path] = parent
        for child in node.children:
            visit(child, node)

    for tree in trees:
        visit(tree, None)
    pages = {}
    for page, nodes in by_page.items():
        first = nodes[0]
        for other in nodes[1:]:
            if _signature(other) != _signature(first) or other.help != first.help:
                raise ValueError(
                    f"man page {page}.{MAN_SECTION} would describe two different commands "
                    f"({' '.join(first.path)!r} and {' '.join(other.path)!r}); rename one of them"
                )
        pages[f"{page}.{MAN_SECTION}"] = render_man_page(nodes, parents)
    return dict(sorted(pages.items()))


# --------------------------------------------------------------------------------------------
# completions


def completion_scripts() -> dict[str, str]:
    """``{"oasr.bash": ..., "_oasr": ..., "oasr.fish": ..., "oasr-convert.bash": ...}``, each
    named as its shell loads it, the text ``oasr completion show SHELL`` prints."""
    return {script_name(prog, shell): script(prog, shell) for prog, _ in COMPLETED for shell in SHELLS}


def generated_files() -> dict[str, str]:
    """Every generated file, by its path relative to the repository root."""
    files = {f"man/{name}": text for name, text in man_pages().items()}
    files.update({f"completions/{name}": text for name, text in completion_scripts().items()})
    return files


# Files in these folders that match these patterns are the generator's; others are left alone.
OWNED = (
    ("man", f"*.{MAN_SECTION}"),
    ("completions", "*.bash"),
    ("completions", "_*"),
    ("completions", "*.fish"),
    ("completions", "*.zsh"),  # the names zsh scripts had before they became _PROG
)


# --------------------------------------------------------------------------------------------
# the command


def plan(root: Path = ROOT) -> tuple[dict[str, str], list[str], list[str]]:
    """(every generated file by relative path, the ones that differ on disk, leftovers to delete)."""
    files = generated_files()
    stale = []
    for rel, text in files.items():
        path = root / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            stale.append(rel)
    leftovers = sorted(
        {
            path.relative_to(root).as_posix()
            for folder, pattern in OWNED
            for path in (root / folder).glob(pattern)
            if path.relative_to(root).as_posix() not in files
        }
    )
    return files, stale, leftovers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 listing stale files")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    files, stale, leftovers = plan(args.root)
    if args.check:
        for rel in stale:
            print(f"stale: {rel}" if (args.root / rel).exists() else f"missing: {rel}")
        for rel in leftovers:
            print(f"not generated (remove): {rel}")
        if stale or leftovers:
            print("run `python scripts/gen_cli_docs.py` (or `make docs`) and commit the result", file=sys.stderr)
            return 1
        return 0

    for rel in stale:
        path = args.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(files[rel], encoding="utf-8")
        print(f"wrote {rel}")
    for rel in leftovers:
        (args.root / rel).unlink()
        print(f"removed {rel}")
    if not stale and not leftovers:
        print(f"{len(files)} files up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
