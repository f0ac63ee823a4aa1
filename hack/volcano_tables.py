"""Write tests/conformance/volcano/<action>/<case>.yaml from the table cases of Volcano
v1.15.1's action tests (docs/conformance.md, "Conformance with Volcano's own tests").

    python hack/volcano_tables.py [OUT]    # default: tests/conformance/volcano

The module comes from the Go module proxy (`go mod download -json`). Each case is a Go
composite literal of uthelper.TestCommonStruct whose objects are built by Volcano's
test helpers (pkg/scheduler/util/test_utils.go): the literal is rewritten into a Python
expression over functions that build what each helper builds, and evaluated. The
expectation is the case's own Expect* fields; nothing here runs batchsched.
"""

import json
import re
import subprocess
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

MODULE = "volcano.sh/volcano@v1.15.1"
ACTIONS = "pkg/scheduler/actions"
OUT = Path(__file__).resolve().parents[1] / "tests" / "conformance" / "volcano"
SCHEDULER = "volcano"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_API = "scheduling.volcano.sh/v1beta1"
HYPERNODE_API = "topology.volcano.sh/v1alpha1"

Obj = dict[str, Any]
# Volcano's helpers leave every object's creationTimestamp zero: all created at one
# instant, so that its job order falls back on the jobs' names. The simulator numbers
# objects without one by their place in the input, so they are given one stamp alike.
CREATED = "2025-01-01T00:00:00Z"

# Objects, as each of Volcano's helpers builds them.


class PriorityClass(dict[str, Any]):
    """A PriorityClass whose `.Value` the tables read (`&highPrio.Value`)."""

    @property
    def Value(self) -> int:  # the Go field's name
        return int(self["value"])


def resources(cpu: str, memory: str, *scalars: tuple[str, str]) -> dict[str, str]:
    """api.BuildResourceList."""
    out = {"cpu": cpu} if cpu else {}
    if memory:
        out["memory"] = memory
    out.update(scalars)
    return out


def node(name: str, alloc: Mapping[str, str], labels: Mapping[str, str] | None) -> Obj:
    meta: Obj = {"name": name, **({"labels": dict(labels)} if labels else {})}
    status = {"capacity": dict(alloc), "allocatable": dict(alloc)}
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "status": status}


def pod(
    namespace: str,
    name: str,
    node_name: str,
    phase: str,
    req: Mapping[str, str],
    group: str,
    labels: Mapping[str, str] | None,
    selector: Mapping[str, str] | None,
) -> Obj:
    """util.BuildPod; the container gets a name, which the API requires."""
    meta: Obj = {
        "name": name,
        "namespace": namespace,
        "creationTimestamp": CREATED,
        "annotations": {GROUP_ANNOTATION: group},
    }
    if labels:
        meta["labels"] = dict(labels)
    container: Obj = {"name": "c", **({"resources": {"requests": dict(req)}} if req else {})}
    spec: Obj = {"schedulerName": SCHEDULER, "containers": [container]}
    if node_name:
        spec["nodeName"] = node_name
    if selector:
        spec["nodeSelector"] = dict(selector)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase},
    }


def _with_spec(key: str) -> Callable[..., Obj]:
    """A BuildPodWith* helper: BuildPod's arguments and one more, set at spec.<key>."""

    def build(*args: Any) -> Obj:
        built = pod(*args[:8])
        if args[8] is not None:
            built["spec"][key] = args[8]
        return built

    return build


def pod_with_anti_affinity(*args: Any) -> Obj:
    """preempt_test.go's buildPodWithPodAntiAffinity: required anti-affinity to pods
    with the pod's own labels, on the topology key given."""
    built = pod(*args[:8])
    term = {"labelSelector": {"matchLabels": dict(args[6] or {})}, "topologyKey": args[8]}
    required = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    built["spec"]["affinity"] = {"podAntiAffinity": required}
    return built


def pod_with_claim(*args: Any) -> Obj:
    """util.BuildPodWithPVC: the claim mounted at /data."""
    claim_obj = args[5]
    built = pod(*args[:5], *args[6:9])
    claim = claim_obj["metadata"]["name"]
    built["spec"]["containers"][0]["volumeMounts"] = [{"name": claim, "mountPath": "/data"}]
    built["spec"]["volumes"] = [{"name": claim, "persistentVolumeClaim": {"claimName": claim}}]
    return built


def pod_group(
    name: str,
    namespace: str,
    queue: str,
    min_member: int,
    task_min: Mapping[str, int] | None,
    phase: str,
) -> Obj:
    spec: Obj = {"queue": queue, "minMember": min_member}
    if task_min is not None:
        spec["minTaskMember"] = dict(task_min)
    meta = {"name": name, "namespace": namespace, "creationTimestamp": CREATED}
    status = {"phase": phase}
    return {
        "apiVersion": VOLCANO_API,
        "kind": "PodGroup",
        "metadata": meta,
        "spec": spec,
        "status": status,
    }


def pod_group_with_network_topology(
    name: str,
    namespace: str,
    hypernode: str,
    queue: str,
    min_member: int,
    task_min: Mapping[str, int] | None,
    phase: str,
    mode: str,
    highest: int | str,
) -> Obj:
    """util.BuildPodGroupWithNetWorkTopologies (`highest` a tier number) and
    BuildPodGroupUsingNetWorkTopologiesWithTierName (a tier name): the job's allocated
    HyperNode in Volcano's annotation, which Volcano's cache keeps between sessions."""
    group = pod_group(name, namespace, queue, min_member, task_min, phase)
    group["metadata"]["annotations"] = {"volcano.sh/job-allocated-hypernode": hypernode}
    limit = "highestTierName" if isinstance(highest, str) else "highestTierAllowed"
    group["spec"]["networkTopology"] = {"mode": mode, limit: highest}
    return group


def hypernode(name: str, tier: int, members: list[Obj], tier_name: str = "") -> Obj:
    """api.BuildHyperNode (and BuildHyperNodeWithTierName): members by exact name,
    pattern or label selector, as its MemberConfig says."""
    keys = {"exact": "exactMatch", "regex": "regexMatch", "label": "labelMatch"}
    specs = []
    for member in members:
        how = member["Selector"]
        body = (
            member.get("LabelSelector")
            if how == "label"
            else {"name" if how == "exact" else "pattern": member["Name"]}
        )
        specs.append({"type": member["Type"], "selector": {keys[how]: body}})
    spec: Obj = {"tier": tier, "members": specs}
    if tier_name:
        spec["tierName"] = tier_name
    return {
        "apiVersion": HYPERNODE_API,
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": spec,
    }


