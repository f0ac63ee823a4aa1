"""Namespaces, for the namespace selectors of pod affinity terms and the queue their
jobs default to."""

from batchsched.api.meta import Obj, describe, labels_of, mapping, name_of
from batchsched.api.objects import Namespace
from batchsched.api.podaffinity import NAMESPACE_NAME_LABEL
from batchsched.api.pods import OUR_QUEUE_KEY, named_queue
from batchsched.api.reads import keys_under, reads

# What namespace_from_object reads (api/reads.py).
NAMESPACE_READS = reads(
    "Namespace", "metadata.labels", *keys_under("metadata.annotations", (OUR_QUEUE_KEY,))
)


def namespace_from_object(obj: Obj) -> Namespace:
    """A Namespace; its queue annotation wins over its queue label, as a pod's group
    annotation wins over its group label."""
    name = name_of(obj, kind="Namespace")
    where = describe(obj, kind="Namespace")
    meta = mapping(obj.get("metadata"), where=f"{where}.metadata")
    return Namespace(
        name=name,
        labels={**labels_of(obj), NAMESPACE_NAME_LABEL: name},
        queue=named_queue(meta, "annotations", OUR_QUEUE_KEY, owner=where)
        or named_queue(meta, "labels", OUR_QUEUE_KEY, owner=where),
    )


def implied_labels(name: str) -> dict[str, str]:
    """The labels of a namespace not (yet) seen: the API server gives every namespace its
    name as a label, and a pod's namespace exists even when no Namespace was read (the
    simulator's input need not list them)."""
    return {NAMESPACE_NAME_LABEL: name}
