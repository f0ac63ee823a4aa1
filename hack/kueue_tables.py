"""Write tests/conformance/kueue/<case>.yaml from the table of Kueue v0.17.0's
TestFindTopologyAssignments (pkg/cache/scheduler/tas_cache_test.go), the cases of how
Kueue's Topology Aware Scheduling assigns a pod set to domains (docs/conformance.md,
"Kueue's topology tables").

    python hack/kueue_tables.py [OUT]    # default: tests/conformance/kueue

Each case is a Go composite literal whose nodes and pods Kueue's test wrappers build
(MakeNode(...).Label(...).StatusAllocatable(...)): the literal is rewritten into a Python
expression over classes that build what each wrapper builds, and evaluated. Its pod sets
become pods as Kueue's pod-set templates leave them (the topology request as Kueue's
annotations, the pod set's name as its label, the flavor's node labels and the pod
set's node selector as the node selector Kueue injects), one gang of our PodGroup. The
expectation is the case's own wantAssignment (per pod set, the pods per domain of the
assignment's levels) or wantReason (the gang does not fit). Cases of Kueue-only
mechanics are listed with why and not written.
"""

import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from volcano_tables import (
    Replacement,
    closing,
    function,
    go_to_python,
    module_dir,
    strip_comments,
)

MODULE = "sigs.k8s.io/kueue@v0.17.0"
SOURCE = "pkg/cache/scheduler/tas_cache_test.go"
TEST = "TestFindTopologyAssignments"
OUT = Path(__file__).resolve().parents[1] / "tests" / "conformance" / "kueue"
GROUP = "workload"
NAMESPACE = "default"
PODSET_LABEL = "kueue.x-k8s.io/podset"
GROUP_ANNOTATION = "scheduling.batchsched.io/group-name"
CREATED = "2025-01-01T00:00:00Z"

Obj = dict[str, Any]

# Why a case is not translated, by the feature gate (or field) it rests on.
NOT_TRANSLATED = {
    "TASBalancedPlacement": (
        "Kueue's balanced placement (alpha feature gate TASBalancedPlacement): an even "
        "spread over the fewest domains, a Kueue placement mode with no annotation of "
        "its own; batchsched has no such mode"
    ),
    "TASMultiLayerTopology": (
        "several slice layers (podset-slice-required-topology-constraints), refused out "
        "loud: batchsched keeps one slice layer"
    ),
    "ElasticJobsViaWorkloadSlices": (
        "an elastic workload's previous assignment (Kueue's workload slices): Kueue-only "
        "bookkeeping of a Workload object's admission"
    ),
}


def json_fields(struct: Mapping[str, Any]) -> Obj:
    """A core/v1 struct literal's Go field names as its JSON names (Key -> key)."""
    return {field[0].lower() + field[1:]: value for field, value in struct.items()}


class MakeNode:
    """testingnode.MakeNode: a Node and its wrapper's setters."""

    def __init__(self, name: str) -> None:
        self.node: Obj = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {}},
            "spec": {},
            "status": {"conditions": []},
        }

    def Label(self, key: str, value: str) -> "MakeNode":
        self.node["metadata"]["labels"][key] = value
        return self

    def StatusAllocatable(self, resources: Mapping[str, str]) -> "MakeNode":
        status = self.node["status"]
        status.setdefault("allocatable", {}).update(resources)
        status["capacity"] = dict(status["allocatable"])
        return self

    def StatusConditions(self, *conditions: Obj) -> "MakeNode":
        self.node["status"]["conditions"] += [json_fields(c) for c in conditions]
        return self

    def Ready(self) -> "MakeNode":
        return self.StatusConditions({"type": "Ready", "status": "True"})

    def NotReady(self) -> "MakeNode":
        return self.StatusConditions({"type": "Ready", "status": "False"})

    def Taints(self, *taints: Obj) -> "MakeNode":
        self.node["spec"].setdefault("taints", []).extend(json_fields(t) for t in taints)
        return self

    def Unschedulable(self) -> "MakeNode":
        self.node["spec"]["unschedulable"] = True
        return self

    def Obj(self) -> Obj:
        return self.node


class MakePod:
    """testingpod.MakePod: a pod not of Kueue's workload, bound by another scheduler."""

    def __init__(self, name: str, namespace: str) -> None:
        self.pod: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": CREATED},
            "spec": {"schedulerName": "default-scheduler", "containers": [{"name": "c"}]},
            "status": {"phase": "Pending"},
        }

    def NodeName(self, name: str) -> "MakePod":
        self.pod["spec"]["nodeName"] = name
        return self

    def Request(self, resource: str, quantity: str) -> "MakePod":
        requests = self.pod["spec"]["containers"][0].setdefault("resources", {"requests": {}})
        requests["requests"][resource] = quantity
        return self

    def StatusPhase(self, phase: str) -> "MakePod":
        self.pod["status"]["phase"] = phase
        return self

    def Obj(self) -> Obj:
        return self.pod


