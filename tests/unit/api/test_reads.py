"""Each parser reads only what its module declares (api/reads.py), so the operator's
trimmers, built from the declarations, keep all it reads.

Every scenario the repository holds is parsed through a map that records each path the
parser asks for, present or not: a field asked for only to see whether it is set
(spec.preemptionPolicy) is caught though no scenario sets it. Annotations are checked
whole by annotations_of (every value a string) and then looked up by key: the map it
returns records those lookups too, so an annotation key read but not declared is caught.
"""

import contextlib
import copy
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from batchsched.api import meta, pods, volumes
from batchsched.api.reads import ITEMS, Reads
from batchsched.api.reads import Path as ReadPath
from batchsched.k8s.trim import trimmer

from ..scenarios import PARSERS, declarations, label, scenario_ids, scenario_objects

# A path read, and whether it was read whole (a map iterated) rather than by key.
Read = tuple[ReadPath, bool]


DECLARED = declarations()
ANNOTATIONS = ("metadata", "annotations")


def recorded(value: Any, path: ReadPath, log: set[Read]) -> Any:
    if isinstance(value, Mapping):
        return RecordedMap(value, path, log)
    if isinstance(value, list):
        return RecordedList(value, path, log)
    return value


class RecordedMap(Mapping[str, Any]):
    """A map that logs each key asked for, and being read whole."""

    def __init__(self, data: Mapping[str, Any], path: ReadPath, log: set[Read]) -> None:
        self._data, self._path, self._log = data, path, log

    def __getitem__(self, key: str) -> Any:
        self._log.add(((*self._path, key), False))
        return recorded(self._data[key], (*self._path, key), self._log)

    def __contains__(self, key: object) -> bool:
        self._log.add(((*self._path, str(key)), False))
        return key in self._data

    def get(self, key: str, default: Any = None) -> Any:
        if key not in self:  # logs the key: asking for an absent one is a read too
            return default
        return self[key]

    def __iter__(self) -> Iterator[str]:
        self._log.add((self._path, True))
        return iter(self._data)

    def __len__(self) -> int:
        # Whether it is empty (`meta or {}`): a read of the map, not of its keys.
        self._log.add((self._path, False))
        return len(self._data)


class RecordedList(list[Any]):
    """A list whose items log what is read of them."""

    def __init__(self, data: list[Any], path: ReadPath, log: set[Read]) -> None:
        super().__init__(recorded(item, (*path, ITEMS), log) for item in data)


def paths_read(kind: str, obj: dict[str, Any]) -> set[Read]:
    log: set[Read] = set()

    def annotations_of(obj: Any, *, kind: str | None = None) -> Any:
        return RecordedMap(meta.annotations_of(obj, kind=kind), ANNOTATIONS, log)

    # A refused object's reads count as well.
    with (
        contextlib.suppress(Exception),
        mock.patch.object(pods, "annotations_of", annotations_of),
        mock.patch.object(volumes, "annotations_of", annotations_of),
    ):
        PARSERS[kind](RecordedMap(obj, (), log))
    return log


def undeclared(declared: Reads, log: set[Read]) -> list[str]:
    return sorted(
        ".".join(path) + (" (whole)" if whole else "")
        for path, whole in log
        if path and not (whole and path == ANNOTATIONS) and not declared.covers(path, whole=whole)
    )


@pytest.mark.parametrize("scenario", scenario_ids())
def test_every_path_a_parser_reads_is_declared(scenario: str, tmp_path: Path) -> None:
    missing = {
        label(obj): paths
        for obj in scenario_objects(scenario, tmp_path)
        if (paths := undeclared(DECLARED[obj["kind"]], paths_read(str(obj["kind"]), obj)))
    }
    assert missing == {}


def test_a_read_left_undeclared_is_found() -> None:
    """The check itself: a pod with no preemptionPolicy, against a declaration without it."""
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
    log = paths_read("Pod", pod)
    assert undeclared(DECLARED["Pod"], log) == []
    tree = copy.deepcopy(DECLARED["Pod"].tree)
    del tree["spec"]["preemptionPolicy"]  # type: ignore[union-attr]
    assert undeclared(Reads("Pod", tree), log) == ["spec.preemptionPolicy"]


def test_an_annotation_read_but_left_undeclared_is_found() -> None:
    """The check itself, for annotation keys: a Volcano task role, against a declaration
    without that key."""
    pod = {
        "metadata": {"name": "p", "annotations": {pods.TASK_ROLE_KEY: "master"}},
        "spec": {"containers": [{"name": "c"}]},
    }
    log = paths_read("Pod", pod)
    assert undeclared(DECLARED["Pod"], log) == []
    tree = copy.deepcopy(DECLARED["Pod"].tree)
    del tree["metadata"]["annotations"][pods.TASK_ROLE_KEY]  # type: ignore[union-attr,index]
    assert undeclared(Reads("Pod", tree), log) == [f"metadata.annotations.{pods.TASK_ROLE_KEY}"]


def test_every_watched_object_keeps_its_uid() -> None:
    """Events about any object carry its uid, which kubectl matches them by."""
    for kind, declared in DECLARED.items():
        full = {"metadata": {"name": "x", "uid": "u-1", "resourceVersion": "7"}}
        assert trimmer(declared)(full)["metadata"] == {"name": "x", "uid": "u-1"}, kind
