"""Whisper's attentions over the audio as explicit products in blocks of query rows
(``attend_in``'s ``rows``): the same attention as SDPA's, taken only where no mask applies."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

from oasr.models import whisper as W  # noqa: E402


@pytest.mark.parametrize("rows", [1, 64, 100, 250, 400])
def test_attention_in_blocks_is_sdpas_attention(rows):
    """250 queries: blocks that do and do not divide them, one block, more rows than queries."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 250, 16, generator=g) for _ in range(3))
    k = k[:, :, :180]  # fewer keys than queries
    v = v[:, :, :180]
    expected = F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(W.attention_in_blocks(q, k, v, rows), expected, atol=1e-5, rtol=1e-5)


def _attention(rows, dtype=None):
    torch.manual_seed(0)
    mha = W.MultiHeadAttention(64, 4).eval()
    mha.attention_dtype, mha.attention_rows = dtype, rows
    return mha


def _refuse_sdpa(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("SDPA was called")

    monkeypatch.setattr(W.F, "scaled_dot_product_attention", refuse)


@pytest.mark.parametrize("length", [300, 5])
def test_unmasked_attention_takes_the_blocks(monkeypatch, length):
    """An encoder window (300 queries) and a decoding step's cross-attention (5)."""
    x = torch.randn(1, length, 64)
    audio = torch.randn(1, 300, 64)
    with torch.inference_mode():
        reference = _attention(None)
        expected = reference(x, reference.project_kv(audio), None)
        mha = _attention(100, torch.bfloat16)
        kv = mha.project_kv(audio)
        _refuse_sdpa(monkeypatch)
        y = mha(x, kv, None)
    assert y.dtype == torch.float32
    assert F.cosine_similarity(y.flatten(), expected.flatten(), dim=0) > 0.9999


def test_beams_over_one_window_take_the_blocks(monkeypatch):
    """5 beams' queries against one window's keys (the grouped cross-attention of beam search)."""
    x = torch.randn(5, 1, 64)
    audio = torch.randn(1, 300, 64)
    with torch.inference_mode():
        reference = _attention(None)
        kv = reference.project_kv(audio)
        expected = reference(x, tuple(t.expand(5, -1, -1, -1) for t in kv), None)
        mha = _attention(100, torch.bfloat16)
        kv = mha.project_kv(audio)
        _refuse_sdpa(monkeypatch)
        y = mha(x, kv, None)
    assert F.cosine_similarity(y.flatten(), expected.flatten(), dim=0) > 0.9999


def test_causal_attention_stays_with_sdpa(monkeypatch):
    calls = []
    sdpa = F.scaled_dot_product_attention
    monkeypatch.setattr(W.F, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or sdpa(*a, **k))
    mha = _attention(100)
    x = torch.randn(1, 300, 64)
    with torch.inference_mode():
        mha(x, mha.project_kv(x), 0)
    assert calls == [1]
