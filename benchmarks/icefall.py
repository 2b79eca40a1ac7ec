"""Zipformer benchmark: oasr against the ``zipformer`` package (icefall's own modules) on the same random weights.

    python benchmarks/icefall.py [--kinds ctc,transducer] [--size medium|small] [--seconds 60]
                                   [--runs N] [--threads 2] [--no-process] [--json FILE]

One hybrid icefall model (CTC head and stateless transducer) with random weights, built by the
tests' helpers (tests/support/icefall_folders.py: ``medium`` is icefall's default Zipformer2
layout, 500 labels; ``small`` two stacks, for a quick check), is written as ``export.py`` lays it
out and converted once into an oasr CTC bundle and an oasr transducer bundle (not timed). The
audio is jfk.wav tiled to ``--seconds``. The whole call is timed:

* ``oasr``: ``oasr.transcribe(audio, bundle)`` (front end, encoder, greedy decoding, text), fp32;
* ``zipformer``: the package's front end (torchaudio's Kaldi fbank, as its ``inference.py`` calls
  it: 80 bins, no dither, ``snip_edges=False``), ``model.forward_encoder``, its own
  ``ctc_greedy_search`` / ``greedy_search`` and ``token_ids_to_text``, fp32, in eager mode (the
  package's ``K2_ONNX_EXPORT`` switch, set by the tests' stand-ins, keeps ``torch.compile`` out).

Whole process (unless ``--no-process``): a fresh ``oasr transcribe -m BUNDLE -f AUDIO --threads N -q``
against a fresh ``python -c`` script that builds the package's model, loads ``exp/pretrained.pt``
into it (as icefall's ``pretrained.py`` does), reads the file and transcribes it, each timed from
spawn to exit. The package's training-only imports are stand-ins (tests/support/zipformer_reference.py),
so its process imports less than an installed icefall would.

The joiner's blank is biased so that greedy search emits on about one frame in six (4 labels a
second at 25 frames a second, as in speech; random weights emit on every frame or on none); the
CTC head keeps the parity test's weights. Both engines decode greedily, one symbol per frame.
Rounds are interleaved and medians reported with the ratio oasr / zipformer, for wall time and
for CPU time (user + sys of the process or the child); the load average is printed. The medium
stack on random weights is chaotic in float32 (see the parity test), so on long audio the two
texts may part after a while: the word counts are printed beside the times.
Target (icefall Zipformer issue, medium, 60 s, 2 threads): at most 0.7x.
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
SUPPORT = ROOT / "tests" / "support"
sys.path.insert(0, str(SUPPORT))

from icefall_folders import MEDIUM, SMALL, export_folder, reference_model  # noqa: E402

DATA = Path(os.environ.get("OASR_TEST_DATA", ROOT / "tests" / "data"))
# (shape, spread of the random weights, the heads' blank bias): the parity test's values (the
# joiner's blank is then tuned: tune_blank)
SIZES = {"small": (SMALL, 0.05, 1.5), "medium": (MEDIUM, 0.02, 0.0)}
VOCAB = 500  # icefall's lang_bpe_500
TARGET = 0.7
EMIT_RATE = 1 / 6  # transducer labels per encoder frame (25 a second): about 4 a second, as in speech
ARCHITECTURES = {"ctc": "icefall-ctc", "transducer": "transducer"}

# The reference, run in this process (its functions) and as a fresh process (``python -c``).
REFERENCE = """
import sys, types, zipfile
import torch

def kaldi_fbank(wheel):
    # torchaudio's compliance/kaldi.py, read out of its wheel: torchaudio does not load beside this torch
    sys.modules.setdefault("torchaudio", types.ModuleType("torchaudio"))
    module = types.ModuleType("torchaudio.compliance.kaldi")
    exec(compile(zipfile.ZipFile(wheel).read("torchaudio/compliance/kaldi.py").decode(), "kaldi.py", "exec"), module.__dict__)
    return module.fbank

def package(support):
    sys.path.insert(0, support)
    if "pytest" not in sys.modules:  # the stand-ins' importorskip, without importing pytest
        import importlib
        sys.modules["pytest"] = types.SimpleNamespace(importorskip=importlib.import_module)
    from zipformer_reference import zipformer_package
    return zipformer_package()

def features(fbank, samples):
    return fbank(torch.as_tensor(samples)[None], num_mel_bins=80, sample_frequency=16000, dither=0, snip_edges=False,
                 high_freq=-400)

def recognise(model, search, fbank, table, samples, kind):
    from zipformer.utils import token_ids_to_text
    with torch.inference_mode():
        feats = features(fbank, samples)
        encoded, lengths = model.forward_encoder(feats[None], torch.tensor([feats.shape[0]]))
        if kind == "ctc":
            ids = search.ctc_greedy_search(model.ctc_output(encoded), lengths)[0]
        else:
            ids = search.greedy_search(model, encoded, lengths)[0]
    return token_ids_to_text(ids, table)

if __name__ == "__main__":
    import soundfile as sf
    support, size, folder, audio, threads, kind, wheel = sys.argv[1:8]
    torch.set_num_threads(int(threads))
    model_module, search = package(support)
    import icefall_folders
    from zipformer.utils import SymbolTable
    table = SymbolTable.from_file(f"{folder}/data/lang_bpe_500/tokens.txt")
    model = model_module.AsrModel(**getattr(icefall_folders, size.upper()), chunk_size="-1", left_context_frames="-1",
                                  vocab_size=len(table), use_ctc=True, use_transducer=True, context_size=2)
    model.load_state_dict(torch.load(f"{folder}/exp/pretrained.pt", map_location="cpu")["model"])
    model.eval()
    samples, rate = sf.read(audio, dtype="float32")
    print(recognise(model, search, kaldi_fbank(wheel), table, samples, kind))
