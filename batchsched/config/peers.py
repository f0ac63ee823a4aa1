"""Peers' configuration files, read as they are written: Volcano's scheduler configuration
(alone, or in the ConfigMap its chart ships; volcano.py) and kube-scheduler's
KubeSchedulerConfiguration, with scheduler-plugins' Coscheduling (kube.py), translated
into batchsched's own (load.py).

Every key is honoured, accepted with one logged line saying why it has no effect here,
or refused with its name: never silently dropped.
"""

from collections.abc import Mapping
from typing import Any

import yaml

from batchsched.api.errors import InvalidObject
from batchsched.config import kube, volcano
from batchsched.config.volcano import Translated

CONFIGMAP_KEY = "volcano-scheduler.conf"


def translate(raw: Mapping[str, Any], *, source: str) -> Translated:
    """`raw` in batchsched's own format, whichever peer's format it came in."""
    kind = raw.get("kind")
    if kind == "ConfigMap":
        return _configmap(raw, source=source)
    if kind == "KubeSchedulerConfiguration" or str(raw.get("apiVersion", "")).startswith(
        kube.KUBE_GROUP
    ):
        return Translated(raw=kube.translate(raw, source=source), source=source)
    return volcano.translate(raw, source=source)


def _configmap(raw: Mapping[str, Any], *, source: str) -> Translated:
    """The configuration a ConfigMap holds: Volcano's chart's key, or its only key."""
    data = raw.get("data")
    if not isinstance(data, Mapping) or not data:
        raise InvalidObject(f"{source}.data: a ConfigMap holding the configuration is needed")
    if CONFIGMAP_KEY in data:
        key = CONFIGMAP_KEY
    elif len(data) == 1:
        key = next(iter(data))
    else:
        raise InvalidObject(
            f"{source}.data: which key holds the configuration? expected {CONFIGMAP_KEY!r} "
            f"or a single key (found: {', '.join(sorted(map(str, data)))})"
        )
    where = f"{source}.data.{key}"
    text = data[key]
    if not isinstance(text, str):
        raise InvalidObject(f"{where}: expected the configuration file as a string")
    try:
        inner = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise InvalidObject(f"{where}: not valid YAML: {error}") from None
    if not isinstance(inner, Mapping):
        raise InvalidObject(f"{where}: expected a map of settings at the top level")
    return translate(inner, source=where)
