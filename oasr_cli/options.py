"""Option types, flag groups and app settings shared by every command, defined once.

A flag shared by several commands is an ``Annotated`` alias here (``DeviceOpt``...). Flags that
travel together are a group: ``flag_group`` adds them to each command's signature and hands them
to its body as one object (``Report``: --json, -q, -v; the audio commands' ``InputFlags`` in
``oasr_cli.inputs``). ``from_flags`` builds a runtime options dataclass from the flags named as its
fields, so a command says only what differs (a parsed list, a computed schedule).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Callable, Mapping, Optional, Sequence

import typer

from oasr.errors import InputError
from oasr.threads import set_threads

from .output import setup_logging

CONTEXT = {"help_option_names": ["-h", "--help"]}


def new_app(name: str, help: str | None = None, *, epilog: str | None = None) -> typer.Typer:
    """A Typer app (a program or a command group) with oasr's settings: -h, no completion
    options (``oasr completion`` and the generated scripts do that), exceptions left to
    ``oasr_cli.errors``."""
    return typer.Typer(
        name=name,
        help=help,
        epilog=epilog,
        no_args_is_help=True,
        add_completion=False,
        context_settings=CONTEXT,
        pretty_exceptions_enable=False,
    )


def optional_float(text: Any) -> float | None:
    """The parser of a number flag that none/off switches off (a threshold, a gate)."""
    if text is None or isinstance(text, (int, float)):  # a default, already parsed
        return text
    if text.strip().lower() in ("none", "off"):
        return None
    try:
        return float(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a number (or 'none' to switch it off)") from None


def number_or_none(flag: str, *, metavar: str, help: str, panel: str | None = None) -> Any:
    """The type of a number flag that none/off switches off (a threshold, a gate), for a signature:
    ``gate: number_or_none("--gate", metavar="DB", help=...) = -60.0``."""
    return Annotated[Optional[float], typer.Option(flag, parser=optional_float, metavar=metavar, help=help, rich_help_panel=panel)]


MODEL_TAKES = "a native bundle, a checkpoint directory, a registry name (see oasr models list) or auto"
NAME_TAKES = "a registry name (see oasr models list), auto, or a Hugging Face org/repo[@revision]"


def _not_blank(takes: str) -> Callable[[Optional[str]], Optional[str]]:
    def check(value: Optional[str]) -> Optional[str]:
        if value is not None and not value.strip():
            raise typer.BadParameter(f"is empty; it takes {takes}")
        return value

    return check


# The callbacks of every flag or argument that names a model (-m, quantize's SRC, diarize's
# --vad-model, the NAME of oasr models): an empty or blank value is a usage error (exit 2), not
# the current folder.
model_spec = _not_blank(MODEL_TAKES)
model_name = _not_blank(NAME_TAKES)


def paths_not_blank(values):
    """Path arguments taken as text, so an empty one is a usage error (Path('') would be the
    current folder): the callback of convert's SRC... DST, inspect's PATH and quantize's DST."""
    if values is None:
        return None
    for value in values if isinstance(values, list) else [values]:
        if not value.strip():
            raise typer.BadParameter("is empty; it takes a file or folder path")
    return [Path(v) for v in values] if isinstance(values, list) else Path(values)


class Dtype(str, Enum):
    auto = "auto"
    float32 = "float32"
    float16 = "float16"
    bfloat16 = "bfloat16"


class RunDtype(str, Enum):
    """What a command that runs a model takes as --dtype / --compute-type: the float dtypes, and
    faster-whisper's compute types that oasr runs (int8 weights; int8_float32 is int8 with the
    float32 activations every CPU plan has)."""

    auto = "auto"
    float32 = "float32"
    float16 = "float16"
    bfloat16 = "bfloat16"
    int8 = "int8"
    int8_float32 = "int8_float32"
    default = "default"  # faster-whisper's name of auto


