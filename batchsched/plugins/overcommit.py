"""overcommit: let the enqueue action admit jobs beyond the cluster's idle resources, as
Volcano's overcommit plugin does.

Without it, enqueue admits a job only while its minResources fit what is idle. With it,
the room is the idle resources plus (factor - 1) x the cluster's allocatable, so with
the default factor 1.2 jobs are admitted until their minResources exceed idle + 20% of
the cluster: their pods get created and wait in allocate, ready to start the moment
resources free up, instead of waiting to be admitted. Arguments, as Volcano's:
`overcommit-factor` (default 1.2) and `overcommit-factor.<resource>` for one resource;
factors below 1 are refused (Volcano falls back to the default for them).
"""

from collections.abc import Mapping
from typing import Any

import numpy as np

from batchsched.api.errors import InvalidObject
from batchsched.framework.session import Session

FACTOR = "overcommit-factor"
DEFAULT_FACTOR = 1.2


class Overcommit:
    name = "overcommit"

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        self.factor = _factor(FACTOR, arguments.get(FACTOR, DEFAULT_FACTOR))
        self.per_resource: dict[str, float] = {}
        for key, value in arguments.items():
            if key == FACTOR:
                continue
            resource = key.removeprefix(f"{FACTOR}.")
            if resource == key or not resource:
                raise InvalidObject(
                    f"plugin {self.name}: unknown argument {key!r} "
                    f"(allowed: {FACTOR}, {FACTOR}.<resource>)"
                )
            self.per_resource[resource] = _factor(key, value)

    def open(self, session: Session) -> None:
        snapshot = session.snapshot
        factors = np.full(len(snapshot.resources), self.factor)
        for resource, factor in self.per_resource.items():
            if resource in snapshot.column:
                factors[snapshot.column[resource]] = factor
        total = snapshot.allocatable.sum(axis=0)
        # To the nearest unit: 1.2 - 1 is not exactly 0.2 in floating point.
        session.enqueue_headroom.append(np.rint(total * (factors - 1)).astype(np.int64))


def _factor(key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 1:
        raise InvalidObject(f"plugin overcommit: {key} must be a number >= 1, got {value!r}")
    return float(value)
