"""WeNet U2++ benchmark: oasr against the tests' WeNet reference on the same random weights.

    python benchmarks/wenet.py [--size medium|small] [--seconds 60] [--runs N] [--threads 2]
                               [--beam-size 10] [--reverse-weight 0] [--no-process] [--json FILE]

The WeNet experiment folder (``train.yaml``, ``final.pt``, ``global_cmvn``, ``units.txt``) is
written by the tests' WeNet helpers (``tests/support/wenet_refs.py``: ESPnet's Conformer and
decoders with WeNet's names mapped, and WeNet's own arithmetic where it differs) with seeded random
weights, at ``medium``: a U2++ Conformer as AISHELL's ``train_u2++_conformer.yaml`` (256 wide, 12
blocks, 4 heads, 2048 feed-forward, causal convolution with a layer norm, dynamic chunks trained,
so full context at decoding; a left-to-right decoder of 3 blocks and a right-to-left one of 3;
80 mel bins, 4233 units), its kernel 15 where AISHELL's is 8 (ESPnet's module takes odd kernels
only); or ``small`` (64 x 2, 300 units) to check the script. The helper's draws (spread 0.3 and
layer-norm gains near 0, for the parity tests) would make 12 blocks of attention average every
frame into one vector and the CTC head emit one label for the whole recording, so they are scaled
to PyTorch's default spread (1 / sqrt(3 fan-in)) with zero biases and unit gains, the global CMVN
is the audio's own statistics, and the CTC blank's bias is raised until greedy decoding gives
about 4 labels a second, as speech does: the n-best the decoder rescores is then as long as a real
transcript's. The folder is converted once into an oasr bundle (not timed). The audio is jfk.wav
tiled to ``--seconds``. The whole call is timed, fp32, attention rescoring of a beam of
``--beam-size`` (``ctc_weight`` 0, ``reverse_weight`` ``--reverse-weight``: WeNet's defaults, 0):

* ``oasr``: ``oasr.transcribe(audio, bundle)`` (front end, encoder, CTC prefix beam search,
  decoder rescoring, text). oasr cuts long audio into 60 s chunks overlapping by 4 s, each decoded
  on its own (its n-best rescored alone) and each keeping the words of its own span; 60 s of audio
  is one piece, as WeNet decodes it (WeNet runs any length in one piece);
* ``reference``: WeNet's ``recognize.py`` pipeline as the parity tests run it: Kaldi fbank of the
  int16-scaled audio (torchaudio's ``compliance/kaldi.py``, read out of its wheel), the global
  CMVN and ESPnet's encoder in one piece, WeNet's CTC prefix beam search and attention rescoring.

Whole process (unless ``--no-process``): a fresh ``oasr transcribe -m BUNDLE -f AUDIO --threads N
-q --beam-size B`` against a fresh ``python -c`` script that builds the reference's modules
(without the helper's random draws, as WeNet's ``init_model``), loads ``final.pt`` from the same
folder, reads the file and transcribes it, each timed from spawn to exit.

Rounds are interleaved and medians reported with the ratio oasr / reference, for wall time and CPU
time (user + sys of the process or the child); the load average is printed, and whether each text
equals the reference's. Target (2 threads, 60 s, beam 10): at most 0.7x.
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
SUPPORT = ROOT / "tests" / "support"
sys.path.insert(0, str(SUPPORT))
import wenet_refs as wr  # noqa: E402

SIZES = {  # encoder (width, blocks, heads, feed-forward), decoder blocks (left, right), units
    "medium": dict(width=256, blocks=12, heads=4, ff=2048, decoder=(3, 3), vocab=4233),
    "small": dict(width=64, blocks=2, heads=2, ff=256, decoder=(1, 1), vocab=300),
}
LABELS_PER_SECOND = 4.0
TARGET = 0.7

# The reference, run in this process (its functions) and as a fresh process (``python -c``).
REFERENCE = """
import sys, types
from unittest import mock
import torch, yaml

def setup(support):
    sys.path.insert(0, support)
    # speaker_refs' only use of pytest: skipping a test when the torchaudio wheel is absent; and
    # compliance/kaldi.py imports torchaudio, which does not load beside this torch
    sys.modules.setdefault("pytest", types.SimpleNamespace(skip=sys.exit))
    sys.modules.setdefault("torchaudio", types.ModuleType("torchaudio"))
    import speaker_refs, wenet_refs
    return wenet_refs, speaker_refs.kaldi_module().fbank

