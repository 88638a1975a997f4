"""How run.json of an earlier schema version is read: one function per version step, each turning run.json of its
version into the next version's, so that a run folder written by an earlier physprobe is read, not refused.

Schema versions: 2 (label, baselines, prompts), 3 (the run's spec embedded; statuses and distinct codes of
predictions), 4 (``figure_kinds``: the kind of each figure metrics.json may hold, as the benchmark declares it).
A folder of a version with no step from it (2, or one from a later physprobe) is one line naming the fix.

>>> info = migrated({"schema_version": 3, "spec": {"benchmark": "cccons"}}, "run.json", "`physprobe score`")
>>> info["schema_version"], info["figure_kinds"]["accuracy"], info["figure_kinds"]["n"]
(4, 'fraction', 'count')
"""

from __future__ import annotations

from collections.abc import Callable

from physprobe.data import registry
from physprobe.errors import PhysprobeError, RunRecordError

SCHEMA_VERSION = 4


def _from_3(info: dict) -> dict:
    """Schema 3 to 4: the figure kinds its benchmark declares (``Evaluation.figure_kinds``), which schema 3 left to
    the key's name; nothing else changed."""
    spec = info.get("spec")
    benchmark = spec.get("benchmark") if isinstance(spec, dict) else None
    try:
        kinds = registry.evaluation(benchmark).figure_kinds()
    except PhysprobeError as error:
        raise ValueError(f"its benchmark {benchmark!r} declares no figure kinds ({error})") from None
    return {**info, "figure_kinds": {key: kind.value for key, kind in kinds.items()}, "schema_version": 4}


STEPS: dict[int, Callable[[dict], dict]] = {3: _from_3}  # version -> the step to the next one


def migrated(info: dict, where: str, fix: str) -> dict:
    """run.json's ``info`` in the current schema (``SCHEMA_VERSION``), read through each step from its own version;
    one ``RunRecordError`` line naming ``where`` and ``fix`` (the command that scores the run again) for a version
    with no step."""
    version = info.get("schema_version")
    while version != SCHEMA_VERSION:
        step = STEPS.get(version) if isinstance(version, int) and not isinstance(version, bool) else None
        if step is None:
            earlier = isinstance(version, int) and version < SCHEMA_VERSION
            raise RunRecordError(f"{where}: schema_version is {version!r}: the folder was written by "
                                 f"{'an earlier' if earlier else 'another'} physprobe, which this one (schema "
                                 f"{SCHEMA_VERSION}, reading {min(STEPS)} and later) does not read; score the run again "
                                 f"into it ({fix})")  # fmt: skip
        try:
            info = step(info)
        except ValueError as error:
            raise RunRecordError(f"{where}: schema {version} cannot be read as {version + 1}: {error}; score the run "
                                 f"again into it ({fix})") from None  # fmt: skip
        version = info["schema_version"]
    return info
