"""Exception types raised by physprobe; each message names the file, row, key or argument at fault."""


class PhysprobeError(Exception):
    """Base class of every error physprobe raises on bad input."""


class SourceError(PhysprobeError):
    """An upstream file is missing, unreachable, or fails its checksum."""


class TemplateError(PhysprobeError):
    """A template names a slot with no lexicon, or is not well formed."""


class DataError(PhysprobeError):
    """An upstream row or configuration entry does not have the expected shape."""
