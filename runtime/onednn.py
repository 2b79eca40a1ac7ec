"""fp32 linear maps through oneDNN's GEMM on the CPU, on weights packed once (``torch.ops.mkldnn``,
the path torch's own CPU compiler takes). The compute plan (``oasr.precision``) asks for it on
CPUs not made by Intel, where torch's BLAS (MKL) is slower (``benchmarks/precision.md``). A plain
``nn.Linear`` keeps only the packed weight; a model's own linear maps (an ``onednn`` slot) keep
their weight beside it, which costs its size again in memory."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .io.mapped import release

# The rows oneDNN's packed layout is chosen for (any of 8 to 1500 ran alike; benchmarks/precision.md).
ROWS = 64


def pack(weight: Tensor) -> Tensor:
    """An fp32 [out, in] weight reordered for oneDNN's GEMM (``linear``)."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), ROWS)


def linear(x: Tensor, packed: Tensor, bias: Tensor | None) -> Tensor:
    """x [..., in] fp32 -> x W^T + b [..., out] with ``packed`` = ``pack(W)``."""
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


class PackedLinear(nn.Linear):
    """An ``nn.Linear`` whose weight is kept only packed (not twice: a 7B model's fp32 weights
    would take 56 GB): fp32 inputs take oneDNN's GEMM; the weight itself, for an input of another
    dtype or the state dict, is unpacked when read (``to_dense``: the same values, a copy)."""

    def __init__(self, plain: nn.Linear):
        nn.Module.__init__(self)
        self.in_features, self.out_features = plain.in_features, plain.out_features
        self.bias = plain.bias
        self.packed = pack(plain.weight)
        release(plain.weight)  # a weight still mapped from the bundle: its pages go back now

    @property
    def weight(self) -> Tensor:
        return self.packed.to_dense()

    def forward(self, x: Tensor) -> Tensor:
        if x.dtype == torch.float32:
            return linear(x, self.packed, self.bias)
        return F.linear(x, self.weight.to(x.dtype), None if self.bias is None else self.bias.to(x.dtype))

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        destination[prefix + "weight"] = self.weight
        super()._save_to_state_dict(destination, prefix, keep_vars)


def _fp32_on_cpu(module: nn.Module) -> bool:
    return module.weight.dtype == torch.float32 and module.weight.device.type == "cpu"


def pack_linears(model: nn.Module) -> int:
    """Every plain ``nn.Linear`` of ``model`` with an fp32 CPU weight becomes a ``PackedLinear``
    (its bias kept, its weight only packed), and every module that declares an ``onednn`` slot
    (a model's own linear map that computes it its own way) gets its weight packed there; returns
    how many."""
    count = 0
    for module in model.modules():
        if hasattr(module, "onednn") and _fp32_on_cpu(module):
            module.onednn = pack(module.weight)
            count += 1
    plain = [name for name, m in model.named_modules() if type(m) is nn.Linear and _fp32_on_cpu(m)]
    for name in plain:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        setattr(parent, child, PackedLinear(getattr(parent, child)))  # the plain module goes now
    return count + len(plain)
