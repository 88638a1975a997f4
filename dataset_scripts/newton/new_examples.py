"""``physprobe generate newton --spec FILE.yaml``: a challenge set streamed from the NEWTON repository."""

from __future__ import annotations

from physprobe.data.dataset_folder import BuildResult, stream
from physprobe.dataset_scripts.newton import newton
from physprobe.errors import PhysprobeError
from physprobe.generators.newton import challenge_set


def generate(n: int | None, spec: str | None, seed: int, out: str, source_dir: str | None) -> BuildResult:
    """Write the challenge set described by the YAML ``spec`` under ``out``."""
    if spec is None:
        raise PhysprobeError("generate newton needs --spec FILE.yaml")
    if n is not None:
        raise PhysprobeError("generate newton takes no --n: the spec's max_questions sets how many questions; leave --n out")
    parsed = newton.read_spec(spec)
    repository = newton.repository(newton.NEWTON.sources(source_dir))
    rows = challenge_set(repository, parsed, seed)  # export.stream shows the progress
    return stream(parsed.name, newton.CHALLENGE_FEATURES, rows, out, newton.challenge_card(parsed, seed))
