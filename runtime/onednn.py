"""fp32 linear maps through oneDNN's GEMM on the CPU, on weights packed once (``torch.ops.mkldnn``,
the path torch's own CPU compiler takes). The compute plan (``oasr.precision``) asks for it on
CPUs not made by Intel, where torch's BLAS (MKL) is slower (``benchmarks/precision.md``). A
packed copy costs the weight's size again in memory."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# The rows oneDNN's packed layout is chosen for (any of 8 to 1500 ran alike; benchmarks/precision.md).
ROWS = 64


def pack(weight: Tensor) -> Tensor:
    """An fp32 [out, in] weight reordered for oneDNN's GEMM (``linear``)."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), ROWS)


def linear(x: Tensor, packed: Tensor, bias: Tensor | None) -> Tensor:
    """x [..., in] fp32 -> x W^T + b [..., out] with ``packed`` = ``pack(W)``."""
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


class PackedLinear(nn.Linear):
    """An ``nn.Linear`` holding its weight packed beside the weight itself: fp32 inputs take
    oneDNN's GEMM, others (and the state dict) the weight as it is."""

    packed: Tensor

    def forward(self, x: Tensor) -> Tensor:
        if x.dtype == torch.float32:
            return linear(x, self.packed, self.bias)
        return F.linear(x, self.weight, self.bias)


def _fp32_on_cpu(module: nn.Module) -> bool:
    return module.weight.dtype == torch.float32 and module.weight.device.type == "cpu"


def pack_linears(model: nn.Module) -> int:
    """Every plain ``nn.Linear`` of ``model`` with an fp32 CPU weight becomes a ``PackedLinear``
    sharing its parameters, and every module that declares an ``onednn`` slot (a model's own
    linear map that computes it its own way) gets its weight packed there; returns how many."""
    count = 0
    for module in model.modules():
        if hasattr(module, "onednn") and _fp32_on_cpu(module):
            module.onednn = pack(module.weight)
            count += 1
    plain = [(name, m) for name, m in model.named_modules() if type(m) is nn.Linear and _fp32_on_cpu(m)]
    for name, old in plain:
        parent_name, _, child = name.rpartition(".")
        new = PackedLinear(old.in_features, old.out_features, bias=old.bias is not None, device="meta")
        new.weight, new.bias = old.weight, old.bias
        new.packed = pack(old.weight)
        setattr(model.get_submodule(parent_name), child, new)
    return count + len(plain)
