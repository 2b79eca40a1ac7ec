"""Loading a sharded Qwen2-Audio bundle peaks at its bytes plus one shard on the host."""

from __future__ import annotations

import pytest
from qwen2_audio_shapes import load_peak, write_random_folder

from oasr.conversion.run import convert_one

SHARD = 64 << 20
# What a load holds beside the weights whatever their size: the model's Python objects, buffers
# outside the state dict, the allocator's own books (measured: 10 MB steady once loaded).
FIXED = 32 << 20


@pytest.mark.slow
def test_load_peaks_at_bytes_plus_one_shard(tmp_path):
    audio = dict(d_model=256, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=1024, num_mel_bins=128, max_source_positions=1500)
    text = dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=12, num_attention_heads=8, num_key_value_heads=8)
    params = write_random_folder(tmp_path / "hf", audio, text, SHARD)
    assert len(list((tmp_path / "hf").glob("model-*.safetensors"))) > 3
    convert_one(tmp_path / "hf", tmp_path / "b")
    largest = 32000 * 1024 * 4  # the token table in fp32
    # bf16 as stored: its bytes plus one shard. A cast to fp32 also holds, for a moment, the
    # largest tensor's fp32 copy beside its source (measured: bf16 519 MB for 445 MB, fp32 963 MB for 889 MB).
    # fp32 on a CPU not made by Intel: the linear layers' weights are repacked for oneDNN, each
    # plain copy let go as its packed one is made (measured: 1034 MB for 889 MB; 1658 MB when the
    # loader still held every plain weight).
    for dtype, vendor, size, slack in (
        ("bfloat16", "GenuineIntel", 2, SHARD + FIXED),
        ("float32", "GenuineIntel", 4, SHARD + largest + FIXED),
        ("float32", "AuthenticAMD", 4, SHARD + largest + FIXED),
    ):
        before, after = load_peak(tmp_path / "b", dtype, vendor)
        grown = after - before
        print(f"{dtype}, {vendor}: load grew {grown / 1e6:.0f} MB for {params * size / 1e6:.0f} MB of weights (bound {(params * size + slack) / 1e6:.0f} MB)")
        assert grown <= params * size + slack, f"{dtype}, {vendor}: {grown / 1e6:.0f} MB for {params * size / 1e6:.0f} MB of weights"
