"""``depthwise_over_time`` is ``Conv1d`` on the [B, C, T] transpose, for the paddings the encoders use."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

from oasr.models.time_conv import depthwise_over_time  # noqa: E402


@pytest.mark.parametrize("kernel, padding, left, right, bias", [
    (9, 4, 0, 0, True),  # centred (FastConformer, Zipformer, WeNet)
    (9, 0, 8, 0, True),  # causal: the kernel - 1 frames before (Nemotron)
    (11, 0, 6, 4, False),  # shifted (Paraformer's FSMN)
    (1, 0, 0, 0, True),
])
def test_depthwise_over_time_is_conv1d_on_the_transpose(kernel, padding, left, right, bias):
    torch.manual_seed(0)
    conv = torch.nn.Conv1d(16, 16, kernel, padding=padding, groups=16, bias=bias)
    x = torch.randn(3, 40, 16)
    expected = conv(F.pad(x.transpose(1, 2), (left, right))).transpose(1, 2)
    got = depthwise_over_time(conv, x, left, right)
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)
