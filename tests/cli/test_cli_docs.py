"""Man pages and shell completions: current, complete, and working.

The checked-in man/ and completions/ must equal what scripts/gen_cli_docs.py generates from the
Typer apps now; after changing a command or a help string, run `python scripts/gen_cli_docs.py`
(or `make docs`). The generator lives in scripts/, outside the shipped package.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import pytest
import typer

from oasr_cli.main import app, convert_app

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gen_cli_docs.py"


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_cli_docs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


docs = _load_generator()
REGENERATE = "run `python scripts/gen_cli_docs.py` (or `make docs`) and commit man/ and completions/"


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("_OASR", "COMP_", "_TYPER"))}
    env.update(extra)
    return env


def _program(prog: str) -> list[str]:
    """The installed console script, else the same entry point through this interpreter."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    script = shutil.which(prog, path=path)
    if script:
        return [script]
    func = {"oasr": "entry", "oasr-convert": "convert_entry"}[prog]
    return [sys.executable, "-c", f"from oasr_cli.main import {func}; {func}()"]


# ---------------------------------------------------------------------------------------------
# the checked-in copies are current


def test_checked_in_files_are_current():
    files = docs.generated_files()
    stale = [rel for rel, text in files.items() if not (ROOT / rel).is_file() or (ROOT / rel).read_text(encoding="utf-8") != text]
    leftovers = sorted(
        p.relative_to(ROOT).as_posix()
        for folder, pattern in docs.OWNED
        for p in (ROOT / folder).glob(pattern)
        if p.relative_to(ROOT).as_posix() not in files
    )
    assert not stale, f"stale or missing: {', '.join(stale)}; {REGENERATE}"
    assert not leftovers, f"no longer generated: {', '.join(leftovers)}; {REGENERATE}"


def test_generation_is_deterministic():
    assert docs.generated_files() == docs.generated_files()
    expected = {"completions/" + name for name in ("oasr.bash", "_oasr", "oasr.fish", "oasr-convert.bash", "_oasr-convert", "oasr-convert.fish")}
    assert expected <= set(docs.generated_files())


def test_check_mode_lists_stale_files(tmp_path):
    def check() -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, str(SCRIPT), "--check", "--root", str(tmp_path)], capture_output=True, text=True, cwd=ROOT
        )

    result = check()
    assert result.returncode == 1 and "missing: man/oasr.1" in result.stdout
    subprocess.run([sys.executable, str(SCRIPT), "--root", str(tmp_path)], check=True, capture_output=True, cwd=ROOT)
    assert check().returncode == 0, check().stdout

    page = tmp_path / "man" / "oasr-convert.1"
    page.write_text(page.read_text().replace("Weight precision", "Old help"))
    (tmp_path / "man" / "oasr-removed.1").write_text(".TH OLD 1\n")
    result = check()
    assert result.returncode == 1
    assert "stale: man/oasr-convert.1" in result.stdout
    assert "not generated (remove): man/oasr-removed.1" in result.stdout

    subprocess.run([sys.executable, str(SCRIPT), "--root", str(tmp_path)], check=True, capture_output=True, cwd=ROOT)
    assert not (tmp_path / "man" / "oasr-removed.1").exists()
    assert check().returncode == 0


# ---------------------------------------------------------------------------------------------
# the man pages describe every command and every option (walking the click tree directly)


def _walk(command, path: tuple[str, ...], parent=None):
    ctx = command.make_context(path[-1], [], parent=parent, resilient_parsing=True)
    yield path, command, ctx
    if hasattr(command, "list_commands"):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not getattr(sub, "hidden", False):
                yield from _walk(sub, path + (name,), ctx)


def _all_commands():
    for prog, attr in (("oasr", app), ("oasr-convert", convert_app)):
        yield from _walk(typer.main.get_command(attr), (prog,))


def test_man_pages_mention_every_option_of_every_command():
    pages = docs.man_pages()
    seen = 0
    for path, command, ctx in _all_commands():
        name = "-".join(path) + ".1"
        assert name in pages, f"no man page for {' '.join(path)}"
        page = pages[name]
        for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "ENVIRONMENT"):
            assert f".SH {section}\n" in page, f"{name} lacks {section}"
        assert docs._escape(" ".join(path)) in page.split(".SH DESCRIPTION")[0], f"{name}: synopsis lacks {path}"
        first_line = (command.help or "").strip().splitlines()[0]
        assert docs._escape(first_line) in page, f"{name} lacks the description"
        for param in command.get_params(ctx):
            if getattr(param, "hidden", False):
                continue
            if param.param_type_name == "option":
                for flag in [*param.opts, *param.secondary_opts]:
                    assert f"\\fB{docs._escape(flag)}\\fR" in page, f"{name} does not mention {flag}"
                    seen += 1
            else:
                assert ".SH ARGUMENTS" in page, f"{name} lacks ARGUMENTS"
                assert docs._escape(param.metavar or param.name.upper()) in page
            if param.help:
                assert docs._escape(" ".join(param.help.split())) in page, f"{name} lacks the help of {param.name}"
        for code in (0, 1, 2, 130):
            assert f".TP\n\\fB{code}\\fR\n" in page
        assert "OASR_DEBUG" in page and "NO_COLOR" in page
    assert seen >= 12  # --version, -h/--help, and convert's options at least


