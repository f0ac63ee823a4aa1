"""The fields of each kind the parsers read, declared beside the parsers that read them.

The operator keeps only these of every watched object (k8s/trim.py builds its trimmers
from the declarations), so that what `batchsched run` parses is what `batchsched
simulate` parses of the whole object. tests/unit/api/test_reads.py parses every
scenario the repository holds through a mapping that records each path read, and fails
on a path no declaration covers: a field read and not declared would be honoured by the
simulator and silently dropped by the operator.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Union

# A path segment standing for every item of a list.
ITEMS = "[]"
Path = tuple[str, ...]
# A declared map: key -> what is read beneath it; None where the whole value is read.
Tree = dict[str, Union["Tree", None]]

# How every object is named in messages, keys and events: an event's `regarding` carries
# the uid, which kubectl matches events by. (The trimmers set the kind, which the items
# of a list lack.)
IDENTITY = ("kind", "metadata.name", "metadata.namespace", "metadata.uid")


@dataclass(frozen=True)
class Reads:
    """What the parser of `kind` reads of its objects."""

    kind: str
    tree: Tree

    def covers(self, path: Path, *, whole: bool = False) -> bool:
        """Whether `path` is declared: beneath a value read whole, or (unless the read
        takes the value `whole`, such as iterating a map) a declared map or list."""
        node: Tree | None = self.tree
        for segment in path:
            if node is None:
                return True
            if segment not in node:
                return False
            node = node[segment]
        return node is None or not whole


def reads(kind: str, *paths: str | Path) -> Reads:
    """`kind`'s reads from dotted paths ("spec.containers[].resources"), or tuples for
    keys holding dots (annotation keys). A path ending at a key reads its whole value."""
    tree: Tree = {}
    for path in (*IDENTITY, *paths):
        node = tree
        segments = split(path) if isinstance(path, str) else path
        for segment in segments[:-1]:
            child = node.setdefault(segment, {})
            if child is None:
                break
            node = child
        else:
            node[segments[-1]] = None
    return Reads(kind, tree)


def split(path: str) -> Path:
    segments: list[str] = []
    for part in path.split("."):
        if part.endswith(ITEMS):
            segments += [part.removesuffix(ITEMS), ITEMS]
        else:
            segments.append(part)
    return tuple(segments)


def keys_under(prefix: str, keys: Iterable[str]) -> tuple[Path, ...]:
    """`prefix`.key for each key, keys kept whole (annotation keys hold dots)."""
    return tuple((*split(prefix), key) for key in keys)