"""


def torchaudio_wheel() -> Path:
    wheels = sorted((ROOT / ".weights" / "reference").glob("torchaudio-*.whl"))
    if not wheels:
        raise SystemExit("no torchaudio wheel in .weights/reference (make install-test downloads it)")
    return wheels[-1]


def tune_blank(model, search, feats) -> float:
    """Bias the joiner's blank until the package's greedy search emits on about ``EMIT_RATE`` of
    the frames of ``feats``: random weights emit on every frame or on none, which would time the
    decoder's loop and not the model. Returns the rate reached."""
    with torch.no_grad():
        encoded, lengths = model.forward_encoder(feats[None], torch.tensor([feats.shape[0]]))
        bias = model.joiner.output_linear.bias
        base, low, high = float(bias[0]), -10.0, 10.0
        for _ in range(16):
            bias[0] = base + (low + high) / 2
            rate = len(search.greedy_search(model, encoded, lengths)[0]) / int(lengths[0])
            low, high = ((low + high) / 2, high) if rate > EMIT_RATE else (low, (low + high) / 2)
    return rate


def remembered(cmd: list[str]):
    """``process_call`` that keeps its latest stdout in ``text``, one line (the CLI prints a
    line per segment)."""
    run = process_call(cmd)

    def call():
        call.text, call.last = " ".join(run().split()), run.last
        return call.text
    return call


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kinds", default="ctc,transducer")
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

    reference = {"__name__": "reference"}
    exec(REFERENCE, reference)
    _, search = reference["package"](str(SUPPORT))
    from zipformer.utils import SymbolTable

    wheel = torchaudio_wheel()
    fbank = reference["kaldi_fbank"](wheel)
    jfk, rate = sf.read(DATA / "asr" / "jfk.wav", dtype="float32")
    audio = np.tile(jfk, int(np.ceil(args.seconds * rate / len(jfk))))[: int(args.seconds * rate)]
    shape, spread, bias = SIZES[args.size]
    model = reference_model(shape, ctc=True, transducer=True, vocab=VOCAB, blank_bias=bias, spread=spread)
    if "transducer" in args.kinds:
        emitted = tune_blank(model, search, reference["features"](fbank, audio[: rate * 10]))
        print(f"transducer: labels on {emitted:.2f} of the frames (target {EMIT_RATE:.2f})", file=sys.stderr)
    pairs, texts, processes = {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        wav, source = Path(tmp) / "audio.wav", export_folder(Path(tmp) / "icefall", model)
        sf.write(wav, audio, rate)
        symbols = SymbolTable.from_file(source / "data" / "lang_bpe_500" / "tokens.txt")
        cli = str(Path(sys.executable).with_name("oasr"))
        for kind in args.kinds.split(","):
            bundle = Path(tmp) / f"oasr-{kind}"
            oasr.convert([source], bundle, architecture=ARCHITECTURES[kind])
            loaded = oasr.load_pretrained(str(bundle), dtype="float32")
            pairs[kind] = {
                "oasr": lambda loaded=loaded: oasr.transcribe(audio, loaded).text.strip(),
                "zipformer": lambda kind=kind: reference["recognise"](model, search, fbank, symbols, audio, kind),
            }
            texts[kind] = {name: fn() for name, fn in pairs[kind].items()}
            processes[kind] = {
                "oasr transcribe": remembered([cli, "transcribe", "-m", str(bundle), "-f", str(wav), "--threads", str(args.threads), "-q"]),
                "python+zipformer": remembered([sys.executable, "-P", "-c", REFERENCE, str(SUPPORT), args.size, str(source), str(wav),
                                                str(args.threads), kind, str(wheel)]),
            }
        times = timed_rounds(pairs, args.runs)
        ptimes = {} if args.no_process else process_rounds(processes, args.runs)
    load = os.getloadavg()
    rows = []
    for kind in pairs:
        for group, engines, ref_name, table in (("call", pairs[kind], "zipformer", times),
                                                ("process", processes[kind], "python+zipformer", ptimes)):
            if not table:
                continue
            said = texts[kind] if group == "call" else {e: fn.text for e, fn in engines.items()}
            for engine in engines:
                rows.append({"kind": kind, "measure": group, "engine": engine, **ratio_row(table, kind, engine, ref_name), "words": len(said[engine].split()),
                             "same_text": len(set(said.values())) == 1})
    print(f"{args.size} Zipformer, {args.seconds:g} s audio, {args.threads} threads, {args.runs} runs (target oasr <= {TARGET}x); "
          f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"  {'kind':10} {'measure':8} {'engine':17} {'wall':>9}  {'ratio':>6}  {'cpu':>9}  {'ratio':>6}")
    for r in rows:
        same = "same text" if r["same_text"] else "texts differ"
        print(f"  {r['kind']:10} {r['measure']:8} {r['engine']:17} {r['median_s']:8.3f}s  {r['ratio']:.3f}x  "
              f"{r['cpu_s']:8.3f}s  {r['cpu_ratio']:.3f}x  ({r['words']} words, {same})")
    if args.json:
        args.json.write_text(json.dumps({"load_average": load, "rows": rows}, indent=2))


if __name__ == "__main__":
    sys.exit(main())