def append(items: list[Any], *more: Any) -> list[Any]:
    return [*items, *more]


HELPERS: dict[str, Any] = {
    "MakeNode": MakeNode,
    "MakePod": MakePod,
    "append": append,
    "int32": int,
    "string": str,
    "True": True,
    "False": False,
    "None": None,
}

CONSTANTS: list[tuple[str, Replacement]] = [
    (r"\*?testing(?:node|pod)\.", ""),
    (r"&(?=\w+\.)", ""),
    (r"\bptr\.To(?:\[\w+\])?\(", "("),
    (r"\bresource\.MustParse\(", "("),
    (r"\bkueue\.NewPodSetReference\(", "("),
    (r"\bcorev1\.ResourceName\(", "("),
    (r"\bcorev1\.LabelHostname\b", '"kubernetes.io/hostname"'),
    (r"\bcorev1\.Resource(CPU|Memory|Pods)\b", lambda m: f'"{m.group(1).lower()}"'),
    (r"\bcorev1\.Pod(Pending|Running|Succeeded|Failed)\b", r'"\1"'),
    (r"\bcorev1\.TaintEffect(\w+)\b", r'"\1"'),
    (r"\bcorev1\.TolerationOp(\w+)\b", r'"\1"'),
    (r"\bcorev1\.Node(NetworkUnavailable)\b", r'"\1"'),
    (r"\bcorev1\.Condition(True|False)\b", r'"\1"'),
    (r"\bfeatures\.(\w+)\b", r'"\1"'),
    (r"\btas\.V1Beta2From\(", "("),
    (r"\btrue\b", "True"),
    (r"\bfalse\b", "False"),
    (r"\bnil\b", "None"),
    (r"(\w+)\.\.\.", r"*\1"),
]
# Composite literals' types: maps (named ones too) and slices; any other is a struct.
COMPOSITE = re.compile(
    r"(\[\][\w.*\[\]]+|map\[[\w.]+\][\w.*\[\]]+|corev1\.ResourceList|resources\.Requests"
    r"|\*?&?[\w]+\.[A-Z]\w*|PodSetTestCase)\{"
)
# Named map types, whose literals are maps of plain values.
NAMED_MAPS = ("corev1.ResourceList", "resources.Requests")


def to_python(source: str) -> str:
    """Go expressions as Python (slices lists, maps and structs dicts), the wrappers'
    method chains left as they are."""
    return go_to_python(source, CONSTANTS, COMPOSITE, NAMED_MAPS)


def names(body: str) -> dict[str, Any]:
    """The constants and node sets the test defines before its table."""
    block = body.index("const (")
    start = body.index(")", block) + 1
    found: dict[str, Any] = {
        name: json.loads(value)
        for name, value in re.findall(r"(\w+)\s*=\s*(\"[^\"]*\")", body[block:start])
    }
    preamble = body[start : body.index("cases := map[string]struct")]
    at = 0
    while (match := re.compile(r"(\w+)\s*:=\s*").search(preamble, at)) is not None:
        brace = preamble.index("{", match.end())
        end = closing(preamble, brace) + 1
        found[match.group(1)] = eval(  # only our own rewriting of Kueue's literal
            to_python(preamble[match.end() : end]), {"__builtins__": {}, **HELPERS, **found}
        )
        at = end
    return found


def cases(body: str, known: Mapping[str, Any]) -> dict[str, Obj]:
    declared = body.index("cases := map[string]struct")
    table = body.index("{", closing(body, body.index("{", declared)) + 1)
    literal = body[table : closing(body, table) + 1]
    # A function building nodes in a loop (one multi-layer case, not translated) is
    # left out: only its case's gate is read.
    while (start := literal.find("func() []corev1.Node {")) >= 0:
        end = closing(literal, literal.index("{", start)) + 1
        literal = literal[:start] + "None" + literal[end + len("()") :]
    value = eval(  # only our own rewriting of Kueue's literal
        to_python("map[string]PodSetTestCase" + literal.replace("\n", " ")),
        {"__builtins__": {}, **HELPERS, **known},
    )
    assert isinstance(value, dict)
    return value


def untranslated(case: Mapping[str, Any]) -> str | None:
    """Why a case is not translated, or None."""
    for gate, on in (case.get("featureGates") or {}).items():
        if on and NOT_TRANSLATED.get(gate):
            return NOT_TRANSLATED[gate]
    for podset in case["podSets"]:
        if podset.get("previousAssignment") is not None:
            return NOT_TRANSLATED["ElasticJobsViaWorkloadSlices"]
        if (podset.get("topologyRequest") or {}).get("PodsetSliceRequiredTopologyConstraints"):
            return NOT_TRANSLATED["TASMultiLayerTopology"]
    return None


