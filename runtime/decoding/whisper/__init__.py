"""Whisper decoding: batched beam search and sampling with a KV cache (decode.py), greedy
decoding (greedy.py), logit filters, language detection and DTW word alignment."""