def load(wr, folder):
    # as WeNet's init_model + load_checkpoint: the modules built without the helper's random draws
    # (the checkpoint replaces them), final.pt's WeNet names put back on ESPnet's in their order
    conf = yaml.safe_load(open(f"{folder}/train.yaml"))
    empty = lambda *shape, generator=None, **kw: torch.empty(*shape, **kw)
    with mock.patch.object(torch, "randn", empty), mock.patch.object(torch, "rand", empty):
        ref = wr.Reference(conf)
    state = torch.load(f"{folder}/final.pt", map_location="cpu")
    ref.mean, ref.istd = state.pop("encoder.global_cmvn.mean"), state.pop("encoder.global_cmvn.istd")
    theirs = [state[k] for k in state if not k.endswith(".pe")]
    ref.load_state_dict(dict(zip(ref.state_dict(), theirs, strict=True)))
    units = [line.split()[0] for line in open(f"{folder}/units.txt", encoding="utf-8")]
    return ref, conf, units

def recognise(wr, fbank, ref, conf, units, samples, beam, reverse_weight):
    fb, eos = conf["dataset_conf"]["fbank_conf"], conf["output_dim"] - 1
    with torch.inference_mode():
        feats = fbank(torch.as_tensor(samples)[None] * (1 << 15), num_mel_bins=fb["num_mel_bins"], frame_length=fb["frame_length"],
                      frame_shift=fb["frame_shift"], dither=0.0, energy_floor=0.0, sample_frequency=16000)
        enc = ref.encode(feats[None])
        nbest = wr.wenet_prefix_beam(ref.ctc_log_probs(enc)[0], beam)
        best, _ = wr.wenet_rescoring(ref, enc, nbest, eos, eos, 0.0, reverse_weight)
    return "".join(units[i] for i in nbest[best][0] if not units[i].startswith("<")).replace("\u2581", " ").strip()

if __name__ == "__main__":
    import soundfile as sf
    support, folder, audio, threads, beam, reverse_weight = sys.argv[1:7]
    torch.set_num_threads(int(threads))
    wr, fbank = setup(support)
    model = load(wr, folder)
    samples, rate = sf.read(audio, dtype="float32")
    print(recognise(wr, fbank, *model, samples, int(beam), float(reverse_weight)))