def annotations(request: Mapping[str, Any] | None, group: str | None) -> dict[str, str]:
    """The pod-set annotations Kueue writes for a PodSetTopologyRequest."""
    notes: dict[str, str] = {}
    request = request or {}
    for field, key in (
        ("Required", "podset-required-topology"),
        ("Preferred", "podset-preferred-topology"),
        ("PodSetSliceRequiredTopology", "podset-slice-required-topology"),
    ):
        if request.get(field):
            notes[f"kueue.x-k8s.io/{key}"] = request[field]
    if request.get("Unconstrained"):
        notes["kueue.x-k8s.io/podset-unconstrained-topology"] = "true"
    if request.get("PodSetSliceSize") is not None:
        notes["kueue.x-k8s.io/podset-slice-size"] = str(request["PodSetSliceSize"])
    if group or request.get("PodSetGroupName"):
        notes["kueue.x-k8s.io/podset-group-name"] = group or request["PodSetGroupName"]
    return notes


def quantity(resource: str, value: int) -> str:
    """resources.Requests holds CPU in millicores, the rest in units."""
    return f"{value}m" if resource == "cpu" else str(value)


def podset_pods(podset: Mapping[str, Any], name: str, node_labels: Mapping[str, str]) -> list[Obj]:
    requests = {r: quantity(r, v) for r, v in (podset.get("requests") or {}).items() if r != "pods"}
    container: Obj = {"name": "c", "resources": {"requests": requests}}
    spec: Obj = {"schedulerName": "batch-scheduler", "containers": [container]}
    selector = {**node_labels, **(podset.get("nodeSelector") or {})}
    if selector:
        spec["nodeSelector"] = selector
    if podset.get("tolerations"):
        spec["tolerations"] = [json_fields(t) for t in podset["tolerations"]]
    notes = {
        GROUP_ANNOTATION: GROUP,
        **annotations(podset.get("topologyRequest"), podset.get("podSetGroupName")),
    }
    count = podset["count"]
    width = len(str(count - 1))
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{i:0{width}d}",
                "namespace": NAMESPACE,
                "creationTimestamp": CREATED,
                "labels": {PODSET_LABEL: name},
                "annotations": notes,
            },
            "spec": spec,
        }
        for i in range(count)
    ]


def scenario(title: str, case: Mapping[str, Any]) -> Obj:
    objects: list[Obj] = [*case["nodes"], *(case.get("pods") or [])]
    expect: Obj = {}
    total = 0
    for i, podset in enumerate(case["podSets"]):
        name = podset.get("podSetName") or f"main{i or ''}"
        objects += podset_pods(podset, name, case.get("nodeLabels") or {})
        total += podset["count"]
        want = podset.get("wantAssignment")
        expect[name] = (
            {"reason": podset.get("wantReason", "")}
            if want is None
            else {
                "levels": want["Levels"],
                "domains": [{"values": d["Values"], "count": d["Count"]} for d in want["Domains"]],
            }
        )
    group = {
        "apiVersion": "scheduling.batchsched.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": GROUP, "namespace": NAMESPACE, "creationTimestamp": CREATED},
        "spec": {"minMember": total},
    }
    # Kueue's Topology levels, coarsest first, are our tiers finest first.
    tiers = [{"name": level, "nodeLabel": level} for level in reversed(case["levels"])]
    return {
        "source": f"{MODULE}/{SOURCE}",
        "test": TEST,
        "case": title,
        "config": {"topology": {"tiers": tiers}},
        "expect": expect,
        "objects": [group, *objects],
    }


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:80].rstrip("-")


def main(out: Path) -> None:
    source = module_dir(MODULE) / SOURCE
    body = function(strip_comments(source.read_text()), TEST)
    skipped: dict[str, str] = {}
    written: set[Path] = set()
    out.mkdir(parents=True, exist_ok=True)
    for title, case in sorted(cases(body, names(body)).items()):
        why = untranslated(case)
        if why is not None:
            skipped[title] = why
            continue
        path = out / f"{slug(title)}.yaml"
        # Names cut to length must not meet: each case keeps a file of its own.
        assert path not in written, path
        written.add(path)
        # Through JSON: every object its own, with no YAML aliases for shared ones.
        plain = json.loads(json.dumps(scenario(title, case)))
        path.write_text(yaml.safe_dump(plain, sort_keys=False, width=100))
    (out / "not-translated.yaml").write_text(
        yaml.safe_dump({"source": f"{MODULE}/{SOURCE}", "test": TEST, "cases": skipped}, width=100)
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
