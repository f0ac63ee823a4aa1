"""Watched objects cut down to the fields the scheduling core reads.

What the cache parses stays small this way, and updates that touch nothing the core
reads (kubelet heartbeats, container statuses, managed fields) compare equal to the
previous version and are dropped before parsing. What is kept of each kind is what its
parser declares it reads (batchsched/api/reads.py), so the two cannot drift apart.
Trimming only removes: a map, list or value is kept as it is wherever the declaration
reaches it, absent where it was absent, and a malformed value (a list where a map is
read) stays for the parser to refuse with the same message as the whole object's.
"""

from collections.abc import Callable, Mapping
from typing import Any

from batchsched.api.budgets import BUDGET_READS
from batchsched.api.dra import (
    CLASS_READS,
    RESOURCE_CLAIM_READS,
    SLICE_READS,
    TAINT_RULE_READS,
    TEMPLATE_READS,
)
from batchsched.api.groups import POD_GROUP_READS
from batchsched.api.hypernodes import HYPERNODE_READS
from batchsched.api.namespaces import NAMESPACE_READS
from batchsched.api.nativegroups import WORKLOAD_READS
from batchsched.api.nodes import NODE_READS
from batchsched.api.pods import POD_READS
from batchsched.api.queues import PRIORITY_CLASS_READS, QUEUE_READS
from batchsched.api.reads import ITEMS, Reads, Tree
from batchsched.api.volumes import (
    CLAIM_READS,
    CSI_DRIVER_READS,
    CSI_NODE_READS,
    STORAGE_CAPACITY_READS,
    STORAGE_CLASS_READS,
    VOLUME_READS,
)

JSON = dict[str, Any]
Trim = Callable[[Mapping[str, Any]], JSON]


# How the API server writes an object's managedFields, and what follows them in any
# object whose metadata comes right before its spec (pods, nodes).
MANAGED_FIELDS = b',"managedFields":['
MANAGED_FIELDS_END = b']},"spec":{'


def without_managed_fields(data: bytes) -> bytes:
    """`data` (JSON as the API server sends it) without the objects' managedFields, cut
    out before decoding: they are a third of a pod's bytes and most of its small
    objects, so a page of pods decodes in 60 % of the time, and more in clusters where
    the kubelet and controllers each own fields.

    Exact for any JSON, because the cut is only made where it cannot go wrong: from the
    key to the first `]` after it, when that `]` is followed by `},"spec":{`. An entry
    holds no arrays, so the first `]` outside a string ends the list; and that sequence
    cannot lie inside a string, where its `"` would be escaped. Where the list is last in
    its object (ObjectMeta's field order) and its object is followed by a spec, which is
    every pod and node, it goes; elsewhere (a `]` inside a field name, custom resources,
    whose keys come sorted) the data is left as it is.
    """
    pieces: list[bytes] = []
    kept_from = 0
    start = data.find(MANAGED_FIELDS)
    while start >= 0:
        first = data.find(b"]", start + len(MANAGED_FIELDS))
        if first < 0:
            break
        if data.startswith(MANAGED_FIELDS_END, first):
            pieces.append(data[kept_from:start])
            kept_from = first + 1
        start = data.find(MANAGED_FIELDS, first)
    if not pieces:
        return data
    pieces.append(data[kept_from:])
    return b"".join(pieces)


def trimmer(declared: Reads) -> Trim:
    """The trimmer of `declared.kind`, compiled to Python source once, as dataclasses
    compile their __init__: a watch event then runs straight-line code, as fast as
    trimmers written out by hand, where walking the declaration took 1.5 to 3 times as
    long. It sets the kind, which the items of a list lack."""
    source = _Source()
    body = source.map(declared.tree, "obj", "kept", "    ")
    text = "\n".join(
        [
            *source.helpers,
            "def trim(obj):",
            "    kept = {}",
            *body,
            f"    kept['kind'] = {declared.kind!r}",
            "    return kept",
        ]
    )
    scope: dict[str, Any] = {"Mapping": Mapping, "ABSENT": _ABSENT}
    exec(compile(text, f"<trimmer of {declared.kind}>", "exec"), scope)
    trim: Trim = scope["trim"]
    return trim


# What `.get` gives for a key the object does not have: a key set to null is kept.
_ABSENT = object()


class _Source:
    """The lines that keep a declared tree of a value (a map, or a list of maps)."""

    def __init__(self) -> None:
        self.helpers: list[str] = []
        self._names = 0

    def map(self, tree: Tree, value: str, kept: str, indent: str) -> list[str]:
        """Lines copying into `kept` what `tree` declares of the map `value`."""
        lines = []
        for key, below in tree.items():
            self._names += 1
            found, inner = f"v{self._names}", indent + "    "
            lines += [
                f"{indent}{found} = {value}.get({key!r}, ABSENT)",
                f"{indent}if {found} is not ABSENT:",
            ]
            each = None if below is None else below.get(ITEMS)
            if each is not None:
                item = self._item(each)
                lines.append(
                    f"{inner}if isinstance({found}, list): {found} = [{item}(i) for i in {found}]"
                )
            elif below is not None and ITEMS not in below:
                part = f"k{self._names}"
                lines += [
                    f"{inner}if {found}.__class__ is dict or isinstance({found}, Mapping):",
                    f"{inner}    {part} = {{}}",
                    *self.map(below, found, part, inner + "    "),
                    f"{inner}    {found} = {part}",
                ]
            lines.append(f"{inner}{kept}[{key!r}] = {found}")
        return lines

    def _item(self, tree: Tree) -> str:
        """A helper keeping `tree` of one item of a list; its name."""
        self._names += 1
        name = f"item{self._names}"
        self.helpers += [
            f"def {name}(value):",
            "    if value.__class__ is not dict and not isinstance(value, Mapping):",
            "        return value",
            "    kept = {}",
            *self.map(tree, "value", "kept", "    "),
            "    return kept",
        ]
        return name


trim_pod = trimmer(POD_READS)
trim_node = trimmer(NODE_READS)
trim_namespace = trimmer(NAMESPACE_READS)
trim_pod_group = trimmer(POD_GROUP_READS)
trim_budget = trimmer(BUDGET_READS)
trim_queue = trimmer(QUEUE_READS)
trim_priority_class = trimmer(PRIORITY_CLASS_READS)
trim_claim = trimmer(CLAIM_READS)
trim_volume = trimmer(VOLUME_READS)
trim_storage_class = trimmer(STORAGE_CLASS_READS)
trim_csi_node = trimmer(CSI_NODE_READS)
trim_csi_driver = trimmer(CSI_DRIVER_READS)
trim_storage_capacity = trimmer(STORAGE_CAPACITY_READS)
trim_workload = trimmer(WORKLOAD_READS)
trim_hypernode = trimmer(HYPERNODE_READS)
trim_resource_slice = trimmer(SLICE_READS)
trim_device_class = trimmer(CLASS_READS)
trim_resource_claim = trimmer(RESOURCE_CLAIM_READS)
trim_claim_template = trimmer(TEMPLATE_READS)
trim_taint_rule = trimmer(TAINT_RULE_READS)
