"""``dtype="auto"`` on a CPU: the fastest compute type that holds accuracy there.

The choice, per model family, from measurements (benchmarks/precision.py prints them):

- **int8 weights** (the quantized path of ``oasr quantize``) for the families that declare
  ``auto_int8_on_cpu``: Whisper decodes about twice as fast as in fp32 on a 2-core AVX-512 CPU
  with its WER unchanged on the test clips. The int8 variant of a full-precision bundle is made
  on first use (about a second for Whisper base) and kept: beside the bundle in the oasr cache
  (``<key>.int8``, removed with it by ``oasr models rm``), or under ``variants/`` of the cache,
  keyed by the bundle's sha256, for a bundle given by path.
- **fp32** otherwise. bf16 was measured too (AVX-512 BF16 / AMX CPUs): torch's CPU kernels for
  the small matrix-vector products of decoding are slower in bf16 than int8 and than fp32 on
  such a CPU, so auto never picks it; ``--dtype bfloat16`` still runs it.

``--dtype float32`` (or any explicit dtype) keeps full precision; the choice is logged.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from .errors import InputError, OasrError
from .io import bundle as _bundle

log = logging.getLogger("oasr")

VARIANT_SCHEME = "int8"
VARIANT_SUFFIX = ".int8"


@dataclass(frozen=True)
class CpuChoice:
    """What ``auto`` runs on a CPU: ``bundle`` (maybe an int8 variant) in ``dtype``."""

    bundle: Path
    dtype: str  # the float dtype of what is not quantized: always "float32" on a CPU
    quantized: bool  # an int8 variant replaced the full-precision bundle


def wants_int8(bundle: Path) -> bool:
    """Whether ``auto`` on a CPU runs ``bundle`` as int8 (a full-precision bundle of a family
    whose int8 accuracy was checked)."""
    from .models.architectures import model_entry

    cfg = _bundle.existing_config(bundle)
    if cfg is None:
        return False  # not a bundle (loading says what it is)
    if cfg.quantization is not None:
        return False  # already quantized: used as it is
    model_cls = model_entry(cfg.architecture).model_cls
    return bool(getattr(model_cls, "auto_int8_on_cpu", False)) and model_cls.quant_refusal is None


def variant_path(bundle: Path) -> Path:
    """Where the int8 variant of ``bundle`` lives (made or not)."""
    from .hub.cache import cache_root
    from .loading import weights_sha256

    bundle = Path(bundle).resolve()
    root = cache_root().resolve()
    if bundle.is_relative_to(root / "bundles"):
        return bundle.with_name(bundle.name + VARIANT_SUFFIX)
    return root / "variants" / f"{weights_sha256(bundle)[:24]}{VARIANT_SUFFIX}"


def _current(variant: Path, bundle: Path) -> bool:
    """``variant`` is a complete int8 bundle quantized from these very weights."""
    from .loading import weights_sha256

    cfg = _bundle.existing_config(variant)
    if cfg is None or cfg.quantization is None or not (variant / _bundle.WEIGHTS_NAME).is_file():
        return False
    return cfg.quantization.get("scheme") == VARIANT_SCHEME and cfg.quantization.get("source_sha256") == weights_sha256(bundle)


def int8_variant(bundle: Path) -> Path:
    """The int8 variant of the full-precision ``bundle``, made now if missing or stale."""
    from .quant.quantize import quantize

    variant = variant_path(bundle)
    if not _current(variant, bundle):
        log.info("dtype auto: making the int8 variant of %s at %s (once)", bundle, variant)
        variant.parent.mkdir(parents=True, exist_ok=True)
        quantize(bundle, variant, scheme=VARIANT_SCHEME, force=True)
    return variant


def cpu_choice(bundle: Path) -> CpuChoice:
    """What ``auto`` runs on the CPU for ``bundle``; logged with the flag that overrides it.

    A variant that cannot be made (a read-only cache, a full disk) costs speed, not the run: the
    full-precision bundle is used, with a warning.
    """
    bundle = Path(bundle)
    if not wants_int8(bundle):
        return CpuChoice(bundle, "float32", quantized=False)
    try:
        variant = int8_variant(bundle)
    except InputError as e:  # a model too small to have a layer worth quantizing
        log.info("dtype auto: %s runs in float32 (%s)", bundle, e)
        return CpuChoice(bundle, "float32", quantized=False)
    except (OSError, OasrError) as e:
        log.warning("dtype auto: no int8 variant of %s (%s); running it in float32", bundle, e)
        return CpuChoice(bundle, "float32", quantized=False)
    log.info("dtype auto on this CPU: int8 weights (%s); --dtype float32 keeps full precision", variant)
    return CpuChoice(variant, "float32", quantized=True)


def make_variants(bundle: Path) -> Path | None:
    """At ``oasr models pull``: the int8 variant ``auto`` would use on a CPU, made ahead; None
    when the model runs in float there (or the variant could not be made: said in the log)."""
    choice = cpu_choice(Path(bundle))
    return choice.bundle if choice.quantized else None
