"""The softWait clock kept on a gang's group object, so that an operator restart or a
new leader goes on counting it (docs/topology.md): when it started, an RFC 3339 time
(`SINCE_ANNOTATION`), and the uid of the object it started for (`OWNER_ANNOTATION`),
so that an object made again from a copy holding them (a manifest, a restore) does
not inherit the clock of the one it replaces. Neither stops the group being scheduled:
a value that cannot be used is ignored (`PodGroup.stored_clock_problem` says why)."""

import re
from collections.abc import Mapping
from datetime import datetime

from batchsched.api.objects import PodGroup

SINCE_ANNOTATION = "batchsched.io/soft-wait-since"
OWNER_ANNOTATION = "batchsched.io/soft-wait-owner"
ANNOTATIONS = (SINCE_ANNOTATION, OWNER_ANNOTATION)
# RFC 3339's date-time: a zone is required, as a time without one is no instant.
_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})", re.ASCII
)


def stored_clock_of(annotations: Mapping[str, object]) -> tuple[str, str] | None:
    """The two annotations as an object shows them (either may be ""); None for neither."""
    since, owner = annotations.get(SINCE_ANNOTATION), annotations.get(OWNER_ANNOTATION)
    if since is None and owner is None:
        return None
    return (_text(since), _text(owner))


def read_stored_clock(group: PodGroup, annotations: Mapping[str, object]) -> None:
    """Set the group's stored clock from its object's annotations."""
    group.stored_clock = stored_clock_of(annotations)
    if group.stored_clock is None:
        return
    since, owner = annotations.get(SINCE_ANNOTATION), annotations.get(OWNER_ANNOTATION)
    where = f"PodGroup {group.key} annotation {SINCE_ANNOTATION}={since!r}"
    started = parse_rfc3339(since)
    if started is None:
        group.stored_clock_problem = f"{where} is not an RFC 3339 time: ignored"
    elif not group.uid or owner != group.uid:
        group.stored_clock_problem = (
            f"{where} was kept for {OWNER_ANNOTATION}={owner!r}, "
            f"not this object (uid {group.uid!r}): ignored"
        )
    else:
        group.span_since = started


def parse_rfc3339(value: object) -> float | None:
    """An RFC 3339 time as epoch seconds; None for anything else."""
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
        return None
    try:
        return datetime.fromisoformat(value.upper().replace("Z", "+00:00")).timestamp()
    except ValueError:  # in the shape of one, yet no date (month 13, second 61)
        return None


def _text(value: object) -> str:
    return "" if value is None else str(value)