# faster-whisper's compute types -> the dtype oasr's compute plan takes (oasr.precision)
COMPUTE_TYPES = {"int8_float32": "int8", "default": "auto"}


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


def choices(name: str, values: Sequence[str]) -> type[Enum]:
    """A str Enum of ``values``: what Typer offers as a flag's choices (a registry's names)."""
    return Enum(name, {v: v for v in values}, type=str)  # type: ignore[return-value]


def format_choices(result: str, *extra: str) -> type[Enum]:
    """The choices of a command's -F: every output format the registry has for ``result`` (a
    plugin's too), in their listing order, then ``extra`` ("all")."""
    from oasr.formats.registry import names

    return choices(f"{result.title()}Format", [*names(result), *extra])


def format_option(result: str, help: str, *extra: str, repeatable: bool = False) -> Any:
    """The type of -F for a command whose results are ``result``: the registry's formats (a
    plugin's too) and ``extra`` as its choices, one value or (``repeatable``) several."""
    kind = format_choices(result, *extra)
    return Annotated[
        Optional[list[kind]] if repeatable else Optional[kind],
        typer.Option("--output-format", "-F", help=help, rich_help_panel="Output", show_default=False),
    ]


def model_option(flag: str, task: str, role: str, panel: str, used_by: str) -> Any:
    """The type of a flag naming one of a pipeline's models (``--embedding-model``), for a
    signature: a registry name of ``task``, a bundle or a checkpoint; unset, the one ``used_by`` uses."""
    help = f"The {role}: a registry name (oasr models list --task {task}), bundle or checkpoint. Default: the one {used_by} uses."
    return Annotated[Optional[str], typer.Option(flag, metavar="MODEL", help=help, rich_help_panel=panel, callback=model_spec)]


ArchitectureOpt = Annotated[
    Optional[str],
    typer.Option(
        "--architecture",
        "-a",
        help="Skip detection: a converter name (ctranslate2, hf-whisper, openai-whisper) or an architecture (whisper).",
        metavar="NAME",
    ),
]
DtypeOpt = Annotated[Dtype, typer.Option("--dtype", help="Weight precision; auto keeps the source's (convert) or picks per device (run: fp16 on a GPU; on a CPU int8 weights for Whisper, made once, else float32).")]
RunDtypeOpt = Annotated[
    RunDtype,
    typer.Option(
        "--dtype",
        "--compute-type",
        metavar="TYPE",
        help="Precision (auto, float32, float16, bfloat16, int8, int8_float32, default): auto is fp16 on a GPU, on a CPU int8 weights for Whisper (made once), else float32; int8 asks for int8 weights. "
        "--compute-type is faster-whisper's name (int8, int8_float32, float32, float16, bfloat16, default). Example: --compute-type int8.",
    ),
]
DeviceOpt = Annotated[Device, typer.Option("--device", help="Where the model runs; auto picks CUDA when present.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print a machine-readable JSON report on stdout.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Redo the work even when the destination is up to date.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Only errors on stderr.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Log decisions on stderr.")]
ThreadsOpt = Annotated[
    Optional[int],
    typer.Option("--threads", min=1, metavar="N", help="At most N CPU threads for the models (default: the cores this process may use); fewer while other processes keep cores busy.", show_default=False),
]
OutputOpt = Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to FILE instead of stdout ('-' is stdout).", metavar="FILE")]
FailFastOpt = Annotated[bool, typer.Option("--fail-fast", help="Stop at the first failed input instead of going on.")]
MAX_AUDIO_SECONDS = 86400.0  # 24 h: the longest recording the audio commands decode by default
MaxAudioOpt = Annotated[
    float,
    typer.Option("--max-audio-seconds", min=1, metavar="S", envvar="OASR_MAX_AUDIO_SECONDS", show_envvar=True, help="Refuse a recording longer than S seconds, from its header before decoding and while decoding."),
]
ModelOpt = Annotated[
    str,
    typer.Option(
        "--model",
        "-m",
        help="A native bundle, a checkpoint directory (converted on the fly), or a registry name (auto: the default model).",
        metavar="MODEL",
        callback=model_spec,
    ),
]
LanguageOpt = Annotated[
    Optional[str],
    typer.Option("--language", "-l", help="Language code of the speech (en, de, ...); auto or unset detects it.", metavar="CODE"),
]
AudioArg = Annotated[
    Optional[list[str]],
    typer.Argument(help="Audio files ('-' reads stdin), after those given with -f.", metavar="AUDIO", show_default=False),
]
AudioFilesOpt = Annotated[
    Optional[list[str]],
    typer.Option("--file", "-f", help="An audio file to process ('-' reads stdin); repeat for a batch.", metavar="AUDIO", show_default=False),
]
OutputDirOpt = Annotated[
    Optional[Path],
    typer.Option("--output-dir", help="Write one file per input and format into DIR (created if missing).", metavar="DIR"),
]


