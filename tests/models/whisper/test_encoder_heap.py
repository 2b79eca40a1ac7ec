"""The C heap's free pages go back to the system between the blocks of the encoder when the
transcription asks for it (``oasr.heap``: a recording of one window), so the pages a window's
activations touch do not pile up block after block."""

from __future__ import annotations

import ctypes
import platform
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from oasr import heap  # noqa: E402
from oasr.models import whisper as W  # noqa: E402


def _anon_mib() -> float:
    status = Path("/proc/self/status").read_text().splitlines()
    return next(int(line.split()[1]) for line in status if line.startswith("RssAnon")) / 1024


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc" or not hasattr(ctypes.CDLL(None), "malloc_trim"),
    reason="glibc's heap, read from /proc",
)
def test_free_blocks_in_the_middle_of_the_heap_are_given_back():
    """80 MB of 100 KB tensors (below any mmap threshold: in the heap), each held in place by a
    live neighbour of the same size, are freed: glibc keeps their pages until they are released."""
    heap.release_free_pages()
    before = _anon_mib()
    tensors = [torch.ones(25_000) for _ in range(1600)]  # 100 KB each, their pages touched
    kept = tensors[1::2]
    del tensors
    freed = _anon_mib() - before - 80
    assert freed > 60, f"the freed blocks left only {freed:.0f} MiB resident: nothing to release"
    assert heap.release_free_pages()
    assert _anon_mib() - before - 80 < 20
    assert len(kept) == 800


def _encoder() -> W.AudioEncoder:
    torch.manual_seed(0)
    encoder = W.AudioEncoder(n_mels=8, n_ctx=16, n_state=32, n_head=2, n_layer=3).eval()
    encoder.positional_embedding.copy_(W.sinusoids(16, 32))
    return encoder


def test_the_encoder_releases_after_each_block_only_when_asked(monkeypatch):
    calls = []
    monkeypatch.setattr(heap, "release_free_pages", lambda: calls.append(1) or True)
    encoder = _encoder()
    mel = torch.randn(1, 8, 32)
    with torch.inference_mode():
        kept = encoder(mel)
        assert calls == []
        with heap.releasing_between_layers():
            released = encoder(mel)
            assert len(calls) == 3  # one per block
        encoder(mel)
        assert len(calls) == 3  # outside again
    torch.testing.assert_close(released, kept, atol=0, rtol=0)
