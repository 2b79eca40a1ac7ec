"""A random Qwen2-Audio folder of any shape written shard by shard (no model built, no forward
pass): what the load-peak benchmark and its slow test measure."""

from __future__ import annotations

import json
from pathlib import Path

import torch

# Qwen/Qwen2-Audio-7B's shapes: 8.4 B parameters.
REAL = dict(
    audio=dict(d_model=1280, encoder_layers=32, encoder_attention_heads=20, encoder_ffn_dim=5120, num_mel_bins=128, max_source_positions=1500),
    text=dict(vocab_size=156032, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32, max_position_embeddings=8192),
)


def hf_names(config) -> dict[str, tuple[int, ...]]:
    """transformers 5's tensor names and shapes for an oasr Qwen2AudioConfig."""
    from oasr.models.weights import meta_model

    model = meta_model("qwen2-audio", config)
    return {(n if n.startswith("lm_head") else "model." + n): tuple(t.shape) for n, t in model.state_dict().items()}


def write_random_folder(folder: Path, audio: dict, text: dict, shard_bytes: int, dtype=torch.bfloat16) -> int:
    """Writes config.json, the shards and their index; returns the parameter count. Each shard is
    made, written and dropped before the next, so the writer holds one shard at most."""
    from safetensors.torch import save_file

    from oasr_converters.hf_qwen2_audio import qwen2_audio_config

    folder.mkdir(parents=True, exist_ok=True)
    cfg = {"model_type": "qwen2_audio", "audio_config": audio, "text_config": {"model_type": "qwen2", **text}, "audio_token_index": 3}
    (folder / "config.json").write_text(json.dumps(cfg))
    names = hf_names(qwen2_audio_config(cfg, "config.json"))
    size = torch.empty(0, dtype=dtype).element_size()
    groups: list[list[str]] = [[]]
    used = 0
    for name, shape in names.items():
        n = size * torch.Size(shape).numel()
        if groups[-1] and used + n > shard_bytes:
            groups.append([])
            used = 0
        groups[-1].append(name)
        used += n
    weight_map = {}
    generator = torch.Generator().manual_seed(0)
    for i, group in enumerate(groups, 1):
        file = f"model-{i:05d}-of-{len(groups):05d}.safetensors"
        save_file({k: (torch.randn(names[k], generator=generator) * 0.02).to(dtype) for k in group}, folder / file, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(group, file))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return sum(torch.Size(s).numel() for s in names.values())


# VmHWM, not ru_maxrss: Linux carries the parent's peak into ru_maxrss over fork and exec, so a
# child of a large test process would report the parent's peak as its own "before".
LOAD_SCRIPT = """
import sys, oasr
import oasr.loading, oasr.models.qwen2_audio, oasr.io.mapped, oasr.models.weights, oasr.hub.resolve, oasr.onednn  # code, not weights
if len(sys.argv) > 3:  # the compute plan of a CPU by this maker (fp32 off Intel: oneDNN's packed weights)
    oasr.cpu.vendor = lambda: sys.argv[3]
def kib(field):
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(field + ":"))
before = kib("VmHWM")
m = oasr.load_pretrained(sys.argv[1], device="cpu", dtype=sys.argv[2], cache=False)
print(before * 1024, kib("VmHWM") * 1024)
"""


def load_peak(bundle: Path, dtype: str, vendor: str | None = None) -> tuple[int, int]:
    """(peak RSS bytes before the load, after it) of a fresh process loading ``bundle``, planned
    for a CPU made by ``vendor`` (None: this one)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", LOAD_SCRIPT, str(bundle), dtype, *([vendor] if vendor else [])], check=True, capture_output=True, text=True)
    before, after = out.stdout.split()
    return int(before), int(after)