# --- flag groups ------------------------------------------------------------------------------------

Flag = tuple[str, Any, Any]  # (parameter name, Annotated type, default)


def flag_group(param: str, build: Callable[..., Any], *, before: Sequence[Flag] = (), after: Sequence[Flag] = ()):
    """Decorator: flags several commands share, declared once.

    The command's signature (what Typer reads for flags and help) gets ``before`` ahead of its
    own flags and ``after`` behind them; its body gets one argument ``param``, the value of
    ``build(**those flags)``. Groups stack.
    """
    shared = [*before, *after]

    def declare(flags: Sequence[Flag]) -> list[inspect.Parameter]:
        return [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=a, default=d) for name, a, d in flags]

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        own = inspect.signature(fn, eval_str=True).parameters.values()
        params = [*declare(before), *(p.replace(kind=p.KEYWORD_ONLY) for p in own if p.name != param), *declare(after)]

        @functools.wraps(fn)
        def command(**kwargs: Any) -> Any:
            group = build(**{name: kwargs.pop(name) for name, _, _ in shared})
            return fn(**kwargs, **{param: group})

        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command

    return wrap


@dataclass(frozen=True)
class Report:
    """How a command reports: --json on stdout, and what goes to stderr (-q, -v)."""

    json_out: bool
    quiet: bool
    verbose: bool
    threads: int | None = None


def _report(json_out: bool, quiet: bool, verbose: bool, threads: int | None = None) -> Report:
    setup_logging(quiet, verbose)  # in effect from the start of the command
    set_threads(threads)
    return Report(json_out, quiet, verbose, threads)


reporting = flag_group(
    "report",
    _report,
    after=(("json_out", JsonOpt, False), ("quiet", QuietOpt, False), ("verbose", VerboseOpt, False), ("threads", ThreadsOpt, None)),
)


# --- flags -> runtime options -------------------------------------------------------------------------


def usage(message: str, hint: str | None = None) -> typer.BadParameter:
    return typer.BadParameter(message, param_hint=hint)


def checked(build: Callable[..., Any], *args: Any, **fields: Any) -> Any:
    """``build(*args, **fields)`` (an options dataclass): a bad value is a usage error, exit 2."""
    try:
        return build(*args, **fields)
    except InputError as e:  # the message names the flag
        raise usage(str(e)) from e


def from_flags(cls: type, flags: Mapping[str, Any], **given: Any) -> Any:
    """``cls`` (a runtime options dataclass) from the command's ``flags`` (its ``locals()``) that
    are named as its fields, an Enum flag by its value; ``given`` sets the fields a flag does not
    hold as they are. A field with neither keeps its default. A bad value is a usage error."""
    names = {f.name for f in dataclasses.fields(cls)}
    values = {k: v.value if isinstance(v, Enum) else v for k, v in flags.items() if k in names}
    return checked(cls, **{**values, **given})
