"""Task logic without CLI policy: long-form transcription, voice activity, chunking, merging.

Modules: ``transcribe`` (``oasr.transcribe``: sequential 30-second Whisper windows),
``vad`` (an energy voice-activity detector and the map back to original times),
``silero_vad`` (Silero VAD probabilities and speech regions), ``speaker_embedding`` (GE2E
embeddings of utterances and of many windows at once), ``loading`` (the model a step runs).
"""
