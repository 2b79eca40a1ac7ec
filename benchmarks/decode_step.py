"""Whisper decoder time per step: the beam search of one window, in process, no start-up.

    python benchmarks/decode_step.py [--model whisper-base] [--audio jfk.wav] [--beam-size 5]
                                     [--threads 2] [--runs 7] [--windows 1]

The window is encoded once and its prompt run once (not timed); each run then times
``WhisperDecoder.decode_batch(prompted, 0.0)`` (``--windows`` copies of the window decoded as
one batch) and counts the decoder calls it made. Reported: medians over ``--runs`` of wall and
user CPU milliseconds per decoder step (user CPU tells the work apart from waiting on a loaded
machine). To compare two versions of the code, run this script once per checkout
(``PYTHONPATH=OTHER_CHECKOUT_PARENT``), same arguments, interleaving if the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("OASR_TEST_DATA", ROOT / "tests" / "data"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="whisper-base")
    parser.add_argument("--audio", default=str(DATA / "asr" / "jfk.wav"))
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--windows", type=int, default=1)
    args = parser.parse_args()

    import torch
    import torch.nn.functional as F

    import oasr
    from oasr.decoding.whisper.decode import WhisperDecoder
    from oasr.features.logmel import log_mel_spectrogram
    from oasr.io.audio import load_audio

    torch.set_num_threads(args.threads)
    loaded = oasr.load_pretrained(args.model, task="transcribe", device="cpu", dtype="float32")
    audio = torch.from_numpy(load_audio(args.audio, 16000)[: 30 * 16000])
    mel = log_mel_spectrogram(audio, loaded.feature_spec, padding=30 * 16000)
    frames = mel.shape[-1] - 3000
    window = F.pad(mel[:, :frames], (0, 3000 - frames))[None].expand(args.windows, -1, -1)
    model = loaded.model
    decoder = WhisperDecoder(model, loaded.tokenizer(), beam_size=args.beam_size)
    calls = [0]
    logits = model.logits

    def counted(*a, **k):
        calls[0] += 1
        return logits(*a, **k)

    with torch.inference_mode():
        features = model.embed_audio(window)
        language = "en"
        prompted = decoder.prompt(features, *decoder.initial_tokens(language, "transcribe"))
        model.logits = counted
        decode = getattr(decoder, "decode_batch", None) or (lambda p, t: [decoder.decode(p, t)])
        decode(prompted, 0.0)  # warm-up
        wall, user, text = [], [], ""
        for _ in range(args.runs):
            calls[0] = 0
            r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            results = decode(prompted, 0.0)
            t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
            wall.append((t1 - t0) * 1000 / calls[0])
            user.append((r1.ru_utime - r0.ru_utime) * 1000 / calls[0])
            text = results[0].text
    print(f"{args.model} beam {args.beam_size} x {args.windows} window(s), {args.threads} thread(s), {calls[0]} steps: "
          f"{statistics.median(wall):.2f} ms wall, {statistics.median(user):.2f} ms user CPU per step (medians of {args.runs})")
    print(f"text: {text.strip()[:80]}")


if __name__ == "__main__":
    main()