def hypernodes(case: Mapping[str, Any]) -> list[Obj]:
    """The case's HyperNodes: its HyperNodesMap's (named by their keys), else the tree
    its HyperNodesSetByTier and HyperNodes (node names per HyperNode) describe, which
    uthelper builds the cache from directly: a HyperNode of the lowest tier holds its
    nodes, one of a higher tier the HyperNodes of the tier below whose nodes it holds."""
    if case.get("HyperNodesMap"):
        # The cache knows each by its key (a case may build one under another name).
        return [
            {**built, "metadata": {"name": key}} for key, built in case["HyperNodesMap"].items()
        ]
    by_tier = case.get("HyperNodesSetByTier") or {}
    nodes = case.get("HyperNodes") or {}
    tiers = sorted(by_tier)
    out = []
    for index, tier in enumerate(tiers):
        for name in sorted(by_tier[tier]):
            if index == 0:
                members = [
                    {"Name": n, "Type": "Node", "Selector": "exact"} for n in sorted(nodes[name])
                ]
            else:
                below = sorted(by_tier[tiers[index - 1]])
                members = [
                    {"Name": child, "Type": "HyperNode", "Selector": "exact"}
                    for child in below
                    if set(nodes[child]) <= set(nodes[name])
                ]
            out.append(hypernode(name, tier, members))
    return out


def pod_group_with_priority(
    name: str, ns: str, queue: str, min_member: int, task_min: Any, phase: str, class_name: str
) -> Obj:
    built = pod_group(name, ns, queue, min_member, task_min, phase)
    built["spec"]["priorityClassName"] = class_name
    return built


def pod_group_with_min_resources(
    name: str, ns: str, queue: str, min_member: int, task_min: Any, least: Any, phase: str
) -> Obj:
    built = pod_group(name, ns, queue, min_member, task_min, phase)
    built["spec"]["minResources"] = dict(least)
    return built


def queue(name: str, weight: int, cap: Mapping[str, str] | None, state: str = "Open") -> Obj:
    spec: Obj = {"weight": weight, **({"capability": dict(cap)} if cap else {})}
    meta = {"name": name}
    return {
        "apiVersion": VOLCANO_API,
        "kind": "Queue",
        "metadata": meta,
        "spec": spec,
        "status": {"state": state},
    }


def queue_with_quantities(
    name: str,
    priority: int | None,
    deserved: Mapping[str, str] | None,
    cap: Mapping[str, str] | None,
) -> Obj:
    built = queue(name, 1, cap)
    if deserved:
        built["spec"]["deserved"] = dict(deserved)
    if priority is not None:
        built["spec"]["priority"] = priority
    return built


def priority_class(name: str, value: int, policy: str | None = None) -> PriorityClass:
    built = PriorityClass(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
    )
    if policy is not None:
        built["preemptionPolicy"] = policy
    return built


def storage_class(name: str, provisioner: str, mode: str) -> Obj:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }


def claim(namespace: str, name: str, req: Mapping[str, str], class_name: str) -> Obj:
    spec = {"resources": {"requests": dict(req)}, "storageClassName": class_name}
    meta = {"name": name, "namespace": namespace}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}


def volume(name: str, class_name: str, capacity: Mapping[str, str]) -> Obj:
    spec = {"storageClassName": class_name, "capacity": dict(capacity)}
    status = {"phase": "Available"}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": spec,
        "status": status,
    }


DRA_API = "resource.k8s.io/v1"
# DeviceAttribute's Go fields, by their JSON names (not the fields' own in lowerCamel).
ATTRIBUTE_FIELDS = {
    "IntValue": "int",
    "BoolValue": "bool",
    "StringValue": "string",
    "VersionValue": "version",
}


def json_name(field: str) -> str:
    """A Kubernetes API Go field's JSON name: lowerCamel, a leading acronym lowered
    whole (CEL: cel)."""
    return re.sub(r"^[A-Z]+(?=[A-Z][a-z]|$)|^[A-Z]", lambda m: m.group().lower(), field)


def as_json(value: Any) -> Any:
    """A Go struct literal's value (dicts keyed by Go field names) as the API's JSON."""
    if isinstance(value, dict):
        return {json_name(k): as_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_json(v) for v in value]
    return value


def pod_with_resource_claim(*args: Any) -> Obj:
    """util.BuildPodWithResourceClaim: the pod's claims, and its container's requests
    of them."""
    built = pod(*args[:8])
    built["spec"]["resourceClaims"] = as_json(args[9])
    container = built["spec"]["containers"][0]
    container.setdefault("resources", {})["claims"] = as_json(args[8])
    return built


def device_request(
    name: str, class_name: str, selectors: Any, mode: str | None, count: int | None
) -> Obj:
    """util.BuildDeviceRequest: an exact request, ExactCount of one unless told."""
    exactly: Obj = {
        "deviceClassName": class_name,
        "count": 1 if count is None else count,
        "allocationMode": mode or "ExactCount",
    }
    if selectors is not None:
        exactly["selectors"] = as_json(selectors)
    return {"name": name, "exactly": exactly}


def resource_claim(
    namespace: str, name: str, requests: list[Obj], constraints: Any, config: Any
) -> Obj:
    """util.BuildResourceClaim."""
    devices: Obj = {"requests": requests}
    if constraints is not None:
        devices["constraints"] = as_json(constraints)
    if config is not None:
        devices["config"] = as_json(config)
    meta = {"name": name, "namespace": namespace, "resourceVersion": "1"}
    return {
        "apiVersion": DRA_API,
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": {"devices": devices},
    }


def resource_slice(name: str, driver: str, node_name: str, pool: Obj, devices: list[Obj]) -> Obj:
    """util.BuildResourceSlice: the node's own slice of the driver's pool."""
    spec = {"nodeName": node_name, "driver": driver, "pool": as_json(pool), "devices": devices}
    return {
        "apiVersion": DRA_API,
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": spec,
    }


def device(name: str, attributes: Mapping[str, Obj] | None, capacity: Any) -> Obj:
    """util.BuildDevice."""
    built: Obj = {"name": name}
    if attributes is not None:
        built["attributes"] = {
            key: {ATTRIBUTE_FIELDS[field]: value for field, value in attribute.items()}
            for key, attribute in attributes.items()
        }
    if capacity is not None:
        built["capacity"] = as_json(capacity)
    return built


