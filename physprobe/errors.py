"""Exception types raised by physprobe, one per kind of fault, all defined here; each message names the file,
row, key or argument at fault and the fix. Every one derives from ``PhysprobeError``, which the command line
turns into a one-line error.

>>> issubclass(ModelLoadError, PhysprobeError), issubclass(FolderInUse, OutputFolderError)
(True, True)
"""


class PhysprobeError(Exception):
    """Base class of every error physprobe raises on bad input."""


class SourceError(PhysprobeError):
    """An upstream file is missing, unreachable, or fails its checksum."""


class TemplateError(PhysprobeError):
    """A template names a slot with no lexicon, or is not well formed."""


class DataError(PhysprobeError):
    """A row of an upstream file, a built config or a challenge-set spec that does not have the expected shape."""


class DataSourceError(PhysprobeError):
    """A benchmark's data cannot be read: unreachable Hub, unknown repo or revision, missing local build."""


class OutputFolderError(PhysprobeError):
    """An output folder (``--out``) physprobe may not write: a symlink, a file, another program's or another
    run's folder, or a path that cannot be created."""


class FolderInUse(OutputFolderError):
    """Another process holds the lock of a run folder."""


class ProtocolError(PhysprobeError):
    """A benchmark, config, method or protocol that does not exist or does not go together."""


class DeclarationError(PhysprobeError):
    """A benchmark's declaration (``paper_tables.yaml``) that contradicts itself or the benchmark's protocols."""


class ModelOptionError(PhysprobeError):
    """A model option (path, Hub id, device, dtype, --model-args entry) that cannot work."""


class ModelLoadError(PhysprobeError):
    """A model or tokenizer that ``from_pretrained`` cannot load, or that cannot encode text."""


class BackendError(PhysprobeError):
    """A backend that does not exist, cannot serve a protocol, or cannot reach or load its model."""


class RequestError(BackendError):
    """A backend's failure on one request (a server's unusable answer): ``index`` is the request's place in the list
    the backend was given, which the runner turns into the benchmark, config and row it names."""

    def __init__(self, message: str, index: int):
        super().__init__(message)
        self.index = index


class ServedModelChanged(BackendError):
    """A server that began serving other weights behind the same model name during a run: ``unconfirmed`` are the
    requests (places in the list the backend was given) answered since its last fingerprint that matched, which may be
    either model's answers; the runner drops them from the cache and keeps those before."""

    def __init__(self, message: str, unconfirmed: list[int]):
        super().__init__(message)
        self.unconfirmed = unconfirmed


class ScoringError(PhysprobeError):
    """A model that cannot do what the method needs (no mask token, input too long) or gives no usable score."""


class MetricInputError(PhysprobeError, ValueError):
    """Predictions, references or options a metric module refuses (the module's own ``ValueError``, named)."""


class RunRecordError(PhysprobeError):
    """A run folder whose run.json or metrics.json is missing or holds what no ``physprobe score`` writes."""


class ExportError(PhysprobeError):
    """An lm-eval export that cannot be written."""


class ReportError(PhysprobeError):
    """Runs that cannot go in one report (none, the same run twice, an unknown benchmark)."""


class ComparisonError(PhysprobeError):
    """Two runs not compared question by question: other protocols or data revisions (unless asked for), no question
    in common, or predictions that cannot be matched (no row contents, several answers to a question)."""


class PublishError(PhysprobeError):
    """A repo folder failed validation, or the Hub refused an operation."""
