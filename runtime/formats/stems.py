"""The files separated stems are written as: each a ``Format`` of the result type ``stems`` whose
writer is the soundfile container the stem writer encodes into (``pipelines/separate/writer.py``).
"""

from __future__ import annotations

from .registry import Format

# The entry points of oasr.formats.stems (pyproject): wav first, the listing order of --format.
WAV = Format("WAV", rank=10)
FLAC = Format("FLAC", rank=20)
