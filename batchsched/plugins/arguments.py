"""Reading plugin arguments with errors that name the plugin, the key and what is allowed."""

from collections.abc import Mapping, Set
from typing import Any

from batchsched.api.errors import InvalidObject


def check_keys(plugin: str, arguments: Mapping[str, Any], allowed: Set[str]) -> None:
    unknown = sorted(set(arguments) - allowed)
    if unknown:
        allowed_text = ", ".join(sorted(allowed)) or "none"
        raise InvalidObject(
            f"plugin {plugin}: unknown argument {unknown[0]!r} (allowed: {allowed_text})"
        )


def integer(plugin: str, key: str, value: object, *, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidObject(f"plugin {plugin}: {key} must be a whole number, got {value!r}")
    if value < low or (high is not None and value > high):
        bounds = f"from {low} to {high}" if high is not None else f">= {low}"
        raise InvalidObject(f"plugin {plugin}: {key} must be {bounds}, got {value}")
    return value
