"""Task logic without CLI policy: long-form transcription, voice activity, chunking, merging.

Modules: ``transcribe`` (``oasr.transcribe``: sequential 30-second Whisper windows),
``vad`` (an energy voice-activity detector and the map back to original times).
"""
