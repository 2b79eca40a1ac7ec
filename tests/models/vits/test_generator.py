"""The HiFi-GAN generator runs its 1-D convolutions as channels-last 2-D ones (no layout
reorders in oneDNN) and still computes what the trained 1-D network does."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from oasr.models.vits.generator import FINAL_SLOPE, LRELU_SLOPE, Generator, upsample


def _generator(resblock: str) -> Generator:
    torch.manual_seed(0)
    gen = Generator(8, resblock, (3, 5), ((1, 2), (2, 6)), (4, 2), 32, (8, 4), gin_channels=4).eval()
    for p in gen.parameters():
        torch.nn.init.normal_(p, std=0.2)
    return gen


def _reference(gen: Generator, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """The network as trained: [B, C, T] signals through the ``nn.Conv1d`` modules themselves."""
    x = gen.conv_pre(x) + gen.cond(g)
    n = gen.n_kernels
    for i, up in enumerate(gen.ups):
        x = up(F.leaky_relu(x, LRELU_SLOPE))
        total = 0
        for block in gen.resblocks[i * n : (i + 1) * n]:
            y = x
            if hasattr(block, "convs"):
                for conv in block.convs:
                    y = y + conv(F.leaky_relu(y, LRELU_SLOPE))
            else:
                for c1, c2 in zip(block.convs1, block.convs2):
                    y = y + c2(F.leaky_relu(c1(F.leaky_relu(y, LRELU_SLOPE)), LRELU_SLOPE))
            total = total + y
        x = total / n
    return gen.conv_post(F.leaky_relu(x, FINAL_SLOPE)).tanh()


class _ConvInputs(TorchDispatchMode):
    """Every convolution's input, as the dispatcher sees it."""

    def __init__(self):
        super().__init__()
        self.calls = []  # (op name, input)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if "conv" in func.overloadpacket.__name__:  # conv1d, conv2d, conv_transpose2d, convolution ...
            self.calls.append((func.overloadpacket.__name__, args[0]))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("resblock", ["1", "2"])
def test_generator_matches_the_1d_network(resblock):
    gen = _generator(resblock)
    x, g = torch.randn(1, 8, 37), torch.randn(1, 4, 1)
    with torch.inference_mode():
        ours, ref = gen(x, g), _reference(gen, x, g)
    assert ours.shape == ref.shape == (1, 1, 37 * 8)
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-5)


def test_generator_convolutions_run_channels_last():
    """A [B, C, T] input would make oneDNN reorder it into its blocked layout and the output
    back, at every convolution: a third of the generator's CPU time on the Piper voices. The
    upsampling runs as ordinary convolutions (oneDNN's transposed one is 3-4x slower there)."""
    gen = _generator("2")
    with torch.inference_mode(), _ConvInputs() as seen:
        gen(torch.randn(1, 8, 37), torch.randn(1, 4, 1))
    signals = [(op, x) for op, x in seen.calls if x.shape[-1] > 1]  # the speaker conditioning is [1, G, 1]
    assert len(signals) == 1 + 2 + 2 * 2 * 2 + 1  # pre, the two ups, 2 stages x 2 blocks x 2 dilations, post
    assert all(x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last) for _, x in signals)
    assert {op for op, _ in signals} == {"conv2d"}


# Piper's stages (8, 16) and (4, 8), VITS's (2, 4), an odd stride; then two whose kernel is not
# stride + 2 * padding, which keep the transposed convolution.
@pytest.mark.parametrize("rate, kernel", [(8, 16), (4, 8), (2, 4), (3, 5), (5, 10), (3, 8)])
def test_upsample_is_the_transposed_convolution(rate, kernel):
    torch.manual_seed(0)
    layer = torch.nn.ConvTranspose1d(6, 3, kernel, rate, padding=(kernel - rate) // 2)
    x = torch.randn(1, 6, 11)
    with torch.inference_mode():
        ours = upsample(layer, x.unsqueeze(2).contiguous(memory_format=torch.channels_last))
        ref = layer(x)
    assert ours.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(ours.squeeze(2), ref, rtol=0, atol=1e-5)
