"""``dtype="auto"`` on a CPU: the fastest compute type that holds accuracy there.

The choice, per model family, from measurements (``benchmarks/transcribe.py``, Whisper base,
beam 5, 2 threads of an AVX-512 VNNI/BF16 CPU, in process; WER with tests/wer.py):

- **int8 weights** (the quantized path of ``oasr quantize``) for the families that declare
  ``auto_int8_on_cpu``. Whisper base: jfk.wav 0.79 s vs 1.32 s fp32 (WER 0 / 0), sample.wav
  3.5 s vs 13.6 s (WER 16.0% / 28.4%: fp32 falls back to sampling there), 3 minutes of the two
  alternated 21.8 s vs 28.8 s (WER 13.2% / 12.8%). The int8 variant of a full-precision bundle
  is made on first use (about a second for base) and kept: beside the bundle in the oasr cache
  (``<key>.int8``, removed with it by ``oasr models rm``), or under ``variants/`` of the cache,
  keyed by the bundle's sha256, for a bundle given by path.
- **bf16 attention** beside those int8 weights where the CPU multiplies bf16 natively (AMX-BF16
  or AVX-512 BF16): the attentions over the audio (Whisper's encoder self-attention and the
  decoder's cross-attention, whose keys and values are then kept in bf16, half the memory a
  decoding step reads) run in bf16; the rest stays fp32. Whisper base, 2 threads, AMX: the
  encoder 0.32 s a window against 0.40 s, a beam-5 step 15.0 ms against 16.5, 8 windows batched
  11.1 s against 13.9 s on the 5-minute concatenation (WER 15.3% / 16.0%); AVX-512 BF16 without
  AMX (AMD Zen 5): sample.wav 2.77 s against 3.03 s (medians of 5, the same 205 tokens), and
  the encoder's attention as explicit bf16 products (SDPA's fused kernel gains nothing from bf16
  there) 0.167 s a window against 0.272. It moves the model less than int8 does: on
  sample.wav's first window the encoder output keeps a cosine of 0.99994 with fp32 (int8:
  0.9988) and the logits 0.999997.
- **fp32** otherwise. A bf16 model is never picked: on the same CPU it ran Whisper base at 0.98x,
  0.89x and 0.76x of fp32's speed on those three files, and its sample.wav WER was 75%
  (``--dtype bfloat16`` still runs it).

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
    """What ``auto`` runs on a CPU: ``bundle`` (maybe an int8 variant), its float parts in fp32."""

    bundle: Path
    quantized: bool  # an int8 variant replaced the full-precision bundle


def wants_int8(bundle: Path) -> bool:
    """Whether ``auto`` on a CPU runs ``bundle`` as int8 (a full-precision bundle of a family
    whose int8 accuracy was checked)."""
    from .models.architectures import find_architecture

    cfg = _bundle.existing_config(bundle)
    if cfg is None:
        return False  # not a bundle (loading says what it is)
    if cfg.quantization is not None:
        return False  # already quantized: used as it is
    model_cls = find_architecture(cfg.architecture).model_cls
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
        return CpuChoice(bundle, quantized=False)
    try:
        variant = int8_variant(bundle)
    except InputError as e:  # a model too small to have a layer worth quantizing
        log.info("dtype auto: %s runs in float32 (%s)", bundle, e)
        return CpuChoice(bundle, quantized=False)
    except (OSError, OasrError) as e:
        log.warning("dtype auto: no int8 variant of %s (%s); running it in float32", bundle, e)
        return CpuChoice(bundle, quantized=False)
    log.info("dtype auto on this CPU: int8 weights (%s); --dtype float32 keeps full precision", variant)
    return CpuChoice(variant, quantized=True)


def native_bf16() -> bool:
    """The CPU multiplies bf16 in hardware (AMX tiles or AVX-512 BF16 dot products)."""
    from .quant.modules import cpu_flags

    return bool({"amx_bf16", "avx512_bf16"} & cpu_flags())


# Query rows per block of the audio attentions where the CPU has AVX-512 BF16 but no AMX: the
# encoder 1.6x faster than SDPA there (Whisper base: 0.167 s a window against 0.272, AMD Zen 5);
# 100 and 200 rows ran alike on random 1500-frame inputs.
ATTENTION_ROWS = 100


def tune_for_cpu(model) -> None:
    """``auto`` on a CPU, once a quantized model is loaded: its long attentions (Whisper's encoder
    and cross-attention, ``attend_in``) in bf16 where the CPU multiplies bf16 natively; without
    AMX tiles, which SDPA's fused kernel uses, as explicit bf16 products."""
    if hasattr(model, "attend_in") and native_bf16():
        import torch

        from .quant.modules import cpu_flags

        rows = None if "amx_bf16" in cpu_flags() else ATTENTION_ROWS
        model.attend_in(torch.bfloat16, rows)
        log.info("dtype auto on this CPU: the encoder's and the cross-attention in bfloat16")


def onednn_fp32() -> bool:
    """fp32 GEMMs through oneDNN rather than torch's BLAS (MKL) on this CPU: where the CPU is not
    Intel's, MKL's ran 2.4-3x slower (AMD Zen 5, 2 threads, Whisper base's shapes: an encoder MLP
    layer 17 ms against 7 ms, a beam-5 step's 2048-wide layer 0.14 ms against 0.05, the token
    table at 40 rows 18.6 ms against 6.1)."""
    import torch

    from .quant.modules import cpu_vendor

    return cpu_vendor() not in ("GenuineIntel", "") and torch.backends.mkldnn.is_available()


def pack_for_cpu(model) -> None:
    """An fp32 model loaded on the CPU: its linear maps through oneDNN where ``onednn_fp32``
    (``oasr.onednn.pack_linears``). The packed copies cost the fp32 weights' size again in memory
    (Whisper base: about 180 MB more RSS)."""
    if onednn_fp32():
        from .onednn import pack_linears

        pack_linears(model)
        log.info("float32 on this CPU: linear layers through oneDNN (torch's BLAS is slower here)")


def make_variants(bundle: Path) -> Path | None:
    """At ``oasr models pull``: the int8 variant ``auto`` would use on a CPU, made ahead; None
    when the model runs in float there (or the variant could not be made: said in the log)."""
    choice = cpu_choice(Path(bundle))
    return choice.bundle if choice.quantized else None