def test_man_pages_render_without_warnings():
    groff = shutil.which("groff")
    if groff is None:
        pytest.skip("groff is not installed")
    for name, text in docs.man_pages().items():
        result = subprocess.run([groff, "-man", "-Tutf8", "-ww", "-z"], input=text, capture_output=True, text=True)
        assert result.returncode == 0 and not result.stderr.strip(), f"{name}: {result.stderr}"


class _Colour(str, Enum):
    red = "red"
    green = "green"


def _toy_tree():
    """A tree with what oasr does not have yet: a sub-group, secondary flags, envvars, escapes."""
    toy = typer.Typer(name="toy", add_completion=False)
    models = typer.Typer(help="Manage models.")
    toy.add_typer(models, name="models")

    @toy.callback()
    def _root() -> None:
        """Toy root."""

    @models.command("list")
    def list_(
        colour: Annotated[_Colour, typer.Option("--colour", "-c", help="Pick a colour.")] = _Colour.red,
        cache: Annotated[Optional[Path], typer.Option(envvar="TOY_CACHE", help="Where models live.")] = None,
        strict: Annotated[bool, typer.Option("--strict/--lenient", help="Fail on warnings.")] = False,
        secret: Annotated[bool, typer.Option("--secret", hidden=True)] = False,
        names: Annotated[Optional[list[str]], typer.Argument(help="Only these.")] = None,
    ) -> None:
        """List models.

        .dot leads this line, and a back\\slash 'sits' here.

        \b
        keep
          these lines
        """

    return docs._node(typer.main.get_command(toy), ("toy",))


def test_sub_groups_recurse_and_roff_is_escaped():
    pages = docs.man_pages([_toy_tree()])
    assert set(pages) == {"toy.1", "toy-models.1", "toy-models-list.1"}
    page = pages["toy-models-list.1"]
    assert "\\fBtoy models list\\fR" in page
    assert "\\fB\\-c\\fR, \\fB\\-\\-colour\\fR \\fI{red|green}\\fR" in page
    assert "Default: red." in page
    assert "\\fB\\-\\-strict\\fR / \\fB\\-\\-lenient\\fR" in page
    assert "secret" not in page  # hidden
    assert "\\fBTOY_CACHE\\fR" in page and "Only these." in page
    assert "\\&.dot leads this line, and a back\\eslash 'sits' here." in page
    assert ".nf\nkeep\n  these lines\n.fi" in page
    for line in page.splitlines():
        assert not line.startswith("'"), line
        assert not line.startswith(".") or line.split()[0] in {
            ".\\\"", ".TH", ".SH", ".PP", ".TP", ".IP", ".nf", ".fi", ".nh", ".ad", ".RS", ".RE"
        }, line
    assert "\\fBtoy\\-models\\-list\\fR(1)" in pages["toy-models.1"]  # COMMANDS and SEE ALSO
    assert "\\fBtoy\\-models\\fR(1)" in pages["toy.1"] and "\\fBtoy\\fR(1)" in pages["toy-models.1"]


# ---------------------------------------------------------------------------------------------
# completion: the program answers the completion scripts' call back


