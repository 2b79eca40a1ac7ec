"""The transducer decoding families (``rnnt``, ``tdt``): label looping and beam search (search.py), their options (options.py)."""
