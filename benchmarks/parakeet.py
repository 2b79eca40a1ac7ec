"""FastConformer benchmark: oasr against transformers' Parakeet on the same random weights.

    python benchmarks/parakeet.py [--kinds ctc,rnnt] [--size medium|0.6b] [--seconds 60]
                                  [--runs N] [--threads 2] [--no-process] [--json FILE]

A transformers ``ParakeetForCTC`` / ``ParakeetForRNNT`` with random weights (``medium``: 512 wide,
12 layers, 8x subsampling, 1024 labels; ``0.6b``: Parakeet 0.6B's 1024 x 24) is saved with
``save_pretrained`` and converted once into an oasr bundle (not timed). The audio is jfk.wav
tiled to ``--seconds``. The whole call is timed:

* ``oasr``: ``oasr.transcribe(audio, bundle)`` (front end, encoder, decoding, text), fp32, once
  with its default chunking and once in one chunk (``chunk_length`` = the audio);
* ``transformers``: ``processor(audio)``, ``model.generate`` and ``processor.batch_decode``, fp32.

Whole process (unless ``--no-process``): a fresh ``oasr transcribe -m BUNDLE -f AUDIO --threads N``
against a fresh ``python -c`` script that imports transformers, loads the saved model and
processor, reads the file and transcribes it, each timed from spawn to exit.

The transducer's blank is biased so it emits on about one frame in three, as speech does; both
engines decode greedily and produce the same labels. Rounds are interleaved and medians reported
with the ratio oasr / transformers, for wall time and for CPU time (user + sys of the process or
the child: on a shared, loaded machine it moves less than wall time); the load average is printed.
Target (issue 12, 2 threads): at most 0.7x.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from common import compile_project, process_call, process_rounds, ratio_row, timed_rounds


ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("OASR_TEST_DATA", ROOT / "tests" / "data"))
SIZES = {
    "medium": dict(hidden_size=512, num_hidden_layers=12, num_attention_heads=8, intermediate_size=2048, subsampling_conv_channels=256),
    "0.6b": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=8, intermediate_size=4096, subsampling_conv_channels=256),
}
VOCAB = 1024  # labels without the blank
TARGET = 0.7
EMIT_RATE = 1 / 3  # labels per encoder frame in the transducer benchmark


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import ParakeetTokenizer

    pieces = ["<unk>"] + [f"\u2581w{i}" if i % 3 == 0 else f"p{i}" for i in range(1, VOCAB)]
    tok = Tokenizer(models.Unigram([(p, -1.0) for p in pieces], unk_id=0))
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.Metaspace(), decoders.Metaspace()
    tok.add_special_tokens(["<pad>"])
    return ParakeetTokenizer(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>")


def build(kind: str, size: str, folder: Path):
    from transformers import (ParakeetCTCConfig, ParakeetFeatureExtractor, ParakeetForCTC, ParakeetForRNNT,
                              ParakeetProcessor, ParakeetRNNTConfig)

    torch.manual_seed(0)
    encoder = dict(SIZES[size], num_mel_bins=80, conv_kernel_size=9, subsampling_factor=8)
    if kind == "ctc":
        model = ParakeetForCTC(ParakeetCTCConfig(vocab_size=VOCAB + 1, pad_token_id=VOCAB, encoder_config=encoder))
    else:
        model = ParakeetForRNNT(ParakeetRNNTConfig(vocab_size=VOCAB + 1, blank_token_id=VOCAB, pad_token_id=VOCAB,
                                                   decoder_hidden_size=640, num_decoder_layers=2, encoder_config=encoder))
    model.eval()
    processor = ParakeetProcessor(feature_extractor=ParakeetFeatureExtractor(), tokenizer=_tokenizer())
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return model, processor


def _tune_blank(model, processor, audio):
    """Bias the RNN-T blank until labels come on about one frame in three, as in speech (Parakeet
    emits 3-4 labels a second at 12.5 frames a second). Random weights emit several labels on most
    frames, which would time the prediction network and not the model: the rate is measured by
    greedy decoding (transformers' own) on 10 s, and the bias found by bisection."""
    with torch.inference_mode():
        inputs = processor(audio[: 16000 * 10], sampling_rate=16000, return_tensors="pt")
        frames = model.encoder(input_features=inputs["input_features"]).last_hidden_state.shape[1]
        bias = model.joint.head.bias
        base = float(bias[VOCAB])
        low, high = -20.0, 40.0
        for _ in range(14):
            bias[VOCAB] = base + (low + high) / 2
            ids = model.generate(input_features=inputs["input_features"], decoder_start_token_id=VOCAB)
            ids = ids.sequences if hasattr(ids, "sequences") else ids
            rate = int((ids[0] != VOCAB).sum()) / frames
            low, high = ((low + high) / 2, high) if rate > EMIT_RATE else (low, (low + high) / 2)
        print(f"rnnt: labels on {rate:.2f} of the frames (target {EMIT_RATE})", file=sys.stderr)


HF_SCRIPT = """
import sys
import soundfile as sf
import torch
from transformers import AutoModelForCTC, AutoProcessor, ParakeetForRNNT
folder, audio, threads, kind, blank = sys.argv[1:6]
torch.set_num_threads(int(threads))
cls = AutoModelForCTC if kind == "ctc" else ParakeetForRNNT
model, processor = cls.from_pretrained(folder).eval(), AutoProcessor.from_pretrained(folder)
samples, rate = sf.read(audio, dtype="float32")
with torch.inference_mode():
    inputs = processor(samples, sampling_rate=rate, return_tensors="pt")
    extra = {"decoder_start_token_id": int(blank)} if kind != "ctc" else {}
    out = model.generate(input_features=inputs["input_features"], **extra)
    ids = out.sequences if hasattr(out, "sequences") else out
    if kind != "ctc":
        print(processor.tokenizer.decode([i for i in ids[0].tolist() if i != int(blank)], group_tokens=False))
    else:
        print(processor.batch_decode(ids, skip_special_tokens=True)[0])
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kinds", default="ctc,rnnt")
    ap.add_argument("--size", choices=sorted(SIZES), default="medium")
    ap.add_argument("--seconds", type=float, default=60.0)
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

    jfk, rate = sf.read(DATA / "asr" / "jfk.wav", dtype="float32")
    audio = np.tile(jfk, int(np.ceil(args.seconds * rate / len(jfk))))[: int(args.seconds * rate)]
    pairs, texts, processes = {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "audio.wav"
        sf.write(wav, audio, rate)
        for kind in args.kinds.split(","):
            folder, bundle = Path(tmp) / f"hf-{kind}", Path(tmp) / f"oasr-{kind}"
            model, processor = build(kind, args.size, folder)
            if kind == "rnnt":
                _tune_blank(model, processor, audio)
                model.save_pretrained(folder)
            oasr.convert([folder], bundle)
            loaded = oasr.load_pretrained(str(bundle), dtype="float32")
            whole = oasr.TranscribeOptions(chunk_length=min(max(args.seconds, 1.0), 120.0), chunk_overlap=0.0)

            def hf_call(model=model, processor=processor, kind=kind):
                with torch.inference_mode():
                    inputs = processor(audio, sampling_rate=rate, return_tensors="pt")
                    extra = {"decoder_start_token_id": VOCAB} if kind != "ctc" else {}
                    out = model.generate(input_features=inputs["input_features"], **extra)
                    ids = out.sequences if hasattr(out, "sequences") else out
                    if kind != "ctc":  # transducer sequences hold a blank per step
                        return processor.tokenizer.decode([i for i in ids[0].tolist() if i != VOCAB], group_tokens=False)
                    return processor.batch_decode(ids, skip_special_tokens=True)[0]

            pairs[kind] = {
                "oasr": lambda loaded=loaded: oasr.transcribe(audio, loaded).text,
                "oasr-1chunk": lambda loaded=loaded, whole=whole: oasr.transcribe(audio, loaded, whole).text,
                "transformers": hf_call,
            }
            texts[kind] = {name: fn() for name, fn in pairs[kind].items()}
            cli = str(Path(sys.executable).with_name("oasr"))
            processes[kind] = {
                "oasr transcribe": process_call([cli, "transcribe", "-m", str(bundle), "-f", str(wav), "--threads", str(args.threads), "-q"]),
                "python+transformers": process_call([sys.executable, "-c", HF_SCRIPT, str(folder), str(wav), str(args.threads), kind, str(VOCAB)]),
            }
        times = timed_rounds(pairs, args.runs)
        ptimes = {} if args.no_process else process_rounds(processes, args.runs)
    load = os.getloadavg()
    rows = []
    for kind in pairs:
        for group, engines, ref_name, table in (("call", pairs[kind], "transformers", times), ("process", processes[kind], "python+transformers", ptimes)):
            if not table:
                continue
            for engine in engines:
                rows.append({"kind": kind, "measure": group, "engine": engine, **ratio_row(table, kind, engine, ref_name),
                             "words": len(texts[kind][engine].split()) if group == "call" else None})
    print(f"{args.size} FastConformer, {args.seconds:g} s audio, {args.threads} threads, {args.runs} runs (target oasr <= {TARGET}x); "
          f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"  {'kind':5} {'measure':8} {'engine':20} {'wall':>9}  {'ratio':>6}  {'cpu':>9}  {'ratio':>6}")
    for r in rows:
        words = f"  ({r['words']} words)" if r["words"] is not None else ""
        print(f"  {r['kind']:5} {r['measure']:8} {r['engine']:20} {r['median_s']:8.3f}s  {r['ratio']:.3f}x  {r['cpu_s']:8.3f}s  {r['cpu_ratio']:.3f}x{words}")
    if args.json:
        args.json.write_text(json.dumps({"load_average": load, "rows": rows}, indent=2))


if __name__ == "__main__":
    sys.exit(main())
