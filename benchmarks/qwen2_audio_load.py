"""Qwen2-Audio load peak: loading a bundle of the real shapes (8.4 B parameters) peaks at its bytes
plus one shard on the host.

    python benchmarks/qwen2_audio_load.py [--tmp DIR] [--shard-gb 4] [--layers N] [--vocab N]
                                          [--quantize int8,int4] [--keep]

A random folder of Qwen/Qwen2-Audio-7B's shapes (``REAL`` of tests/support/qwen2_audio_shapes.py),
bf16, written shard by shard in shards of at most ``--shard-gb`` GB (transformers' ``max_shard_size``),
is converted into an oasr bundle as stored (``oasr.conversion.run.convert_one``) and the folder
deleted, in a child process (the memory of writing is given back before anything is measured). A
fresh process loads the bundle (``load_pretrained(..., dtype="bfloat16")``, no forward pass); its
peak RSS growth (VmHWM after the load minus before it, imports excluded) must stay within the bundle's ``model.safetensors`` bytes plus the largest
shard. ``--quantize`` also makes int8/int4 bundles of it (``oasr.quantize``: the decoder only) and
checks each the same way against its own bytes.

``--layers`` (both towers) and ``--vocab`` shrink the model for a quick run; the widths stay real.
The real run needs about 17 GB of disk under ``--tmp`` for the folder plus as much for the bundle
(a quantized bundle is made once the folder is gone), and about 20 GB of memory. Exit status 1 when
a bound is exceeded.
"""

from __future__ import annotations

import argparse
import copy
import multiprocessing
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

from qwen2_audio_shapes import REAL, hf_names, load_peak, write_random_folder  # noqa: E402

GB = 10**9


def shapes(layers: int | None, vocab: int | None) -> tuple[dict, dict]:
    audio, text = copy.deepcopy(REAL["audio"]), copy.deepcopy(REAL["text"])
    if layers is not None:
        audio["encoder_layers"] = text["num_hidden_layers"] = layers
    if vocab is not None:
        text["vocab_size"] = vocab
    return audio, text


def count(audio: dict, text: dict) -> int:
    """The parameter count of these shapes, from the meta model (nothing allocated)."""
    import torch

    from oasr_converters.hf_qwen2_audio import qwen2_audio_config

    cfg = {"model_type": "qwen2_audio", "audio_config": audio, "text_config": {"model_type": "qwen2", **text}}
    return sum(torch.Size(s).numel() for s in hf_names(qwen2_audio_config(cfg, "config.json")).values())


def available_memory() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def prepare(work: Path, audio: dict, text: dict, shard_bytes: int) -> tuple[int, str]:
    """The random folder, its bundle ``work/bf16``, the folder deleted: (largest shard, what was done)."""
    from oasr.conversion.run import convert_one

    start = time.perf_counter()
    write_random_folder(work / "hf", audio, text, shard_bytes)
    shards = [p.stat().st_size for p in (work / "hf").glob("model-*.safetensors")]
    wrote = f"written: {len(shards)} shards, largest {max(shards) / GB:.2f} GB, {time.perf_counter() - start:.0f} s"
    start = time.perf_counter()
    r = convert_one(work / "hf", work / "bf16")
    shutil.rmtree(work / "hf")
    converted = f"converted: {r.parameters / 1e9:.3f} B parameters, {r.bytes / GB:.2f} GB of {r.dtype}, {time.perf_counter() - start:.0f} s"
    return max(shards), f"{wrote}\n{converted}"


def quantize(work: Path, scheme: str) -> str:
    import oasr

    start = time.perf_counter()
    oasr.quantize(work / "bf16", work / scheme, scheme=scheme)
    return f"quantized {scheme}: {time.perf_counter() - start:.0f} s"


def in_child(fn, *args):
    """``fn(*args)`` in a fresh process that has exited, its memory given back, when this returns."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def check(label: str, bundle: Path, shard: int) -> bool:
    size = (bundle / "model.safetensors").stat().st_size
    start = time.perf_counter()
    before, after = load_peak(bundle, "bfloat16")
    grown, bound = after - before, size + shard
    ok = grown <= bound
    print(f"{label}: bundle {size / GB:.2f} GB, load {time.perf_counter() - start:.0f} s; peak RSS before {before / GB:.2f} GB, "
          f"after {after / GB:.2f} GB, growth {grown / GB:.2f} GB; bound bytes + one shard {bound / GB:.2f} GB: {'pass' if ok else 'FAIL'}")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tmp", type=Path, default=None, help="where the folder and bundles are written (default: the system's)")
    parser.add_argument("--shard-gb", type=float, default=4.0, help="largest shard, GB (10^9 bytes)")
    parser.add_argument("--layers", type=int, default=None, help="encoder and decoder layers (default: 32, the real ones)")
    parser.add_argument("--vocab", type=int, default=None, help="vocabulary (default: 156032, the real one)")
    parser.add_argument("--quantize", default="", help="also int8 and/or int4 bundles, e.g. int8,int4")
    parser.add_argument("--keep", action="store_true", help="keep the bundles (the source folder is always deleted)")
    args = parser.parse_args()
    schemes = [s for s in args.quantize.split(",") if s]

    audio, text = shapes(args.layers, args.vocab)
    params = count(audio, text)
    weights = params * 2
    need = 2 * weights * 1.01
    work = Path(tempfile.mkdtemp(prefix="qwen2-audio-load-", dir=args.tmp))
    free, memory = shutil.disk_usage(work).free, available_memory()
    print(f"{params / 1e9:.3f} B parameters ({weights / GB:.2f} GB in bf16) under {work}: disk free {free / GB:.1f} GB "
          f"(about {need / GB:.1f} needed), memory available {'?' if memory is None else f'{memory / GB:.1f} GB'}")
    if free < need:
        shutil.rmtree(work)
        raise SystemExit(f"not enough disk under {work.parent}: point --tmp elsewhere")
    if memory is not None and memory < weights + args.shard_gb * GB:
        print(f"warning: {memory / GB:.1f} GB available is less than the bound; the load may be killed")

    ok = True
    try:
        shard, done = in_child(prepare, work, audio, text, int(args.shard_gb * GB))
        print(done)
        ok &= check("bfloat16", work / "bf16", shard)
        for scheme in schemes:
            print(in_child(quantize, work, scheme))
            ok &= check(scheme, work / scheme, shard)
            if not args.keep:
                shutil.rmtree(work / scheme)
    finally:
        if args.keep:
            print(f"kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
