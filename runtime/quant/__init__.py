"""Weight-only quantization: int8 and int4 bundles (format version 2) and the modules that run them.

``schemes`` packs and unpacks, ``modules`` holds ``QuantLinear``/``QuantEmbedding``, ``layers``
decides what is quantized and swaps modules at load, ``section`` reads the bundle's quantization
section, ``quantize`` writes a bundle and ``verify`` compares it with its source.
"""
