"""Decoding, one folder per family, each with its search and its options (``options.py``, which
declares the family: see ``family.py``): whisper/ (beam search, sampling, logit filters, language
detection, cross-attention word alignment), ctc/, transducer/; pitch.py (CREPE)."""
