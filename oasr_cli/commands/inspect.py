"""oasr inspect PATH"""

from __future__ import annotations

from typing import Annotated

import typer

from ..options import JsonOpt, paths_not_blank
from ..output import human_size, print_json


EXAMPLES = """Examples:

What a bundle holds (architecture, size, capabilities, provenance):
  oasr inspect ./whisper-small

Which converter would read a foreign checkpoint, and why, as JSON:
  oasr inspect --json ./faster-whisper-small

Read and check every tensor of a cached model (exit 1 on a problem):
  oasr inspect --verify "$(oasr models path whisper-base)"
"""


def inspect(
    path: Annotated[str, typer.Argument(help="A native bundle, or a foreign checkpoint directory or file.", show_default=False, callback=paths_not_blank)],
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="Bundles: read every tensor and check shapes against the model, finite values, the safetensors header and, in the oasr cache, the recorded sha256; exit 1 on a problem.",
        ),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Show what a bundle holds, or what detection would pick for a foreign checkpoint and why."""
    from oasr.conversion.inspect import inspect as run_inspect

    info = run_inspect(path, verify=verify)
    if json_out:
        print_json(info)
        _exit_if_unverified(info)
        return
    if info["kind"] == "bundle":
        prov = info["provenance"]
        lines = [
            f"bundle         {info['path']} (format {info['format_version']})",
            f"architecture   {info['architecture']}",
            f"parameters     {info['parameters'] / 1e6:.1f}M in {info['tensors']} tensors, {human_size(info['bytes'])}",
            f"dtypes         {', '.join(f'{k} x{v}' for k, v in info['tensor_dtypes'].items())}",
            f"capabilities   {', '.join(info['capabilities']) or 'none'}",
            f"tokenizer      {info['tokenizer']['kind']} ({', '.join(info['tokenizer']['files']) or 'no assets'})",
            f"source         {prov['source_format']}: {prov['source']}",
        ]
        lines += [f"  sha256       {sha}  {name}" for name, sha in prov["source_files"].items()]
        lines.append(f"converted by   oasr {prov['oasr_version']}")
        if info["quantization"]:
            q = info["quantization"]
            counts = {s: list(q["layers"].values()).count(s) for s in sorted(set(q["layers"].values()))}
            layers = ", ".join(f"{n} {s}" for s, n in counts.items())
            kept = f"; float by --keep or rule: {', '.join(q['keep'])}" if q["keep"] else ""
            lines.append(f"quantization   {q['scheme']} (group {q['group_size']}): {layers} layers{kept}")
            lines.append(f"  from         sha256 {q['source_sha256']} by oasr {q['oasr_version']}")
    else:
        lines = [f"foreign        {info['path']}"]
        if not info["claims"]:
            lines.append("claims         none")
        for c in info["claims"]:
            lines.append(f"claim          {c['converter']} -> {c['architecture']} (specificity {c['specificity']}: {c['reason']})")
        lines.append(f"picked         {info['picked']}" if info["picked"] else f"problem        {info['problem']}")
    if "verify" in info:
        v = info["verify"]
        lines.append(f"verify         {'ok' if v['ok'] else 'FAILED'}: {'; '.join(v['problems'] or v['checks'])}")
    typer.echo("\n".join(lines))
    _exit_if_unverified(info)


def _exit_if_unverified(info) -> None:
    v = info.get("verify")
    if v is not None and not v["ok"]:
        typer.echo(f"oasr: error: {info['path']} failed verification: {'; '.join(v['problems'])}", err=True)
        raise typer.Exit(1)
