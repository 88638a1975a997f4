"""``physprobe generate cccons --n N``: new rows from the induced CConS templates (see ``cccons.generate_new``)."""

from __future__ import annotations

from physprobe.data.dataset_folder import BuildResult, write
from physprobe.dataset_scripts.cccons import cccons
from physprobe.errors import PhysprobeError


def generate(n: int | None, spec: str | None, seed: int, out: str, source_dir: str | None) -> BuildResult:
    """Write ``n`` new rows as the ``cccons_generated`` dataset under ``out``."""
    if spec is not None:
        raise PhysprobeError("generate cccons takes no --spec: it fills the induced templates with new noun pairs; give --n N")
    if n is None or n < 1:
        raise PhysprobeError(f"generate cccons needs --n at least 1, got {n}")
    paths = cccons.CCCONS.sources(source_dir)
    return write(cccons.GENERATED, cccons.generate_new(paths, n, seed), out)
