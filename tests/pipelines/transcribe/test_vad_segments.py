"""--vad silero keeps Whisper's own segments inside the speech regions (issue 30), on real audio:
two copies of jfk.wav with 4 s of silence between them, transcribed by Whisper tiny.en."""

from __future__ import annotations

import numpy as np
import soundfile as sf

import oasr
from oasr.options import TranscribeOptions


def test_no_segment_spans_the_silence_the_vad_cut(tiny_en_bundle, jfk_wav):
    x, rate = sf.read(jfk_wav, dtype="float32")
    audio = np.concatenate([x, np.zeros(4 * rate, np.float32), x])
    gap = (len(x) / rate, len(x) / rate + 4.0)  # 11.0 .. 15.0 s
    heard = []
    t = oasr.transcribe(audio, str(tiny_en_bundle), TranscribeOptions(vad="silero"), device="cpu", dtype="float32", on_segment=heard.append)
    assert len(t.segments) >= 4 and heard == list(t.segments)  # streamed as decoded, the same segments
    for s in t.segments:
        assert not (s.start < gap[0] + 0.5 and s.end > gap[1] - 0.5), (s.start, s.end, s.text)  # none across the gap
    assert "country" in " ".join(s.text for s in t.segments if s.end <= gap[0] + 0.5).lower()
