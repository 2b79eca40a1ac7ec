"""``oasr.io.mapped``: tensors kept as views of a private mapping, and their pages given back."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from oasr.errors import BundleError
from oasr.io import mapped
from oasr.io.mapped import read_streamed, release

SIZE = 16 << 20  # bytes of the kept tensor: far above the noise of the process's own file pages


def _rss_file_mb() -> float:
    """This process's resident pages that are backed by a file."""
    for line in open("/proc/self/status"):
        if line.startswith("RssFile:"):
            return int(line.split()[1]) / 1024
    pytest.skip("no RssFile in /proc/self/status")


@pytest.fixture
def stored(tmp_path):
    tensors = {"q": torch.randint(-128, 127, (SIZE // 1024, 1024), dtype=torch.int8), "f": torch.randn(64, 64)}
    save_file(tensors, tmp_path / "w.safetensors")
    return tmp_path / "w.safetensors", tensors


def _float64(name, t):
    return t.double() if t.is_floating_point() else t


def test_what_needs_no_cast_stays_a_mapped_view_and_the_rest_is_converted(stored):
    file, tensors = stored
    out = read_streamed(file, _float64, BundleError)
    assert out["q"].dtype == torch.int8 and torch.equal(out["q"], tensors["q"])
    assert any(lo <= out["q"].data_ptr() < hi for lo, hi in mapped._KEPT)  # not copied
    assert out["f"].dtype == torch.float64 and torch.equal(out["f"], tensors["f"].double())
    assert not any(lo <= out["f"].data_ptr() < hi for lo, hi in mapped._KEPT)
    out["q"][0, 0] = 5  # copy-on-write: the file is never written
    again = read_streamed(file, lambda name, t: t.clone(), BundleError)
    assert torch.equal(again["q"], tensors["q"])


def test_release_gives_a_kept_tensors_pages_back_and_it_stays_readable(stored):
    file, tensors = stored
    q = read_streamed(file, _float64, BundleError)["q"]
    q.sum(dtype=torch.int64)  # every page read
    before = _rss_file_mb()
    release(q)
    after = _rss_file_mb()
    assert before - after > 0.9 * SIZE / 2**20, (before, after)
    assert torch.equal(q, tensors["q"])  # read from the file again


def test_release_leaves_any_other_tensor_alone(stored):
    file, tensors = stored
    copied = read_streamed(file, lambda name, t: t.clone(), BundleError)["q"]
    release(copied)
    assert torch.equal(copied, tensors["q"])
    own = torch.full((SIZE,), 7, dtype=torch.int8)
    release(own)
    assert bool((own == 7).all())
