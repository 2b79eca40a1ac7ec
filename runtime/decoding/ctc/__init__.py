"""The ``ctc`` decoding family: greedy and prefix beam search (search.py), its options (options.py)."""
