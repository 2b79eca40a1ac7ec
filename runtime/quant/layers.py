"""Which layers of a model are quantized, and the swap of those layers for quantized modules.

The rules: every ``nn.Linear`` (and every module that declares itself linear with
``quant_as_linear``, such as FastConformer's kernel-1 convolutions) takes the asked scheme and every ``nn.Embedding`` takes int8 per
row (a token table, often tied as the output projection, is the most sensitive weight: int4
bundles keep it at int8), unless its weight matches one of the model's ``quant_keep`` patterns
or the user's, or it is small (fewer than ``MIN_FEATURES`` inputs). Everything else (convolutions,
norms, biases, positional tables, recurrent weights) stays in floating point.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Iterable, Mapping

import torch
from torch import nn

from ..errors import CapabilityError, LoadError
from ..models.base import OasrModel
from .modules import QuantEmbedding, QuantLinear, _Quantized, pack_ahead
from .schemes import SCHEMES
from .section import QuantizationSpec

MIN_FEATURES = 64  # smaller layers cost nothing to keep and their scales would be a large share


def _linear_like(module: nn.Module) -> bool:
    """A module that computes a linear map on its last dimension under another type (a kernel-1
    convolution run as a GEMM) and says so with ``quant_as_linear``; its weight is stored [out, in]."""
    return bool(getattr(module, "quant_as_linear", False))


def linear_layers(model: nn.Module) -> set[str]:
    """Names of the layers the rules consider: linear, linear-like and embedding layers."""
    return {n for n, m in model.named_modules() if isinstance(m, (nn.Linear, nn.Embedding)) or _linear_like(m)}


def check_quantizable(model: OasrModel | type[OasrModel], architecture: str) -> None:
    """Raise the architecture's refusal (its ``quant_refusal`` reason), if it has one."""
    if model.quant_refusal is not None:
        raise CapabilityError(f"{architecture} models cannot be quantized: {model.quant_refusal}")


def plan_layers(model: OasrModel, scheme: str, keep: Iterable[str] = ()) -> dict[str, str]:
    """module name -> scheme of every layer to quantize (the model may be on the meta device)."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}")
    patterns = tuple(model.quant_keep) + tuple(keep)
    layers = {}
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) or _linear_like(module):
            features = module.in_features if isinstance(module, nn.Linear) else module.in_channels
            layer_scheme = scheme
            if scheme == "int4" and features % 2:
                layer_scheme = "int8"  # two codes per byte need an even row
        elif isinstance(module, nn.Embedding):
            features, layer_scheme = module.embedding_dim, "int8"
        else:
            continue
        if features < MIN_FEATURES or any(fnmatchcase(f"{name}.weight", p) for p in patterns):
            continue
        layers[name] = layer_scheme
    return layers


def swap_quantized(model: nn.Module, spec: QuantizationSpec) -> None:
    """Replace each listed layer by its quantized module (built on the model's device: meta at load)."""
    for name, layer_scheme in spec.layers.items():
        parent_name, _, child = name.rpartition(".")
        try:
            parent = model.get_submodule(parent_name)
            old = getattr(parent, child)
        except AttributeError as e:
            raise LoadError(f"quantized layer {name} does not exist in {type(model).__name__}") from e
        device = next(old.parameters()).device
        with torch.device(device):
            if isinstance(old, nn.Linear):
                new = QuantLinear(old.in_features, old.out_features, old.bias is not None, layer_scheme, spec.group_size)
            elif _linear_like(old):
                new = QuantLinear(old.in_channels, old.out_channels, old.bias is not None, layer_scheme, spec.group_size)
            elif isinstance(old, nn.Embedding) and layer_scheme == "int8":
                new = QuantEmbedding(old.num_embeddings, old.embedding_dim)
            else:
                raise LoadError(f"quantized layer {name}: a {type(old).__name__} cannot hold {layer_scheme} weights")
        setattr(parent, child, new)


def stored_names(spec: QuantizationSpec) -> set[str]:
    """Tensors that are stored exactly as used: integer weights and fp32 scales, never cast."""
    return {f"{name}.{t}" for name in spec.layers for t in ("weight", "weight_scale")}


def check_dtypes(model: nn.Module, tensors: Mapping[str, torch.Tensor]) -> None:
    """The integer weights and scales have the dtypes of their modules (shapes are checked elsewhere)."""
    for name, module in model.named_modules():
        if not isinstance(module, _Quantized):
            continue
        for t in ("weight", "weight_scale"):
            want, got = getattr(module, t).dtype, tensors[f"{name}.{t}"].dtype
            if got != want:
                raise LoadError(f"{name}.{t} is {got} in the bundle; its {module.scheme} layer needs {want}")


def prepare_quantized(model: nn.Module, dtype: torch.dtype) -> None:
    """Pick each quantized module's kernel once its tensors sit on their device; the CPU's packed
    weights are made on a helper thread from now on."""
    amx_rows = tuple(getattr(model, "quant_amx_rows", ()))
    for name, module in model.named_modules():
        wide_rows = next((rows for prefix, rows in amx_rows if name.startswith(prefix)), 0)
        if isinstance(module, QuantEmbedding):
            module.prepare(dtype, wide_rows)
        elif isinstance(module, QuantLinear):
            module.prepare(wide_rows)
    pack_ahead(model)
