"""The Zipformer encoder builds its large intermediates a block at a time and still computes
what the whole-tensor arithmetic does: a fresh [B, H, T, 2T - 1] or [B, 3C, T, F] tensor at
every call was paid for in page faults (hundreds of MB at 60 s of audio). ``BLOCK_ELEMENTS`` is
set here so that each block holds a few rows."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from oasr.models.zipformer import encoder  # noqa: E402
from oasr.models.zipformer.config import ZipformerConfig  # noqa: E402
from oasr.models.zipformer.encoder import (  # noqa: E402
    Conv2dSubsampling,
    ConvNeXt,
    RelPositionMultiheadAttentionWeights,
    ZipformerEncoder,
    compact_positions,
    swoosh_l,
    swoosh_r,
)

ALLOCATIONS = ("empty", "new_empty", "empty_like", "empty_strided")


class _Outputs(TorchDispatchMode):
    """The element count of every tensor an op computes (buffers made by ``empty`` kept apart);
    views and ``out=`` results, which hold no new memory, are not counted."""

    def __init__(self):
        super().__init__()
        self.computed, self.allocated = [], []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        kept = self.allocated if func.overloadpacket.__name__ in ALLOCATIONS else self.computed
        given = {t.untyped_storage().data_ptr() for t in (*args, *(kwargs or {}).values()) if isinstance(t, torch.Tensor)}
        kept.extend(o.numel() for o in (out if isinstance(out, (tuple, list)) else (out,))
                    if isinstance(o, torch.Tensor) and o.untyped_storage().data_ptr() not in given)
        return out


def _config(**stack) -> ZipformerConfig:
    dims = dict(encoder_dim=16, num_layers=1, num_heads=2, query_head_dim=4, pos_head_dim=2, value_head_dim=4,
                feedforward_dim=32, cnn_module_kernel=5) | stack
    return ZipformerConfig(n_mels=20, downsampling_factor=(1,), pos_dim=8, vocab_size=10,
                           **{k: (v,) for k, v in dims.items()})


def _attention(t: int, batch: int = 1):
    torch.manual_seed(0)
    heads, query, pos = 2, 2, 2
    module = RelPositionMultiheadAttentionWeights(8, 8, heads, query, pos).eval()
    return module, torch.randn(batch, t, 8), compact_positions(t, 8, "cpu")


def _attention_rows(monkeypatch, module, t: int, rows: int) -> None:
    monkeypatch.setattr(encoder, "BLOCK_ELEMENTS", module.heads * 2 * t * rows)  # a row: T scores, about T by position


def _whole_attention(module, x, pos):
    """icefall's arithmetic with every tensor whole: score[i, j] = q_i . k_j + p_i . pe[(T - 1) - i + j]."""
    b, t, _ = x.shape
    h, qd = module.heads, module.q * module.heads
    x = module.in_proj(x)
    q = x[..., :qd].reshape(b, t, h, -1).transpose(1, 2)
    k = x[..., qd : 2 * qd].reshape(b, t, h, -1).transpose(1, 2)
    p = x[..., 2 * qd :].reshape(b, t, h, -1).transpose(1, 2)
    pe = module.linear_pos(pos).reshape(2 * t - 1, h, -1).transpose(0, 1)  # [H, 2T-1, p]
    offsets = (t - 1) - torch.arange(t)[:, None] + torch.arange(t)[None]  # [T, T]
    by_offset = p @ pe.transpose(1, 2)  # [B, H, T, 2T-1]
    return (q @ k.transpose(2, 3) + by_offset.gather(-1, offsets.expand(b, h, t, t))).softmax(-1)


@pytest.mark.parametrize("rows, batch", [(1, 1), (5, 1), (8, 1), (40, 1), (1000, 1), (5, 3)])  # 1000: one block
def test_attention_weights_in_blocks_match_the_whole(rows, batch, monkeypatch):
    module, x, pos = _attention(40, batch)
    _attention_rows(monkeypatch, module, 40, rows)
    with torch.inference_mode():
        torch.testing.assert_close(module(x, pos), _whole_attention(module, x, pos), rtol=0, atol=1e-5)


def test_attention_block_bounds_the_largest_intermediate(monkeypatch):
    """With the elements of 8 rows of every head a block, a block is 8 x H rows of one head, and
    nothing computed is bigger than its position scores [8H, T + 8H - 1]; whole, the scores
    alone are [B, H, T, T] and the position scores [B, H, T, 2T - 1]. The weights themselves are
    one buffer, filled a block at a time."""
    t, rows = 40, 8
    module, x, pos = _attention(t)
    _attention_rows(monkeypatch, module, t, rows)
    with torch.inference_mode(), _Outputs() as seen:
        module(x, pos)
    block = module.heads * rows
    assert max(seen.computed) <= block * (t + block - 1) < module.heads * t * t
    assert seen.allocated == [module.heads * t * t]


def test_convnext_in_blocks_matches_the_whole_and_bounds_its_middle(monkeypatch):
    """The 3x-wide middle (a [B, 3C, rows, F] block) never outgrows the input once blocked."""
    torch.manual_seed(0)
    c, t, f = 4, 20, 5
    module = ConvNeXt(c).eval()
    monkeypatch.setattr(encoder, "BLOCK_ELEMENTS", 3 * c * f * 4)  # 4 frames a block
    x = torch.randn(1, c, t, f)
    with torch.inference_mode(), _Outputs() as seen:
        got = module(x)
    with torch.inference_mode():
        want = x + module.pointwise_conv2(swoosh_l(module.pointwise_conv1(module.depthwise_conv(x))))
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    assert max(seen.computed) <= x.numel() < 3 * x.numel()


def test_front_convs_in_blocks_match_the_whole_and_stay_small(monkeypatch):
    """Each block of the front's output frames reads only its own input frames (2o .. 2o + 8 for
    frame o); whole, the first conv's output [B, C1, T - 2, F] is the largest tensor."""
    torch.manual_seed(0)
    front = Conv2dSubsampling(_config()).eval()
    c1, c3 = front.conv[0].out_channels, front.conv[7].out_channels
    rows, t, f = 3, 61, 20  # 27 output frames: 9 blocks
    monkeypatch.setattr(encoder, "BLOCK_ELEMENTS", c3 * front.width * rows)
    x = torch.randn(1, t, f)
    with torch.inference_mode(), _Outputs() as seen:
        got = front.convs(x)
    with torch.inference_mode():
        want = x.unsqueeze(1)
        for i in (0, 4, 7):
            want = swoosh_r(front.conv[i](want))
    assert got.shape == want.shape == (1, c3, (t - 7) // 2, front.width)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    largest = c1 * (2 * rows + 5) * f  # the first conv's output for one block's input frames
    assert max(seen.computed) <= largest < c1 * (t - 2) * f // 4


def test_a_stack_fills_one_weights_buffer_for_all_its_layers():
    """Each layer's attention weights are dead once it returns, so three layers share one
    [B, H, T, T] buffer rather than fault three fresh ones in."""
    torch.manual_seed(0)
    stack = ZipformerEncoder(_config(num_layers=3), 0).eval()
    x = torch.randn(1, 30, 16)
    with torch.inference_mode(), _Outputs() as seen:
        got = stack(x)
    assert seen.allocated.count(2 * 30 * 30) == 1
    with torch.inference_mode():  # the same as each layer with its own weights
        want, pos = x, compact_positions(30, 8, "cpu")
        for layer in stack.layers:
            want = layer(want, pos)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