"""


def build(size: str, folder: Path, fbank, samples: np.ndarray) -> None:
    """The WeNet folder: the helpers' U2++ config at ``size``, its weights made speech-like (below)
    and a unit table as long as its CTC head."""
    s = SIZES[size]
    conf = wr.train_yaml(decoder="bitransformer", causal=True, norm="layer_norm", dynamic=True, vocab=s["vocab"], mels=80, width=s["width"])
    conf["encoder_conf"].update(attention_heads=s["heads"], linear_units=s["ff"], num_blocks=s["blocks"], cnn_module_kernel=15)
    conf["decoder_conf"].update(attention_heads=s["heads"], linear_units=s["ff"], num_blocks=s["decoder"][0], r_num_blocks=s["decoder"][1])
    torch.manual_seed(0)
    ref = wr.Reference(conf)
    with torch.no_grad():  # the helper's draws at PyTorch's default spread, biases 0, layer-norm gains 1
        for p in ref.parameters():
            if p.dim() > 1:
                p.mul_(1 / (0.3 * (3 * p[0].numel()) ** 0.5))
            else:
                p.zero_()
        for m in ref.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.fill_(1.0)
    with torch.inference_mode():  # the CMVN of the audio; greedy labels a second on 10 s, the blank's bias by bisection
        feats = fbank(torch.as_tensor(samples[: 16000 * 10])[None] * (1 << 15), num_mel_bins=80, dither=0.0, energy_floor=0.0)
        ref.mean, ref.istd = feats.mean(0), 1 / feats.std(0)
        logits = ref.ctc_lo(ref.encode(feats[None]))[0]
        low, high = 0.0, 20.0
        for _ in range(20):
            bias = (low + high) / 2
            rate = len(wr.wenet_greedy(torch.cat((logits[:, :1] + bias, logits[:, 1:]), 1))) / 10
            low, high = (bias, high) if rate > LABELS_PER_SECOND else (low, bias)
    with torch.no_grad():
        ref.ctc_lo.bias[0] += bias
    print(f"CTC blank bias +{bias:.2f}: {rate:.1f} greedy labels a second (target {LABELS_PER_SECOND:g})", file=sys.stderr)
    wr.write_folder(folder, conf, ref)
    units = ["<blank>", "<unk>"] + [f"\u2581w{i}" if i % 3 == 0 else f"p{i}" for i in range(2, s["vocab"] - 1)] + ["<sos/eos>"]
    (folder / "units.txt").write_text("".join(f"{u} {i}\n" for i, u in enumerate(units)), encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="medium")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--beam-size", type=int, default=10)
    ap.add_argument("--reverse-weight", type=float, default=0.0, help="U2++'s right-to-left decoder's weight (WeNet's default 0)")
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
    _, fbank = reference["setup"](str(SUPPORT))
    jfk, rate = sf.read(DATA / "asr" / "jfk.wav", dtype="float32")
    audio = np.tile(jfk, int(np.ceil(args.seconds * rate / len(jfk))))[: int(args.seconds * rate)]
    with tempfile.TemporaryDirectory() as tmp:
        wav, folder, bundle = Path(tmp) / "audio.wav", Path(tmp) / "exp", Path(tmp) / "bundle"
        sf.write(wav, audio, rate)
        build(args.size, folder, fbank, audio)
        oasr.convert([folder], bundle)
        loaded = oasr.load_pretrained(str(bundle), dtype="float32")
        model = reference["load"](wr, str(folder))
        options = oasr.TranscribeOptions(beam_size=args.beam_size, decoding={"mode": "attention_rescoring", "reverse_weight": args.reverse_weight})
        calls = {
            "oasr": lambda: oasr.transcribe(audio, loaded, options).text,
            "reference": lambda: reference["recognise"](wr, fbank, *model, audio, args.beam_size, args.reverse_weight),
        }
        cli = [str(Path(sys.executable).with_name("oasr")), "transcribe", "-m", str(bundle), "-f", str(wav), "--threads", str(args.threads),
               "-q", "--beam-size", str(args.beam_size)] + (["--decoding-option", f"reverse_weight={args.reverse_weight}"] if args.reverse_weight else [])
        processes = {
            "oasr transcribe": process_call(cli),
            "python+reference": process_call([sys.executable, "-c", REFERENCE, str(SUPPORT), str(folder), str(wav), str(args.threads),
                                              str(args.beam_size), str(args.reverse_weight)]),
        }
        texts = {name: fn() for name, fn in calls.items()}
        if not args.no_process:  # oasr prints a line per segment; the reference's last line (ESPnet prints a notice on stdout)
            texts["oasr transcribe"] = " ".join(processes["oasr transcribe"]().split())
            texts["python+reference"] = (processes["python+reference"]().strip().splitlines() or [""])[-1]
        times = timed_rounds({"call": calls}, args.runs)
        ptimes = {} if args.no_process else process_rounds({"process": processes}, args.runs)
    load = os.getloadavg()
    rows = []
    for group, engines, ref_name, table in (("call", calls, "reference", times), ("process", processes, "python+reference", ptimes)):
        if not table:
            continue
        for engine in engines:
            rows.append({"measure": group, "engine": engine, **ratio_row(table, group, engine, ref_name), "words": len(texts[engine].split()),
                         "same_text": texts[engine].split() == texts[ref_name].split()})
    print(f"{args.size} WeNet U2++ Conformer, {args.seconds:g} s audio, {args.threads} threads, attention rescoring, beam {args.beam_size}, "
          f"{args.runs} runs (target oasr <= {TARGET}x); load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"  {'measure':8} {'engine':18} {'wall':>9}  {'ratio':>6}  {'cpu':>9}  {'ratio':>6}")
    for r in rows:
        text = "same text" if r["same_text"] else "TEXT DIFFERS from the reference's"
        print(f"  {r['measure']:8} {r['engine']:18} {r['median_s']:8.3f}s  {r['ratio']:.3f}x  {r['cpu_s']:8.3f}s  {r['cpu_ratio']:.3f}x"
              f"  ({r['words']} words, {text})")
    if args.json:
        args.json.write_text(json.dumps({"load_average": load, "rows": rows}, indent=2))


if __name__ == "__main__":
    sys.exit(main())
