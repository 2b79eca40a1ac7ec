"""The one exception hierarchy of oasr.

Every message is a single line a user can act on; the CLI prints it as is and maps the class
to an exit code. Causes are chained (``raise ... from e``) so ``OASR_DEBUG=1`` shows them.
"""


class OasrError(Exception):
    """Base class of every error oasr raises on purpose."""


class InputError(OasrError):
    """A path or file given by the user is missing, empty or unreadable."""


class DetectionError(OasrError):
    """No converter, or more than one equally specific converter, claims a source."""


class ConversionError(OasrError):
    """A source was recognised but cannot be turned into a complete model."""


class UnsafeCheckpointError(ConversionError):
    """A checkpoint holds pickled objects beyond tensors; they are never executed."""


class BundleError(OasrError):
    """A native bundle is malformed, truncated or of an unknown format version."""


class LoadError(OasrError):
    """Weights do not fill the model exactly (missing or unexpected tensors, wrong shapes)."""


class CapabilityError(OasrError):
    """A requested feature is not supported by the model."""


class SourceUnavailable(OasrError):
    """One source could not provide a model; the resolver notes why and tries the next."""


class IntegrityError(OasrError):
    """Downloaded bytes differ from the sha256 the registry lists; they are refused."""


class VerificationError(OasrError):
    """A quantized bundle differs from its source by more than ``--verify`` allows; it is not kept."""


class MissingExtraError(InputError):
    """An optional package is not installed; the message names the extra that installs it."""
