"""Reading simulator input: multi-document Kubernetes YAML, workloads expanded to pods."""

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from batchsched.api.errors import InvalidObject, UnreadableInput
from batchsched.api.meta import describe, name_of, namespace_of
from batchsched.api.yamlload import load_all
from batchsched.cache.cluster import KINDS
from batchsched.sim.claims import template_claims
from batchsched.sim.workloads import IMPLIED_LABEL, WORKLOAD_KINDS, ephemeral_claims, expand


@dataclass
class LoadedInput:
    objects: list[dict[str, Any]] = field(default_factory=list)
    # Problems with single documents: reported, and the rest is still simulated.
    warnings: list[str] = field(default_factory=list)


def load_files(paths: Iterable[str]) -> LoadedInput:
    loaded = LoadedInput()
    for path in paths:
        try:
            text = Path(path).read_text()
        except OSError as error:
            raise UnreadableInput(f"{path}: cannot read: {error.strerror}") from None
        try:
            documents = load_all(text)
        except yaml.YAMLError as error:
            raise UnreadableInput(f"{path}: not valid YAML: {error}") from None
        for number, document in enumerate(documents, start=1):
            _add(loaded, document, where=f"{path} document {number}")
    _drop_shadowed_groups(loaded)
    _add_ephemeral_claims(loaded)
    _add_template_claims(loaded)
    return loaded


def _add_template_claims(loaded: LoadedInput) -> None:
    """The ResourceClaims of pods' template claims, as the resource-claim controller
    makes them (sim/claims.py), each pod's status naming them."""
    templates = {
        _key(o): o for o in loaded.objects if o.get("kind") == "ResourceClaimTemplate" and _named(o)
    }
    given = {_key(o) for o in loaded.objects if o.get("kind") == "ResourceClaim" and _named(o)}
    objects = []
    for obj in loaded.objects:
        if obj.get("kind") != "Pod" or not _named(obj):
            objects.append(obj)
            continue
        try:
            made = template_claims(obj, templates)
        except InvalidObject as error:
            loaded.warnings.append(str(error))
            objects.append(obj)
            continue
        loaded.warnings += made.missing
        objects.append(made.pod)
        objects += [claim for claim in made.claims if _key(claim) not in given]
    loaded.objects = objects


def _add_ephemeral_claims(loaded: LoadedInput) -> None:
    """The claims of pods' ephemeral volumes, as their controller makes them: only where
    the input has no claim of that name (a claim the pod does not own then stays, and
    the pod waits saying so, as it would on a cluster)."""

    given = {
        _key(o) for o in loaded.objects if o.get("kind") == "PersistentVolumeClaim" and _named(o)
    }
    for pod in [o for o in loaded.objects if o.get("kind") == "Pod" and _named(o)]:
        try:
            made = ephemeral_claims(pod)
        except InvalidObject as error:
            loaded.warnings.append(str(error))
            continue
        loaded.objects += [claim for claim in made if _key(claim) not in given]


def _add(loaded: LoadedInput, document: object, *, where: str) -> None:
    if document is None:
        return
    if not isinstance(document, dict):
        loaded.warnings.append(f"{where}: ignored, not a Kubernetes object")
        return
    kind = document.get("kind")
    if kind == "List":
        for item in document.get("items") or []:
            _add(loaded, item, where=where)
    elif kind in KINDS:
        loaded.objects.append(document)
    elif kind in WORKLOAD_KINDS:
        try:
            loaded.objects.extend(expand(document))
        except InvalidObject as error:
            loaded.warnings.append(f"{where}: {error}")
    else:
        loaded.warnings.append(
            f"{where}: ignored {describe(document)}: kind {kind!r} is not simulated"
        )


def _drop_shadowed_groups(loaded: LoadedInput) -> None:
    """An explicit PodGroup wins over one implied by a Kubeflow job of the same name."""

    def implied(obj: dict[str, Any]) -> bool:
        return IMPLIED_LABEL in ((obj.get("metadata") or {}).get("labels") or {})

    explicit = {
        _key(obj)
        for obj in loaded.objects
        if obj.get("kind") == "PodGroup" and not implied(obj) and _named(obj)
    }
    loaded.objects = [
        obj
        for obj in loaded.objects
        if not (obj.get("kind") == "PodGroup" and implied(obj) and _key(obj) in explicit)
    ]


def _key(obj: dict[str, Any]) -> str:
    return f"{namespace_of(obj)}/{name_of(obj)}"


def _named(obj: dict[str, Any]) -> bool:
    try:
        name_of(obj)
    except InvalidObject:
        return False
    return True
