"""The ``aed`` decoding family (hybrid CTC / attention encoder-decoder models: WeNet's U2 / U2++,
icefall's Zipformer with its attention decoder, any model with a CTC head and an attention
decoder): CTC greedy, CTC prefix beam, attention beam and attention rescoring (search.py), its
options (options.py), its quantization check (verify.py)."""
