"""A gang's placement, recorded on its first bound member so a new leader can finish it.

Binding is one request per pod, so a scheduler that dies in the middle of a gang leaves
it partly bound. Before the rest of a gang is sent, its whole placement travels in the
annotations of the first member's Binding, which the API server copies onto that pod:
one write that was being made anyway. The next leader reads it there and places the
members still pending on the nodes they were meant for before anything else.
"""

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

PLACEMENT_ANNOTATION = "scheduling.batchsched.io/gang-placement"
# Enough of a pod's uid to tell it from a pod of the same name created later.
UID_PREFIX = 8
# Annotations share a 256 KiB budget per object; a record larger than this (a gang of
# a few thousand members) is not written, and its gang is not protected.
MAX_RECORD_BYTES = 128 * 1024


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one session meant a gang's members to go: pod name -> (node, uid prefix)."""

    at: float
    members: Mapping[str, tuple[str, str]]

    def node_for(self, name: str, uid: str) -> str | None:
        """The recorded node of this very pod (not of a later one of its name)."""
        member = self.members.get(name)
        if member is None or not uid.startswith(member[1]):
            return None
        return member[0]


def format_placement(at: float, members: Iterable[tuple[str, str, str]]) -> str | None:
    """The annotation for (pod name, uid, node) members, or None when it is too large."""
    record = {
        "at": round(at, 6),
        "pods": {name: [node, uid[:UID_PREFIX]] for name, uid, node in members},
    }
    text = json.dumps(record, separators=(",", ":"))
    return text if len(text) <= MAX_RECORD_BYTES else None


def parse_placement(text: str) -> Placement | None:
    """The record, or None when it is not one of ours. It sits on a pod that is already
    bound and must go on counting against its node, so a damaged record is not an error
    that would reject the pod: it only means there is no placement to finish."""
    try:
        record = json.loads(text)
        at = float(record["at"])
        members = {str(name): (str(node), str(uid)) for name, (node, uid) in record["pods"].items()}
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    return Placement(at=at, members=members)
