"""Architectures: one file per architecture (a config dataclass and an ``OasrModel``), the
``oasr.models`` entry-point registry, and the weight accounting every load goes through."""