def device_class(name: str, selectors: Any, config: Any) -> Obj:
    """util.BuildDeviceClass."""
    spec: Obj = {"selectors": as_json(selectors)}
    if config is not None:
        spec["config"] = as_json(config)
    return {"apiVersion": DRA_API, "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def sprintf(form: str, *args: Any) -> str:
    """fmt.Sprintf with the verbs the tables use (%s, %d, %v)."""
    return form.replace("%v", "%s") % args


HELPERS: dict[str, Any] = {
    "BuildResourceList": resources,
    "BuildNode": node,
    "BuildPod": pod,
    "BuildBestEffortPod": lambda ns, n, nd, ph, g, lb, sel: pod(ns, n, nd, ph, {}, g, lb, sel),
    "BuildPodWithPriority": _with_spec("priority"),
    "BuildPodWithPreemptionPolicy": _with_spec("preemptionPolicy"),
    "buildPodWithPodAntiAffinity": pod_with_anti_affinity,
    "BuildPodWithPVC": pod_with_claim,
    "BuildPodWithResourceClaim": pod_with_resource_claim,
    "BuildResourceClaim": resource_claim,
    "BuildDeviceRequest": device_request,
    "BuildResourceSlice": resource_slice,
    "BuildDevice": device,
    "BuildDeviceClass": device_class,
    "Sprintf": sprintf,
    "BuildPodGroup": pod_group,
    "BuildPodGroupWithPrio": pod_group_with_priority,
    "BuildPodGroupWithMinResources": pod_group_with_min_resources,
    "BuildPodGroupWithNetWorkTopologies": pod_group_with_network_topology,
    "BuildPodGroupUsingNetWorkTopologiesWithTierName": pod_group_with_network_topology,
    "NewHyperNodeInfo": lambda built: built,
    "BuildHyperNode": hypernode,
    "BuildHyperNodeWithTierName": lambda n, t, tn, m: hypernode(n, t, m, tn),
    "setof": lambda *names: list(names),
    "BuildQueue": queue,
    "BuildQueueWithState": queue,
    "BuildQueueWithResourcesQuantity": lambda n, d, c: queue_with_quantities(n, None, d, c),
    "BuildQueueWithPriorityAndResourcesQuantity": queue_with_quantities,
    "BuildPriorityClass": priority_class,
    "BuildPriorityClassWithPreemptionPolicy": priority_class,
    "scalars": lambda *pairs: pairs,
}

# Reading a Go literal.

# A constant's value, or what builds it from its match.
Replacement = str | Callable[[re.Match[str]], str]
# Go constants and spellings the tables use, and their Python values (outside strings).
CONSTANTS: list[tuple[str, Replacement]] = [
    (r"\bv1\.Pod(Pending|Running|Succeeded|Failed|Unknown)\b", r'"\1"'),
    (
        r"\b(?:schedulingv1(?:beta1)?|scheduling)\.PodGroup(Pending|Inqueue|Running|Unknown|Completed)\b",
        r'"\1"',
    ),
    (r"\bschedulingv1beta1\.PodPreemptable\b", '"volcano.sh/preemptable"'),
    (r"\bschedulingv1beta1\.QueueState(\w+)\b", r'"\1"'),
    (r"\bv1\.PreemptNever\b", '"Never"'),
    (r"\btopologyv1alpha1\.MemberType(Node|HyperNode)\b", r'"\1"'),
    (r"\bsets\.New\[string\]\(", "setof("),
    (r"\bv1\.PreemptLowerPriority\b", '"PreemptLowerPriority"'),
    (r"\b(?:schedulingapi|api)\.(Pending|Allocated|Pipelined|Binding|Bound|Running)\b", r'"\1"'),
    # Conversions and pointers to a value are the value; a struct literal of the DRA
    # API is a struct like any other.
    (r"\bptr\.To\(|\bresourcev1\.QualifiedName\(", "("),
    (r"(?<![\]*])(?:&|\b)resourcev1\.\w+\{", "{"),
    (r"\bfmt\.Sprintf\(", "Sprintf("),
    (r"\bnil\b", "None"),
    (r"\btrue\b", "True"),
    (r"\bfalse\b", "False"),
    (r"make\(map\[string\]string\)", "{}"),
    (r"&(\w+)\.Value", r"\1.Value"),
    (r"\butil\.|\bapi\.", ""),
    (r"\b(\w+)\.PluginName\b", r'"\1"'),
    (r"\b\w+\.New\b", "None"),
]
STRING = r'"(?:[^"\\]|\\.)*"'
COMPOSITE = re.compile(
    r"(\[\]\*?[\w.]+|map\[[\w.]+\]\*?[\w.\[\]]+|v1\.ResourceList|HyperNodeTierNameMap)\{"
)
# Named map types, whose literals are maps of plain values.
NAMED_MAPS = ("v1.ResourceList", "HyperNodeTierNameMap")


def strip_comments(text: str) -> str:
    return re.sub(
        f"{STRING}|//[^\n]*", lambda m: "" if m.group().startswith("/") else m.group(), text
    )


def closing(text: str, start: int) -> int:
    """Where the brace opened at text[start] closes."""
    depth = 0
    for match in re.finditer(f"{STRING}|[{{}}]", text[start:]):
        if match.group() == "{":
            depth += 1
        elif match.group() == "}":
            depth -= 1
            if depth == 0:
                return start + match.start()
    raise ValueError("unbalanced braces")


def function(source: str, name: str) -> str:
    start = source.index(f"func {name}(")
    end = source.find("\nfunc ", start + 1)
    return source[start : end if end >= 0 else None]


def case_literals(body: str) -> list[str]:
    """The `{ Name: ... }` literals of the function's TestCommonStruct table."""
    table = body.index("{", body.index("[]uthelper.TestCommonStruct{"))
    end = closing(body, table)
    out, at = [], table + 1
    while (at := body.find("{", at, end)) >= 0:
        close = closing(body, at)
        out.append(body[at : close + 1])
        at = close + 1
    return out


def brace(go_type: str, named_maps: Collection[str]) -> tuple[str, str]:
    """A literal of the Go type: list, map or struct, and its elements' type. A named
    map's elements (HyperNodeTierNameMap's, a ResourceList's) are plain values."""
    if go_type.startswith("[]"):
        return "list", go_type[2:].lstrip("*")
    if go_type.startswith("map["):
        return "map", go_type[go_type.index("]") + 1 :].lstrip("*")
    if go_type in named_maps:
        return "map", ""
    return "struct", ""


def go_to_python(
    literal: str,
    constants: Sequence[tuple[str, Replacement]],
    composite: re.Pattern[str],
    named_maps: Collection[str],
) -> str:
    """A Go expression as a Python one: slices become lists, maps and structs dicts (a
    struct's field names quoted), the constants (outside strings) their values; a
    composite literal's type is what `composite` matches before its brace."""
    # A raw string (none of the tables' holds a backtick or needs escapes kept) as
    # a quoted one, which the rest reads.
    literal = re.sub(r"`([^`]*)`", lambda m: json.dumps(m.group(1)), literal)
    parts = re.split(f"({STRING})", literal)
    for n in range(0, len(parts), 2):
        for pattern, replacement in constants:
            parts[n] = re.sub(pattern, replacement, parts[n])
    text = "".join(parts)
    out: list[str] = []
    # Each open brace's kind, and the type of its elements (a literal whose type is
    # left out is one of these).
    stack: list[tuple[str, str]] = []
    # The last character written but spaces: a struct's field name follows its brace
    # or a comma, never a value (a key such as `v1.ResourceCPU:` in a map).
    last = "{"
    at = 0
    while at < len(text):
        if text[at] == '"':
            string = re.compile(STRING).match(text, at)
            assert string is not None
            out.append(string.group())
            at = string.end()
        elif opened := composite.match(text, at):
            stack.append(brace(opened.group(1), named_maps))
            out.append("[" if stack[-1][0] == "list" else "{")
            at = opened.end()
        elif text[at] == "{":
            stack.append(brace(stack[-1][1] if stack else "", named_maps))
            out.append("[" if stack[-1][0] == "list" else "{")
            at += 1
        elif text[at] == "}":
            out.append("]" if stack.pop()[0] == "list" else "}")
            at += 1
        elif (
            stack
            and stack[-1][0] == "struct"
            and last in "{,"
            and (field := re.match(r"([A-Za-z]\w*)\s*:(?!=)", text[at:]))
        ):
            out.append(f'"{field.group(1)}":')
            at += field.end()
        else:
            out.append(text[at])
            at += 1
        if not out[-1].isspace():
            last = out[-1][-1]
    return "".join(out)


def to_python(literal: str) -> str:
    """A Go composite literal of Volcano's tables as a Python expression; a slice of
    scalar resources spread into a call is their pairs."""
    literal = re.sub(
        r"\[\]api\.ScalarResource\{((?:\{[^{}]*\},?\s*)*)\}\.\.\.", r"*scalars(\1)", literal
    )
    literal = re.sub(r'\{Name:\s*("[^"]+"),\s*Value:\s*("[^"]+")\}', r"(\1, \2)", literal)
    return go_to_python(literal, CONSTANTS, COMPOSITE, NAMED_MAPS)


def evaluate(literal: str, names: Mapping[str, Any]) -> dict[str, Any]:
    value = eval(
        to_python(literal), {"__builtins__": {}, **HELPERS, **names}
    )  # only our own rewriting of Volcano's literal
    assert isinstance(value, dict)
    return value


# The configuration a test sets up.

# The flags (as a configuration file spells them) that gate each callback the plugin
# registers in v1.15.1. Sub-job and hyper-node callbacks are left out: they act only on
# PodGroups with subGroupPolicy or networkTopology, which no translated case has.
PLUGIN_FLAGS = {
    "gang": (
        "enableJobOrder",
        "enableJobPipelined",
        "enableJobReady",
        "enableJobStarving",
        "enablePreemptable",
        "enableReclaimable",
    ),
    "drf": ("enableJobOrder", "enablePreemptable", "enableQueueOrder", "enableReclaimable"),
    "proportion": (
        "enabledAllocatable",
        "enableJobEnqueued",
        "enabledOverused",
        "enablePredicate",
        "enablePreemptive",
        "enableQueueOrder",
        "enableReclaimable",
    ),
    "predicates": ("enableNodeOrder", "enablePredicate"),
    "nodeorder": ("enableNodeOrder",),
    "priority": ("enableJobOrder", "enableJobStarving", "enablePreemptable", "enableTaskOrder"),
    "conformance": ("enablePreemptable", "enableReclaimable"),
    "sla": ("enableJobEnqueued", "enableJobOrder", "enableJobPipelined"),
    "capacity": (
        "enabledAllocatable",
        "enableJobEnqueued",
        "enablePredicate",
        "enablePreemptive",
        "enableQueueOrder",
        "enableReclaimable",
    ),
    "networktopologyaware": (
        "enableNodeOrder",
        "enabledHyperNodeOrder",
        "enabledHyperNodeGradient",
    ),
}
# conf.PluginOption's Go fields, by their configuration file key.
GO_FLAGS = {
    "EnabledJobOrder": "enableJobOrder",
    "EnabledJobReady": "enableJobReady",
    "EnabledJobPipelined": "enableJobPipelined",
    "EnabledTaskOrder": "enableTaskOrder",
    "EnabledPreemptable": "enablePreemptable",
    "EnabledReclaimable": "enableReclaimable",
    "EnablePreemptive": "enablePreemptive",
    "EnabledQueueOrder": "enableQueueOrder",
    "EnabledPredicate": "enablePredicate",
    "EnabledNodeOrder": "enableNodeOrder",
    "EnabledJobEnqueued": "enableJobEnqueued",
    "EnabledJobStarving": "enableJobStarving",
    "EnabledOverused": "enabledOverused",
    "EnabledAllocatable": "enabledAllocatable",
    "EnabledHyperNodeOrder": "enabledHyperNodeOrder",
    "EnabledHyperNodeGradient": "enabledHyperNodeGradient",
}
# Plugins whose Go package is named otherwise than the plugin.
PLUGIN_NAMES = {"networktopologyaware": "network-topology-aware"}


def go_constant(plugins: Path, package: str, name: str) -> str:
    """A string constant of a plugin's Go package."""
    for source in sorted((plugins / package).glob("*.go")):
        if found := re.search(rf'\b{name}\s*=\s*"([^"]*)"', source.read_text()):
            return found.group(1)
    raise KeyError(f"{package}.{name}")


def go_tiers(body: str, plugins: Path) -> list[list[Obj]]:
    """The function's `tiers := []conf.Tier{...}`: each plugin's name, the flags the test
    sets and its arguments (string ones, and switches keyed by a plugin's constant)."""
    start = body.index("{", body.index("tiers := []conf.Tier{"))
    tiers = []
    for tier in re.finditer(
        r"Plugins:\s*\[\]conf\.PluginOption\{", body[start : closing(body, start)]
    ):
        open_ = start + tier.end() - 1
        entries = body[open_ + 1 : closing(body, open_)]
        options: list[Obj] = []
        for entry in re.finditer(r"\{\s*Name:\s*(\w+)\.PluginName,", entries):
            block = entries[entry.start() : closing(entries, entry.start())]
            flags = re.findall(r"(Enabl\w+):\s*&(true|false)Value", block)
            arguments: Obj = dict(re.findall(r'"([\w-]+)":\s*"([^"]*)"', block))
            for package, key, value in re.findall(r"\b(\w+)\.(\w+):\s*(true|false)Value", block):
                arguments[go_constant(plugins, package, key)] = value == "true"
            options.append(
                {
                    "name": entry.group(1),
                    "flags": {GO_FLAGS[k]: v == "true" for k, v in flags},
                    "arguments": arguments,
                }
            )
        tiers.append(options)
    return tiers


def configuration(
    tiers: list[list[Obj]],
    registered: set[str],
    action: str,
    arguments: Mapping[str, Any] | None,
) -> Obj:
    """The configuration file that sets what the test sets. In Go a flag left unset is
    off, in a file it is on: every flag the test leaves unset on a callback the plugin
    registers is written false. Plugins the test lists but does not register are left
    out, as Volcano's session leaves them out. batchsched requires predicates
    (docs/drop-in.md): a tier holding it is added where the test has none."""
    out = []
    for tier in tiers:
        plugins = []
        for plugin in tier:
            if plugin["name"] not in registered:
                continue
            entry: Obj = {"name": PLUGIN_NAMES.get(plugin["name"], plugin["name"])}
            entry |= {f: False for f in PLUGIN_FLAGS[plugin["name"]] if not plugin["flags"].get(f)}
            if plugin["arguments"]:
                entry["arguments"] = plugin["arguments"]
            plugins.append(entry)
        out.append({"plugins": plugins})
    if not any(p["name"] == "predicates" for tier in out for p in tier["plugins"]):
        out.append({"plugins": [{"name": "predicates"}]})
    config: Obj = {"actions": action, "tiers": out}
    if arguments:
        config["configurations"] = [{"name": action, "arguments": dict(arguments)}]
    config["schedulerNames"] = [SCHEDULER]
    return config


def expectations(case: Mapping[str, Any]) -> Obj:
    """CheckAll's checks: binds (by pod, or their number alone under MinimalBindCheck),
    evictions, pipelined jobs, PodGroup phases and task statuses."""
    expect: Obj = {}
    if not case.get("MinimalBindCheck") and "ExpectBindMap" in case:
        expect["binds"] = dict(case["ExpectBindMap"] or {})
    if "ExpectBindsNum" in case:
        expect["bindCount"] = case["ExpectBindsNum"]
    if "ExpectEvicted" in case:
        expect["evicted"] = sorted(case["ExpectEvicted"] or [])
    if "ExpectEvictNum" in case:
        expect["evictCount"] = case["ExpectEvictNum"]
    if "ExpectPipeLined" in case:
        expect["pipelined"] = case["ExpectPipeLined"]
    if "ExpectStatus" in case:
        expect["phases"] = dict(case["ExpectStatus"])
    if "ExpectTaskStatusNums" in case:
        expect["taskStatus"] = case["ExpectTaskStatusNums"]
    if "taskStatus" not in expect or "bindCount" in expect:
        # CheckAll fails on any bind or eviction it was not told of. Tasks Volcano
        # leaves Binding wait in its volume binder for a PersistentVolume controller its
        # test does not run, so its binder sees none: their number is the expectation.
        expect.setdefault("bindCount", 0)
        if not case.get("MinimalBindCheck"):
            expect.setdefault("binds", {})
    expect.setdefault("evicted", [])
    expect.setdefault("evictCount", 0)
    return expect


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:64].rstrip("-")


