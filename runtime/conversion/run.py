"""``oasr convert``: foreign checkpoints -> native bundles, atomic and idempotent.

torch is imported only for a converter that hands torch tensors or gives no layout, or for a
bfloat16 cast: a CTranslate2 Whisper folder converts on numpy alone.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..io import bundle as _bundle
from ..errors import ConversionError, InputError, OasrError
from . import arrays
from .accounting import check_tensor_dtypes, check_weights
from .detect import check_source, pick_converter
from ..version import __version__

log = logging.getLogger("oasr")

DTYPES = ("auto", "float32", "float16", "bfloat16")


@dataclass
class ConvertResult:
    source: str
    destination: str
    status: str  # "converted", "skipped" (up to date), "planned" (dry run) or "failed"
    converter: str = ""
    architecture: str = ""
    dtype: str = ""
    claims: list[dict] = field(default_factory=list)
    tensors: int = 0
    parameters: int = 0
    bytes: int = 0
    mapped: int = 0
    dropped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def destinations(sources: Sequence[Path], dst: Path) -> list[Path]:
    """One source converts into DST itself; several go into DST/<source name>."""
    if len(sources) == 1:
        return [dst]
    names = [Path(s).stem if Path(s).is_file() else Path(s).resolve().name for s in sources]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError(f"several sources share the name {dupes[0]!r}; convert them one by one")
    return [dst / n for n in names]


def check_destination(src: Path, dst: Path) -> None:
    """Refuse a destination that is, holds or lies inside the source: the bundle replaces DST
    whole, so a source inside it would be deleted, and one around it would be written into."""
    s, d = Path(src).resolve(), Path(dst).resolve()
    if d == s or s in d.parents:
        raise InputError(f"destination {dst} is inside the source {src}")
    if d in s.parents:
        raise InputError(
            f"the source {src} lies inside the destination {dst}, which would be replaced whole; "
            "move the source out or choose another destination"
        )
    if dst.exists() and not (_bundle.is_bundle(dst) or (dst.is_dir() and not any(dst.iterdir()))):
        raise InputError(f"destination {dst} exists and is not an oasr bundle; choose another path or remove it")
    if not dst.parent.is_dir():
        raise InputError(f"the parent folder of {dst} does not exist")


def non_finite_tensors(tensors: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> list[str]:
    """The names of the floating tensors that hold inf or NaN, in order (integer ones cannot)."""
    items = tensors.items() if isinstance(tensors, Mapping) else tensors
    return [name for name, t in items if arrays.is_floating(t) and not arrays.all_finite(t)]


def describe_non_finite(bad: Sequence[str]) -> str:
    more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
    return f"{len(bad)} tensor(s) hold inf or NaN values ({', '.join(bad[:3])}{more})"


def check_finite(tensors: Mapping[str, Any], where: str) -> None:
    """A ConversionError naming the first few tensors (and the count) that hold inf or NaN."""
    bad = non_finite_tensors(tensors)
    if bad:
        raise ConversionError(f"{where}: {describe_non_finite(bad)}; the weights are corrupt, refusing them")


def _up_to_date(dst: Path, converter: str, hashes: dict[str, str], dtype: str, source_label: str | None) -> bool:
    cfg = _bundle.existing_config(dst)
    if cfg is None:
        return False
    p = cfg.provenance
    return (
        p.source_format == converter
        and p.source_files == hashes
        and p.oasr_version == __version__
        and p.options.get("dtype") == dtype
        and (source_label is None or p.source == source_label)
        and (dst / _bundle.WEIGHTS_NAME).is_file()
    )


def convert_one(
    src: Path,
    dst: Path,
    *,
    architecture: str | None = None,
    dtype: str = "auto",
    force: bool = False,
    dry_run: bool = False,
    source_label: str | None = None,
) -> ConvertResult:
    start = time.perf_counter()
    if dtype not in DTYPES:
        raise InputError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    src = check_source(Path(src))
    dst = Path(dst)
    if _bundle.is_bundle(src):
        raise InputError(f"{src} is already a native bundle; nothing to convert")
    check_destination(src, dst)
    converter_cls, claims = pick_converter(src, architecture)
    src = src.resolve()
    result = ConvertResult(
        source=str(src),
        destination=str(dst),
        status="planned" if dry_run else "converted",
        converter=converter_cls.name,
        architecture=converter_cls.architecture,
        claims=[c.to_dict() for c in claims],
    )
    converter = converter_cls(src)
    hashes = converter.source_hashes()
    if not dry_run and not force and _up_to_date(dst, converter_cls.name, hashes, dtype, source_label):
        result.status = "skipped"
        result.dtype = _bundle.read_config(dst).dtype
        result.seconds = time.perf_counter() - start
        return result

    converted = converter.convert(hashes)
    model = converter.layout(converted.model_config)
    if model is None:
        from ..models.weights import meta_model

        model = meta_model(converted.architecture, converted.model_config)
    tensors, report = check_weights(model, converted.state_dict, converter_cls)
    stored = check_tensor_dtypes(tensors)
    target = stored if dtype == "auto" else dtype
    if target != stored:
        tensors = {k: arrays.cast(v, target) for k, v in tensors.items()}
    # After the cast: a corrupt source, and values too large for the target dtype, both show here.
    check_finite(tensors, str(src))
    result.dtype = target
    result.tensors = len(tensors)
    result.parameters = sum(arrays.numel(t) for t in tensors.values())
    result.bytes = sum(arrays.nbytes(t) for t in tensors.values())
    result.mapped = len(report.mapped)
    result.dropped = report.dropped
    result.notes = converted.notes
    for note in converted.notes:
        log.warning("%s", note)
    if not dry_run:
        provenance = converted.provenance
        provenance.options["dtype"] = dtype
        if source_label is not None:
            provenance = dataclasses.replace(provenance, source=source_label)
        provenance = dataclasses.replace(provenance, dropped=tuple(report.dropped))
        config = _bundle.BundleConfig(
            architecture=converted.architecture,
            model=converted.model_config.to_dict(),
            dtype=target,
            tokenizer=converted.tokenizer,
            features=converted.features,
            decoding=converted.decoding,
            provenance=provenance,
            capabilities=tuple(sorted(model.capabilities)),
            aux=converted.aux,
        )
        _bundle.write_bundle(dst, config, tensors, converted.tokenizer_files)
    result.seconds = time.perf_counter() - start
    return result


def convert(
    sources: Sequence[str | Path],
    dst: str | Path,
    *,
    architecture: str | None = None,
    dtype: str = "auto",
    force: bool = False,
    dry_run: bool = False,
    fail_fast: bool = False,
    on_result: Callable[[ConvertResult], None] | None = None,
    source_label: str | None = None,
) -> list[ConvertResult]:
    """Convert each source into a bundle; a failed source is reported and the rest go on.

    ``source_label``: what the bundle's ``provenance.source`` names (the hub passes the
    repository and commit, or the packages, a checkpoint came from); None: the source path.
    """
    if not sources:
        raise InputError("no source given")
    dst = Path(dst)
    sources = [Path(s) for s in sources]
    if len(sources) > 1:
        if dst.exists() and not dst.is_dir():
            raise InputError(f"with several sources, {dst} must be a directory")
        if _bundle.is_bundle(dst):
            raise InputError(f"with several sources, {dst} must be a directory of bundles, not a bundle")
    created: list[Path] = []
    if len(sources) > 1 and not dry_run:
        from ..io.files import make_parents

        created = make_parents(dst / "bundle")  # DST and its missing parents, taken away again if nothing lands
    results = []
    try:
        for src, out in zip(sources, destinations(sources, dst)):
            try:
                result = convert_one(
                    src, out, architecture=architecture, dtype=dtype, force=force, dry_run=dry_run, source_label=source_label
                )
            except (OasrError, OSError) as e:  # OSError: a full disk, a folder that cannot be written
                if len(sources) == 1 or fail_fast:
                    raise
                error = str(e) if isinstance(e, OasrError) else f"{out}: {e.strerror or e}"
                result = ConvertResult(source=str(src), destination=str(out), status="failed", error=error)
            results.append(result)
            if on_result is not None:
                on_result(result)
    finally:
        if created:
            from ..io.files import remove_empty

            remove_empty(created)  # only while empty: a folder that received a bundle stays
    return results
