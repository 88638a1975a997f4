"""Exception types raised by physprobe, all defined here; each message names the file, row, key or argument at
fault. Every one derives from ``PhysprobeError``, which the command line turns into a one-line error.

>>> issubclass(ModelLoadError, PhysprobeError), issubclass(FolderInUse, DataError)
(True, True)
"""


class PhysprobeError(Exception):
    """Base class of every error physprobe raises on bad input."""


class SourceError(PhysprobeError):
    """An upstream file is missing, unreachable, or fails its checksum."""


class TemplateError(PhysprobeError):
    """A template names a slot with no lexicon, or is not well formed."""


class DataError(PhysprobeError):
    """An upstream row or configuration entry does not have the expected shape."""


class FolderInUse(DataError):
    """Another process holds the lock of a run folder."""


class DataSourceError(PhysprobeError):
    """A benchmark's data cannot be read: unreachable Hub, unknown repo or revision, missing local build."""


class ProtocolError(PhysprobeError):
    """A benchmark, config, method or protocol that does not exist or does not go together."""


class ModelOptionError(PhysprobeError):
    """A model option (path, Hub id, device, dtype, --model-args entry) that cannot work."""


class ModelLoadError(PhysprobeError):
    """A model or tokenizer that ``from_pretrained`` cannot load as the family the protocol needs."""


class BackendError(PhysprobeError):
    """A backend that does not exist, cannot serve a protocol, or cannot reach or load its model."""


class ScoringError(PhysprobeError):
    """A model or tokenizer cannot do what the method needs (no mask token, input too long, ...)."""


class ExportError(PhysprobeError):
    """An lm-eval export that cannot be written."""


class ReportError(PhysprobeError):
    """A run folder, a table declaration or the output folder is not what the report needs."""


class PublishError(PhysprobeError):
    """A repo folder failed validation, or the Hub refused an operation."""