# The tables translated: file, test function, action, plugins it registers (None: each
# case says), its action arguments, and names its cases refer to.

HIGH = priority_class("high-priority", 100000)
LOW = priority_class("low-priority", 10)
CLASS = storage_class("sc", "ignore-provisioner", "WaitForFirstConsumer")
STORAGE: dict[str, Any] = {
    "sc": CLASS,
    "pvc1": claim("c1", "pvc1", {"storage": "1Gi"}, "sc"),
    "pvc2": claim("c1", "pvc2", {"storage": "1Gi"}, "sc"),
    "pv1": volume("pv1", "sc", {"storage": "2Gi"}),
    "pv2": volume("pv2", "sc", {"storage": "2Gi"}),
    "ignoreProvisioners": None,
}
PREEMPT_NAMES = {"highPrio": HIGH, "lowPrio": LOW}
TABLES: list[
    tuple[str, str, str, set[str] | None, Mapping[str, Any] | None, Mapping[str, Any], str]
] = [
    (
        "allocate/allocate_test.go",
        "TestAllocate",
        "allocate",
        {"drf", "proportion", "predicates", "nodeorder", "gang"},
        None,
        {},
        "",
    ),
    (
        "allocate/allocate_test.go",
        "TestAllocateWithNetWorkTopologies",
        "allocate",
        {"gang", "predicates", "networktopologyaware"},
        None,
        {},
        "network-topology-",
    ),
    (
        "allocate/allocate_test.go",
        "TestAllocateWithPVC",
        "allocate",
        {"gang", "predicates"},
        None,
        STORAGE,
        "pvc-",
    ),
    (
        "allocate/allocate_test.go",
        "TestAllocateWithDRA",
        "allocate",
        {"gang", "predicates"},
        None,
        {},
        "dra-",
    ),
    (
        "allocate/allocate_test.go",
        "TestFareShareAllocate",
        "allocate",
        {"drf", "proportion", "predicates", "nodeorder"},
        None,
        {},
        "",
    ),
    (
        "preempt/preempt_test.go",
        "TestPreempt",
        "preempt",
        {"conformance", "gang", "priority", "proportion"},
        {"enableTopologyAwarePreemption": False},
        PREEMPT_NAMES,
        "",
    ),
    (
        "preempt/preempt_test.go",
        "TestTopologyAwarePreempt",
        "preempt",
        {"capacity", "conformance", "gang", "priority", "proportion", "predicates"},
        {"enableTopologyAwarePreemption": True},
        PREEMPT_NAMES,
        "topology-aware-",
    ),
    ("reclaim/reclaim_test.go", "TestReclaim", "reclaim", None, None, {}, ""),
    (
        "enqueue/enqueue_test.go",
        "TestEnqueue",
        "enqueue",
        {"drf", "gang", "sla", "proportion"},
        None,
        {},
        "",
    ),
]
# The preempt tests give every case these classes.
CLASSES = {"TestPreempt": [HIGH, LOW], "TestTopologyAwarePreempt": [HIGH, LOW]}
KINDS = (
    "PriClass",
    "SCs",
    "PVs",
    "PVCs",
    "Queues",
    "Nodes",
    "HyperNodeObjects",
    "DeviceClasses",
    "ResourceSlices",
    "ResourceClaims",
    "PodGroups",
    "Pods",
)


