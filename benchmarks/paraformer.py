"""Paraformer benchmark: oasr against FunASR's own Paraformer on the same random weights.

    python benchmarks/paraformer.py [--size large|small] [--seconds 60] [--chunk-length 30]
                                    [--runs N] [--threads 2] [--no-process] [--json FILE]

The FunASR folder (``config.yaml``, ``model.pt``, ``am.mvn``, ``tokens.json``) is written by the
tests' FunASR helpers (``tests/support/funasr_reference.py``) with seeded random weights, at
``large``: paraformer-large's shape (SAN-M encoder of 50 blocks, 512 wide, 4 heads, 2048
feed-forward; CIF predictor v2; SAN-M decoder of 16 blocks, all with cross-attention; 80 mel
bins, LFR 7/6; 8404 tokens, CJK characters), or ``small`` (64 x 4, decoder 2, 500 tokens) to
check the script. It is converted once into an oasr bundle (not timed). The audio is jfk.wav
tiled to ``--seconds``. The whole call is timed, fp32:

* ``oasr``: ``oasr.transcribe(audio, bundle)`` (front end, encoder, CIF, decoder, text), once
  with its defaults (60 s chunks with 4 s overlaps: 60 s of audio is one piece, as in FunASR) and
  once in ``--chunk-length`` chunks (30 s: three chunks, 68 s of audio through the model);
* ``funasr``: its ``WavFrontend`` (fbank, LFR, CMVN) then the model's ``inference`` (encoder,
  CIF, decoder, text), as the parity tests' reference and ``AutoModel`` without a VAD call it:
  the whole recording in one piece.

Whole process (unless ``--no-process``): a fresh ``oasr transcribe -m BUNDLE -f AUDIO --threads
N -q`` against a fresh ``python -c`` script that loads FunASR's model from the same folder (the
tests' helper, as ``AutoModel`` builds it and loads ``model.pt``), reads the file and
transcribes it, each timed from spawn to exit.

Rounds are interleaved and medians reported with the ratio oasr / funasr, for wall time and
CPU time (user + sys of the process or the child); the load average is printed, and whether
each in-process text equals FunASR's. Target (2 threads, 60 s): at most 0.5x; the model is
non-autoregressive, so the work is the encoder.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np
import torch

from common import compile_project, process_call, process_rounds, ratio_row, timed_rounds

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("OASR_TEST_DATA", ROOT / "tests" / "data"))
SUPPORT = ROOT / "tests" / "support"
sys.path.insert(0, str(SUPPORT))
import funasr_reference as ref  # noqa: E402

SIZES = {  # FunASR's config schema; feed-forward 4 x wide, as paraformer-large's
    "large": dict(d_model=512, encoder_layers=50, decoder_layers=16, att_layers=16, vocab=8404),
    "small": dict(d_model=64, encoder_layers=4, decoder_layers=2, att_layers=2, vocab=500),
}
TARGET = 0.5

FUNASR_SCRIPT = """
import contextlib, io, sys, types
from pathlib import Path
import soundfile as sf
import torch
support, folder, audio, threads = sys.argv[1:5]
sys.path.insert(0, support)
sys.modules.setdefault("pytest", types.ModuleType("pytest"))  # the helper names it for skips only
import funasr_reference as ref
torch.set_num_threads(int(threads))
model, frontend, tokenizer = ref.funasr_parts(Path(folder))
samples, rate = sf.read(audio, dtype="float32")
with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):
    feats, lengths = frontend(torch.from_numpy(samples)[None], torch.tensor([len(samples)]))
    out, _ = model.inference(feats, lengths[:, None], key=["utt"], tokenizer=tokenizer, frontend=frontend,
                             data_type="fbank", device="cpu")
print(out[0]["text"] if out else "")
"""


def write_folder(folder: Path, size: str) -> Path:
    """The tests' FunASR folder at ``size``, with a vocabulary of SPECIALS, CJK characters, <unk>."""
    shape = dict(SIZES[size])
    tokens = ref.SPECIALS + [chr(0x4E00 + i) for i in range(shape.pop("vocab") - len(ref.SPECIALS) - 1)] + ["<unk>"]
    conf = ref.config(**shape)
    for part in ("encoder_conf", "decoder_conf"):
        conf[part]["linear_units"] = 4 * shape["d_model"]
    with mock.patch.object(ref, "vocabulary", lambda kind: tokens):
        return ref.write_folder(folder, conf, "zh")


