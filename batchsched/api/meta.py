"""Reading the common parts of Kubernetes objects: names, timestamps, nested fields."""

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from batchsched.api.errors import InvalidObject

Obj = Mapping[str, Any]


def mapping(value: object, *, where: str) -> Obj:
    """`value` as a map, treating a missing value as empty."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidObject(f"{where}: expected a map, got {value!r}")
    return value


def sequence(value: object, *, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidObject(f"{where}: expected a list, got {value!r}")
    return value


# Kinds without a namespace; every other kind we read lives in one ("default" if unset).
CLUSTER_SCOPED = frozenset({"Node", "Queue", "PriorityClass", "Namespace"})


def describe(obj: Obj) -> str:
    """`Kind ns/name` (or `Kind name` when cluster-scoped): how every message names an object."""
    meta = obj.get("metadata") or {}
    name = meta.get("name", "<unnamed>") if isinstance(meta, Mapping) else "<unnamed>"
    kind = obj.get("kind", "object")
    if kind in CLUSTER_SCOPED:
        return f"{kind} {name}"
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    return f"{kind} {namespace or 'default'}/{name}"


def name_of(obj: Obj) -> str:
    meta = mapping(obj.get("metadata"), where=f"{describe(obj)}.metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidObject(f"{describe(obj)}: metadata.name is missing")
    return name


def namespace_of(obj: Obj) -> str:
    meta = mapping(obj.get("metadata"), where=f"{describe(obj)}.metadata")
    namespace = meta.get("namespace") or "default"
    return str(namespace)


def creation_of(obj: Obj, *, default: float) -> float:
    """metadata.creationTimestamp as epoch seconds; `default` keeps input order in files."""
    meta = mapping(obj.get("metadata"), where=f"{describe(obj)}.metadata")
    stamp = meta.get("creationTimestamp")
    if stamp is None:
        return default
    if isinstance(stamp, datetime):
        return stamp.timestamp()
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise InvalidObject(
            f"{describe(obj)}: metadata.creationTimestamp {stamp!r} is not a timestamp"
        ) from None


def labels_of(obj: Obj) -> dict[str, str]:
    meta = mapping(obj.get("metadata"), where=f"{describe(obj)}.metadata")
    labels = mapping(meta.get("labels"), where=f"{describe(obj)}.metadata.labels")
    return {str(k): str(v) for k, v in labels.items()}


def annotations_of(obj: Obj) -> dict[str, str]:
    meta = mapping(obj.get("metadata"), where=f"{describe(obj)}.metadata")
    notes = mapping(meta.get("annotations"), where=f"{describe(obj)}.metadata.annotations")
    return {str(k): str(v) for k, v in notes.items()}


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