# Volcano's e2e scheduling cases (test/e2e/schedulingaction), written by hand: each runs
# Go steps on a kind cluster rather than a table. What a case sees is rebuilt: the nodes
# InitTestContext leaves room on (NodesNumLimit nodes with NodesResourceLimit idle; its
# placeholder pods fill the rest), its queues, and for each Volcano Job what Volcano's job
# controller writes for it (a PodGroup with the job's minAvailable, per-task minimum,
# queue and minResources; pods annotated with group and task), created once the job
# before it is ready. Its scheduler configuration is the chart's CI configuration.
E2E = "test/e2e/schedulingaction"
E2E_NAMESPACE = "e2e"
CI_CONFIGURATION: Obj = {
    "actions": "enqueue, allocate, backfill, reclaim, preempt",
    "tiers": [
        {
            "plugins": [
                {"name": "priority"},
                {"name": "gang", "enablePreemptable": False},
                {"name": "conformance"},
                {"name": "sla"},
            ]
        },
        {
            "plugins": [
                {"name": "overcommit"},
                {"name": "drf", "enablePreemptable": False},
                {
                    "name": "predicates",
                    "arguments": {"predicate.DynamicResourceAllocationEnable": True},
                },
                {"name": "proportion"},
                {"name": "nodeorder"},
                {"name": "binpack"},
                {"name": "network-topology-aware"},
            ]
        },
    ],
    "schedulerNames": [SCHEDULER],
}
SLOT = {"cpu": "2000m", "memory": "2048Mi"}
HALF = {"cpu": "500m", "memory": "512Mi"}
ONE = {"cpu": "1000m", "memory": "1024Mi"}


