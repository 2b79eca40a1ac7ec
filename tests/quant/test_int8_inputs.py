"""What the integer layers make of their inputs: the per-row peaks, an input consumed in place, and
Whisper's MLP making its 4x-wide hidden activation once."""

from __future__ import annotations

import pytest
import torch
from torch.utils._pytree import tree_leaves
from torch.utils._python_dispatch import TorchDispatchMode

from oasr.models.whisper import MLP
from oasr.quant import modules
from oasr.quant.modules import QuantLinear


def _int8_linear(in_features: int, out_features: int, seed: int = 0) -> QuantLinear:
    g = torch.Generator().manual_seed(seed)
    layer = QuantLinear(in_features, out_features, True, "int8")
    layer.weight = torch.randint(-127, 128, (out_features, in_features), dtype=torch.int8, generator=g)
    layer.weight_scale = torch.rand(out_features, generator=g) / 100
    layer.bias.data = torch.randn(out_features, generator=g)
    layer.prepare()
    return layer


class _NewTensorsOf(TorchDispatchMode):
    """Records the ops that make a new tensor of ``numel`` elements (not a view or an in-place
    result on one of their inputs)."""

    def __init__(self, numel: int):
        super().__init__()
        self.numel = numel
        self.made: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {a.untyped_storage().data_ptr() for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)}
        for o in tree_leaves(out):
            if isinstance(o, torch.Tensor) and o.numel() == self.numel and o.untyped_storage().data_ptr() not in inputs:
                self.made.append(str(func))
        return out


@pytest.mark.parametrize("rows", [1, 5, modules._PEAK_ROWS - 1, modules._PEAK_ROWS, 1500])
def test_row_peaks_are_the_largest_magnitude_of_each_row(rows):
    x = torch.randn(rows, 384, generator=torch.Generator().manual_seed(rows))
    x[::2] *= -3  # rows whose peak is negative
    x[-1] = 0  # an empty row gets the floor, not a zero to divide by
    peaks = modules._row_peaks(x)
    expected = x.abs().amax(dim=1, keepdim=True).clamp_min(1e-30)
    assert torch.equal(peaks, expected)


@pytest.mark.parametrize("rows", [3, 40, 1500, modules._BLOCK_ROWS * 2 + 7])
@torch.inference_mode()
def test_a_consumed_input_gives_the_same_product_bit_for_bit(rows):
    layer = _int8_linear(256, 96)
    x = torch.randn(1, rows, 256, generator=torch.Generator().manual_seed(1))
    kept = layer(x.clone())
    consumed = x.clone()
    y = layer(consumed, consume=True)
    assert torch.equal(y, kept)
    assert not torch.equal(consumed, x)  # it was scaled in place, not copied


@torch.inference_mode()
def test_whispers_mlp_makes_its_hidden_activation_once():
    mlp = MLP(256, 1024)
    mlp[0], mlp[2] = _int8_linear(256, 1024, 0), _int8_linear(1024, 256, 1)
    x = torch.randn(1, 1500, 256, generator=torch.Generator().manual_seed(2))
    reference = mlp[2](torch.nn.functional.gelu(mlp[0](x.clone())))
    with _NewTensorsOf(1500 * 1024) as mode:
        y = mlp(x.clone())
    assert torch.equal(y, reference)
    # fc1's output, overwritten by GELU and scaled in place by fc2: no copy, no |h|, no h / peak
    assert mode.made == ["quantized.linear_dynamic.default"]
