"""oasr quantize SRC DST --scheme int8|int4"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..options import ForceOpt, Report, model_spec, paths_not_blank, reporting
from ..output import hub_progress, human_size, interactive, print_json


class Scheme(str, Enum):
    int8 = "int8"
    int4 = "int4"


EXAMPLES = """Examples:

An int8 copy of a bundle, checked on a clip (logit cosine, WER change):
  oasr quantize ./whisper-small ./whisper-small-int8 --verify

A Parakeet bundle to int8, refused (exit 1, nothing written) below the gates (int8: cosine 0.999):
  oasr quantize ./parakeet-ctc ./parakeet-ctc-int8 --verify --verify-audio jfk.wav

int4 from a registry name, the decoder's cross-attention kept in floating point:
  oasr quantize whisper-base ./whisper-base-int4 --scheme int4 --keep 'decoder.blocks.*.cross_attn.*'
"""


@reporting
def quantize(
    src: Annotated[
        str,
        typer.Argument(help="A native bundle, a checkpoint directory, or a registry name (as -m takes).", metavar="SRC", show_default=False, callback=model_spec),
    ],
    dst: Annotated[str, typer.Argument(help="The quantized bundle to write.", metavar="DST", show_default=False, callback=paths_not_blank)],
    scheme: Annotated[
        Scheme,
        typer.Option("--scheme", help="int8: per-output-channel; int4: groups of 128 along the input (token tables stay int8)."),
    ] = Scheme.int8,
    keep: Annotated[
        Optional[list[str]],
        typer.Option("--keep", help="Keep weights whose name matches this fnmatch pattern in floating point.", metavar="PATTERN", show_default=False),
    ] = None,
    verify: Annotated[
        bool, typer.Option("--verify", help="Transcribe a clip with source and result; print output cosine and WER change (CTC/RNN-T/TDT: under the gates fails and DST is not written).")
    ] = False,
    verify_audio: Annotated[
        Optional[Path],
        typer.Option("--verify-audio", help="The clip for --verify (default: pyannote-audio's sample when installed).", metavar="AUDIO"),
    ] = None,
    force: ForceOpt = False,
    *,
    report: Report,
) -> None:
    """Quantize a model's weights to int8 or int4 (a format-2 bundle): smaller, faster on CPU.

    Atomic (a failed run leaves DST as it was) and idempotent (an up-to-date DST is skipped).
    Architectures without validated rules are refused with the reason.
    """
    if verify_audio is not None and not verify:
        raise typer.BadParameter("--verify-audio needs --verify", param_hint="--verify-audio")
    from oasr.quant.quantize import quantize as run_quantize
    from oasr.quant.verify import check_gates, verify_clip
    from oasr.quant.verify import verify as run_verify

    clip = verify_clip(verify_audio) if verify else None  # before anything is written

    def check(source: Path, quantized: Path):
        outcome = run_verify(source, quantized, clip)
        check_gates(outcome)  # a failed gate: one line, exit 1, DST left as it was
        return outcome

    with hub_progress(interactive(report.quiet)) as progress:
        result = run_quantize(
            src, dst, scheme=scheme.value, keep=tuple(keep or ()), force=force, progress=progress,
            check=check if clip is not None else None,
        )
    if report.json_out:
        print_json(result.to_dict())
    elif not report.quiet:
        _print_result(result)


def _print_result(r) -> None:
    if r.status == "skipped":
        typer.echo(f"skipped    {r.source} -> {r.destination} (up to date)")
    else:
        schemes = sorted(set(r.layers.values()))
        typer.echo(
            f"quantized  {r.source} -> {r.destination}: {r.architecture}, {len(r.layers)} layers "
            f"({', '.join(schemes)}), {human_size(r.source_bytes)} -> {human_size(r.bytes)} "
            f"({100 * r.ratio:.1f}%), {r.seconds:.1f} s"
        )
        if r.kept:
            typer.echo(f"  kept in floating point: {', '.join(r.kept)}")
    if r.verify is not None:
        v = r.verify
        encoder = f"encoder cosine {v['encoder_cosine']:.5f}, head " if "encoder_cosine" in v else ""
        typer.echo(f"  verify on {v['audio']}: {encoder}logit cosine {v['cosine']:.5f}, WER change {100 * v['wer_change']:.1f} points")