@pytest.mark.parametrize(
    "prog, var, env, expected",
    [
        ("oasr", "_OASR_COMPLETE", {"COMP_WORDS": "oasr con", "COMP_CWORD": "1"}, "convert"),
        ("oasr", "_OASR_COMPLETE", {"COMP_WORDS": "oasr convert --dt", "COMP_CWORD": "2"}, "--dtype"),
        ("oasr", "_OASR_COMPLETE", {"COMP_WORDS": "oasr convert --dtype bf", "COMP_CWORD": "3"}, "bfloat16"),
        ("oasr-convert", "_OASR_CONVERT_COMPLETE", {"COMP_WORDS": "oasr-convert --fail", "COMP_CWORD": "1"}, "--fail-fast"),
    ],
)
def test_bash_completion_round_trip(prog, var, env, expected):
    result = subprocess.run(
        _program(prog), env=_clean_env(**env, **{var: "complete_bash"}), capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [expected], (result.stdout, result.stderr)


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_completion_round_trip(shell):
    env = _clean_env(_OASR_COMPLETE=f"complete_{shell}", _TYPER_COMPLETE_ARGS="oasr ins", _TYPER_COMPLETE_FISH_ACTION="get-args")
    result = subprocess.run(_program("oasr"), env=env, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "inspect" in result.stdout and "convert" not in result.stdout, result.stdout


def test_checked_in_bash_script_completes_in_bash():
    bash = shutil.which("bash")
    program = _program("oasr")
    if bash is None or len(program) != 1:
        pytest.skip("needs bash and the installed oasr script")
    script = ROOT / "completions" / "oasr.bash"
    body = f"""
source {script}
COMP_WORDS=(oasr con); COMP_CWORD=1
_oasr_completion oasr
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    env = _clean_env(PATH=os.pathsep.join([str(Path(program[0]).parent), os.environ.get("PATH", "")]))
    result = subprocess.run([bash, "--norc", "--noprofile", "-c", body], env=env, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["convert"], (result.stdout, result.stderr)


# ---------------------------------------------------------------------------------------------
# help stays light


def test_help_does_not_import_torch():
    code = (
        "import io, sys, contextlib\n"
        "from oasr_cli.main import main, convert_main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    codes = [main(['--help']), main(['convert', '--help']), main(['inspect', '--help']), convert_main(['--help'])]\n"
        "assert codes == [0, 0, 0, 0], codes\n"
        "assert 'Usage' in out.getvalue()\n"
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('gen_cli_docs', {str(SCRIPT)!r})\n"
        "docs = sys.modules['gen_cli_docs'] = importlib.util.module_from_spec(spec); spec.loader.exec_module(docs)\n"
        "docs.generated_files()\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy', 'safetensors', 'transformers'))\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], env=_clean_env(), capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr


def test_help_importtime_has_no_torch():
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "oasr_cli", "--help"],
        env=_clean_env(), capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    imported = [line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")]
    assert imported, result.stderr[:500]
    assert not [m for m in imported if m.split(".")[0] == "torch"]


# ---------------------------------------------------------------------------------------------
# help: whole option names when piped, and examples in every command


def _leaf_commands():
    for path, command, _ in _all_commands():
        if not hasattr(command, "list_commands"):
            yield path, command


def test_piped_help_keeps_option_names_whole():
    """`oasr transcribe --help | grep temperature-increment` finds it, whatever COLUMNS says."""
    env = _clean_env(COLUMNS="40")
    env.pop("TERMINAL_WIDTH", None)
    result = subprocess.run(_program("oasr") + ["transcribe", "--help"], env=env, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("--temperature-increment-on-fallback") == 1
    assert "--condition-on-previous-text" in result.stdout and "…" not in result.stdout
    result = subprocess.run(_program("oasr") + ["transcribe", "--help"], env=_clean_env(TERMINAL_WIDTH="60"), capture_output=True, text=True, cwd=ROOT, timeout=60)
    options = result.stdout.split("Examples:")[0].splitlines()
    assert max(len(line) for line in options if not line.lstrip().startswith("--")) <= 60  # an explicit TERMINAL_WIDTH still decides


def test_every_command_has_examples_in_help_and_man_page(cli):
    pages = docs.man_pages()
    for path, command in _leaf_commands():
        code, out, err = (cli(*path[1:], "--help") if path[0] == "oasr" else (0, "", ""))
        assert code == 0, err
        name = " ".join(path)
        if path[0] == "oasr":
            assert "Examples:" in out, f"{name} --help shows no examples"
            example = next(line.strip() for line in out.split("Examples:", 1)[1].splitlines() if line.strip().startswith(("oasr", "source")))
            assert example.split()[0] in ("oasr", "source"), example
        page = pages["-".join(path) + ".1"]
        assert ".SH EXAMPLES\n" in page, f"{name}'s man page has no EXAMPLES"
        assert page.index(".SH EXAMPLES") < page.index(".SH EXIT STATUS")


# ---------------------------------------------------------------------------------------------
# oasr completion show|install


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_show_prints_the_checked_in_scripts(cli, shell):
    code, out, err = cli("completion", "show", shell)
    assert code == 0, err
    names = {"bash": ("oasr.bash", "oasr-convert.bash"), "zsh": ("_oasr", "_oasr-convert"), "fish": ("oasr.fish", "oasr-convert.fish")}[shell]
    assert out == "\n".join((ROOT / "completions" / n).read_text() for n in names)


def test_completion_install_writes_where_each_shell_looks(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    for var in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "BASH_COMPLETION_USER_DIR", "ZDOTDIR"):
        monkeypatch.delenv(var, raising=False)
    expected = {
        "bash": tmp_path / ".local/share/bash-completion/completions/oasr.bash",
        "zsh": tmp_path / ".zfunc/_oasr",
        "fish": tmp_path / ".config/fish/completions/oasr.fish",
    }
    for shell, path in expected.items():
        code, out, err = cli("completion", "install", shell)
        assert code == 0, err
        assert out.splitlines()[0] == str(path) and len(out.splitlines()) == 2  # oasr and oasr-convert
        assert path.read_text() == (ROOT / "completions" / path.name).read_text()
        assert ("fpath+=" in err) == (shell == "zsh")  # zsh's extra step is said
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    code, out, _ = cli("completion", "install", "bash")
    assert code == 0 and out.splitlines()[0] == str(tmp_path / "data/bash-completion/completions/oasr.bash")
    assert cli("completion", "show", "tcsh")[0] == 2