def e2e_node(index: int, idle: Mapping[str, str]) -> Obj:
    name = f"worker-{index}"
    return node(name, {**idle, "pods": "110"}, {"kubernetes.io/hostname": name})


def e2e_queue(name: str, guarantee: Mapping[str, str] | None = None) -> Obj:
    """CreateQueueWithQueueSpec: weight 1, and a guarantee is deserved too."""
    built = queue(name, 1, None)
    if guarantee:
        built["spec"]["guarantee"] = {"resource": dict(guarantee)}
        built["spec"]["deserved"] = dict(guarantee)
    return built


def vcjob(
    name: str,
    req: Mapping[str, str],
    minute: int,
    *,
    replicas: int = 1,
    least: int = 1,
    queue_name: str = "default",
    labels: Mapping[str, str] | None = None,
    affinity: Obj | None = None,
    host_port: int | None = None,
    priority: PriorityClass | None = None,
) -> list[Obj]:
    """A one-task e2eutil.JobSpec (Min `least`, Rep `replicas`) as Volcano's webhook and
    job controller write it, created `minute` minutes into the case: the task's
    minAvailable defaults to its replicas, the group's minResources are its first
    `least` pods' requests. A job's `Min` (`least`) given apart from its task's is the
    job's minAvailable; the task's own minimum is still its replicas."""
    task = f"{name}-task-0"
    created = f"2025-01-01T00:{minute:02d}:00Z"
    group = pod_group(name, E2E_NAMESPACE, queue_name, least, {task: replicas}, "Pending")
    group["metadata"]["creationTimestamp"] = created
    group["spec"]["minResources"] = {key: times(value, least) for key, value in req.items()}
    if priority is not None:
        group["spec"]["priorityClassName"] = priority["metadata"]["name"]
    members = []
    for index in range(replicas):
        member = pod(
            E2E_NAMESPACE, f"{name}-{task}-{index}", "", "Pending", req, name, labels, None
        )
        member["metadata"]["creationTimestamp"] = created
        member["metadata"]["annotations"] |= {
            "volcano.sh/job-name": name,
            "volcano.sh/task-spec": task,
            "volcano.sh/queue-name": queue_name,
        }
        container = member["spec"]["containers"][0]
        container |= {"name": task, "image": "nginx:1.29.3-alpine"}
        if host_port is not None:
            container["ports"] = [{"containerPort": host_port, "hostPort": host_port}]
        if affinity:
            member["spec"]["affinity"] = affinity
        if priority is not None:
            # The controller gives the pod the job's class; admission, its value.
            member["spec"]["priorityClassName"] = priority["metadata"]["name"]
            member["spec"]["priority"] = priority.Value
        members.append(member)
    return [group, *members]


def times(quantity: str, count: int) -> str:
    """A quantity `count` times over, in its own suffix (1000m x 4 = 4000m)."""
    match = re.fullmatch(r"(\d+)([A-Za-z]*)", quantity)
    assert match is not None, quantity
    return f"{int(match.group(1)) * count}{match.group(2)}"


PREDICATE_LABEL = {"job": "for-test-predicate"}
ANTI_AFFINITY: Obj = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {
                    "matchExpressions": [
                        {"key": "job", "operator": "In", "values": ["for-test-predicate"]}
                    ]
                },
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    }
}
ONE_CPU = {"cpu": "1000m"}
HALF_CPU = {"cpu": "500m"}
# The predicates cases read the cluster (ClusterNodeNumber, ComputeNode): they are given
# kind's four workers, here with 4 CPUs and 8Gi idle each.
KIND = [e2e_node(i, {"cpu": "4", "memory": "8Gi"}) for i in range(1, 5)]
FOO = {"foo": "bar"}


def on_hostname(kind: str, selector: Obj) -> Obj:
    term = {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


ON_WORKER_1: Obj = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": ["worker-1"]}
                    ]
                }
            ]
        }
    }
}
E2E_HIGH = priority_class("high-priority", 100)
E2E_LOW = priority_class("low-priority", 10)
PREEMPTABLE = {"volcano.sh/preemptable": "true"}
# ClusterSize(OneCPU) on those workers.
KIND_SLOTS = 16
WITHOUT_ENQUEUE: Obj = {**CI_CONFIGURATION, "actions": "allocate, backfill, reclaim, preempt"}


