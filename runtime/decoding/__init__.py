"""Decoding, one module or folder per family: whisper/ (beam search, sampling, logit filters,
language detection, cross-attention word alignment), ctc.py, pitch.py (CREPE)."""
