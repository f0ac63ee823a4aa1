"""Namespaces, for the namespace selectors of pod affinity terms."""

from batchsched.api.meta import Obj, labels_of, name_of
from batchsched.api.objects import Namespace
from batchsched.api.podaffinity import NAMESPACE_NAME_LABEL


def namespace_from_object(obj: Obj) -> Namespace:
    name = name_of(obj, kind="Namespace")
    return Namespace(name=name, labels={**labels_of(obj), NAMESPACE_NAME_LABEL: name})


def implied_labels(name: str) -> dict[str, str]:
    """The labels of a namespace not (yet) seen: the API server gives every namespace its
    name as a label, and a pod's namespace exists even when no Namespace was read (the
    simulator's input need not list them)."""
    return {NAMESPACE_NAME_LABEL: name}