def pending_group() -> list[Obj]:
    """preempt.go's `pending-pg`: a PodGroup asking for 30 CPUs, and a high-priority pod
    of it."""
    group = pod_group("pending-pg", E2E_NAMESPACE, "default", 1, None, "Pending")
    group["spec"]["minResources"] = {"cpu": "30000m"}
    del group["status"]
    group["metadata"]["creationTimestamp"] = "2025-01-01T00:01:00Z"
    member = pod(E2E_NAMESPACE, "preemptor-pod", "", "Pending", ONE_CPU, "pending-pg", None, None)
    member["metadata"]["creationTimestamp"] = "2025-01-01T00:01:00Z"
    member["spec"]["containers"][0]["resources"]["limits"] = dict(ONE_CPU)
    member["spec"] |= {"priorityClassName": "high-priority", "priority": E2E_HIGH.Value}
    return [group, member]


# file, Describe, It, objects, expectation, and the configuration when the case changes
# the CI one. The expectation is the waits after the last job is created (the waits
# before gate the next job's creation, and become its creation time): ready and pending,
# at least so many of a job's pods bound, or not (WaitTasksReady, WaitTasksPending);
# notReady, fewer than so many bound (a WaitTasksReady expected to time out); onNodes,
# every bound pod of the job on these nodes; sameNode and apart, the job's pods on one
# node, or each on its own.
NO_ENQUEUE: Obj = {**CI_CONFIGURATION, "actions": "allocate,backfill,reclaim,preempt"}
E2E_CASES: list[
    tuple[str, str, str, list[Obj], Obj] | tuple[str, str, str, list[Obj], Obj, Obj]
] = [
    (
        "preempt.go",
        "Job E2E Test",
        "schedule high priority job without preemption when resource is enough",
        [
            e2e_queue("default"),
            E2E_HIGH,
            E2E_LOW,
            *KIND,
            *vcjob("preemptee-0", ONE_CPU, 0, labels=PREEMPTABLE, priority=E2E_LOW),
            *vcjob("preemptor-0", ONE_CPU, 1, labels=PREEMPTABLE, priority=E2E_HIGH),
        ],
        {"ready": {"preemptee-0": 1, "preemptor-0": 1}},
    ),
    (
        "preempt.go",
        "Job E2E Test",
        "schedule high priority job with preemption when idle resource is NOT enough but "
        "preemptee resource is enough",
        [
            e2e_queue("default"),
            E2E_HIGH,
            E2E_LOW,
            *KIND,
            *vcjob(
                "preemptee-1",
                ONE_CPU,
                0,
                replicas=KIND_SLOTS,
                labels=PREEMPTABLE,
                priority=E2E_LOW,
            ),
            *vcjob(
                "preemptor-1",
                ONE_CPU,
                1,
                replicas=KIND_SLOTS,
                least=KIND_SLOTS // 2,
                labels=PREEMPTABLE,
                priority=E2E_HIGH,
            ),
        ],
        {"ready": {"preemptee-1": KIND_SLOTS // 2, "preemptor-1": KIND_SLOTS // 2}},
        WITHOUT_ENQUEUE,
    ),
    (
        "preempt.go",
        "Job E2E Test",
        "preemption doesn't work when podgroup is pending due to insufficient resource",
        [
            e2e_queue("default"),
            E2E_HIGH,
            E2E_LOW,
            *KIND,
            *vcjob("preemptee-2", ONE_CPU, 0, replicas=KIND_SLOTS, priority=E2E_LOW),
            *pending_group(),
        ],
        {"ready": {"preemptee-2": KIND_SLOTS}},
    ),
    (
        "preempt.go",
        "Job E2E Test",
        # Its configuration change drops reclaim from a list it then does not write back.
        "preemption only works in the same queue",
        [
            e2e_queue("default"),
            e2e_queue("q1-preemption"),
            e2e_queue("q2-reference"),
            E2E_HIGH,
            E2E_LOW,
            *KIND,
            *vcjob(
                "j1-q1",
                ONE_CPU,
                0,
                replicas=KIND_SLOTS // 2,
                least=KIND_SLOTS // 2,
                queue_name="q1-preemption",
                labels=PREEMPTABLE,
                priority=E2E_LOW,
            ),
            *vcjob(
                "j2-q2",
                ONE_CPU,
                1,
                replicas=KIND_SLOTS // 2,
                least=KIND_SLOTS // 2,
                queue_name="q2-reference",
                labels=PREEMPTABLE,
                priority=E2E_LOW,
            ),
            *vcjob(
                "j3-q1",
                ONE_CPU,
                2,
                replicas=KIND_SLOTS,
                least=KIND_SLOTS // 2,
                queue_name="q1-preemption",
                labels=PREEMPTABLE,
                priority=E2E_HIGH,
            ),
        ],
        {"ready": {"j3-q1": KIND_SLOTS // 2, "j1-q1": 0}},
    ),
    (
        "preempt.go",
        "Job E2E Test",
        "preemption doesn't work when total resource of idle resource and preemptee is NOT enough",
        [
            e2e_queue("default"),
            e2e_queue("q1-preemption"),
            e2e_queue("q2-reference"),
            E2E_HIGH,
            E2E_LOW,
            *KIND,
            *vcjob(
                "j1-q1",
                ONE_CPU,
                0,
                queue_name="q1-preemption",
                labels=PREEMPTABLE,
                priority=E2E_LOW,
            ),
            *vcjob(
                "j2-q2",
                ONE_CPU,
                1,
                replicas=KIND_SLOTS // 2,
                least=KIND_SLOTS // 2,
                queue_name="q2-reference",
                labels=PREEMPTABLE,
                priority=E2E_LOW,
            ),
            *vcjob(
                "j3-q1",
                ONE_CPU,
                2,
                replicas=KIND_SLOTS,
                least=KIND_SLOTS,
                queue_name="q1-preemption",
                labels=PREEMPTABLE,
                priority=E2E_HIGH,
            ),
        ],
        {
            "notReady": {"j3-q1": KIND_SLOTS},
            "ready": {"j1-q1": 1, "j2-q2": KIND_SLOTS // 2},
        },
    ),
    (
        "predicates.go",
        "Predicates E2E Test",
        "Hostport",
        [
            e2e_queue("default"),
            *KIND,
            *vcjob("hp-spec", ONE_CPU, 0, replicas=8, least=4, host_port=28080),
        ],
        {"ready": {"hp-spec": 4}, "pending": {"hp-spec": 4}},
    ),
    (
        "predicates.go",
        "Predicates E2E Test",
        "NodeAffinity",
        [
            e2e_queue("default"),
            *KIND,
            *vcjob("na-job", ONE_CPU, 0, replicas=4, affinity=ON_WORKER_1),
        ],
        {"ready": {"na-job": 4}, "onNodes": {"na-job": ["worker-1"]}},
    ),
    (
        "predicates.go",
        "Predicates E2E Test",
        "Pod Affinity",
        [
            e2e_queue("default"),
            *KIND,
            *vcjob(
                "pa-job",
                HALF_CPU,
                0,
                replicas=4,
                least=4,
                labels=FOO,
                affinity=on_hostname("podAffinity", {"matchLabels": FOO}),
            ),
        ],
        {"ready": {"pa-job": 4}, "sameNode": ["pa-job"]},
    ),
    (
        "predicates.go",
        "Predicates E2E Test",
        "Pod Anti-Affinity",
        [
            e2e_queue("default"),
            *KIND,
            *vcjob(
                "pa-job",
                ONE_CPU,
                0,
                replicas=2,
                least=2,
                labels=FOO,
                affinity=on_hostname("podAntiAffinity", {"matchLabels": FOO}),
            ),
        ],
        {"ready": {"pa-job": 2}, "apart": ["pa-job"]},
    ),
    (
        "allocate.go",
        "Job E2E Test",
        "allocate work when resource is enough",
        [
            e2e_queue("default"),
            e2e_node(1, SLOT),
            e2e_node(2, SLOT),
            *vcjob("low", HALF, 0),
            *vcjob("high", ONE, 1),
        ],
        {"ready": {"high": 1}},
    ),
    (
        "allocate.go",
        "Job E2E Test",
        "allocate don't work when resource is NOT enough",
        [
            e2e_queue("default"),
            e2e_node(1, SLOT),
            *vcjob("middle", ONE, 0),
            *vcjob("low", HALF, 1),
            *vcjob("high", {"cpu": "3000m", "memory": "3072Mi"}, 2),
        ],
        {"pending": {"high": 1}},
    ),
    (
        "allocate.go",
        "Job E2E Test",
        "allocate don't work when job NOT satisfy predicates",
        [
            e2e_queue("default"),
            e2e_node(1, SLOT),
            *vcjob("j1", HALF, 0, labels=PREDICATE_LABEL),
            *vcjob("j2", HALF, 1, labels=PREDICATE_LABEL, affinity=ANTI_AFFINITY),
        ],
        {"pending": {"j2": 1}},
    ),
    (
        "enqueue.go",
        "Enqueue E2E Test",
        "allocate work even not config enqueue action",
        [
            e2e_queue("default"),
            e2e_node(1, SLOT),
            e2e_node(2, SLOT),
            *vcjob("low", HALF, 0),
            *vcjob("high", ONE, 1),
        ],
        {"ready": {"high": 1}},
        NO_ENQUEUE,
    ),
    (
        "guarantee.go",
        "Guarantee reserved resource E2E Test",
        "one queue reserve all cluster resource",
        [
            e2e_queue("default"),
            e2e_queue("queue1", SLOT),
            e2e_queue("queue2"),
            e2e_node(1, SLOT),
            *vcjob("queue2-job", HALF, 0, queue_name="queue2"),
        ],
        {"pending": {"queue2-job": 1}},
    ),
    (
        "guarantee.go",
        "Guarantee reserved resource E2E Test",
        "one queue reserve some cluster resource, so it  is NOT enough to create job",
        [
            e2e_queue("default"),
            e2e_queue("queue1", ONE),
            e2e_queue("queue2"),
            e2e_node(1, SLOT),
            *vcjob("queue2-job", {"cpu": "1500m", "memory": "512Mi"}, 0, queue_name="queue2"),
        ],
        {"pending": {"queue2-job": 1}},
    ),
]


def write_e2e(out: Path) -> None:
    for rel, describe, it, objects, jobs, *changed in E2E_CASES:
        expect = {
            key: (
                {f"{E2E_NAMESPACE}/{job}": value for job, value in wanted.items()}
                if isinstance(wanted, Mapping)
                else [f"{E2E_NAMESPACE}/{job}" for job in wanted]
            )
            for key, wanted in jobs.items()
        }
        scenario = {
            "source": f"{MODULE}/{E2E}/{rel}",
            "test": describe,
            "case": it,
            "config": changed[0] if changed else CI_CONFIGURATION,
            "expect": expect,
            "objects": [dict(o) for o in objects],
        }
        name = slug(it if it.startswith(Path(rel).stem) else f"{Path(rel).stem} {it}")
        path = out / "e2e" / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(scenario, sort_keys=False, width=100))


def module_dir(module: str) -> Path:
    listing = subprocess.run(
        ["go", "mod", "download", "-json", module], check=True, capture_output=True, text=True
    )
    return Path(json.loads(listing.stdout)["Dir"])


def main(out: Path) -> None:
    root = module_dir(MODULE) / ACTIONS
    # Names cut to length may meet: the later case is numbered rather than overwrite.
    written: set[Path] = set()
    for rel, test, action, plugins, arguments, names, prefix in TABLES:
        body = function(strip_comments((root / rel).read_text()), test)
        tiers = go_tiers(body, root.parent / "plugins")
        for literal in case_literals(body):
            case = evaluate(literal, names)
            case.setdefault("PriClass", CLASSES.get(test, []))
            case["HyperNodeObjects"] = hypernodes(case)
            registered = plugins if plugins is not None else set(case["Plugins"])
            scenario = {
                "source": f"{MODULE}/{ACTIONS}/{rel}",
                "test": test,
                "case": case["Name"],
                "config": configuration(tiers, registered, action, arguments),
                "expect": expectations(case),
                "objects": [dict(o) for kind in KINDS for o in case.get(kind) or []],
            }
            stem = f"{prefix}{slug(case['Name'])}"
            path = out / action / f"{stem}.yaml"
            number = 1
            while path in written:
                number += 1
                path = out / action / f"{stem}-{number}.yaml"
            written.add(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(yaml.safe_dump(scenario, sort_keys=False, width=100))
    write_e2e(out)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
