"""Reading the common parts of Kubernetes objects: names, timestamps, nested fields."""

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from batchsched.api.errors import InvalidObject

Obj = Mapping[str, Any]
# For isinstance: decoded JSON and YAML are dicts, which this checks at C speed before
# asking the slower Mapping ABC (every watch event of a pod asks a dozen times).
MAP_TYPES = (dict, Mapping)


def mapping(value: object, *, where: str) -> Obj:
    """`value` as a map, treating a missing value as empty."""
    if value is None:
        return {}
    if not isinstance(value, MAP_TYPES):
        raise InvalidObject(f"{where}: expected a map, got {value!r}")
    return value


def sequence(value: object, *, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidObject(f"{where}: expected a list, got {value!r}")
    return value


# Kinds without a namespace; every other kind we read lives in one ("default" if unset).
CLUSTER_SCOPED = frozenset(
    {
        "Node",
        "HyperNode",
        "Queue",
        "PriorityClass",
        "Namespace",
        "PersistentVolume",
        "StorageClass",
        "CSINode",
        "CSIDriver",
        "ResourceSlice",
        "DeviceClass",
        "DeviceTaintRule",
    }
)


def describe(obj: Obj, *, kind: str | None = None) -> str:
    """`Kind ns/name` (or `Kind name` when cluster-scoped): how every message names an object.

    `kind` stands in for objects that arrive without one (trimmed watch events).
    """
    meta = obj.get("metadata") or {}
    name = meta.get("name", "<unnamed>") if isinstance(meta, Mapping) else "<unnamed>"
    kind = kind or obj.get("kind", "object")
    if kind in CLUSTER_SCOPED:
        return f"{kind} {name}"
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    return f"{kind} {namespace or 'default'}/{name}"


# Every pod passes through these on every watch event, so they build an object's
# description only when there is an error to report.


def _metadata(obj: Obj, kind: str | None) -> Obj:
    meta = obj.get("metadata")
    if meta is None:
        return {}
    if not isinstance(meta, MAP_TYPES):
        raise InvalidObject(f"{describe(obj, kind=kind)}.metadata: expected a map, got {meta!r}")
    return meta


def _string_map(obj: Obj, key: str, kind: str | None) -> dict[str, str]:
    value = _metadata(obj, kind).get(key)
    if value is None:
        return {}
    if not isinstance(value, MAP_TYPES):
        where = f"{describe(obj, kind=kind)}.metadata.{key}"
        raise InvalidObject(f"{where}: expected a map, got {value!r}")
    return {str(k): str(v) for k, v in value.items()}


def name_of(obj: Obj, *, kind: str | None = None) -> str:
    name = _metadata(obj, kind).get("name")
    if not isinstance(name, str) or not name:
        raise InvalidObject(f"{describe(obj, kind=kind)}: metadata.name is missing")
    return name


def namespace_of(obj: Obj, *, kind: str | None = None) -> str:
    return str(_metadata(obj, kind).get("namespace") or "default")


def creation_of(obj: Obj, *, default: float, kind: str | None = None) -> float:
    """metadata.creationTimestamp as epoch seconds; `default` keeps input order in files."""
    stamp = _metadata(obj, kind).get("creationTimestamp")
    if stamp is None:
        return default
    return timestamp(stamp, where=f"{describe(obj, kind=kind)}: metadata.creationTimestamp")


def timestamp(stamp: object, *, where: str) -> float:
    """An RFC 3339 time (or the datetime YAML makes of one) as epoch seconds."""
    if isinstance(stamp, datetime):
        return stamp.timestamp()
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise InvalidObject(f"{where} {stamp!r} is not a timestamp") from None


def labels_of(obj: Obj, *, kind: str | None = None) -> dict[str, str]:
    return _string_map(obj, "labels", kind)


def annotations_of(obj: Obj, *, kind: str | None = None) -> dict[str, str]:
    return _string_map(obj, "annotations", kind)


def flag(value: object, *, where: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidObject(f"{where}: {value!r} is not true or false")
    return value


def text(value: object, *, where: str, default: str) -> str:
    """A string field; absent or empty gives `default`."""
    if value is None or value == "":
        return default
    if not isinstance(value, str):
        raise InvalidObject(f"{where}: {value!r} is not a string")
    return value


def whole_number(value: object, *, where: str, minimum: int) -> int:
    """An integer field (YAML may give it as a string, as labels always do)."""
    if isinstance(value, bool):
        raise InvalidObject(f"{where}: {value!r} is not a whole number")
    try:
        number = int(str(value).strip()) if isinstance(value, str) else value
    except ValueError:
        raise InvalidObject(f"{where}: {value!r} is not a whole number") from None
    if not isinstance(number, int):
        raise InvalidObject(f"{where}: {value!r} is not a whole number")
    if number < minimum:
        raise InvalidObject(f"{where}: {number} is below the minimum of {minimum}")
    return number