def funasr_call(model, frontend, tokenizer, audio: np.ndarray):
    """FunASR's front end and inference on the whole recording -> its text."""
    def run():
        with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):  # inference prints its progress
            feats, lengths = frontend(torch.from_numpy(audio)[None], torch.tensor([len(audio)]))
            out, _ = model.inference(feats, lengths[:, None], key=["utt"], tokenizer=tokenizer, frontend=frontend,
                                     data_type="fbank", device="cpu")
        return out[0]["text"] if out else ""
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="large")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--chunk-length", type=float, default=30.0, help="seconds per chunk of the chunked oasr run")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-process", action="store_true", help="skip the whole-process figure")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    import soundfile as sf

    if not args.no_process:
        compile_project(ROOT)  # the whole-process figure times the tool as installed

    import oasr

    ref.funasr()
    jfk, rate = sf.read(DATA / "asr" / "jfk.wav", dtype="float32")
    audio = np.tile(jfk, int(np.ceil(args.seconds * rate / len(jfk))))[: int(args.seconds * rate)]
    with tempfile.TemporaryDirectory() as tmp:
        wav, folder, bundle = Path(tmp) / "audio.wav", Path(tmp) / "funasr", Path(tmp) / "oasr"
        sf.write(wav, audio, rate)
        write_folder(folder, args.size)
        oasr.convert([folder], bundle)
        loaded = oasr.load_pretrained(str(bundle), dtype="float32")
        chunked = oasr.TranscribeOptions(chunk_length=args.chunk_length)
        calls = {
            "oasr": lambda: oasr.transcribe(audio, loaded).text.strip(),
            f"oasr-{args.chunk_length:g}s-chunks": lambda: oasr.transcribe(audio, loaded, chunked).text.strip(),
            "funasr": funasr_call(*ref.funasr_parts(folder), audio),
        }
        texts = {name: fn() for name, fn in calls.items()}
        cli = str(Path(sys.executable).with_name("oasr"))
        processes = {
            "oasr transcribe": process_call([cli, "transcribe", "-m", str(bundle), "-f", str(wav), "--threads", str(args.threads), "-q"]),
            "python+funasr": process_call([sys.executable, "-c", FUNASR_SCRIPT, str(SUPPORT), str(folder), str(wav), str(args.threads)]),
        }
        times = timed_rounds({"call": calls}, args.runs)
        ptimes = {} if args.no_process else process_rounds({"process": processes}, args.runs)
    load = os.getloadavg()
    rows = []
    for group, engines, ref_name, table in (("call", calls, "funasr", times), ("process", processes, "python+funasr", ptimes)):
        if not table:
            continue
        for engine in engines:
            rows.append({"measure": group, "engine": engine, **ratio_row(table, group, engine, ref_name),
                         "chars": len(texts[engine].replace(" ", "")) if group == "call" else None,
                         "same_text": texts[engine] == texts["funasr"] if group == "call" else None})
    print(f"{args.size} Paraformer, {args.seconds:g} s audio, {args.threads} threads, {args.runs} runs (target oasr <= {TARGET}x); "
          f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"  {'measure':8} {'engine':20} {'wall':>9}  {'ratio':>6}  {'cpu':>9}  {'ratio':>6}")
    for r in rows:
        text = f"  ({r['chars']} chars, {'same text as' if r['same_text'] else 'text differs from'} funasr)" if r["chars"] is not None else ""
        print(f"  {r['measure']:8} {r['engine']:20} {r['median_s']:8.3f}s  {r['ratio']:.3f}x  {r['cpu_s']:8.3f}s  {r['cpu_ratio']:.3f}x{text}")
    if args.json:
        args.json.write_text(json.dumps({"load_average": load, "rows": rows}, indent=2))


if __name__ == "__main__":
    sys.exit(main())
