"""Whisper decoding: batched beam search and sampling with a KV cache (decode.py), logit filters,
language detection and DTW word alignment."""
