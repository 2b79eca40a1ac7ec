"""The ``cif`` decoding family: Paraformer's one forward, its tokens and FunASR's timestamps."""
