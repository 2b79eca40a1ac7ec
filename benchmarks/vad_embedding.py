"""Diarization front half: Silero VAD and GE2E embeddings against the silero-vad and resemblyzer packages.

    python benchmarks/vad_embedding.py [--runs N] [--windows N] [--threads N] [--json FILE]

Same weights (each package's own files, converted in memory by oasr, not timed), same audio:
``sample.wav`` (30 s, 16 kHz). Three measurements:

* ``vad``: speech probabilities for every 32 ms chunk of the file: ``speech_probabilities``
  (encoder over all chunks at once, one LSTM pass) against the package's model called chunk by
  chunk, as its ``get_speech_timestamps`` does;
* ``windows``: ``--windows`` embeddings of 1.5 s windows, 0.45 s apart (what a diarization
  run over 30 s of speech embeds): ``embed_segments`` (all partials in batches) against
  ``VoiceEncoder.embed_utterance`` per window (Resemblyzer has no batched form);
* ``utterance``: one embedding of the whole file (``embed_utterance``, 38 partials, both batched).

Both run in this process, interleaved over ``--runs`` rounds after a warm-up; medians, ratio =
peer time / oasr time (above 1: oasr is faster). Importing silero_vad sets torch to one thread;
the thread count is restored after the import, so both sides run with the same count.
Target (issue 6): 30 s of audio diarized in 1.5 s end to end, so VAD plus embeddings should take
a small share of it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from common import interleaved

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("OASR_TEST_DATA", ROOT / "tests" / "data"))
SR = 16000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--windows", type=int, default=60)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    import torch

    threads = args.threads or torch.get_num_threads()
    import resemblyzer
    import silero_vad

    torch.set_num_threads(threads)

    import oasr
    from oasr.io.audio import load_audio
    from oasr.pipelines.vad.silero import speech_probabilities
    from oasr.pipelines.diarize.embedding import embed_segments, embed_utterance

    audio = load_audio(DATA / "diarization" / "sample.wav", SR)
    vad = oasr.load_pretrained(Path(silero_vad.__file__).parent / "data", device="cpu")
    encoder = oasr.load_pretrained(Path(resemblyzer.__file__).parent / "pretrained.pt", device="cpu")
    peer_vad = silero_vad.load_silero_vad()
    peer_encoder = resemblyzer.VoiceEncoder("cpu", verbose=False)
    signal = torch.nn.functional.pad(torch.from_numpy(audio), (0, -len(audio) % 512))
    windows = [(i * 0.45, i * 0.45 + 1.5) for i in range(args.windows)]
    pieces = [audio[round(a * SR) : round(b * SR)] for a, b in windows]

    def peer_vad_run():
        peer_vad.reset_states()
        with torch.no_grad():
            [peer_vad(signal[i : i + 512], SR).item() for i in range(0, len(signal), 512)]

    pairs = {
        "vad": {"oasr": lambda: speech_probabilities(audio, vad), "peer": peer_vad_run},
        "windows": {
            "oasr": lambda: embed_segments(audio, windows, encoder, normalize_volume=False),
            "peer": lambda: [peer_encoder.embed_utterance(p) for p in pieces],
        },
        "utterance": {
            "oasr": lambda: embed_utterance(audio, encoder, normalize_volume=False),
            "peer": lambda: peer_encoder.embed_utterance(audio),
        },
    }
    times = interleaved(pairs, args.runs)

    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); {args.runs} interleaved run(s), medians; "
          f"{len(audio) / SR:.1f} s of audio")
    peers = {"vad": "silero-vad", "windows": "resemblyzer", "utterance": "resemblyzer"}
    results = []
    for measure in pairs:
        ours, theirs = (statistics.median(times[(measure, e)]) for e in ("oasr", "peer"))
        what = f"{args.windows} windows" if measure == "windows" else f"{len(audio) / SR:.0f} s"
        results.append({"measure": measure, "what": what, "oasr_s": round(ours, 4), "peer": peers[measure],
                        "peer_s": round(theirs, 4), "ratio": round(theirs / ours, 2)})
        print(f"{measure:9} {what:11}: oasr {ours * 1000:7.1f} ms, {peers[measure]:11} {theirs * 1000:7.1f} ms, "
              f"ratio {theirs / ours:5.2f}x")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
