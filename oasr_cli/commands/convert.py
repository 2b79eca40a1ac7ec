"""oasr convert SRC [SRC ...] DST"""

from __future__ import annotations

from typing import Annotated

import typer

from ..options import ArchitectureOpt, Dtype, DtypeOpt, FailFastOpt, ForceOpt, Report, paths_not_blank, reporting
from ..output import human_size, print_json


EXAMPLES = """Examples:

A CTranslate2 (faster-whisper) model into a native bundle:
  oasr convert ./faster-whisper-small ./whisper-small

What detection picks and how the tensors map, writing nothing:
  oasr convert --dry-run ./checkpoint ./out

Several checkpoints into one folder of bundles, in bfloat16:
  oasr convert --dtype bfloat16 ./tiny ./base ./bundles
"""


@reporting
def convert(
    paths: Annotated[
        list[str],
        typer.Argument(
            help="One or more sources, then the destination. With several sources DST is a folder of bundles.",
            metavar="SRC... DST",
            show_default=False,
            callback=paths_not_blank,
        ),
    ],
    architecture: ArchitectureOpt = None,
    dtype: DtypeOpt = Dtype.auto,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Detect and map, print the summary, write nothing.")] = False,
    force: ForceOpt = False,
    fail_fast: FailFastOpt = False,
    *,
    report: Report,
) -> None:
    """Convert checkpoints (CTranslate2, Hugging Face, openai-whisper) into native oasr bundles.

    Atomic (a failed run leaves DST as it was) and idempotent (an up-to-date bundle is skipped).
    """
    if len(paths) < 2:
        raise typer.BadParameter("give at least one source and a destination", param_hint="SRC... DST")
    from oasr.conversion.run import convert as run_convert

    from ..errors import sigterm_interrupts

    *sources, dst = paths
    with sigterm_interrupts():  # a stopped conversion removes what it extracted and wrote
        results = run_convert(
            sources,
            dst,
            architecture=architecture,
            dtype=dtype.value,
            force=force,
            dry_run=dry_run,
            fail_fast=fail_fast,
            on_result=None if (report.json_out or report.quiet) else _print_result,
        )
    if report.json_out:
        print_json([r.to_dict() for r in results])
    failed = [r for r in results if r.status == "failed"]
    if failed:
        if not report.json_out:
            typer.echo(f"oasr: {len(failed)} of {len(results)} source(s) failed: {', '.join(r.source for r in failed)}", err=True)
        raise typer.Exit(1)


def _print_result(r) -> None:
    if r.status == "failed":
        typer.echo(f"failed     {r.source}: {r.error}", err=True)
        return
    if r.status == "skipped":
        typer.echo(f"skipped    {r.source} -> {r.destination} (up to date)")
        return
    verb = "would write" if r.status == "planned" else "converted  "
    typer.echo(
        f"{verb} {r.source} -> {r.destination}: {r.architecture} via {r.converter}, {r.dtype}, "
        f"{r.tensors} tensors, {r.parameters / 1e6:.1f}M parameters, {human_size(r.bytes)}, {r.seconds:.1f} s"
    )
    if r.status == "planned":
        claims = ", ".join(f"{c['converter']} ({c['specificity']}: {c['reason']})" for c in r.claims) or "explicit --architecture"
        typer.echo(f"  detection: {claims}")
        typer.echo(f"  mapping: {r.mapped} source tensors mapped, {len(r.dropped)} expected-unused dropped, 0 missing")
