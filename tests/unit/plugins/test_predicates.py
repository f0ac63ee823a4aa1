"""predicates: which nodes a pod may use at all, and kube-scheduler's words when none."""

from typing import Any

import pytest

from tests.support.objects import Obj, decide, node, placements, pod

SELECTOR = "node(s) didn't match Pod's node affinity/selector"
PORTS = "node(s) didn't have free ports for the requested pod ports"
DEDICATED = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def required(*expressions: Obj, fields: tuple[Obj, ...] = ()) -> dict[str, Any]:
    """A pod spec with one required node affinity term."""
    term: Obj = {"matchExpressions": list(expressions)}
    if fields:
        term["matchFields"] = list(fields)
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        }
    }


def expression(key: str, operator: str, *values: str) -> Obj:
    return {"key": key, "operator": operator, "values": list(values)}


def with_port(port: int, protocol: str = "TCP") -> dict[str, Any]:
    ports = [{"containerPort": port, "hostPort": port, "protocol": protocol}]
    return {"containers": [{"name": "main", "ports": ports}]}


LABELLED = node("n1", labels={"zone": "a", "gpus": "8"})


@pytest.mark.parametrize(
    ("cluster", "spec", "reason"),
    [
        pytest.param([LABELLED], {"nodeSelector": {"zone": "a"}}, None, id="selector-match"),
        pytest.param([LABELLED], {"nodeSelector": {"zone": "b"}}, SELECTOR, id="selector-value"),
        pytest.param(
            [LABELLED], {"nodeSelector": {"zone": "a", "disk": "ssd"}}, SELECTOR, id="selector-all"
        ),
        pytest.param([LABELLED], required(expression("zone", "In", "b", "a")), None, id="in"),
        pytest.param([LABELLED], required(expression("zone", "In", "b")), SELECTOR, id="in-miss"),
        pytest.param(
            [LABELLED], required(expression("zone", "NotIn", "a")), SELECTOR, id="notin-hit"
        ),
        pytest.param([LABELLED], required(expression("zone", "NotIn", "b")), None, id="notin"),
        pytest.param(
            [LABELLED], required(expression("rack", "NotIn", "r1")), None, id="notin-absent"
        ),
        pytest.param([LABELLED], required(expression("zone", "Exists")), None, id="exists"),
        pytest.param(
            [LABELLED], required(expression("rack", "Exists")), SELECTOR, id="exists-absent"
        ),
        pytest.param(
            [LABELLED], required(expression("zone", "DoesNotExist")), SELECTOR, id="doesnotexist"
        ),
        pytest.param([LABELLED], required(expression("gpus", "Gt", "4")), None, id="gt"),
        pytest.param([LABELLED], required(expression("gpus", "Gt", "8")), SELECTOR, id="gt-equal"),
        pytest.param([LABELLED], required(expression("zone", "Gt", "1")), SELECTOR, id="gt-text"),
        pytest.param([LABELLED], required(expression("gpus", "Lt", "9")), None, id="lt"),
        pytest.param(
            [LABELLED],
            required(expression("zone", "In", "a"), expression("gpus", "Lt", "2")),
            SELECTOR,
            id="term-needs-all-expressions",
        ),
        pytest.param(
            [LABELLED],
            required(fields=(expression("metadata.name", "In", "n1"),)),
            None,
            id="match-fields",
        ),
        pytest.param(
            [LABELLED],
            required(fields=(expression("metadata.name", "NotIn", "n1"),)),
            SELECTOR,
            id="match-fields-notin",
        ),
        pytest.param(
            [node("n1", taints=[DEDICATED])],
            {},
            "node(s) had untolerated taint {dedicated: gpu}",
            id="taint",
        ),
        pytest.param(
            [node("n1", taints=[DEDICATED])],
            {"tolerations": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]},
            None,
            id="toleration-equal",
        ),
        pytest.param(
            [node("n1", taints=[DEDICATED])],
            {"tolerations": [{"key": "dedicated", "value": "cpu"}]},
            "node(s) had untolerated taint {dedicated: gpu}",
            id="toleration-other-value",
        ),
        pytest.param(
            [node("n1", taints=[DEDICATED])],
            {"tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}]},
            "node(s) had untolerated taint {dedicated: gpu}",
            id="toleration-other-effect",
        ),
        pytest.param(
            [node("n1", taints=[DEDICATED, {"key": "spot", "effect": "NoExecute"}])],
            {"tolerations": [{"operator": "Exists"}]},
            None,
            id="toleration-exists-everything",
        ),
        pytest.param(
            [node("n1", taints=[{"key": "spot", "effect": "PreferNoSchedule"}])],
            {},
            None,
            id="prefer-no-schedule-ignored",
        ),
        pytest.param(
            [node("n1", unschedulable=True)], {}, "node(s) were unschedulable", id="unschedulable"
        ),
        pytest.param(
            [node("n1", unschedulable=True)],
            {"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]},
            None,
            id="unschedulable-tolerated",
        ),
        pytest.param([node("n1", ready=False)], {}, "node(s) were not ready", id="not-ready"),
        pytest.param([node("n1", ready=True)], {}, None, id="ready"),
        pytest.param(
            [node("n1", ready=False)],
            {"tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}]},
            None,
            id="not-ready-tolerated",
        ),
        pytest.param(
            [node("n1"), pod("web", node_name="n1", scheduler="other", spec=with_port(8080))],
            with_port(8080),
            PORTS,
            id="host-port-taken",
        ),
        pytest.param(
            [node("n1"), pod("web", node_name="n1", scheduler="other", spec=with_port(8080))],
            with_port(8080, "UDP"),
            None,
            id="host-port-other-protocol",
        ),
        pytest.param(
            [
                node("n1"),
                pod(
                    "web",
                    node_name="n1",
                    phase="Succeeded",
                    scheduler="other",
                    spec=with_port(8080),
                ),
            ],
            with_port(8080),
            None,
            id="host-port-freed-by-terminal-pod",
        ),
        pytest.param(
            [node("n1", extra={"pods": 1}), pod("other", node_name="n1", scheduler="other")],
            {},
            "Too many pods",
            id="too-many-pods",
        ),
        pytest.param(
            [node("n1", cpu="2"), pod("other", requests={"cpu": "1500m"}, node_name="n1")],
            {},
            "Insufficient cpu",
            id="insufficient-cpu",
        ),
    ],
)
def test_single_node(cluster: list[Obj], spec: dict[str, Any], reason: str | None) -> None:
    """Pod `p` asks for 1 CPU; it lands on n1, or waits with the reason from n1."""
    spec = {"containers": [{"name": "main"}], **spec}
    spec["containers"] = [
        {**c, "resources": {"requests": {"cpu": "1"}}} for c in spec["containers"]
    ]
    decisions = decide([*cluster, pod("p", spec=spec)])
    if reason is None:
        assert placements(decisions) == {"default/p": "n1"}
    else:
        assert placements(decisions) == {}
        assert decisions.pending == {"default/p": f"0/1 nodes are available: 1 {reason}."}


@pytest.mark.parametrize(
    ("requests", "reason"),
    [
        ({"nvidia.com/gpu": 1}, "Insufficient nvidia.com/gpu"),
        ({"memory": "64Gi"}, "Insufficient memory"),
        ({"ephemeral-storage": "1Gi"}, "Insufficient ephemeral-storage"),
    ],
)
def test_resources_the_node_lacks(requests: dict[str, str | int], reason: str) -> None:
    decisions = decide([node("n1"), pod("p", requests=requests)])
    assert decisions.pending == {"default/p": f"0/1 nodes are available: 1 {reason}."}


def test_reasons_are_counted_over_nodes() -> None:
    decisions = decide(
        [
            node("a", cpu="1", labels={"zone": "a"}),
            node("b", cpu="1", labels={"zone": "a"}),
            node("c", cpu="8", labels={"zone": "b"}),
            node("d", cpu="8", labels={"zone": "a"}, taints=[DEDICATED]),
            pod("p", requests={"cpu": "2"}, spec={"nodeSelector": {"zone": "a"}}),
        ]
    )
    assert decisions.pending == {
        "default/p": "0/4 nodes are available: "
        "1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient cpu."
    }


def test_fit_counts_pods_placed_earlier_in_the_session() -> None:
    decisions = decide(
        [
            node("a", cpu="2"),
            node("b", cpu="2"),
            *(pod(f"p{i}", requests={"cpu": "1"}) for i in range(5)),
        ]
    )
    bound = placements(decisions)
    assert sorted(bound.values()) == ["a", "a", "b", "b"]
    assert decisions.pending == {"default/p4": "0/2 nodes are available: 2 Insufficient cpu."}


def test_two_pods_with_one_host_port_spread() -> None:
    decisions = decide(
        [node("a"), node("b"), *(pod(f"p{i}", spec=with_port(9000)) for i in range(3))]
    )
    assert placements(decisions) == {"default/p0": "a", "default/p1": "b"}
    assert decisions.pending == {"default/p2": f"0/2 nodes are available: 2 {PORTS}."}
