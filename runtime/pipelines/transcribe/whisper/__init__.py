"""The ``whisper_seq2seq`` engine: long-form Whisper transcription, as openai-whisper's ``transcribe`` does it.

Two loops over 30-second windows, composed from the same parts:

- ``sequential.py`` (the default): windows one after another, each starting at the last complete
  segment's end, conditioned on the previous text (openai-whisper's ``transcribe``);
- ``batched.py`` (``batch_size`` above 1): VAD speech packed into windows decoded N at a time, no
  conditioning (faster-whisper's ``BatchedInferencePipeline``).

Their parts: ``window.py`` (the window's clock, a window being decoded, the pieces its tokens are
cut into), ``mel.py`` (a window's log-mel), ``decoder.py`` (the model set up to decode windows),
``fallback.py`` (openai-whisper's temperature fallback and silence rules, written once),
``segments.py`` (tokens -> pieces, pieces -> segments on the recording's clock) and
``hallucinations.py`` (openai-whisper's ``hallucination_silence_threshold``). ``engine.py`` checks
the options against the model and picks the loop.
"""

from .engine import Engine

__all__ = ["Engine"]
